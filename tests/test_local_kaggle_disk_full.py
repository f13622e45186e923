"""A full disk under the local Kaggle: an HTTP 507 (Insufficient Storage), never a dropped connection.

ENOSPC is simulated where the server writes: the upload handler's write of the bytes it receives (and, for an RPC,
the store's write of a record). The server answers 507 with its own words; the bytes that arrived stay, so a probe
answers 308 with their range and the upload resumes once there is room. ``kkb push`` reports the server's answer
(not "cannot reach Kaggle"), gives up at once (a full disk does not clear between two tries), and resumes on the next
run.
"""

from __future__ import annotations

import base64
import errno
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from builder import cli
from builder.errors import RemoteError
from builder.local_kaggle import LocalKaggle, blobs, store
from builder.local_kaggle.runner import InstantRunner
from builder.remote.kaggle_api import UnreachableError
from builder.remote.push import push
from builder.remote.session import PushSettings
from tests.support.demo_kaggle import DEMO_KEY, DEMO_USER, LOOPBACK_WAITS, demo_adapter, serve_local_kaggle
from tests.support.files import KERNELS

pytestmark = pytest.mark.loopback  # a local Kaggle over loopback HTTP

AUTH = "Basic " + base64.b64encode(f"{DEMO_USER}:{DEMO_KEY}".encode()).decode()
KEPT = 4  # bytes a write keeps before the disk is full
FULL = ("Insufficient storage: the local Kaggle's disk is full (No space left on device) while storing the upload; "
        "free space in its data folder, then resume")


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    yield from serve_local_kaggle(tmp_path, monkeypatch, InstantRunner())


def _disk_full_after(monkeypatch: pytest.MonkeyPatch, keep: int) -> None:
    """The upload handler's writes keep ``keep`` bytes of a PUT, then the disk is full (ENOSPC)."""
    original = blobs._write_from

    def full(path: Path, start: int, body: Any, headers: Any, _keep: int | None, limit: int) -> int:
        original(path, start, body, headers, keep, limit)  # reads the body, keeps ``keep`` bytes of it
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(blobs, "_write_from", full)


def _start_upload(server: LocalKaggle, length: int) -> str:
    answer = requests.post(f"{server.base_url}/api/v1/blobs.BlobApiService/StartBlobUpload", timeout=30,
                           headers={"Authorization": AUTH}, json={"type": "DATASET", "name": "x.bin", "contentLength": length})
    return str(answer.json()["createUrl"])


def test_a_full_disk_during_an_upload_is_a_507_and_what_arrived_is_kept(server: LocalKaggle,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    url = _start_upload(server, 10)
    with monkeypatch.context() as patch:
        _disk_full_after(patch, KEPT)
        answer = requests.put(url, data=b"0123456789", timeout=30)
    assert (answer.status_code, answer.json()) == (507, {"code": 507, "message": FULL})
    probe = requests.put(url, headers={"Content-Range": "bytes */10", "Content-Length": "0"}, timeout=30)
    assert (probe.status_code, probe.headers.get("Range")) == (308, f"bytes=0-{KEPT - 1}")
    rest = requests.put(url, data=b"456789", headers={"Content-Range": "bytes 4-9/10"}, timeout=30)
    assert rest.status_code == 200


def test_a_full_disk_in_an_rpc_is_a_507_naming_the_call(server: LocalKaggle, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(self: Any, path: Path, value: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(store.Store, "write", full)
    answer = requests.post(f"{server.base_url}/api/v1/blobs.BlobApiService/StartBlobUpload", timeout=30,
                           headers={"Authorization": AUTH}, json={"type": "DATASET", "name": "x.bin", "contentLength": 3})
    assert answer.status_code == 507
    assert answer.json()["message"] == ("Insufficient storage: the local Kaggle's disk is full (No space left on device) "
                                        "while storing the result of blobs.BlobApiService/StartBlobUpload; free space in "
                                        "its data folder, then resume")


def test_kkb_push_reports_the_servers_full_disk_and_resumes_later(server: LocalKaggle, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))
    settings = PushSettings(kernel_dir=kernel, out_dir=tmp_path / "build", adapter=demo_adapter(server), waits=LOOPBACK_WAITS)
    with monkeypatch.context() as patch:
        _disk_full_after(patch, KEPT)
        with pytest.raises(RemoteError) as caught:
            push(settings)
    assert not isinstance(caught.value, UnreachableError)
    assert caught.value.message.startswith("Kaggle answered HTTP 507 (Insufficient Storage: the server's disk is full) "
                                           "to the upload of ")
    assert "cannot reach" not in caught.value.message and "it resumes" in (caught.value.hint or "")
    assert push(settings).kernel_action == "pushed"  # room again: the same command finishes the push


def test_the_cli_says_the_server_is_full_not_unreachable(server: LocalKaggle, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))
    _disk_full_after(monkeypatch, KEPT)
    assert cli.main(["push", str(kernel), "--out", str(tmp_path / "build")]) == 3
    err = " ".join(capsys.readouterr().err.split())
    assert "Kaggle answered HTTP 507 (Insufficient Storage: the server's disk is full)" in err
    assert "cannot reach" not in err
