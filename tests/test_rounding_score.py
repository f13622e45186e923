"""Rounding judged by the score: significant digits for relative-error metrics, one summary line, the expected
score before and after rounding, and the warning naming the columns and the digits that keep the score."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from builder.kkb_runtime.metrics import parse_metric, score_frames
from builder.kkb_runtime.rounding import SIGNIFICANT, round_safely, significant, summary
from builder.kkb_runtime.vocabulary import Scenario
from builder.rehearse.dryrun import DryRunSettings, dry_run
from builder.rehearse.metric_report import metric_report
from builder.rehearse.rounding_score import rounding_effect
from tests.support.files import KERNELS


def test_significant_digits() -> None:
    values = pd.Series([0.00123456789, -98765.4321, 0.0, 1.5e-9, np.inf])
    assert significant(values, 3).tolist() == [0.00123, -98800.0, 0.0, 1.5e-9, np.inf]


def volatility(seed: int = 0, n: int = 600) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Optiver-like: answers and predictions around 1e-3."""
    rng = np.random.default_rng(seed)
    truth = rng.lognormal(np.log(1e-3), 0.5, n)
    ids = [str(i) for i in range(n)]
    answers = pd.DataFrame({"id": ids, "target": truth, "Usage": np.where(np.arange(n) % 4 == 0, "Public", "Private")})
    return answers, pd.DataFrame({"id": ids, "target": truth * (1 + rng.normal(0, 0.25, n))})


def test_a_relative_error_metric_rounds_to_significant_digits_and_keeps_its_score() -> None:
    answers, predictions = volatility()
    score = lambda f: score_frames(parse_metric("rmspe"), f, answers, "id", ["target"])  # noqa: E731
    as_decimals, _ = round_safely(predictions, ["target"], 6, parse_metric("rmse"), ["target"])
    rounded, records = round_safely(predictions, ["target"], 6, parse_metric("rmspe"), ["target"])
    assert (records[0].kind, records[0].used, records[0].line().split(",")[0]) == (
        SIGNIFICANT, 6, "column 'target': 6 significant digits")
    moved = rounding_effect(score, predictions, as_decimals, [{"column": "target", "used": 6, "kind": "decimals"}])
    kept = rounding_effect(score, predictions, rounded, [{"column": "target", "used": 6, "kind": SIGNIFICANT}])
    assert moved.moved > 1e-6 and moved.culprits[0][0] == "target" and moved.culprits[0][1] is not None
    assert kept.moved <= 1e-6 and kept.culprits == ()
    warning = moved.warning("rmspe")
    assert warning is not None and warning.startswith("rmspe: rounding moves the expected score by ")
    assert f"columns 'target' (keeps it at {moved.culprits[0][1]} decimals); set [submission] decimals = " in warning


def test_rmsle_rounds_columns_near_zero_to_significant_digits_only() -> None:
    frame = pd.DataFrame({"small": [0.000123456, 0.5], "large": [1234.56789, 3.0]})
    _, records = round_safely(frame, ["small", "large"], 3, parse_metric("rmsle"), ["small", "large"])
    assert [(r.column, r.kind) for r in records] == [("small", SIGNIFICANT), ("large", "decimals")]


def test_one_summary_line_and_no_round_false_claimed_for_a_functions_columns() -> None:
    frame = pd.DataFrame({f"q{i}": np.linspace(0, 1, 10) + i for i in range(5)} | {"close": [0.5, 0.5004] * 5})
    columns = list(frame.columns)
    _, records = round_safely(frame, columns, 1, parse_metric("spearman"), columns, unrounded={"q0"},
                              discretised={"q1", "q2"})
    assert summary(records) == ("rounding: 1 column left unrounded (round = false), 2 columns left as the "
                                "post-processing wrote them, 2 columns to 1 decimals, 1 column kept more decimals than "
                                "requested (no two predictions merged)")
    assert [r.why for r in records[1:3]] == ["the post-processing function returned it as discretised"] * 2


@pytest.mark.slow
def test_the_dry_run_reports_the_score_before_and_after_rounding(tmp_path: Path) -> None:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal"))
    spec = (kernel / "kernel.toml").read_text().replace("hidden_rows = 200", 'hidden_rows = 200\nmetric = "rmspe"')
    (kernel / "kernel.toml").write_text(spec.replace("decimals = 4", "decimals = 2"))
    report = dry_run(DryRunSettings(kernel_dir=kernel, scenario=Scenario.RERUN, out_dir=tmp_path / "build",
                                    rerun_data_dir=kernel / "data" / "competition" / "hidden"))
    (rerun,) = report.scenarios
    assert rerun.verdict.name == "OK", rerun.verdict
    metric = json.loads((tmp_path / "build" / "dryrun" / "report.json").read_text())["scenarios"][0]["metric"]
    assert [(r["column"], r["used"], r["kind"]) for r in metric["rounding"]] == [("target", 2, SIGNIFICANT)]
    effect = metric["expected"]["rounding"]
    assert effect["unrounded"] != effect["rounded"] and effect["moved"] > 1e-6
    assert [c["column"] for c in effect["columns"]] == ["target"]
    rounding_lines = [line for line in metric["lines"] if line.startswith("rounding:")]
    assert rounding_lines == [f"rounding: 1 column to 2 significant digits; ties grew in 1 column; the expected score moved by "
                              f"{effect['moved']:.2g}"]
    assert any(w.startswith("rmspe: rounding moves the expected score by") for w in rerun.warnings)
    assert "expected score before rounding" in (tmp_path / "build" / "dryrun" / "report.html").read_text()


