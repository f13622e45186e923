"""``kkb image --on-kaggle`` end to end: the capture kernel runs on the local Kaggle (so it describes this
machine's Python), and its description is stored where the dry run and ``kkb wheels`` read it."""

from __future__ import annotations

import datetime
import json
import platform
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

from builder import cli
from builder.errors import KkbError
from builder.local_kaggle import LocalKaggle
from builder.project.image import load_image, preinstalled_patterns
from builder.project.image_store import IMAGE_ENV, captured_image_path, check_description, stored_image_path
from builder.project.spec import load_spec
from builder.remote.rehearsal import image_label
from tests.support.demo_kaggle import serve_local_kaggle
from tests.support.files import KERNELS

pytestmark = [pytest.mark.slow, pytest.mark.loopback]

USER, KEY = "kkb-demo", "local-test-key-0123456789"


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv(IMAGE_ENV, raising=False)
    yield from serve_local_kaggle(tmp_path, monkeypatch, None)


def test_image_on_kaggle_stores_a_description_the_dry_run_and_wheels_read(server: LocalKaggle, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert stored_image_path() is None  # nothing captured yet: kkb falls back to the shipped description
    assert cli.main(["image", "--on-kaggle", "--accelerator", "none"]) == 0
    out = capsys.readouterr().out
    stored = tmp_path / "config" / "kkb" / "kaggle-image.json"
    assert captured_image_path() == stored and stored_image_path() == stored
    assert f"stored {stored}" in out
    data = check_description(json.loads(stored.read_text()), str(stored))
    assert data["format"] == 1 and data["verified"] is True
    assert data["captured"] == datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    assert data["python"] == ".".join(platform.python_version_tuple()[:2])
    assert data["packages"]["pandas"] == metadata.version("pandas")  # every installed distribution, by canonical name
    assert data["import_names"].get("yaml") == "pyyaml"
    assert data["gpu"] is None and "kkb-demo/kkb-image-capture v1 (CPU)" in data["name"]
    # The kernel's environment as the run had it; a secret by name only (the dry run gives its kernels a stand-in)
    variables = {entry["name"]: entry for entry in data["environment"]["variables"]}
    assert variables["KAGGLE_URL_BASE"]["value"] == "https://www.kaggle.com"
    assert variables["KAGGLE_USER_SECRETS_TOKEN"] == {"name": "KAGGLE_USER_SECRETS_TOKEN", "stand_in": True,
                                                      "source": "captured on Kaggle"}
    assert not any(name.startswith("KKB_") for name in variables)
    # The capture kernel: private, internet off, a script; never a competition kernel.
    meta = json.loads((server.store.root / "kernels" / "kkb-demo" / "kkb-image-capture" / "versions" / "1"
                       / "version.json").read_text())
    assert meta["isPrivate"] is True and meta["enableInternet"] is False and meta["competitionSources"] == []
    # Without --on-kaggle: which description is in use.
    assert cli.main(["image"]) == 0
    assert f"{stored}: Kaggle image as captured by kkb-demo/kkb-image-capture v1 (CPU)" in capsys.readouterr().out
    # The dry run and kkb wheels read it: load_image is what both call (exclusions, "not rehearsed").
    captured = load_image()
    assert captured.path == str(stored) and captured.verified and captured.has("pandas")
    assert {variable.name for variable in captured.environment} == set(variables)
    assert "pandas" in preinstalled_patterns(captured)
    # A rehearsal's heading names the captured image by its date.
    assert image_label(load_spec(KERNELS / "minimal")) == f"as captured {data['captured']}"
    # $KKB_KAGGLE_IMAGE still wins (a file the user points at on purpose).
    monkeypatch.setenv(IMAGE_ENV, str(tmp_path / "mine.json"))
    assert stored_image_path() == tmp_path / "mine.json"


@pytest.mark.parametrize(("data", "message"), [
    ([], "x: a Kaggle image description is a JSON object"),
    ({"format": 1, "name": "n", "captured": "2026-11-30", "packages": {}}, "x: 'python' is missing or not a str"),
    ({"format": 2, "name": "n", "captured": "d", "python": "3.12", "packages": {}}, "x: format 2 is not 1"),
    ({"format": 1, "name": "n", "captured": "d", "python": "3.12", "packages": {"torch": 2}},
     "x: packages: versions must be strings (torch)"),
])
def test_a_broken_description_is_never_stored(data: object, message: str) -> None:
    with pytest.raises(KkbError) as caught:
        check_description(data, "x")
    assert caught.value.message == message


def test_an_unknown_accelerator_is_refused(server: LocalKaggle, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["image", "--on-kaggle", "--accelerator", "NvidiaTeslaT5"]) == 1
    err = capsys.readouterr().err
    assert "--accelerator: unknown accelerator 'NvidiaTeslaT5'" in err and "use gpu, none or one of" in err
