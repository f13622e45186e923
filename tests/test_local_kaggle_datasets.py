"""Datasets on the local Kaggle, driven by the real in-process ``KaggleApi`` over HTTP."""

from __future__ import annotations

import base64
import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest
import requests

from builder.local_kaggle import ServerSettings
from tests.support.files import build_file_tree
from tests.support.local_kaggle import KEY, OTHER, OTHER_KEY, USER, connect_as, make_dataset, start_server

pytestmark = pytest.mark.loopback  # every test talks to a local Kaggle over HTTP

REF = f"{USER}/tiny-numbers"


def test_create_status_files_and_download(api, kaggle_server, tmp_path: Path) -> None:
    folder = make_dataset(tmp_path / "ds", files={"numbers.csv": "n\n1\n2\n", "fold0/model.bin": b"\x00\x01weights",
                                                  "fold0/deep/cfg.json": "{}"})
    created = api.dataset_create_new(str(folder), dir_mode="zip", quiet=True)
    assert (created.status, created.error) == ("ok", "")
    assert created.url == f"{kaggle_server.base_url}/datasets/{REF}"
    assert api.dataset_status(REF) == "ready"
    names = {f.name: f.total_bytes for f in api.dataset_list_files(REF).files}
    # fold0/ went up as fold0.zip and came back as a folder, as on Kaggle
    assert names == {"numbers.csv": 6, "fold0/model.bin": 9, "fold0/deep/cfg.json": 2}

    api.dataset_download_files(REF, path=str(tmp_path / "all"), unzip=True, quiet=True)
    assert (tmp_path / "all" / "fold0" / "model.bin").read_bytes() == b"\x00\x01weights"
    api.dataset_download_file(REF, "fold0/deep/cfg.json", path=str(tmp_path / "one"), quiet=True)
    assert (tmp_path / "one" / "fold0" / "deep" / "cfg.json").read_text() == "{}"


def test_every_version_is_a_full_snapshot(api, tmp_path: Path) -> None:
    folder = make_dataset(tmp_path / "ds", files={"a.csv": "a\n1\n", "b.csv": "b\n2\n"})
    assert api.dataset_create_new(str(folder), quiet=True).status == "ok"
    (folder / "b.csv").unlink()
    (folder / "c.csv").write_text("c\n3\n")
    assert api.dataset_create_version(str(folder), "drop b, add c", quiet=True).status == "ok"

    assert json.loads(api.dataset_status(REF, format="json")) == {"status": "ready", "current_version_number": 2}
    assert sorted(f.name for f in api.dataset_list_files(REF).files) == ["a.csv", "c.csv"]
    assert sorted(f.name for f in api.dataset_list_files(f"{REF}/1").files) == ["a.csv", "b.csv"]


def test_tar_folders_are_unpacked(api, tmp_path: Path) -> None:
    folder = make_dataset(tmp_path / "ds", files={"weights/fold1/w.pth": b"pth", "x.txt": "x"})
    assert api.dataset_create_new(str(folder), dir_mode="tar", quiet=True).status == "ok"
    assert sorted(f.name for f in api.dataset_list_files(REF).files) == ["weights/fold1/w.pth", "x.txt"]


def test_uploaded_archives_are_unpacked_and_unsafe_ones_refused(api, tmp_path: Path) -> None:
    good = io.BytesIO()
    with zipfile.ZipFile(good, "w") as zf:
        zf.writestr("inner/a.txt", "a")
    folder = make_dataset(tmp_path / "ds", files={"bundle.zip": good.getvalue()})
    assert api.dataset_create_new(str(folder), quiet=True).status == "ok"
    assert [f.name for f in api.dataset_list_files(REF).files] == ["bundle/inner/a.txt"]

    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w") as tf:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 1
        tf.addfile(info, io.BytesIO(b"x"))
    bad = make_dataset(tmp_path / "bad", slug="evil-archive", title="Evil archive", files={"evil.tar": evil.getvalue()})
    with pytest.raises(requests.HTTPError, match=r"Invalid archive entry '../escape.txt' in evil.tar") as refused:
        api.dataset_create_new(str(bad), quiet=True)
    assert refused.value.response is not None and refused.value.response.status_code == 400


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"licenses": [{"name": "WTFPL"}]}, "Invalid license 'WTFPL'"),
        ({"id": f"{USER}/Upper-Case"}, "Invalid slug 'Upper-Case'"),
        ({"id": f"{OTHER}/not-mine"}, "permission to create datasets for 'bob'"),
    ],
    ids=["license", "slug-charset", "other-owner"],
)
def test_creation_errors_come_back_in_the_body(api, tmp_path: Path, metadata: dict, message: str) -> None:
    folder = make_dataset(tmp_path / "ds")
    meta = {**json.loads((folder / "dataset-metadata.json").read_text()), **metadata}
    (folder / "dataset-metadata.json").write_text(json.dumps(meta))
    result = api.dataset_create_new(str(folder), quiet=True)
    assert result.status == "error"
    assert message in result.error


