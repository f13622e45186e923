"""An evaluation-API kernel whose local competition data lacks kaggle_evaluation/: "Not Rehearsed", not a verdict.

Kaggle's competition data ships the package; a partial copy here says nothing about what Kaggle would do."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builder import cli
from builder.errors import EXIT_NOT_REHEARSED
from builder.kkb_runtime.vocabulary import Scenario
from builder.project.spec import load_spec
from builder.rehearse.dryrun import DryRunSettings, dry_run
from builder.rehearse.evalapi import missing_gateway_package
from tests.support.files import KERNELS


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    """kernels/evalapi as a clean clone has it before make_assets.py: no kaggle_evaluation in its data."""
    copy = Path(shutil.copytree(KERNELS / "evalapi", tmp_path / "evalapi", ignore=shutil.ignore_patterns("__pycache__")))
    for folder in ("public", "hidden"):
        shutil.rmtree(copy / "data" / "competition" / folder / "kaggle_evaluation", ignore_errors=True)
    return copy


def test_the_missing_package_is_named(kernel: Path) -> None:
    data = kernel / "data" / "competition" / "public"
    assert missing_gateway_package(load_spec(kernel), data) == (
        f"the local competition data has no kaggle_evaluation package ({data / 'kaggle_evaluation'} is missing); "
        "download the full data (kaggle competitions download -c kkb-evalapi), which has it")
    shutil.copytree(KERNELS / "evalapi" / "kaggle_evaluation", data / "kaggle_evaluation")
    assert missing_gateway_package(load_spec(kernel), data) is None


@pytest.mark.slow
@pytest.mark.loopback
def test_the_dry_run_says_not_rehearsed(kernel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = dry_run(DryRunSettings(kernel_dir=kernel, scenario=Scenario.COMMIT, out_dir=tmp_path / "build"))
    (commit,) = report.scenarios
    assert commit.verdict.name == "Not Rehearsed"
    assert commit.verdict.reason.startswith("the local competition data has no kaggle_evaluation package")
    assert cli.main(["dry-run", str(kernel), "--scenario", "commit", "--out", str(tmp_path / "build")]) \
        == EXIT_NOT_REHEARSED
    assert "Submission CSV Not Found" not in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.loopback
def test_after_the_documented_step_the_dry_run_passes(kernel: Path, tmp_path: Path) -> None:
    """README: ``python kernels/evalapi/make_assets.py`` once, from a clean clone."""
    done = subprocess.run([sys.executable, str(kernel / "make_assets.py")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = dry_run(DryRunSettings(kernel_dir=kernel, scenario=Scenario.COMMIT, out_dir=tmp_path / "build"))
    assert report.scenarios[0].verdict.name == "OK", report.scenarios[0].verdict
