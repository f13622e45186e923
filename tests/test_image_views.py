"""``kkb image --diff`` (two images side by side) and what the dry run says about the image (its age, a newer image a
run recorded, the Python the kernel ran on)."""

from __future__ import annotations

import json
import os
import shutil
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from builder import cli
from builder.errors import EXIT_OK, EXIT_USAGE, EXIT_USER
from builder.project.image_store import record_run_capture
from builder.project.spec import load_spec
from builder.rehearse.image_notes import image_notes
from tests.support.files import KERNELS, REPO

IMAGES = REPO / "tests" / "images"
KERNEL_ID = "kkb-demo/kkb-minimal-inference"


def _record(name: str, kernel: str = KERNEL_ID, version: int = 3) -> dict[str, object]:
    data = json.loads((IMAGES / f"{name}.json").read_text())
    record_run_capture(data, server="kaggle.com", kernel=kernel, version=version)
    return data


def test_diff_shows_two_images_side_by_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copyfile(IMAGES / "py313-torch211.json", tmp_path / "kkb_image.json")
    monkeypatch.chdir(tmp_path)  # a relative file name, as people type it
    assert cli.main(["image", "--diff", "described", "kkb_image.json", "--json"]) == EXIT_OK
    diff = json.loads(capsys.readouterr().out)
    rows = {row[0]: row[1:] for row in diff["rows"]}
    assert rows["python"] == ["3.12", "3.13"] and rows["torch"] == ["2.10.0", "2.11.0"] and rows["cuda"] == ["12.8", "12.8"]
    assert rows["torchvision"] == ["0.25.0", "0.26.0+cu128"] and rows["packages"] == ["873", "5"]
    assert rows["numpy"] == ["2.4.6", "2.0.2"] and rows["timm"] == ["1.0.26", "1.0.24"]
    assert diff["only_right"] == [] and len(diff["only_left"]) == 868 and diff["same"] == 1  # pandas
    assert cli.main(["image", "--diff", "kkb_image.json"]) == EXIT_OK  # one name: beside the description kkb uses
    out = capsys.readouterr().out
    assert "python" in out and "2.11.0" in out and "only left: " in out and "and 856 more" in out


def test_diff_defaults_to_the_description_and_the_newest_image_a_run_recorded(capsys: pytest.CaptureFixture[str]) -> None:
    _record("py313-torch210")
    assert cli.main(["image", "--diff", "--json"]) == EXIT_OK
    diff = json.loads(capsys.readouterr().out)
    assert diff["left"].startswith("builder/data/kaggle-image.json") and diff["right"] == f"the run of {KERNEL_ID} v3 (2026-09-02)"
    assert cli.main(["image", "--diff", "shipped", KERNEL_ID, "--json"]) == EXIT_OK  # a kernel's last recorded run
    assert json.loads(capsys.readouterr().out)["right"] == diff["right"]


