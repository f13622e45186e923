"""Every test runs without the developer's Kaggle credentials, home folder or temp dir (an autouse fixture)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def isolate_kaggle(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test may read real credentials, write to the real home, or share upload state in TMPDIR."""
    for name in list(os.environ):
        if name.startswith("KAGGLE_") or name.startswith("KKB_"):
            monkeypatch.delenv(name, raising=False)
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(home / ".kaggle"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    tmp = tmp_path_factory.mktemp("tmpdir")
    monkeypatch.setenv("TMPDIR", str(tmp))
    # gettempdir() is cached: the kaggle client keeps resumable-upload state under it.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))


# The kernel runtime's offline() sets these in its own process; a test that runs the runtime in-process must not
# hand them to the next test (a sandbox started later would inherit them, which Kaggle never does).
RUNTIME_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "NO_ALBUMENTATIONS_UPDATE")


@pytest.fixture(autouse=True)
def restore_runtime_variables() -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in RUNTIME_VARIABLES}
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
