"""``kkb env``: an environment with the image's versions of what the kernel imports, built once, offline
here (the image's version is a wheel in a local folder), reused without pip the second time."""

from __future__ import annotations

import json
import subprocess
from importlib import metadata
from pathlib import Path

import pytest
from packaging.version import Version

from builder.cli.views import _show_dry_run
from builder.errors import DryRunError
from builder.kkb_runtime.vocabulary import Scenario
from builder.project.image import load_image
from builder.rehearse.report import DryRunReport
from builder.run import image_env
from builder.run.env_check import PTH_FILE, env_damage, site_packages
from builder.run.image_env import build_image_env, image_env_note, image_pins, kernel_modules
from builder.run.skew import interpreter_versions
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
    assert (interpreter_versions(first.python) or {}).get("tqdm") == IMAGE_TQDM  # the skew check sees the environment's versions

    (wheels / f"tqdm-{IMAGE_TQDM}-py3-none-any.whl").unlink()  # a second build would fail now: nothing is installed
    second = build_image_env(kernel, find_links=wheels, image=image)
    assert not second.built and second.root == first.root
    assert second.lines()[0] == f"{first.root}: reused (nothing to install; checked against its record), 1 pins from Kaggle's image"


def _tiny_env(kernel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, object]:
    monkeypatch.setenv(image_env.CACHE_ENV, str(tmp_path / "cache"))
    path = tmp_path / "image.json"
    path.write_text(json.dumps({"python": "3.12", "captured": "2026-06-17", "packages": {"tqdm": IMAGE_TQDM}}))
    wheels = tmp_path / "wheels"
    write_pure_wheel(wheels, "tqdm", IMAGE_TQDM)
    return wheels, load_image(path)


def _damage_half(root: Path) -> list[Path]:
    """Half of the environment's own site-packages files deleted (a cache cleaner, a full disk, an rm)."""
    files = sorted(p for p in site_packages(root).rglob("*") if p.is_file() and p.name != PTH_FILE)
    for path in files[::2]:
        path.unlink()
    return files[::2]


