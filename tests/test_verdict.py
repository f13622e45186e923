"""Verdicts in Kaggle's words, from DataFrames and hand-made execution results: no notebook runs here."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from builder.kkb_runtime.vocabulary import Layout
from builder.rehearse.verdict import (
    COMPUTE,
    CSV_NOT_FOUND,
    GB,
    NOT_REHEARSED,
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
from builder.run.deadlines import LimitCheck
from builder.run.execute import ExecutionResult

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
                 ["duplicate ids: 1 (e.g. 'a'), 1 extra row(s)", "ids do not match the sample submission: 1 missing (e.g. 'c')"], id="duplicate-ids"),
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


RAISED: dict[str, Any] = {"ok": False, "failed_cell": 5, "ename": "StepFailed",
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


# --- memory, disk, layout, network, submission name, not rehearsed ---------------------------

NOTEBOOK_FAILED = {"ok": False, "failed_cell": 5}
MEMORY = {**NOTEBOOK_FAILED, "ename": "StepFailed",
          "evalue": "step 'big' failed with exit code 1\n--- stderr (last 2 lines) ---\n    x = bytearray(n)\nMemoryError\n"
                    "\n[kkb] step 'big' peak memory: 3221225472 bytes", "memory_limit_bytes": 29 * GB,
          "memory_accounting": "pss"}


@pytest.mark.parametrize(("changes", "limits", "verdict", "reason"), [
    pytest.param(MEMORY, Limits(ram_bytes=29 * GB), COMPUTE,
                 "step 'big' ran out of memory (MemoryError) at a peak of 3.0 GiB; the machine shape has 29.0 GiB of RAM "
                 "(enforced here on the whole run: 29.0 GiB, pss)", id="step-memory-error"),
    pytest.param({**NOTEBOOK_FAILED, "ename": "MemoryError", "evalue": "Unable to allocate 64.0 GiB for an array",
                  "peak_rss_bytes": GB}, Limits(ram_bytes=29 * GB), COMPUTE,
                 "cell 5 ran out of memory (MemoryError) at a peak of 1.0 GiB; the machine shape has 29.0 GiB of RAM "
                 "(no memory limit was enforced here)", id="cell-memory-error"),
    pytest.param({**NOTEBOOK_FAILED, "ename": "StepFailed", "evalue": "step 'big' failed with exit code -9\n"}, Limits(), COMPUTE,
                 "step 'big' ran out of memory (killed by SIGKILL, the out-of-memory killer's signal) at a peak of 2.0 GiB "
                 "(no memory limit was enforced here)", id="oom-killed"),
    pytest.param({**NOTEBOOK_FAILED, "ename": "Killed", "evalue": "x", "disk_exceeded": True, "working_bytes": 21 * 10**9,
                  "working_limit_bytes": 20 * 10**9}, Limits(), COMPUTE,
                 "/kaggle/working grew to 19.6 GiB > the 18.6 GiB Kaggle keeps there (the run was stopped)", id="disk-full"),
    pytest.param({"working_bytes": 10**6, "working_limit_bytes": 20 * 10**9}, Limits(), OK,
                 "submission.csv matches the sample submission", id="disk-fine"),
])
def test_memory_and_disk_are_exceeded_compute(tmp_path: Path, changes: dict[str, object], limits: Limits, verdict: str,
                                              reason: str) -> None:
    result = _judge(_result(tmp_path, submission=None if verdict != OK else "id,target\na,1\nb,2\nc,3\n", **changes), limits=limits)
    assert (result.name, result.reason) == (verdict, reason)


@pytest.mark.parametrize(("mounted", "read", "reason"), [
    pytest.param("competitions/my-comp", "/kaggle/input/my-comp/test.csv",
                 "it read /kaggle/input/my-comp/test.csv, which does not exist in the current input layout; "
                 "Kaggle has it at /kaggle/input/competitions/my-comp/test.csv (the current layout)", id="legacy-path-read"),
    pytest.param("my-comp", "/kaggle/input/competitions/my-comp/test.csv",
                 "it read /kaggle/input/competitions/my-comp/test.csv, which does not exist in the legacy input layout; "
                 "Kaggle has it at /kaggle/input/my-comp/test.csv (the legacy layout, pass --legacy-layout to rehearse it)",
                 id="current-path-read-in-legacy"),
    pytest.param("datasets/me/weights-x", "/kaggle/input/weights-x/model.pt",
                 "it read /kaggle/input/weights-x/model.pt, which does not exist in the current input layout; "
                 "Kaggle has it at /kaggle/input/datasets/me/weights-x/model.pt (the current layout)", id="dataset"),
])
def test_a_path_of_the_other_layout_names_both_paths(tmp_path: Path, mounted: str, read: str, reason: str) -> None:
    leaf = read.rsplit("/", 1)[1]
    (tmp_path / "input" / mounted).mkdir(parents=True)
    (tmp_path / "input" / mounted / leaf).write_text("x")
    result = _result(tmp_path, submission=None, **NOTEBOOK_FAILED, ename="FileNotFoundError",
                     evalue=f"[Errno 2] No such file or directory: '{read}'")
    verdict = judge(result, kernel_type="notebook", submission_file="submission.csv", sample_submission=_sample(tmp_path),
                    id_column="id", target_columns=["target"],
                    limits=Limits(layout=Layout.LEGACY if "legacy" in reason.split(";")[0] else Layout.CURRENT))
    assert verdict.name == CSV_NOT_FOUND
    assert verdict.reason == (f"the notebook stopped before writing submission.csv: FileNotFoundError in cell 5: "
                              f"[Errno 2] No such file or directory: '{read}'; {reason}")


def _sample(tmp_path: Path) -> Path:
    sample = tmp_path / "sample_submission.csv"
    SAMPLE.to_csv(sample, index=False)
    return sample


def test_a_blocked_download_names_the_host_in_the_reason(tmp_path: Path) -> None:
    (tmp_path / ".sandbox").mkdir()
    (tmp_path / ".sandbox" / "network.log").write_text("12 resolve huggingface.co:443\n")
    verdict = _judge(_result(tmp_path, submission=None, **RAISED))
    assert verdict.reason.endswith("; blocked network access: resolve huggingface.co:443")


def test_the_submission_name_comes_from_the_competition(tmp_path: Path) -> None:
    result = _result(tmp_path, submission=None)
    (result.working_dir / "preds.csv").write_text("id,target\na,1\nb,2\nc,3\n")
    verdict = judge(result, kernel_type="notebook", submission_file="submission.csv", sample_submission=_sample(tmp_path),
                    id_column="id", target_columns=["target"], kernel_file="preds.csv")
    assert (verdict.name, verdict.reason) == (CSV_NOT_FOUND, "the run wrote preds.csv ([submission] file), but Kaggle looks "
                                              "for submission.csv in /kaggle/working: the competition declares no other name "
                                              "(set [competition] submission_file only if it does)")
    declared = judge(result, kernel_type="notebook", submission_file="preds.csv", sample_submission=_sample(tmp_path),
                     id_column="id", target_columns=["target"], kernel_file="preds.csv")
    assert declared.ok


@pytest.mark.parametrize(("evalue", "gpu_shape", "cuda", "verdict", "reason"), [
    pytest.param("step 'fit' failed with exit code 1\nModuleNotFoundError: No module named 'sklearn'", False, False,
                 NOT_REHEARSED, "not rehearsed: Kaggle's image has scikit-learn 1.6.1 (2026-06-17); step 'fit' imports "
                 "'sklearn', which is not installed here; install it here to rehearse (pip install scikit-learn==1.6.1, the "
                 "image's version; or kkb env, then kkb dry-run --image-env)", id="image-package-missing-here"),
    pytest.param("step 'fit' failed with exit code 1\nModuleNotFoundError: No module named 'kkb_nowhere'", False, False,
                 CSV_NOT_FOUND, None, id="package-kaggle-lacks-too"),
    pytest.param("step 'infer' failed with exit code 1\nAssertionError: Torch not compiled with CUDA enabled", True, False,
                 NOT_REHEARSED, "not rehearsed here: step 'infer' needs CUDA and this machine has no GPU; the machine shape "
                 "has one: rehearse it on Kaggle's machines (kkb push, then kkb status)", id="needs-cuda"),
    pytest.param("step 'infer' failed with exit code 1\nAssertionError: Torch not compiled with CUDA enabled", False, False,
                 CSV_NOT_FOUND, None, id="cuda-on-a-cpu-shape-fails-on-kaggle-too"),
])
def test_what_this_machine_cannot_rehearse_is_not_rehearsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, evalue: str,
                                                            gpu_shape: bool, cuda: bool, verdict: str, reason: str | None) -> None:
    monkeypatch.setattr("builder.rehearse.diagnose._importable", lambda module: False)
    monkeypatch.setattr("builder.rehearse.diagnose.cuda_here", lambda: cuda)
    monkeypatch.delenv("KKB_KAGGLE_IMAGE", raising=False)
    result = _judge(_result(tmp_path, submission=None, **NOTEBOOK_FAILED, ename="StepFailed", evalue=evalue),
                    limits=Limits(shape_has_gpu=gpu_shape))
    assert result.name == verdict
    if reason is not None:
        assert result.reason == reason


def test_an_absolute_kaggle_path_in_the_portable_sandbox_is_not_rehearsed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "test.csv").write_text("id,x\n")
    failed = {**NOTEBOOK_FAILED, "ename": "FileNotFoundError", "isolation": "python", "isolation_note": "portable",
              "evalue": "[Errno 2] No such file or directory: '/kaggle/input/competitions/c/test.csv'",
              "mounts": ((data, tmp_path / "input" / "competitions" / "c"),)}
    verdict = _judge(_result(tmp_path, submission=None, **failed))
    assert (verdict.name, verdict.reason) == (NOT_REHEARSED, "not rehearsed here: cell 5 reads /kaggle/input/competitions/c/test.csv, "
                                              "an absolute /kaggle path, and this sandbox has none (portable); install "
                                              "bubblewrap or allow user namespaces to rehearse it")
    missing = {**failed, "evalue": "[Errno 2] No such file or directory: '/kaggle/input/competitions/c/other.csv'"}
    assert _judge(_result(tmp_path / "m", submission=None, **missing)).name == CSV_NOT_FOUND  # missing on Kaggle too


@pytest.mark.parametrize(
    ("check", "verdict", "reason"),
    [
        # killed at a 60 s timeout having run 12 s of it: the machine's load, not the kernel
        (LimitCheck("the run's time limit", 60, 61, 11.5, 49, 5.2, 2, finished=False), "Not Rehearsed",
         "not rehearsed: the run's time limit (60.0 s): 61.0 s by the wall clock, 11.5 s of CPU time, 49.0 s waiting "
         "for a CPU (load 5.2 on 2 CPUs): it ran 12.0 s, and had not finished when the limit ended it; the rest went to "
         "other work on this machine"),
        # it ran 58 s of the 60 s on a loaded machine: the limit is the kernel's, and the reason names the load
        (LimitCheck("the run's time limit", 60, 61, 57, 3.5, 3.0, 2, finished=False), "Notebook Timeout",
         "killed after 61.0 s: timeout; judged on a loaded machine: the run's time limit (60.0 s): 61.0 s by the wall "
         "clock, 57.0 s of CPU time, 3.5 s waiting for a CPU (load 3.0 on 2 CPUs): passed, ran 57.5 s"),
        (LimitCheck("the run's time limit", 60, 61, 60, 0.1, 0.5, 2, finished=False), "Notebook Timeout", "killed after 61.0 s: timeout"),
    ],
    ids=["by-load", "own-time-loaded", "quiet"],
)
def test_a_timeout_on_a_busy_machine(tmp_path: Path, check: LimitCheck, verdict: str, reason: str) -> None:
    result = _result(tmp_path, submission=None, ok=False, timed_out=True, evalue="timeout", wall_seconds=61.0,
                     time_limit_check=check)
    judged = _judge(result)
    assert judged.name == verdict and judged.reason.startswith(reason), judged.reason


def test_a_run_that_ended_in_the_time_the_load_took_is_not_rehearsed(tmp_path: Path) -> None:
    """Past its 60 s limit by the wall clock, it ended in the extra time the load was owed: 40 s of its own."""
    check = LimitCheck("the run's time limit", 60, 70, 39, 30, 5.0, 2, finished=True)
    judged = _judge(_result(tmp_path, wall_seconds=70.0, time_limit_check=check))
    assert judged.name == "Not Rehearsed" and judged.reason.startswith(
        "not rehearsed: the run's time limit (60.0 s): 70.0 s by the wall clock, 39.0 s of CPU time, 30.0 s waiting for a "
        "CPU (load 5.0 on 2 CPUs): it ran 40.0 s; the rest went to other work on this machine"), judged.reason
