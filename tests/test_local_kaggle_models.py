"""The local Kaggle's ``models.ModelApiService``, driven by the real ``kaggle`` client (2.2.5)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from builder.local_kaggle import InstantRunner, LocalKaggle, ServerSettings
from builder.remote.backoff import Backoff
from builder.remote.kaggle_api import KaggleAdapter

pytestmark = pytest.mark.loopback  # a local Kaggle over loopback HTTP

BOB, BOB_KEY = "bob", "bobs-local-key-0123456789"
ALICE, ALICE_KEY = "alice", "alices-local-key-0123456789"
INSTANCE = "bob/tiny-net/pytorch/default"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LocalKaggle]:
    settings = ServerSettings(dataset_ready_seconds=0.0, dataset_ready_polls=1)
    with LocalKaggle(tmp_path / "kaggle", port=0, settings=settings, runner=InstantRunner()) as local:
        local.add_user(BOB, BOB_KEY)
        local.add_user(ALICE, ALICE_KEY)
        yield local


def _as(server: LocalKaggle, monkeypatch: pytest.MonkeyPatch, user: str, key: str) -> KaggleAdapter:
    monkeypatch.setenv("KAGGLE_USERNAME", user)
    monkeypatch.setenv("KAGGLE_KEY", key)
    return KaggleAdapter.connect(server.base_url, retry=Backoff(attempts=2, base_seconds=0.01, max_seconds=0.02))


def _model_folder(folder: Path, private: bool, text: str = "NET") -> Path:
    (folder / "fold0").mkdir(parents=True)
    (folder / "net.txt").write_text(text)
    (folder / "fold0" / "w.bin").write_bytes(b"\1\2\3")
    (folder / "model-metadata.json").write_text(json.dumps(
        {"ownerSlug": "bob", "slug": "tiny-net", "title": "Tiny Net", "isPrivate": private, "description": "tiny"}))
    (folder / "model-instance-metadata.json").write_text(json.dumps(
        {"ownerSlug": "bob", "modelSlug": "tiny-net", "instanceSlug": "default", "framework": "pytorch",
         "licenseName": "Apache 2.0"}))
    return folder


def test_create_version_read_and_download(server: LocalKaggle, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bob = _as(server, monkeypatch, BOB, BOB_KEY)
    folder = _model_folder(tmp_path / "model", private=False)
    created = bob.api.model_create_new(str(folder))
    assert (created.ref, created.error) == ("bob/tiny-net", "")
    assert bob.api.model_create_new(str(folder)).error == "The model bob/tiny-net already exists"
    assert bob.api.model_instance_create(str(folder), quiet=True, dir_mode="tar").ref == INSTANCE
    assert bob.model_instance_version(INSTANCE) == 0  # not ready until one status poll saw it processing
    assert bob.model_instance_version(INSTANCE) == 1
    (folder / "net.txt").write_text("NET v2")
    assert bob.api.model_instance_version_create(INSTANCE, str(folder), "v2", quiet=True, dir_mode="tar").error == ""
    assert [bob.model_instance_version(INSTANCE) for _ in range(2)] == [1, 2]

    files = bob.api.model_instance_files(INSTANCE).files  # the newest ready version; metadata files are not uploaded
    assert sorted(f.name for f in files) == ["fold0/w.bin", "net.txt"]
    assert bob.model_file(INSTANCE, 1, "net.txt") == b"NET" and bob.model_file(INSTANCE, 2, "net.txt") == b"NET v2"
    assert bob.model_file(INSTANCE, 3, "net.txt") is None
    model = bob.api.model_get("bob/tiny-net")
    assert (model.title, model.instances[0].framework.name, model.instances[0].version_number) == (
        "Tiny Net", "MODEL_FRAMEWORK_PY_TORCH", 2)

    alice = _as(server, monkeypatch, ALICE, ALICE_KEY)  # a public model: anyone reads and downloads it
    target = tmp_path / "download"
    alice.api.model_instance_version_download(f"{INSTANCE}/1", path=str(target), untar=True)
    assert (target / "net.txt").read_text() == "NET" and (target / "fold0" / "w.bin").read_bytes() == b"\1\2\3"
    assert alice.model_version_readable(f"{INSTANCE}/2") and not alice.model_version_readable(f"{INSTANCE}/3")
    refused = alice.api.model_instance_version_create(INSTANCE, str(folder), "mine now", quiet=True, dir_mode="tar")
    assert refused.error == "You do not have permission to create a new version of this model"


def test_a_private_model_is_invisible_to_others(server: LocalKaggle, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bob = _as(server, monkeypatch, BOB, BOB_KEY)
    folder = _model_folder(tmp_path / "model", private=True)
    bob.api.model_create_new(str(folder))
    bob.api.model_instance_create(str(folder), quiet=True, dir_mode="tar")
    assert bob.model_version_readable(f"{INSTANCE}/1")
    alice = _as(server, monkeypatch, ALICE, ALICE_KEY)
    assert not alice.model_exists("bob/tiny-net") and alice.model_instance_version(INSTANCE) is None
    assert not alice.model_version_readable(f"{INSTANCE}/1")
    with pytest.raises(requests.HTTPError, match="Model bob/tiny-net not found"):
        alice.api.model_get("bob/tiny-net")


def test_bad_variation_is_answered_in_the_body(server: LocalKaggle, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bob = _as(server, monkeypatch, BOB, BOB_KEY)
    folder = _model_folder(tmp_path / "model", private=False)
    bob.api.model_create_new(str(folder))
    meta = json.loads((folder / "model-instance-metadata.json").read_text())
    (folder / "model-instance-metadata.json").write_text(json.dumps({**meta, "instanceSlug": "Bad Slug"}))
    response = bob.api.model_instance_create(str(folder), quiet=True, dir_mode="tar")
    assert response.error == "Invalid instance slug 'Bad Slug': lower-case letters, digits, '-', '_' and '.'"
