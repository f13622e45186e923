"""Verdicts in Kaggle's words, from DataFrames and hand-made execution results: no notebook runs here."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pandas as pd
import pytest

from builder.rehearse.execute import ExecutionResult
from builder.rehearse.verdict import (
    COMPUTE,
    CSV_NOT_FOUND,
    GB,
    OK,
    SCORING_ERROR,
    THREW,
    TIMEOUT,
    Limits,
    failing_step,
    judge,
    machine_shape,
    projected_seconds,
    submission_problems,
)

SAMPLE = pd.DataFrame({"id": ["a", "b", "c"], "target": [0.0, 0.0, 0.0]})


def _problems(**columns: list[object]) -> list[str]:
    return submission_problems(pd.DataFrame(columns), SAMPLE, "id", ["target"])


@pytest.mark.parametrize(("columns", "expected"), [
    pytest.param({"id": ["a", "b", "c"], "target": [0.1, 0.2, 0.3]}, [], id="valid"),
    pytest.param({"id": ["a", "b", "c"], "prediction": [0.1, 0.2, 0.3]},
                 ["missing column(s): target", "extra column(s): prediction"], id="renamed-column"),
    pytest.param({"Unnamed: 0": [0, 1, 2], "id": ["a", "b", "c"], "target": [1.0, 1.0, 1.0]},
                 ["extra column(s): Unnamed: 0"], id="index-written"),
    pytest.param({"id": ["a", "b"], "target": [0.1, 0.2]},
                 ["row count: expected 3 rows (as the sample submission), got 2",
                  "ids do not match the sample submission: 1 missing (e.g. 'c')"], id="row-count"),
    pytest.param({"id": ["a", "b", "z"], "target": [0.1, 0.2, 0.3]},
                 ["ids do not match the sample submission: 1 missing (e.g. 'c'), 1 unexpected (e.g. 'z')"], id="ids-set"),
    pytest.param({"id": ["c", "b", "a"], "target": [0.1, 0.2, 0.3]},
                 ["ids are not in the sample submission's order (row 0: expected 'a', got 'c')"], id="ids-order"),
    pytest.param({"id": ["a", "a", "b"], "target": [0.1, 0.2, 0.3]},
                 ["duplicate ids: 1 (e.g. 'a')", "ids do not match the sample submission: 1 missing (e.g. 'c')"], id="duplicate-ids"),
    pytest.param({"id": ["a", "b", "c"], "target": [0.1, math.nan, math.nan]},
                 ["NaN in target column 'target': 2 rows"], id="nan"),
    pytest.param({"id": ["a", "b", "c"], "target": [0.1, math.inf, -math.inf]},
                 ["inf in target column 'target': 2 rows"], id="inf"),
    pytest.param({"id": ["a", "b", "c"], "target": ["cat", "0.5", "dog"]},
                 ["non-numeric values in target column 'target': 2 rows (e.g. 'cat', 'dog')"], id="non-numeric"),
])
def test_submission_checks_name_the_exact_reason(columns: dict[str, list[object]], expected: list[str]) -> None:
    assert _problems(**columns) == expected


def test_text_targets_are_not_required_to_be_numeric() -> None:
    sample = pd.DataFrame({"id": ["a", "b"], "PredictionString": ["x", "y"]})
    ok = pd.DataFrame({"id": ["a", "b"], "PredictionString": ["1 0.5 0 0 10 10", "y"]})
    empty = pd.DataFrame({"id": ["a", "b"], "PredictionString": ["1 0.5", None]})
    assert submission_problems(ok, sample, "id") == []
    assert submission_problems(empty, sample, "id") == ["empty values in column 'PredictionString': 1 rows"]


# --- judge() on hand-made results -----------------------------------------------------------------------


def _result(tmp_path: Path, *, submission: str | None = "id,target\na,1\nb,2\nc,3\n", **changes: object) -> ExecutionResult:
    working = tmp_path / "working"
    working.mkdir(parents=True, exist_ok=True)
    if submission is not None:
        (working / "submission.csv").write_text(submission)
    base = ExecutionResult(root=tmp_path, working_dir=working, executed_notebook=tmp_path / "__notebook__.ipynb",
                           ok=True, timed_out=False, failed_cell=None, ename=None, evalue=None, traceback_tail=None,
                           wall_seconds=100.0, peak_rss_bytes=2 * GB, peak_gpu_bytes=None, log=[], steps=[])
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _judge(result: ExecutionResult, kernel_type: str = "notebook", limits: Limits | None = None):  # type: ignore[no-untyped-def]
    sample = result.root / "sample_submission.csv"
    SAMPLE.to_csv(sample, index=False)
    return judge(result, kernel_type=kernel_type, submission_file="submission.csv", sample_submission=sample,
                 id_column="id", target_columns=["target"], limits=limits)


RAISED = {"ok": False, "failed_cell": 5, "ename": "StepFailed",
          "evalue": "step 'infer' failed with exit code 1\n--- stderr ---\nboom", "traceback_tail": "StepFailed: ..."}


def test_a_valid_submission_is_ok(tmp_path: Path) -> None:
    verdict = _judge(_result(tmp_path))
    assert (verdict.name, verdict.reason, verdict.ok) == (OK, "submission.csv matches the sample submission", True)


def test_a_notebook_exception_surfaces_as_submission_csv_not_found(tmp_path: Path) -> None:
    verdict = _judge(_result(tmp_path, submission=None, **RAISED))
    assert verdict.name == CSV_NOT_FOUND
    assert verdict.reason == ("the notebook stopped before writing submission.csv: "
                              "StepFailed in cell 5 (step 'infer'): step 'infer' failed with exit code 1")
    assert verdict.detail == "StepFailed: ..."


def test_a_script_exception_is_notebook_threw_exception_even_with_a_file(tmp_path: Path) -> None:
    verdict = _judge(_result(tmp_path, **RAISED), kernel_type="script")
    assert verdict.name == THREW
    assert verdict.reason == "StepFailed in the script (step 'infer'): step 'infer' failed with exit code 1"


def test_kkb_runtime_refusal_keeps_its_reasons_in_the_verdict(tmp_path: Path) -> None:
    refused = {"ok": False, "failed_cell": 8, "ename": "SubmissionError",
               "evalue": "submission.csv would not score (Submission Scoring Error):\n  - NaN in target column 'target': 2 rows"}
    verdict = _judge(_result(tmp_path, submission=None, **refused))
    assert verdict.name == CSV_NOT_FOUND
    assert verdict.reason.endswith("(Submission Scoring Error): NaN in target column 'target': 2 rows")


def test_a_notebook_that_failed_after_writing_a_valid_file_is_scored_as_kaggle_would(tmp_path: Path) -> None:
    verdict = _judge(_result(tmp_path, **RAISED))
    assert verdict.name == OK
    assert "although the notebook failed: StepFailed in cell 5" in verdict.reason


def test_no_file_and_no_exception(tmp_path: Path) -> None:
    result = _result(tmp_path, submission=None)
    (result.working_dir / "submision.csv").write_text("id,target\n")
    verdict = _judge(result)
    assert verdict.name == CSV_NOT_FOUND
    assert verdict.reason == "the run finished but wrote no submission.csv in /kaggle/working (it wrote: submision.csv)"


def test_a_bad_file_is_a_scoring_error_with_the_reason(tmp_path: Path) -> None:
    verdict = _judge(_result(tmp_path, submission="id,target\na,1\nb,\nc,3\n"))
    assert (verdict.name, verdict.reason) == (SCORING_ERROR, "NaN in target column 'target': 1 rows")
    verdict = _judge(_result(tmp_path / "x", submission="not,a\n\x00,csv,at,all\n"))
    assert verdict.name == SCORING_ERROR


def test_a_killed_run_is_a_timeout(tmp_path: Path) -> None:
    result = _result(tmp_path, submission=None, ok=False, timed_out=True, failed_cell=3, ename="Timeout",
                     evalue="the run exceeded its timeout of 60 s and was killed with its child processes", wall_seconds=60.2)
    verdict = _judge(result)
    assert verdict.name == TIMEOUT
    assert verdict.reason == "killed after 60.2 s in cell 3: the run exceeded its timeout of 60 s and was killed with its child processes"


def test_time_is_projected_to_the_hidden_rows(tmp_path: Path) -> None:
    steps = [{"name": "infer", "seconds": 80.0, "peak_rss_bytes": GB}]
    result = _result(tmp_path, wall_seconds=100.0, steps=steps)
    limits = Limits(time_limit_seconds=9 * 3600, rows_run=100, hidden_rows=50_000)
    # 20 s outside the steps stay, 80 s of steps grow 500 times
    assert projected_seconds(result, limits) == pytest.approx(20 + 80 * 500)
    verdict = _judge(result, limits=limits)
    assert verdict.name == TIMEOUT
    assert verdict.reason == ("projected 11.12 h for 50000 hidden rows (measured 100.0 s for 100 rows) "
                              "> the competition's limit of 9.00 h")
    assert _judge(result, limits=Limits(time_limit_seconds=9 * 3600, rows_run=100, hidden_rows=10_000)).ok
    # without step records the whole run scales: a safe over-estimate
    assert projected_seconds(_result(tmp_path / "n"), limits) == pytest.approx(100 * 500)


def test_memory_over_the_machine_shape_is_exceeded_compute(tmp_path: Path) -> None:
    t4 = machine_shape("NvidiaTeslaT4")
    limits = Limits(ram_bytes=t4.ram_bytes, gpu_bytes=t4.gpu_bytes)
    assert _judge(_result(tmp_path, peak_rss_bytes=28 * GB, peak_gpu_bytes=14 * GB), limits=limits).ok
    verdict = _judge(_result(tmp_path, peak_rss_bytes=31 * GB), limits=limits)
    assert (verdict.name, verdict.reason) == (COMPUTE, "peak memory 31.0 GiB (RSS of the kernel and its processes) "
                                                       "> 29.0 GiB of RAM on the machine shape")
    verdict = _judge(_result(tmp_path, peak_gpu_bytes=17 * GB), limits=limits)
    assert (verdict.name, verdict.reason) == (COMPUTE, "peak GPU memory 17.0 GiB > 15.0 GiB per GPU on the machine shape")
    assert machine_shape(None).gpu_bytes is None and machine_shape("TpuV5E8").ram_bytes == 29 * GB


def test_blocked_network_and_the_old_input_layout_are_explained(tmp_path: Path) -> None:
    (tmp_path / ".sandbox").mkdir()
    (tmp_path / ".sandbox" / "network.log").write_text("12 resolve huggingface.co:443\n13 resolve huggingface.co:443\n")
    result = _result(tmp_path, submission=None, ok=False, failed_cell=5, ename="FileNotFoundError",
                     evalue="[Errno 2] No such file or directory: '/kaggle/input/my-comp/test.csv'")
    detail = _judge(result).detail or ""
    assert "blocked network access (internet is off in code competitions; ship files in a dataset): " \
           "resolve huggingface.co:443\n" in detail
    assert "it read input/my-comp, the old input layout" in detail
    assert failing_step(result) is None and failing_step(_result(tmp_path, **RAISED)) == "infer"
