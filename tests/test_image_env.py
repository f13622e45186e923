"""``kkb env`` (issue 22): an environment with the image's versions of what the kernel imports, built once, offline
here (the image's version is a wheel in a local folder), reused without pip the second time."""

from __future__ import annotations

import json
import subprocess
from importlib import metadata
from pathlib import Path

import pytest
from packaging.version import Version

from builder.cli.views import _show_dry_run
from builder.project.image import load_image
from builder.rehearse import image_env
from builder.rehearse.image_env import build_image_env, image_env_note, image_pins, kernel_modules
from builder.rehearse.report import DryRunReport
from builder.rehearse.skew import interpreter_versions
from tests.support.files import build_file_tree
from tests.support.wheels import write_pure_wheel

pytestmark = [pytest.mark.usefixtures("hermetic_pip"), pytest.mark.slow]
TQDM = metadata.version("tqdm")
IMAGE_TQDM = f"{Version(TQDM).major + 1}.0.0"



@pytest.fixture()
def kernel(tmp_path: Path) -> Path:
    return build_file_tree(tmp_path / "kernel", {
        "predict.py": "import tqdm\nfrom pandas import DataFrame\nimport os.path\nfrom . import local\n",
        "data/ignored.py": "import kkb_never_imported\n"})


def test_the_kernel_imports_are_read_from_its_code(kernel: Path) -> None:
    assert kernel_modules(kernel) == {"tqdm", "pandas", "os"}


def test_the_environment_is_built_once_and_reused(kernel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(image_env.CACHE_ENV, str(tmp_path / "cache"))
    path = tmp_path / "image.json"
    path.write_text(json.dumps({"python": "3.12", "captured": "2026-06-17",
                                "packages": {"tqdm": IMAGE_TQDM, "pandas": metadata.version("pandas")}}))
    image = load_image(path)
    wheels = tmp_path / "wheels"
    write_pure_wheel(wheels, "tqdm", IMAGE_TQDM)
    assert image_pins({"tqdm", "pandas"}, image) == ([f"tqdm=={IMAGE_TQDM}"], [])

    first = build_image_env(kernel, find_links=wheels, image=image)
    assert first.built and first.pins == (f"tqdm=={IMAGE_TQDM}",)
    out = subprocess.run([str(first.python), "-c", "import importlib.metadata as m, pandas; print(m.version('tqdm'))"],
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == IMAGE_TQDM, out.stderr  # the image's tqdm; pandas still found in kkb's environment
    assert interpreter_versions(first.python)["tqdm"] == IMAGE_TQDM  # the skew check sees the environment's versions

    (wheels / f"tqdm-{IMAGE_TQDM}-py3-none-any.whl").unlink()  # a second build would fail now: nothing is installed
    second = build_image_env(kernel, find_links=wheels, image=image)
    assert not second.built and second.root == first.root
    assert second.lines()[0] == f"{first.root}: reused (nothing to install), 1 pins from Kaggle's image"


def test_an_image_env_dry_run_says_so_in_its_summary_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = DryRunReport("k", "me/k", "notebook", tmp_path, tmp_path / "report.json", environment=image_env_note(True))
    assert report.to_json()["environment"].startswith("kkb env's environment: the image's versions")
    _show_dry_run(report)
    assert "environment: kkb env's environment: the image's versions" in capsys.readouterr().out
    assert image_env_note(False) == "" and DryRunReport("k", "me/k", "notebook", tmp_path, tmp_path).to_json()["environment"] is None
