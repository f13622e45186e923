"""Generated example data, made once however many pytest-xdist workers ask for it.

``kernels/evalapi``'s competition folders get their ``kaggle_evaluation`` copies at session start (kept once in
``kernels/evalapi/kaggle_evaluation/``, never committed twice); the heavier generators
(``kernels/reference/make_assets.py`` and the example kernels') run from the fixtures of the tests that need them,
through :func:`make_assets`. Workers share the checkout, so each kernel's generator runs under a file lock in
its ``.kkb/`` (git-ignored, never shipped): the second worker waits, then finds the assets up to date.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.files import KERNELS


def make_assets(kernel: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run ``kernel/make_assets.py`` (it skips what is up to date), one process at a time per kernel."""
    lock = kernel / ".kkb" / "make_assets.lock"
    lock.parent.mkdir(exist_ok=True)
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        return subprocess.run([sys.executable, str(kernel / "make_assets.py")], capture_output=True, text=True,
                              timeout=timeout)


def pytest_sessionstart(session: pytest.Session) -> None:
    made = make_assets(KERNELS / "evalapi", timeout=120)
    assert made.returncode == 0, made.stdout + made.stderr
