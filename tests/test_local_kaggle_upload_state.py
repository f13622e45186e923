"""The real client's resumable-upload state (``$TMPDIR/.kaggle-uploads-<uid>/<path>.json``) across server restarts.

The client remembers, per local file path, the ``createUrl`` and token of an upload that a failed run
left behind, and resumes it on the next run. Against a local Kaggle that was restarted:

* on the same port with fresh data, the server answers the unknown upload session cleanly (404 to the
  probe: the client restarts the upload; an unknown token in a create call: an error in the body, not
  an HTTP error that would make the client keep its stale state), so the run goes through;
* on another port, the client resumes against the dead port and fails ("Upload unsuccessful") on every
  run: nothing a server can answer reaches it. Only a TMPDIR per server helps, which is what kkb's test
  helpers use and what docs/local-kaggle.md tells users of the raw client.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from builder.local_kaggle import LocalKaggle
from builder.remote.session import private_tmpdir
from tests.support.local_kaggle import INSTANT_DATASETS, KEY, OTHER, OTHER_KEY, USER, FakeRunner, connect_as, make_dataset

pytestmark = pytest.mark.loopback  # a local Kaggle over loopback HTTP

PAYLOAD = os.urandom(200_000)


def _server(data: Path, port: int = 0) -> LocalKaggle:
    server = LocalKaggle(data, port=port, settings=INSTANT_DATASETS, runner=FakeRunner()).start()
    server.add_user(USER, KEY)
    server.add_user(OTHER, OTHER_KEY)
    return server


def _interrupted_upload(server: LocalKaggle, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that leaves an incomplete upload behind: every transfer of the big file is cut."""
    server.faults.break_upload(times=10, fraction=0.5)
    with pytest.raises(ValueError, match="Upload unsuccessful: blob.bin"):
        connect_as(monkeypatch, server.base_url).dataset_create_new(str(folder), quiet=True)
    server.faults.clear()


def _received(server: LocalKaggle) -> list[int]:
    blobs = server.store.root / "blobs"
    return sorted((p / "data").stat().st_size for p in blobs.iterdir()) if blobs.is_dir() else []


def test_same_port_fresh_data_restarts_an_unknown_upload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = make_dataset(tmp_path / "ds", files={"blob.bin": PAYLOAD})
    first = _server(tmp_path / "a")
    port = first.port
    _interrupted_upload(first, folder, monkeypatch)
    first.stop()
    with _server(tmp_path / "b", port=port) as second:
        result = connect_as(monkeypatch, second.base_url).dataset_create_new(str(folder), quiet=True)
        assert result.status == "ok"
        assert len(PAYLOAD) in _received(second)


def test_same_port_after_a_failed_create_the_next_run_goes_through(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    folder = make_dataset(tmp_path / "ds", files={"blob.bin": PAYLOAD})
    first = _server(tmp_path / "a")
    port = first.port
    first.faults.fail_rpc("CreateDataset", status=500)
    with pytest.raises(Exception, match="Internal server error"):  # the upload finished, the create did not
        connect_as(monkeypatch, first.base_url).dataset_create_new(str(folder), quiet=True)
    first.stop()
    with _server(tmp_path / "b", port=port) as second:
        assert connect_as(monkeypatch, second.base_url).dataset_create_new(str(folder), quiet=True).status == "ok"
        assert len(PAYLOAD) in _received(second)


def test_an_unknown_upload_token_is_answered_in_the_body(tmp_path: Path) -> None:
    """What a client holding a token from an earlier server gets: an answer it reports (and then drops its
    state for), not an HTTP error after which it would keep the stale state."""
    import requests

    with _server(tmp_path / "a") as server:
        answer = requests.post(f"{server.base_url}/api/v1/datasets.DatasetApiService/CreateDataset", auth=(USER, KEY),
                               json={"ownerSlug": USER, "slug": "stale-token", "title": "Stale token",
                                     "licenseName": "CC0-1.0", "files": [{"token": "f" * 32}]}, timeout=30)
        assert (answer.status_code, answer.json()) == (200, {
            "status": "error", "invalidTags": [],
            "error": f"Invalid upload token '{'f' * 32}': start the upload with this account and finish it"})


def test_another_port_needs_another_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = make_dataset(tmp_path / "ds", files={"blob.bin": PAYLOAD})
    first = _server(tmp_path / "a")
    _interrupted_upload(first, folder, monkeypatch)
    first.stop()
    with _server(tmp_path / "b") as second:
        with pytest.raises(ValueError, match="Upload unsuccessful: blob.bin"):  # it resumed against the dead port
            connect_as(monkeypatch, second.base_url).dataset_create_new(str(folder), quiet=True)
        assert _received(second) == []
        fresh = tmp_path / "tmp-for-second"
        fresh.mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(fresh))
        assert connect_as(monkeypatch, second.base_url).dataset_create_new(str(folder), quiet=True).status == "ok"


def test_private_tmpdir_is_immune_to_a_restart_on_another_port(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = tmp_path / "kernel"
    folder = make_dataset(tmp_path / "ds", files={"blob.bin": PAYLOAD})
    first = _server(tmp_path / "a")
    with private_tmpdir(kernel, first.base_url):
        _interrupted_upload(first, folder, monkeypatch)
    first.stop()
    with _server(tmp_path / "b") as second, private_tmpdir(kernel, second.base_url):
        assert connect_as(monkeypatch, second.base_url).dataset_create_new(str(folder), quiet=True).status == "ok"


def test_private_tmpdir_keeps_upload_state_inside_the_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = tmp_path / "kernel"
    folder = make_dataset(tmp_path / "ds", files={"blob.bin": PAYLOAD})
    with _server(tmp_path / "a") as server, private_tmpdir(kernel, server.base_url) as private:
        _interrupted_upload(server, folder, monkeypatch)
        assert oct(private.stat().st_mode & 0o777) == "0o700"
    states = list((kernel / ".kkb" / "tmp").glob("*/.kaggle-uploads-*/*.json"))
    assert [p.name.endswith("blob.bin.json") for p in states] == [True]
    assert not list(Path(tempfile.gettempdir()).glob(".kaggle-uploads-*/*blob.bin.json"))


def test_the_kaggle_cli_helper_keeps_one_tmpdir_per_server(tmp_path: Path) -> None:
    from tests.support.local_kaggle import kaggle_cli

    home = tmp_path / "home"
    seen: list[Any] = []
    for port in (1111, 2222):
        done = kaggle_cli(["--version"], f"http://127.0.0.1:{port}", home)
        assert done.returncode == 0
        seen.append(sorted(p.name for p in (home / "tmp").iterdir()))
    assert seen[-1] == ["127.0.0.1-1111", "127.0.0.1-2222"]
