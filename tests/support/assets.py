"""Generated example data the suite needs before it starts: kernels/evalapi's competition folders get their
``kaggle_evaluation`` copies (kept once in ``kernels/evalapi/kaggle_evaluation/``, never committed twice).

The heavier generators (``kernels/reference/make_assets.py`` and the example kernels') run from the fixtures
of the tests that need them; this one is a file copy, done once per session.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.files import KERNELS


def pytest_sessionstart(session: pytest.Session) -> None:
    subprocess.run([sys.executable, str(KERNELS / "evalapi" / "make_assets.py")], check=True, capture_output=True)