def test_without_a_metric_the_report_says_so_in_one_quiet_line(tmp_path: Path) -> None:
    from_answers, predictions = volatility(n=8)
    from_answers.to_csv(tmp_path / "answers.csv", index=False)
    predictions.to_csv(tmp_path / "submission.csv", index=False)
    predictions.assign(target=0.0).to_csv(tmp_path / "sample.csv", index=False)
    report = metric_report(None, tmp_path / "submission.csv", tmp_path / "sample.csv", "id", [], tmp_path,
                           answers=tmp_path / "answers.csv")
    assert report.lines == ("metric: no [competition] metric: no metric-specific check, rounding as requested, "
                            "no expected score",)
    assert report.expected is None


# --- a step that rounds its own output -------------------------------------------------------------------

@pytest.mark.parametrize(("values", "decimals"), [([0.0012, 0.0031, 0.0007], 4), ([1.5, 2.25, 3.0], 2),
                                                   ([0.00123456789, 0.002], None), ([3.0, 4.0], 0)])
def test_the_decimals_a_step_rounded_to(values: list[float], decimals: int | None) -> None:
    from builder.rehearse.step_rounding import own_decimals

    assert own_decimals(pd.Series(values)) == decimals


def test_a_steps_rounding_is_judged_by_what_it_costs_a_relative_metric(tmp_path: Path) -> None:
    from builder.rehearse.step_rounding import rounding_cost, step_rounding_warnings

    answers_scale = pd.Series(np.linspace(0.0005, 0.003, 40))
    rmspe = parse_metric("rmspe")
    cost = rounding_cost(rmspe, answers_scale.round(4), 4)
    assert cost is not None and cost > 0.01  # 1-2 digits left: a real cost
    # 4 decimals of values between 0.5 and 3 keep 4-5 digits: less than kkb's own 4 significant digits would cost
    decimals, significant = (rounding_cost(rmspe, (answers_scale * 1000).round(4), 4),
                             rounding_cost(rmspe, answers_scale * 1000, 4, SIGNIFICANT))
    assert decimals is not None and significant is not None and decimals < significant
    step = tmp_path / "working" / "gbm.csv"
    step.parent.mkdir()
    pd.DataFrame({"row_id": range(40), "target": answers_scale.round(4)}).to_csv(step, index=False)
    steps = [{"name": "gbm", "output": "/kaggle/working/gbm.csv"}]
    (warning,) = step_rounding_warnings(parse_metric("rmspe"), steps, tmp_path / "working", ["target"])
    assert warning.startswith("step 'gbm': column 'target' is rounded by the step itself to 4 decimals (every value a "
                              "multiple of 1e-4); rmspe scores relative errors and its values reach down to 0.0005, where "
                              "4 decimals keep 1 significant digit: the rounding alone costs about")
    assert warning.endswith("more than kkb's own rounding (6 significant digits) would; write the step's output unrounded "
                            "and let [submission] decimals round it (to significant digits under rmspe)")
    assert step_rounding_warnings(parse_metric("rmse"), steps, tmp_path / "working", ["target"]) == []  # absolute errors
    pd.DataFrame({"row_id": range(40), "target": (answers_scale * 1000).round(4)}).to_csv(step, index=False)
    assert step_rounding_warnings(rmspe, steps, tmp_path / "working", ["target"], 4) == []


@pytest.mark.slow
def test_a_rmspe_kernel_whose_step_rounds_to_4_decimals_is_warned_naming_the_step(tmp_path: Path) -> None:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))
    spec = (kernel / "kernel.toml").read_text().replace("hidden_rows = 200", 'hidden_rows = 200\nmetric = "rmspe"')
    (kernel / "kernel.toml").write_text(spec)
    predict = kernel / "predict.py"  # volatility-sized targets (~1e-3), rounded by the step as notebooks do
    predict.write_text(predict.read_text().replace('"target": model.predict(test)})',
                                                   '"target": (0.002 + model.predict(test).abs() * 1e-4).round(4)})'))
    report = dry_run(DryRunSettings(kernel_dir=kernel, scenario=Scenario.RERUN, out_dir=tmp_path / "build", fit=False))
    (rerun,) = report.scenarios
    assert rerun.verdict.name == "OK", rerun.verdict
    said = [w for w in rerun.warnings if "rounded by the step itself" in w]
    assert [w.split(" is rounded")[0] for w in said] == ["step 'linear': column 'target'", "step 'ridge': column 'target'"]