@pytest.mark.parametrize(("args", "code", "message"), [
    (["image", "--diff", "a", "b", "c"], EXIT_USAGE, "Got unexpected extra argument(s) (c)"),
    (["image", "described"], EXIT_USAGE, "image names go with --diff (kkb image --diff [A [B]])"),
    (["image", "--diff", "--refresh", "x"], EXIT_USAGE, "--on-kaggle, --diff and --refresh are separate actions"),
    (["image", "--diff", "no-such.json"], EXIT_USER, "no-such.json: no such file, and not one of described, shipped, "
                                                     "captured, newest or OWNER/SLUG"),
    (["image", "--diff", "described", "me/never-ran"], EXIT_USER, "me/never-ran: no run recorded an image on kaggle.com"),
])
def test_diff_refusals(args: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(args) == code
    assert message in capsys.readouterr().err


def test_the_dry_run_says_how_old_the_description_is_and_what_a_newer_run_recorded() -> None:
    spec = load_spec(KERNELS / "minimal")
    assert not [note for note in image_notes(spec, "kkb-demo", today=date(2026, 8, 1)) if "days old" in note]
    (age,) = [note for note in image_notes(spec, "kkb-demo", today=date(2026, 12, 4)) if "days old" in note]
    assert age.startswith("kkb's image description is 170 days old (as of 2026-06-17; ") and "over 90" in age
    _record("py313-torch211")
    newer = [note for note in image_notes(spec, "kkb-demo", today=date(2026, 8, 1)) if "newer than" in note]
    assert newer == [f"the run of {KERNEL_ID} v3 on kaggle.com recorded Python 3.13, CUDA 12.8, torch 2.11.0 on 2026-10-15, "
                     "newer than kkb's description (Python 3.12, CUDA 12.8, torch 2.10.0: Python ABI cp312 → cp313; "
                     "torch 2.10.0 → 2.11.0): the dry run checks packages against the description"]
    (python,) = [note for note in image_notes(spec, "kkb-demo", today=date(2026, 8, 1)) if "ran on Python" in note]
    assert "Kaggle's image has Python 3.13: the wheelhouse is checked for cp313" in python


def test_a_run_records_its_image_outside_kkb_s_sandbox_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import machinery

    from builder.kkb_runtime import image_capture

    torch = tmp_path / "fake" / "torch"
    torch.mkdir(parents=True)
    (torch / "version.py").write_text("__version__ = '2.11.0+cu128'\ncuda: Optional[str] = '12.8'\n")
    spec = machinery.ModuleSpec("torch", None, is_package=True)
    spec.submodule_search_locations = [str(torch)]
    monkeypatch.setattr("builder.kkb_runtime.image_capture.util.find_spec", lambda name: spec if name == "torch" else None)
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\nprintf 'Tesla T4, 15360\\nTesla T4, 15360\\n'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}:{os.environ['PATH']}")
    monkeypatch.delenv("KKB_SANDBOX_NETLOG", raising=False)

    written = image_capture.write_capture(tmp_path, KERNEL_ID)
    assert written == tmp_path / "kkb_image.json"
    data = json.loads(written.read_text())
    assert (data["cuda"], data["kernel"], data["format"]) == ("12.8", KERNEL_ID, 1)
    assert data["gpu"] == {"name": "Tesla T4", "memory_bytes": 15360 * 2**20, "count": 2}
    assert data["packages"]["pandas"] == pd.__version__ and data["captured"].endswith("+00:00")
    monkeypatch.setenv("KKB_SANDBOX_NETLOG", str(tmp_path / "net.log"))  # kkb's sandbox: this machine, not Kaggle's image
    assert image_capture.write_capture(tmp_path / "other", KERNEL_ID) is None


def test_a_push_keeps_the_image_the_version_it_pushed_before_ran_on_and_asks_once(tmp_path: Path) -> None:
    from builder.remote.history import History
    from builder.remote.push import push
    from builder.remote.run_image import IMAGE
    from builder.remote.session import PushSettings
    from tests.support.fake_kaggle import FAKE_WAITS, FakeKaggle

    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))
    fake = FakeKaggle(run_output={"kkb_image.json": (IMAGES / "py313-torch211.json").read_text(), "big.bin": "x" * 100})

    def pushed() -> None:
        push(PushSettings(kernel_dir=kernel, out_dir=tmp_path / "build", adapter=fake, waits=FAKE_WAITS))  # type: ignore[arg-type]

    pushed()  # v1: nothing ran before it
    assert History.for_kernel(kernel).last(IMAGE) is None
    pushed()  # v1's run completed: its image is kept (that one file, not the whole output)
    record = History.for_kernel(kernel).last(IMAGE)
    assert record is not None and (record["kernel_version"], record["python"], record["torch"]) == (1, "3.13", "2.11.0")
    images = sorted((Path(os.environ["HOME"]) / ".config" / "kkb" / "captures" / "kaggle.com").glob("*.json"))
    assert [json.loads(path.read_text())["version"] for path in images] == [1]
    fake.run_output = {}
    pushed()  # asked once per version: nothing new
    assert len([r for r in History.for_kernel(kernel).records() if r.get("event") == IMAGE]) == 1
