"""Where kkb keeps the Kaggle image description captured on Kaggle (``kkb image --on-kaggle``).

One file per user, not per project: the image is Kaggle's, the same for every kernel. Lookup order,
the one ``builder.project.image.load_image`` follows after the explicit path it is given:

1. ``$KKB_KAGGLE_IMAGE`` (a file a user points at on purpose, e.g. in CI);
2. ``$XDG_CONFIG_HOME/kkb/kaggle-image.json`` (default ``~/.config/kkb/kaggle-image.json``), written by
   ``kkb image --on-kaggle``;
3. the description shipped with kkb (``builder/data/kaggle-image.json``).

The format is the shipped description's (``format: 1``); a captured one adds ``cudnn``, ``gpu`` and
``verified: true``. :func:`check_description` is the shape check used before a captured file is stored,
so a broken capture never replaces a good one.

Every run of a kkb kernel also records the image it had (``kkb_runtime.image_capture``); ``kkb submit`` and
``kkb dry-run --on-kaggle`` keep the newest one per kernel and server, in ``$XDG_CONFIG_HOME/kkb/captures/<server>/``
(:func:`record_run_capture`): what the drift guard (``builder.project.image_facts``) compares wheelhouses with.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from builder.errors import KkbError

IMAGE_ENV = "KKB_KAGGLE_IMAGE"
API_ENV = "KKB_KAGGLE_API"  # the Kaggle-compatible server kkb talks to (builder.remote.kaggle_api)
DEFAULT_SERVER = "kaggle.com"
CAPTURES_DIR = "captures"
IMAGE_FILE = "kaggle-image.json"
FORMAT = 1
REQUIRED = {"format": int, "name": str, "captured": str, "python": str, "packages": dict}


def config_dir() -> Path:
    """``$XDG_CONFIG_HOME/kkb``, else ``~/.config/kkb``."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "kkb"


def captured_image_path() -> Path:
    """Where ``kkb image --on-kaggle`` writes (never ``$KKB_KAGGLE_IMAGE``: that file is the user's)."""
    return config_dir() / IMAGE_FILE


def stored_image_path() -> Path | None:
    """The description to read instead of the shipped one: ``$KKB_KAGGLE_IMAGE``, else a captured one, else None."""
    chosen = os.environ.get(IMAGE_ENV)
    if chosen:
        return Path(chosen)
    captured = captured_image_path()
    return captured if captured.is_file() else None


def check_description(data: Any, where: str) -> dict[str, Any]:
    """``data`` if it has the description's shape, else a :class:`KkbError` naming the key."""
    if not isinstance(data, Mapping):
        raise KkbError(f"{where}: a Kaggle image description is a JSON object", hint="capture it again")
    for key, kind in REQUIRED.items():
        if not isinstance(data.get(key), kind):
            raise KkbError(f"{where}: '{key}' is missing or not a {kind.__name__}", hint="capture it again")
    if data["format"] != FORMAT:
        raise KkbError(f"{where}: format {data['format']} is not {FORMAT}", hint="capture it again with this kkb")
    bad = [name for name, version in data["packages"].items() if not isinstance(version, str)]
    if bad:
        raise KkbError(f"{where}: packages: versions must be strings ({', '.join(sorted(bad)[:3])})",
                       hint="capture it again")
    return dict(data)


def store_image(data: Mapping[str, Any], where: str) -> Path:
    """Write a captured description atomically to :func:`captured_image_path` and return the path."""
    return write_json(captured_image_path(), check_description(data, where), "the Kaggle image description")


def write_json(target: Path, data: Mapping[str, Any], what: str, indent: int = 1) -> Path:
    """``data`` into ``target`` atomically (a partial file, then a rename): a reader never sees half of it."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        partial.write_text(json.dumps(dict(data), indent=indent, sort_keys=indent == 1) + "\n", encoding="utf-8")
        partial.replace(target)
    except OSError as exc:
        raise KkbError(f"cannot write {what} {target}: {exc.strerror or exc}",
                       hint="check the permissions of the folder, or set XDG_CONFIG_HOME (or pass --out)") from exc
    return target


def server_of(endpoint: str | None = None) -> str:
    """The server an image was seen on, as the history names it: ``endpoint`` (an adapter's), else ``$KKB_KAGGLE_API``
    (its base URL, as the adapter normalises it), else ``kaggle.com``."""
    raw = endpoint if endpoint is not None else os.environ.get(API_ENV) or None
    if not raw:
        return DEFAULT_SERVER
    return raw.strip().rstrip("/").removesuffix("/api")


def _captures_dir(server: str) -> Path:
    return config_dir() / CAPTURES_DIR / re.sub(r"[^A-Za-z0-9._-]+", "_", server)


def record_run_capture(data: Mapping[str, Any], *, server: str, kernel: str, version: int | None) -> Path | None:
    """Keep what ``kernel`` v``version``'s run recorded of its image (``kkb_image.json``), unless an image it already
    recorded is newer; None when ``data`` is not a capture (an older kkb, a damaged file)."""
    if not isinstance(data.get("python"), str) or not isinstance(data.get("packages"), dict) or not data.get("captured"):
        return None
    folder = _captures_dir(server)
    target = folder / (re.sub(r"[^A-Za-z0-9._-]+", "__", kernel) + ".json")
    try:
        kept = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        kept = {}
    if str(kept.get("captured") or "") > str(data["captured"]):
        return target
    return write_json(target, {**dict(data), "kernel": kernel, "version": version, "server": server},
                      f"the image of {kernel}'s run into")


def run_captures(server: str) -> list[dict[str, Any]]:
    """The image each kernel's newest recorded run had on ``server`` (see :func:`record_run_capture`)."""
    folder = _captures_dir(server)
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("python"), str):
            found.append(data)
    return found


__all__ = ["IMAGE_ENV", "captured_image_path", "check_description", "config_dir", "record_run_capture", "run_captures",
           "server_of", "store_image", "stored_image_path", "write_json"]
