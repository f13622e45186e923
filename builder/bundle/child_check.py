"""Model files are first loaded in a child process, where a crash cannot take kkb down.

LightGBM, XGBoost and CatBoost parse a booster in C++: a truncated or corrupt file can abort the
process (SIGABRT, a segfault) with pages of the library's log and no word from kkb. So before the
build loads a card's file in its own process, :func:`load_in_child` loads it once in a child
(``python -m builder.bundle.child_check``, the kernel's runtime loader, offline, the kernel folder
importable as in the kernel). A child killed by a signal, or one that never answers, is a clean
:class:`builder.errors.ModelError` naming the card, the file and the signal (exit 1). A child that
raises an ordinary Python error is left to the in-process load, which words it as before.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from builder.bundle.models import offline_environment, user_code_importable
from builder.errors import ModelError
from builder.kkb_runtime.cards import tabular

CHILD_SECONDS = 300
TAIL_LINES = 3  # of the library's own log, in the message
_LOADED: set[tuple[str, int, int, str]] = set()  # files a child loaded (path, size, mtime, card)


def load_in_child(card: Mapping[str, Any], path: Path, kernel_dir: Path, hint: str) -> None:
    """Load ``path`` as ``card`` (a tabular card's JSON) in a child; a crash is a ModelError naming the file.
    A file that loaded once (same path, size and mtime) is not loaded again in this process's life."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, json.dumps(dict(card), sort_keys=True))
    if key in _LOADED:
        return
    _run_child(card, path, kernel_dir, hint)
    _LOADED.add(key)


def _run_child(card: Mapping[str, Any], path: Path, kernel_dir: Path, hint: str) -> None:
    argv = [sys.executable, "-m", "builder.bundle.child_check", json.dumps(dict(card)), str(path), str(kernel_dir)]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=CHILD_SECONDS)
    except subprocess.TimeoutExpired:
        raise ModelError(f"[[models]] '{card['name']}': {path} did not load within {CHILD_SECONDS} s", hint=hint) from None
    if out.returncode >= 0:
        return  # loaded, or an ordinary error the in-process load reports in its own words
    name = _signal_name(-out.returncode)
    tail = [line.strip() for line in out.stderr.strip().splitlines() if line.strip()][-TAIL_LINES:]
    said = f"; its last words: {' | '.join(tail)}" if tail else ""
    raise ModelError(f"[[models]] '{card['name']}': {path} crashed the loader ({name}): the file is corrupt or "
                     f"truncated{said}", hint=hint)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _child(argv: list[str]) -> int:
    """The child's side: the runtime's own loader, as the kernel will call it."""
    card, path, kernel_dir = json.loads(argv[0]), Path(argv[1]), Path(argv[2])
    with user_code_importable(kernel_dir), offline_environment():
        if card.get("kind") == "sklearn":
            tabular.load_estimator(card, path)
        else:
            tabular.load_booster(card, path)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
