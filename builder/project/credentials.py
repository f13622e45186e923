"""Where the Kaggle username comes from when ``[kernel] owner`` is not set.

Only the *username* is read here (for dataset and kernel ids). The key never passes through kkb's
own code: the real ``kaggle`` client reads it in ``builder.remote.kaggle_api``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from builder.errors import SpecError


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
            try:
                username = json.loads(path.read_text()).get("username")
            except (OSError, ValueError):
                continue
            if username:
                return str(username)
    return None


def resolve_owner(explicit: str | None, spec_owner: str | None, spec_path: Path) -> str:
    owner = explicit or spec_owner or kaggle_username()
    if not owner:
        raise SpecError(
            f"{spec_path}: [kernel] owner is not set and no Kaggle username was found",
            hint="set [kernel] owner = \"<your kaggle username>\", pass --owner, or set KAGGLE_USERNAME / kaggle.json",
        )
    return owner