def test_a_damaged_environment_is_detected_and_rebuilt(kernel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheels, image = _tiny_env(kernel, tmp_path, monkeypatch)
    first = build_image_env(kernel, find_links=wheels, image=image)  # type: ignore[arg-type]
    assert env_damage(first.root, first.python, list(first.pins)) == []
    assert _damage_half(first.root)
    damage = env_damage(first.root, first.python, list(first.pins))
    assert damage and all("tqdm" in line for line in damage), damage

    again = build_image_env(kernel, find_links=wheels, image=image)  # type: ignore[arg-type]
    assert again.built and again.root == first.root and again.repaired == tuple(damage)
    assert again.lines()[0].startswith(f"{first.root}: rebuilt, the cached one was damaged (tqdm")
    assert env_damage(again.root, again.python, list(again.pins)) == []
    out = subprocess.run([str(again.python), "-c", "import importlib.metadata as m, tqdm; print(m.version('tqdm'))"],
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == IMAGE_TQDM, out.stderr


def test_a_file_in_no_record_is_damage_and_nothing_of_the_cache_runs_here(kernel: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """An extra .pth file in the cached environment (it would run at every start of its interpreter): named as damage,
    and the check, the versions the skew check reads and the rebuild run none of it on this machine."""
    wheels, image = _tiny_env(kernel, tmp_path, monkeypatch)
    first = build_image_env(kernel, find_links=wheels, image=image)  # type: ignore[arg-type]
    ran = tmp_path / "the-pth-ran"
    (site_packages(first.root) / "evil.pth").write_text(f"import pathlib; pathlib.Path({str(ran)!r}).write_text('x')\n")

    assert env_damage(first.root, first.python, list(first.pins)) == [
        "1 file(s) of its site-packages in no RECORD (evil.pth): not installed by pip, and a .pth file among them would run"]
    assert (interpreter_versions(first.python) or {}).get("tqdm") == IMAGE_TQDM
    again = build_image_env(kernel, find_links=wheels, image=image)  # type: ignore[arg-type]
    assert again.built and not (site_packages(again.root) / "evil.pth").exists()
    assert not ran.exists()  # nothing of the cache ran here


def test_a_damaged_environment_that_cannot_be_rebuilt_is_refused_naming_the_damage(
        kernel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheels, image = _tiny_env(kernel, tmp_path, monkeypatch)
    first = build_image_env(kernel, find_links=wheels, image=image)  # type: ignore[arg-type]
    (site_packages(first.root) / PTH_FILE).unlink()
    (wheels / f"tqdm-{IMAGE_TQDM}-py3-none-any.whl").unlink()  # offline, and the wheel is gone
    with pytest.raises(DryRunError) as caught:
        build_image_env(kernel, find_links=wheels, image=image)  # type: ignore[arg-type]
    assert caught.value.message.startswith(
        f"kkb env: the cached environment {first.root} was damaged ({site_packages(first.root) / PTH_FILE} "
        "(kkb's environment behind it) is missing) and could not be rebuilt: kkb env: could not install")


def test_an_image_env_dry_run_says_so_in_its_summary_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = DryRunReport("k", "me/k", "notebook", tmp_path, tmp_path / "report.json", environment=image_env_note(True))
    assert report.to_json()["environment"].startswith("kkb env's environment: the image's versions")
    _show_dry_run(report)
    assert "environment: kkb env's environment: the image's versions" in capsys.readouterr().out
    assert image_env_note(False) == "" and DryRunReport("k", "me/k", "notebook", tmp_path, tmp_path).to_json()["environment"] is None


@pytest.mark.loopback
def test_the_evaluation_api_rerun_runs_in_the_image_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A predict that needs the image's version of a package: the rerun's gateway-driven notebook runs on kkb env's
    interpreter with --image-env, OK; without it the rerun is Not Rehearsed naming both versions."""
    import shutil

    from builder.rehearse.dryrun import DryRunSettings, dry_run
    from tests.support.files import KERNELS
    from tests.support.kernels import evalapi_variant

    kernel = Path(shutil.copytree(KERNELS / "evalapi", tmp_path / "evalapi", ignore=shutil.ignore_patterns("__pycache__")))
    evalapi_variant(kernel, "from tqdm import VERSION  # the image's tqdm has it, this machine's does not\n"
                            "from evalapi_model.serve import predict as real\n\n\ndef predict(test):\n    return real(test)\n")
    monkeypatch.setenv(image_env.CACHE_ENV, str(tmp_path / "cache"))
    description = tmp_path / "image.json"
    description.write_text(json.dumps({"python": "3.12", "captured": "2026-06-17", "packages": {"tqdm": IMAGE_TQDM}}))
    monkeypatch.setenv("KKB_KAGGLE_IMAGE", str(description))
    write_pure_wheel(tmp_path / "wheels", "tqdm", IMAGE_TQDM)
    assert build_image_env(kernel, find_links=tmp_path / "wheels").built  # the dry run finds it in the cache

    with_env = dry_run(DryRunSettings(kernel_dir=kernel, image_env=True, scenario=Scenario.RERUN, out_dir=tmp_path / "with"))
    (rerun,) = with_env.scenarios
    assert rerun.verdict.name == "OK" and rerun.evaluation_api is not None, rerun.verdict
    assert rerun.evaluation_api["predict_calls"] == 3
    without = dry_run(DryRunSettings(kernel_dir=kernel, scenario=Scenario.RERUN, out_dir=tmp_path / "without"))
    (rerun,) = without.scenarios  # the gateway's SERVER_CONNECTION_FAILED is no Kaggle verdict here: the versions differ
    assert rerun.verdict.name == "Not Rehearsed", rerun.verdict
    assert f"which is {TQDM} here and {IMAGE_TQDM} on Kaggle's image" in rerun.verdict.reason
