"""kkb as people call it: the ``kkb`` command in a subprocess, from a folder of their choice, with relative paths."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

# The console script pip installs next to the interpreter (what people type); `python -m builder` where there is none.
_SCRIPT = Path(sys.executable).parent / "kkb"
COMMAND = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "builder"]


def kkb(*args: str | Path, cwd: Path, env: Mapping[str, str] | None = None,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``kkb ARGS`` started in ``cwd``, with this process's (isolated) environment plus ``env``."""
    return subprocess.run([*COMMAND, *map(str, args)], cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, errors="replace", timeout=timeout)


def said(run: subprocess.CompletedProcess[str]) -> str:
    """What a run printed, for an assertion's message."""
    return f"exit {run.returncode}\n--- stdout\n{run.stdout[-3000:]}\n--- stderr\n{run.stderr[-3000:]}"