def test_slug_in_use_is_reported_by_the_client(api, tmp_path: Path) -> None:
    folder = make_dataset(tmp_path / "ds")
    assert api.dataset_create_new(str(folder), quiet=True).status == "ok"
    again = api.dataset_create_new(str(folder), quiet=True)
    assert again.status == "error"
    assert "already in use" in again.error


def test_a_new_version_is_not_ready_at_once(tmp_path: Path, monkeypatch) -> None:
    settings = ServerSettings(dataset_ready_seconds=0.0, dataset_ready_polls=2)
    with start_server(tmp_path / "data", settings=settings) as srv:
        api = connect_as(monkeypatch, srv.base_url)
        assert api.dataset_create_new(str(make_dataset(tmp_path / "ds")), quiet=True).status == "ok"
        assert [api.dataset_status(REF) for _ in range(3)] == ["blobs_received", "blobs_received", "ready"]


def test_private_datasets_are_invisible_to_others(api, kaggle_server, tmp_path: Path, monkeypatch) -> None:
    assert api.dataset_create_new(str(make_dataset(tmp_path / "ds")), quiet=True).status == "ok"
    bob = connect_as(monkeypatch, kaggle_server.base_url, OTHER, OTHER_KEY)
    with pytest.raises(requests.HTTPError, match="not found"):
        bob.dataset_status(REF)


def test_errors_have_kaggles_shape_and_bad_credentials_get_401(kaggle_server) -> None:
    url = f"{kaggle_server.base_url}/api/v1/datasets.DatasetApiService/GetDatasetStatus"
    good = "Basic " + base64.b64encode(f"{USER}:{KEY}".encode()).decode()
    missing = requests.post(url, json={"ownerSlug": USER, "datasetSlug": "nothing-here"}, headers={"Authorization": good})
    assert missing.status_code == 404
    assert missing.json() == {"code": 404, "message": f"Dataset {USER}/nothing-here not found"}

    wrong = "Basic " + base64.b64encode(f"{USER}:wrong-key".encode()).decode()
    denied = requests.post(url, json={}, headers={"Authorization": wrong})
    assert (denied.status_code, denied.json()) == (401, {"code": 401, "message": "Unauthenticated"})
    unknown = requests.post(f"{kaggle_server.base_url}/v1/nope.NopeService/Nothing", json={})
    assert unknown.status_code == 404 and unknown.json()["code"] == 404


def test_state_survives_a_restart(tmp_path: Path, monkeypatch) -> None:
    data = tmp_path / "data"
    with start_server(data) as first:
        api = connect_as(monkeypatch, first.base_url)
        assert api.dataset_create_new(str(make_dataset(tmp_path / "ds")), quiet=True).status == "ok"
    with start_server(data, users=False) as second:  # users, datasets and blobs come from disk
        api = connect_as(monkeypatch, second.base_url)
        assert api.dataset_status(REF) == "ready"
        assert [f.name for f in api.dataset_list_files(REF).files] == ["numbers.csv"]
        folder = build_file_tree(tmp_path / "ds", {"more.csv": "m\n"})
        assert api.dataset_create_version(str(folder), "after restart", quiet=True).status == "ok"
        assert json.loads(api.dataset_status(REF, format="json"))["current_version_number"] == 2
