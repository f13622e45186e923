"""Kaggle's state decides "unchanged", not only the project's history (a fresh clone, a CI runner).

The real ``kaggle`` client over loopback HTTP against the local Kaggle, as in ``test_push_e2e.py``: the kernel's
content hash travels in the pushed notebook, so a clone without ``.kkb`` pushes nothing when nothing changed.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.errors import LockedError
from builder.local_kaggle import InstantRunner, LocalKaggle
from builder.remote.kernel_stamp import stamp, stamped_hash, unstamped_bytes
from builder.remote.lock import kernel_lock
from builder.remote.push import PushResult, push
from builder.remote.rehearsal import RehearsalSettings, rehearse_on_kaggle
from builder.remote.session import PushSettings
from tests.support.demo_kaggle import LOOPBACK_WAITS, demo_adapter, serve_local_kaggle
from tests.support.files import KERNELS

KERNEL_ID = "kkb-demo/kkb-minimal-inference"


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    yield from serve_local_kaggle(tmp_path, monkeypatch, InstantRunner())


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    return Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))


def _push(kernel: Path, server: LocalKaggle) -> PushResult:
    return push(PushSettings(kernel_dir=kernel, out_dir=kernel.parent / "build", adapter=demo_adapter(server),
                             waits=LOOPBACK_WAITS))


def _received_bytes(server: LocalKaggle) -> int:
    return sum((meta.parent / "data").stat().st_size for meta in (server.store.root / "blobs").glob("*/blob.json"))


def _fresh_clone(kernel: Path) -> None:
    """What a second machine has: the project without its .kkb state and without a build."""
    shutil.rmtree(kernel / ".kkb")
    shutil.rmtree(kernel.parent / "build")


@pytest.mark.slow
@pytest.mark.loopback
def test_a_fresh_clone_with_nothing_changed_pushes_nothing(kernel: Path, server: LocalKaggle) -> None:
    first = _push(kernel, server)
    assert first.kernel_action == "pushed" and first.uploaded_bytes > 0
    received = _received_bytes(server)
    _fresh_clone(kernel)
    again = _push(kernel, server)
    assert (again.weights.action, again.code.action, again.kernel_action) == ("unchanged",) * 3  # type: ignore[union-attr]
    assert again.uploaded_bytes == 0 and _received_bytes(server) == received
    assert demo_adapter(server).kernel_version(KERNEL_ID) == 1


@pytest.mark.slow
@pytest.mark.loopback
def test_a_fresh_clone_with_a_changed_kernel_pushes_a_new_version(kernel: Path, server: LocalKaggle) -> None:
    _push(kernel, server)
    _fresh_clone(kernel)
    spec = kernel / "kernel.toml"
    spec.write_text(spec.read_text(encoding="utf-8") + "\n# a comment changes the spec's hash in the provenance\n",
                    encoding="utf-8")
    again = _push(kernel, server)
    assert (again.code.action, again.kernel_action, again.kernel_version) == ("unchanged", "pushed", 2)


@pytest.mark.slow
@pytest.mark.loopback
def test_a_killed_uploads_archive_is_removed_by_the_next_push(kernel: Path, server: LocalKaggle) -> None:
    """``kill -9`` mid-upload leaves the client's ``tmpXXXX/weights.tar``; the next push (under the lock) removes it."""
    dead = kernel / ".kkb" / "tmp" / f"127.0.0.1-{server.port}" / "tmpk1ll3d"
    dead.mkdir(parents=True)
    (dead / "weights.tar").write_bytes(b"\0" * 4096)
    _push(kernel, server)
    assert not dead.exists()
    assert not list((kernel / ".kkb" / "tmp" / f"127.0.0.1-{server.port}").glob("tmp*"))


def test_the_stamp_is_not_part_of_the_hash(tmp_path: Path) -> None:
    notebook = tmp_path / "k.ipynb"
    notebook.write_text(json.dumps({"cells": [], "metadata": {"kkb": {"kernel": "a/b"}}, "nbformat": 4,
                                    "nbformat_minor": 5}))
    before = unstamped_bytes(notebook)
    stamp(notebook, "sha256:" + "a" * 64)
    assert unstamped_bytes(notebook) == before
    assert stamped_hash(json.dumps(json.loads(notebook.read_text()))) == "sha256:" + "a" * 64  # as the client sends it
    script = tmp_path / "k.py"
    script.write_text("print(1)\n")
    stamp(script, "sha256:" + "b" * 64)
    stamp(script, "sha256:" + "c" * 64)  # a second stamp replaces the first
    assert script.read_text() == "print(1)\n# kkb kernel_hash: sha256:" + "c" * 64 + "\n"
    assert unstamped_bytes(script) == b"print(1)\n" and stamped_hash(script.read_text()) == "sha256:" + "c" * 64


@pytest.mark.parametrize("source", [None, "", "not json", "[1, 2]", '{"metadata": {"kkb": {"kernel_hash": 3}}}',
                                    '{"metadata": []}'])
def test_code_without_a_stamp_says_nothing(source: str | None) -> None:
    assert stamped_hash(source) is None


def test_the_rehearsal_on_kaggle_takes_the_kernel_lock(kernel: Path) -> None:
    """Beside a running push it waits, then names the holder: no build, no upload, no internal error."""
    with kernel_lock(kernel, "push"):
        with pytest.raises(LockedError) as caught:
            rehearse_on_kaggle(RehearsalSettings(kernel_dir=kernel, out_dir=kernel.parent / "build", lock_wait_s=0.1))
    assert caught.value.message.startswith(f"{kernel}: kkb push (pid ")
    assert caught.value.message.endswith("is running on this kernel project; kkb dry-run --on-kaggle waited 0.1s for it")
    assert not (kernel.parent / "build").exists()
