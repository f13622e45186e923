"""A push killed mid-upload resumes where Kaggle stopped.

A real ``kkb push`` in a subprocess, the real client over loopback against the local Kaggle, which reads the
upload slowly; ``kill -9`` once part of the weights archive arrived. The next push sends only the rest: the
archive sits at a stable path (``kaggle_api/staging.py``), so the client's own resume state matches it.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator
from io import BufferedIOBase
from pathlib import Path
from typing import Any

import pytest

from builder.errors import RemoteError
from builder.local_kaggle import InstantRunner, LocalKaggle
from builder.remote.kaggle_api import staging
from builder.remote.kaggle_api.staging import RESUME_WINDOW_S, remove_dead_stages, stable_upload_folder
from builder.remote.push import push
from builder.remote.session import PushSettings, upload_state_key
from tests.support.demo_kaggle import DEMO_KEY, DEMO_USER, LOOPBACK_WAITS, demo_adapter, serve_local_kaggle
from tests.support.files import KERNELS, REPO

BIG = 6 << 20


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    yield from serve_local_kaggle(tmp_path, monkeypatch, InstantRunner())


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))
    (kernel / "weights" / "big.json").write_bytes(random.Random(0).randbytes(BIG))  # matched by weights/*.json
    return kernel


class _Slow(BufferedIOBase):
    """The request body, read at about 2 MB/s (a slow uplink), counting what was read."""

    def __init__(self, body: BufferedIOBase, count: Callable[[int], None]) -> None:
        self._body, self._count = body, count

    def read(self, size: int | None = -1) -> bytes:
        piece = self._body.read(size)
        time.sleep(len(piece) / (2 << 20))
        self._count(len(piece))
        return piece


def _count_puts(server: LocalKaggle, monkeypatch: pytest.MonkeyPatch, slow: bool) -> dict[str, int]:
    """Bytes each upload token received through PUT bodies."""
    received: dict[str, int] = {}
    real = type(server.blobs).put.__get__(server.blobs)

    def put(token: str, headers: Callable[[str], str | None], body: BufferedIOBase) -> Any:
        def count(n: int) -> None:
            received[token] = received.get(token, 0) + n
        wrapped = _Slow(body, count) if slow else _Counted(body, count)
        return real(token, headers, wrapped)

    monkeypatch.setattr(server.blobs, "put", put)
    return received


class _Counted(_Slow):
    def read(self, size: int | None = -1) -> bytes:
        piece = self._body.read(size)
        self._count(len(piece))
        return piece


def _weights_tar(server: LocalKaggle) -> tuple[str, int, int]:
    """(token, bytes Kaggle holds, announced size) of the weights archive's upload."""
    for meta in (server.store.root / "blobs").glob("*/blob.json"):
        found = server.store.read(meta)
        if found["name"] == "weights.tar":
            return found["token"], (meta.parent / "data").stat().st_size, int(found["contentLength"])
    return "", 0, 0


def _settled(server: LocalKaggle) -> tuple[str, int, int]:
    """The weights archive's upload once the server read what was still in the socket of the killed client."""
    last = _weights_tar(server)
    while True:
        time.sleep(0.5)
        now = _weights_tar(server)
        if now == last:
            return now
        last = now


