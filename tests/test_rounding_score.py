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
    assert moved.warning("rmspe").startswith("rmspe: rounding moves the expected score by ")
    assert f"columns 'target' (keeps it at {moved.culprits[0][1]} decimals); set [submission] decimals = " in moved.warning("rmspe")


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
    report = dry_run(DryRunSettings(kernel_dir=kernel, scenario="rerun", out_dir=tmp_path / "build",
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
