"""Where the Kaggle username comes from when ``[kernel] owner`` is not set.

Only the *username* is read here (for dataset and kernel ids). The key never passes through kkb's
own code: the real ``kaggle`` client reads it in ``builder.remote.kaggle_api``. A kaggle.json that is not
a JSON object is reported as such, naming the file (never its content, which holds the key), not
skipped into a misleading "no username found".
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from builder.errors import AuthError, SpecError

KAGGLE_JSON_HINT = ('kaggle.json must hold {"username": "...", "key": "..."}: fix it, or download a new one '
                    "from kaggle.com → Settings → API → Create New Token")


def kaggle_json_candidates(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The client's own search order (kaggle-api.md §2)."""
    env = os.environ if environ is None else environ
    home = Path(env.get("HOME", str(Path.home())))
    if env.get("KAGGLE_CONFIG_DIR"):
        return [Path(env["KAGGLE_CONFIG_DIR"]) / "kaggle.json"]
    xdg = Path(env.get("XDG_CONFIG_HOME", str(home / ".config")))
    return [home / ".kaggle" / "kaggle.json", xdg / "kaggle" / "kaggle.json"]


def kaggle_username(environ: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    if env.get("KAGGLE_USERNAME"):
        return env["KAGGLE_USERNAME"]
    for path in kaggle_json_candidates(env):
        if path.is_file():
            username = read_kaggle_json(path).get("username")
            if username:
                return str(username)
    return None


def check_kaggle_json(environ: Mapping[str, str] | None = None) -> None:
    """Refuse (:class:`AuthError`, naming it) a malformed kaggle.json among the places the client reads,
    before the client reports it as "no credentials found"."""
    for path in kaggle_json_candidates(environ):
        if path.is_file():
            read_kaggle_json(path)


def read_kaggle_json(path: Path) -> dict[str, object]:
    """A kaggle.json as a dict; :class:`AuthError` naming the file when it is unreadable or malformed."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise AuthError(f"{path}: cannot be read: {exc.strerror}", hint="check the file's permissions") from None
    except UnicodeDecodeError:
        raise AuthError(f"{path}: not UTF-8 text, so not a valid kaggle.json", hint=KAGGLE_JSON_HINT) from None
    except json.JSONDecodeError as exc:  # its message names a position, never the content (the key)
        raise AuthError(f"{path}: not valid JSON ({exc.msg}: line {exc.lineno} column {exc.colno})",
                        hint=KAGGLE_JSON_HINT) from None
    if not isinstance(document, dict):
        raise AuthError(f"{path}: not a JSON object but a {type(document).__name__}", hint=KAGGLE_JSON_HINT)
    return document


def resolve_owner(explicit: str | None, spec_owner: str | None, spec_path: Path) -> str:
    owner = explicit or spec_owner or kaggle_username()
    if not owner:
        raise SpecError(
            f"{spec_path}: [kernel] owner is not set and no Kaggle username was found",
            hint="set [kernel] owner = \"<your kaggle username>\", pass --owner, or set KAGGLE_USERNAME / kaggle.json",
        )
    return owner
