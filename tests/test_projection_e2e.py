"""Issue 23's done-when: the cassava-style example from a 1-image public test, 15,000 hidden rows, a GPU shape.

The dry run projects from one image (the card steps' timing probe gives the steady rate): the verdict is OK
against 9 h, the projection is a range on the T4 x2 with its basis (the summary the CLI prints carries it).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("timm")

from builder.kkb_runtime.vocabulary import Scenario
from builder.rehearse.dryrun import DryRunSettings, dry_run
from tests.support.assets import make_assets
from tests.support.files import KERNELS

pytestmark = pytest.mark.slow


def _one_image(public: Path, dest: Path) -> Path:
    sample = pd.read_csv(public / "sample_submission.csv", dtype=str).iloc[:1]
    (dest / "test_images").mkdir(parents=True)
    sample.to_csv(dest / "sample_submission.csv", index=False)
    shutil.copyfile(public / "test_images" / sample.iloc[0, 0], dest / "test_images" / sample.iloc[0, 0])
    return dest


def test_cassava_from_one_image_is_ok_against_9_hours_on_a_t4(tmp_path: Path) -> None:
    kernel = KERNELS / "cassava-style"
    made = make_assets(kernel, timeout=600)
    assert made.returncode == 0, made.stdout + made.stderr
    data = _one_image(kernel / "data" / "competition" / "public", tmp_path / "one")
    report = dry_run(DryRunSettings(kernel_dir=kernel, data_dir=data, scenario=Scenario.RERUN, hidden_rows=15_000,
                                    out_dir=tmp_path / "build", owner="tester"))
    (rerun,) = report.scenarios
    assert rerun.verdict.name == "OK", rerun.verdict
    projection = rerun.projection
    assert projection is not None and projection["device"]["target"] == "T4 x2"
    assert projection["low"] <= projection["seconds"] <= projection["high"] and projection["low"] < 9 * 3600
    basis = projection["basis"]
    # a "load" line follows only when other work shared the CPUs during the run
    assert [line.split(":")[0] for line in basis if not line.startswith("load:")] == ["resnet", "effnet", "(notebook outside steps)", "device"]
    assert all("steady batch(es) of a timing probe" in line for line in basis[:2])
    assert "on T4 x2" in projection["summary"] and "no measurement on Kaggle's T4 x2" in projection["summary"]
    steps = {step["name"]: step for step in rerun.steps}
    assert all(steps[name]["timing"]["folds"][0]["probe"] for name in ("resnet", "effnet"))


@pytest.mark.loopback
@pytest.mark.slow
def test_after_rerun_scale_the_public_test_is_the_second_size(tmp_path: Path) -> None:
    """A replicated test large enough on its own (50 rows) and the public one (5): two sizes, fixed apart from per-row
    time, where one point would have counted everything per row."""
    lines: list[str] = []
    report = dry_run(DryRunSettings(kernel_dir=KERNELS / "minimal", scenario=Scenario.RERUN, rerun_scale=10,
                                    out_dir=tmp_path / "build", progress=lines.append))
    (rerun,) = report.scenarios
    assert rerun.ok and rerun.rows == 50, rerun.verdict
    assert "rerun: a second run on 5 rows (the public test, before --rerun-scale) to separate fixed from per-row time" in lines
    projection = rerun.projection or {}
    # the public test is the smaller size; the larger is the replicated one, or a larger run still where 5 and 50
    # rows took the same time within its noise
    larger = [line for line in lines if line.startswith("rerun: a run on ")]
    expected = (5, int(larger[-1].split()[4])) if larger else (5, 50)
    assert projection["exact"] and {tuple(p[0] for p in c["points"]) for c in projection["components"]} == {expected}
    assert {c["method"] for c in projection["components"]} == {"two sizes"}


@pytest.mark.slow
def test_a_table_kernels_model_load_is_fixed_not_per_row(tmp_path: Path) -> None:
    """Table cards record their seconds, not their phases: the 5-row public test gets a second size (50 rows), and
    the boosters' and the net's loading stays fixed; one point would have projected ~800 s for 500 rows of a ~8 s run."""
    kernel = KERNELS / "tabular-style"
    made = make_assets(kernel, timeout=600)
    assert made.returncode == 0, made.stdout + made.stderr
    lines: list[str] = []
    report = dry_run(DryRunSettings(kernel_dir=kernel, scenario=Scenario.RERUN, hidden_rows=500,
                                    out_dir=tmp_path / "build", owner="tester", progress=lines.append))
    (rerun,) = report.scenarios
    assert rerun.ok and rerun.rows == 5, rerun.verdict
    assert "rerun: a second run on 50 rows (10x) to separate fixed from per-row time" in lines
    projection = rerun.projection or {}
    assert {c["name"]: c["method"] for c in projection["components"]} == {
        "lgbm": "two sizes", "logreg": "two sizes", "net": "two sizes", "(notebook outside steps)": "two sizes"}
    # a table model's per-row time hides in 5 and 50 rows' noise: larger runs, up to 10x each, under the hidden size
    # (unless the machine's load changed between the two runs by more than the noise; tests/test_fit_sizes.py pins
    # the sizes chosen)
    larger = [int(line.split()[4]) for line in lines if line.startswith("rerun: a run on ")]
    assert all(50 < rows <= 500 for rows in larger), lines
    assert {c["points"][-1][0] for c in projection["components"]} == {larger[-1] if larger else 50}
    assert projection["seconds"] < 3 * rerun.wall_seconds, projection["summary"]
