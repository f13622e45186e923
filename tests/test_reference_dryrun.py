"""``kkb dry-run --reference``: the run's submission held to the original notebook's, on the same data."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from builder.cli import main
from builder.errors import EXIT_KERNEL, EXIT_OK, DryRunError
from builder.kkb_runtime.vocabulary import Scenario
from builder.rehearse.dryrun import DryRunSettings, dry_run
from builder.rehearse.reference import ReferenceSettings
from tests.support.files import KERNELS

pytestmark = [pytest.mark.slow, pytest.mark.loopback]


def test_an_equal_reference_passes_and_a_perturbed_one_exits_2_naming_the_column(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build = tmp_path / "build"
    first = dry_run(DryRunSettings(kernel_dir=KERNELS / "minimal", out_dir=build, scenario=Scenario.RERUN, fit=False))
    rerun = first.scenarios[0]
    assert rerun.ok and rerun.submission is not None and first.reference is None
    output = pd.read_csv(rerun.submission)
    equal = tmp_path / "original.csv"
    output.sample(frac=1.0, random_state=0).to_csv(equal, index=False)  # the original's row order need not match
    perturbed = tmp_path / "perturbed.csv"
    output.assign(target=output["target"] + 0.01).to_csv(perturbed, index=False)
    step = tmp_path / "linear.csv"
    pd.read_csv(rerun.member_outputs["linear"]).to_csv(step, index=False)
    base = ["dry-run", str(KERNELS / "minimal"), "--out", str(build), "--scenario", "rerun", "--hidden-rows", "5"]

    assert main([*base, "--reference", str(equal), "--reference-step", f"linear={step}"]) == EXIT_OK
    saved = json.loads((build / "dryrun" / "report.json").read_text())
    assert saved["reference"]["ok"] is True and saved["reference"]["scenario"] == "rerun"
    assert [c["left"] for c in saved["reference"]["comparisons"]] == ["rerun submission.csv", "step linear"]
    assert "reference (rerun)" in capsys.readouterr().out

    assert main([*base, "--reference", str(perturbed)]) == EXIT_KERNEL
    out = capsys.readouterr()
    assert "dry run: the rerun's output differs from the reference: rerun submission.csv: target (5 of 5 rows beyond 0.0001" in out.err
    assert "decimals = 4" in out.out
    saved = json.loads((build / "dryrun" / "report.json").read_text())
    assert saved["reference"]["ok"] is False and saved["reference"]["comparisons"][0]["worst"] == ["target"]
    assert "reference (rerun)" in (build / "dryrun" / "report.html").read_text()


@pytest.mark.parametrize(("reference", "scale", "message"), [
    pytest.param(ReferenceSettings(Path("nowhere.csv")), 1, "nowhere.csv: the reference file does not exist", id="missing"),
    pytest.param(ReferenceSettings(steps=(("bert", Path("x.csv")),)), 1,
                 "--reference-step bert: no [[steps]] of that name (the steps: linear, ridge)", id="unknown-step"),
    pytest.param(ReferenceSettings(Path("nowhere.csv")), 2, "--reference compares the submission on the same data, and "
                 "--rerun-scale replicates the test with new ids", id="rerun-scale"),
])
def test_a_reference_that_cannot_be_compared_is_refused_before_any_run(tmp_path: Path, reference: ReferenceSettings,
                                                                       scale: int, message: str) -> None:
    with pytest.raises(DryRunError) as caught:
        dry_run(DryRunSettings(kernel_dir=KERNELS / "minimal", out_dir=tmp_path / "build", reference=reference,
                               rerun_scale=scale))
    assert caught.value.message == message
    assert not (tmp_path / "build" / "dryrun").exists()


def test_a_reference_step_needs_name_and_file() -> None:
    assert main(["dry-run", str(KERNELS / "minimal"), "--reference-step", "linear"]) != EXIT_OK
