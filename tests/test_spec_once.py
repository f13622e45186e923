"""kernel.toml is read once per command: the loaded spec travels in the settings (build, dry run, push, submit).

Each re-read is a place where two views of one project could disagree (an edit between two reads, an owner taken
from one read and the datasets from another). The tests count every read of a file named kernel.toml through
``Path.read_text``/``Path.read_bytes``/``open`` while one ``kkb`` command runs end to end.
"""

from __future__ import annotations

import builtins
import io
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from builder import cli
from builder.local_kaggle import LocalKaggle
from builder.project.spec import SPEC_FILE
from tests.support.demo_kaggle import serve_local_kaggle
from tests.support.files import KERNELS


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    return Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))


@pytest.fixture
def spec_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of every kernel.toml read from now on (opened for reading, in this process)."""
    reads: list[str] = []

    def counting(original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            if Path(str(file)).name == SPEC_FILE and not any(flag in mode for flag in "wax+"):
                reads.append(str(file))
            return original(file, mode, *args, **kwargs)
        return wrapper

    # Path.read_text/read_bytes go through io.open, as does builtins.open: one hook sees every read.
    monkeypatch.setattr(builtins, "open", counting(builtins.open))
    monkeypatch.setattr(io, "open", counting(io.open))
    return reads


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    yield from serve_local_kaggle(tmp_path, monkeypatch, None)  # runs and scores the kernel


def test_kkb_build_reads_kernel_toml_once(kernel: Path, spec_reads: list[str]) -> None:
    assert cli.main(["build", str(kernel), "--out", str(kernel.parent / "build")]) == 0
    assert spec_reads == [str(kernel / SPEC_FILE)]


@pytest.mark.slow
@pytest.mark.loopback
def test_kkb_dry_run_reads_kernel_toml_once(kernel: Path, spec_reads: list[str]) -> None:
    # No --owner: the dry run takes the owner from the spec it loaded, not from a read of its own.
    assert cli.main(["dry-run", str(kernel), "--out", str(kernel.parent / "build"), "--scenario", "commit"]) == 0
    assert spec_reads == [str(kernel / SPEC_FILE)]


@pytest.mark.slow
@pytest.mark.loopback
def test_kkb_submit_reads_kernel_toml_once(kernel: Path, server: LocalKaggle, spec_reads: list[str]) -> None:
    assert cli.main(["submit", str(kernel), "--out", str(kernel.parent / "build")]) == 0
    assert spec_reads == [str(kernel / SPEC_FILE)]