@pytest.mark.slow
@pytest.mark.loopback
def test_a_push_killed_mid_upload_resumes_and_sends_only_the_rest(kernel: Path, server: LocalKaggle, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    first = _count_puts(server, monkeypatch, slow=True)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path),
           "KAGGLE_CONFIG_DIR": str(tmp_path / "home" / ".kaggle"), "KAGGLE_USERNAME": DEMO_USER,
           "KAGGLE_KEY": DEMO_KEY, "KKB_KAGGLE_API": server.base_url, "PYTHONPATH": str(REPO)}
    out = kernel.parent / "build"
    process = subprocess.Popen([sys.executable, "-m", "builder", "push", str(kernel), "--out", str(out)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while _weights_tar(server)[1] < BIG // 4:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "the weights archive never started arriving"
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait(30)
    finally:
        if process.poll() is None:
            process.kill()
    token, held, size = _settled(server)
    assert 0 < held < size and first[token] == held  # what was on the wire when it died is kept
    state = kernel / ".kkb" / "tmp" / upload_state_key(server.base_url)
    assert list(state.glob("stage-*")) and list(state.glob(".kaggle-uploads-*/*.json"))  # what resumes

    monkeypatch.undo()  # the uplink is fast again; the server's env and user stay (re-set below)
    monkeypatch.setenv("KAGGLE_USERNAME", DEMO_USER)
    monkeypatch.setenv("KAGGLE_KEY", DEMO_KEY)
    monkeypatch.setenv("KKB_KAGGLE_API", server.base_url)
    second = _count_puts(server, monkeypatch, slow=False)
    result = push(PushSettings(kernel_dir=kernel, out_dir=out, adapter=demo_adapter(server), waits=LOOPBACK_WAITS))

    assert result.weights is not None and result.weights.action == "created" and result.kernel_action == "pushed"
    assert second.get(token) == size - held  # the rest, from the byte Kaggle had, on the same upload
    assert not list(state.glob("stage-*")) and not list(state.glob("tmp*"))  # nothing left behind
    assert not list(state.glob(".kaggle-uploads-*/*.json"))
    assert demo_adapter(server).dataset_version(result.weights.ref) == 1


def test_a_folder_without_sub_folders_is_uploaded_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_text("x\n")
    with stable_upload_folder(tmp_path / "data", tmp_path / "state") as upload:
        assert upload == tmp_path / "data"
    assert not (tmp_path / "state").exists()


def test_the_stage_is_the_clients_archive_at_a_stable_path(tmp_path: Path) -> None:
    folder = tmp_path / "weights-dataset"
    (folder / "weights" / ".git").mkdir(parents=True)
    (folder / "weights" / ".git" / "HEAD").write_text("ref\n")  # the client's own ignore rules apply
    (folder / "weights" / "b.bin").write_bytes(b"b" * 10)
    (folder / "weights" / "a.bin").write_bytes(b"a" * 10)
    (folder / "dataset-metadata.json").write_text('{"id": "me/w"}')
    root = tmp_path / "state"
    root.mkdir()
    with pytest.raises(RuntimeError), stable_upload_folder(folder, root) as upload:
        names = sorted(p.name for p in upload.iterdir())
        with tarfile.open(upload / "weights.tar") as archive:
            members = archive.getnames()
        raise RuntimeError("the upload died")
    assert names == ["dataset-metadata.json", "weights.tar"] and members == ["a.bin", "b.bin"]
    kept = upload
    assert kept.is_dir()  # a failed upload keeps its stage for the next run
    before = (kept / "weights.tar").stat()
    with stable_upload_folder(folder, root) as again:
        assert again == kept and (again / "weights.tar").stat().st_mtime == before.st_mtime
    assert not kept.exists()  # a finished upload removes it


def test_a_changed_folder_supersedes_its_old_stage_and_old_stages_expire(tmp_path: Path) -> None:
    folder = tmp_path / "code"
    (folder / "pkg").mkdir(parents=True)
    (folder / "pkg" / "m.py").write_text("x = 1\n")
    root = tmp_path / "state"
    root.mkdir()
    with pytest.raises(RuntimeError), stable_upload_folder(folder, root) as old:
        raise RuntimeError
    (folder / "pkg" / "m.py").write_text("x = 22\n")
    with pytest.raises(RuntimeError), stable_upload_folder(folder, root) as new:
        raise RuntimeError
    assert new != old and not old.exists() and new.exists()
    (root / "stage-0-0.partial-1").mkdir()
    assert remove_dead_stages(root) == [root / "stage-0-0.partial-1"]
    assert remove_dead_stages(root, now=time.time() + RESUME_WINDOW_S + 60) == [new]


def test_a_full_disk_while_archiving_is_named_and_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "weights-dataset"
    (folder / "weights").mkdir(parents=True)
    (folder / "weights" / "a.bin").write_bytes(b"a")
    root = tmp_path / "state"
    root.mkdir()

    def full(source: Path, target: Path) -> None:
        target.write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(staging, "_archive", full)
    with pytest.raises(RemoteError) as caught, stable_upload_folder(folder, root):
        pass
    assert caught.value.message == (f"archiving {folder} for the upload in {root}: the disk is full (No space left on "
                                    "device); nothing was uploaded")
    assert caught.value.hint == f"free space there (df -h {root}); the archive needs about the size of {folder}"
    assert not list(root.iterdir())
