"""Evaluation-API competitions: the stand-in kaggle_evaluation package, the rendered notebook,
the kernel-side wrapper, and the dry run's commit and rerun paths with the gateway's error classes."""

from __future__ import annotations

import filecmp
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import pytest

from builder.build import BuildResult, BuildSettings, build_kernel
from builder.errors import DryRunError, SpecError
from builder.kkb_runtime.evaluation import round_answer
from builder.kkb_runtime.vocabulary import Layout, Scenario
from builder.project.spec import parse_spec
from builder.rehearse.evalapi import (
    EvalApiReport,
    RerunResult,
    commit_report,
    notebook_script,
    rehearse_rerun,
    verdict_name,
)
from builder.rehearse.evalapi_scenario import gateway_verdict
from builder.rehearse.verdict import Judgement
from builder.run.execute import ExecutionResult, execute_notebook
from builder.run.gateway import free_port, gateway_module
from builder.run.sandbox import Mount, SandboxSpec, remove_sandbox
from tests.support.busy import busy_loops
from tests.support.files import KERNELS
from tests.support.golden import normalize_provenance
from tests.support.kernels import evalapi_variant

GOLDEN = Path(__file__).parent / "golden"
COMPETITION = KERNELS / "evalapi" / "data" / "competition"


# --- fixtures and helpers ----------------------------------------------------------------------

@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    """A copy of kernels/evalapi that a test may change."""
    return Path(shutil.copytree(KERNELS / "evalapi", tmp_path / "evalapi", ignore=shutil.ignore_patterns("__pycache__")))


def _build(kernel: Path, tmp_path: Path) -> BuildResult:
    return build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))


def _mounts(build: BuildResult, data: Path) -> tuple[Mount, ...]:
    return (Mount(build.code_dir, f"datasets/{build.code_dataset}"), Mount(build.weights_dir, f"datasets/{build.weights_dataset}"),
            Mount(data, f"competitions/{build.spec.competition.slug}"))


@pytest.fixture
def sandboxes(tmp_path: Path) -> Iterator[list[Path]]:
    roots: list[Path] = []
    yield roots
    for root in roots:
        remove_sandbox(root)  # python-mode sandboxes hold read-only copies


def _rerun(build: BuildResult, tmp_path: Path, sandboxes: list[Path], timeout: float = 60) -> RerunResult:
    root = tmp_path / f"rerun-{len(sandboxes)}"
    sandboxes.append(root)
    sandbox = SandboxSpec(mounts=_mounts(build, COMPETITION / "hidden"), rerun=True)
    return rehearse_rerun(build.notebook_path, build.spec, sandbox, root, timeout_seconds=timeout)


def _commit(build: BuildResult, tmp_path: Path, sandboxes: list[Path],
            layout: Layout = Layout.CURRENT) -> tuple[ExecutionResult, EvalApiReport]:
    root = tmp_path / f"commit-{len(sandboxes)}"
    sandboxes.append(root)
    spec = SandboxSpec(mounts=_mounts(build, COMPETITION / "public"), rerun=False, timeout_seconds=60, layout=layout)
    result = execute_notebook(build.notebook_path, spec, root)
    return result, commit_report(result.working_dir, build.spec)


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """kkb-evalapi's inference-server module, imported in this process (cwd: a temp dir)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # no __pycache__ in the project's competition data
    monkeypatch.setenv("KKB_EVALAPI_PORT", str(free_port()))
    monkeypatch.syspath_prepend(str(COMPETITION / "public"))
    import kaggle_evaluation.kkb_evalapi_inference_server as server

    yield server
    for name in [name for name in sys.modules if name.split(".")[0] == "kaggle_evaluation"]:
        del sys.modules[name]


PUBLIC_TEST = str(COMPETITION / "public" / "test.csv")


def _good(batch: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"row_id": batch["row_id"], "target": 0.5})


# --- the competition and its stand-in package ----------------------------------------------------

def test_public_and_hidden_ship_the_same_package() -> None:
    """Kaggle's data ships one kaggle_evaluation; kkb's competition keeps a copy in each mounted folder."""
    compared = filecmp.dircmp(COMPETITION / "public" / "kaggle_evaluation", COMPETITION / "hidden" / "kaggle_evaluation",
                              ignore=["__pycache__"])

    def differences(cmp: filecmp.dircmp) -> list[str]:
        found = cmp.left_only + cmp.right_only + cmp.diff_files
        return found + [name for sub in cmp.subdirs.values() for name in differences(sub)]

    assert differences(compared) == [], "copy public/kaggle_evaluation over hidden/kaggle_evaluation"


@pytest.mark.loopback
def test_local_gateway_writes_submission_parquet(stand_in: ModuleType, tmp_path: Path) -> None:
    def predict(batch: pd.DataFrame) -> pd.DataFrame:
        return _good(batch)

    stand_in.KkbEvalapiInferenceServer(predict).run_local_gateway((PUBLIC_TEST,))
    written = pd.read_parquet(tmp_path / "submission.parquet")
    assert list(written.columns) == ["row_id", "target"] and len(written) == 12
    assert not (tmp_path / "result.json").exists()  # only the rerun's gateway writes it


@pytest.mark.loopback
@pytest.mark.parametrize(
    ("predict", "error", "details"),
    [
        (lambda batch: _good(batch).head(3), "INVALID_SUBMISSION", "Invalid predictions: expected 4 rows but received 3"),
        (lambda batch: np.zeros(len(batch)), "SERVER_RAISED_EXCEPTION", "Type <class 'numpy.ndarray'> not supported for KaggleEvaluation."),
        (lambda batch: 1 / 0, "SERVER_RAISED_EXCEPTION", "division by zero"),
        (lambda batch: batch[["row_id"]], "INVALID_SUBMISSION", "Predictions must have a 'target' column, got ['row_id']"),
    ],
    ids=["short", "ndarray", "raises", "no-target"],
)
def test_local_gateway_raises_the_gateway_error(stand_in: ModuleType, predict, error: str, details: str) -> None:
    def named(batch: pd.DataFrame):  # the relay registers endpoints by __name__; the gateway calls "predict"
        return predict(batch)

    named.__name__ = "predict"
    with pytest.raises(Exception) as caught:
        stand_in.KkbEvalapiInferenceServer(named).run_local_gateway((PUBLIC_TEST,))
    gateway_error: Any = caught.value  # the competition's own GatewayRuntimeError, from the stand-in's package
    assert (gateway_error.error_type.name, gateway_error.error_details) == (error, details)


@pytest.mark.loopback
def test_endpoint_is_found_by_name(stand_in: ModuleType) -> None:
    def forecast(batch: pd.DataFrame) -> pd.DataFrame:
        return _good(batch)

    with pytest.raises(Exception) as caught:
        stand_in.KkbEvalapiInferenceServer(forecast).run_local_gateway((PUBLIC_TEST,))
    gateway_error: Any = caught.value  # the competition's own GatewayRuntimeError
    assert gateway_error.error_type.name == "SERVER_MISSING_ENDPOINT"


# --- spec and notebook ----------------------------------------------------------------------------

def test_spec_checks_the_evaluation_api_table() -> None:
    raw = {"kernel": {"title": "Evaluation kernel"}, "competition": {"slug": "kkb-evalapi"},
           "submission": {"kind": "evaluation-api"},
           "evaluation_api": {"module": "kaggle_evaluation.kkb_evalapi_inference_server", "server_class": "KkbEvalapiInferenceServer",
                              "predict": "evalapi_model.serve.predict"}}
    with pytest.raises(SpecError, match=r"evaluation_api\.predict: String should match pattern") as caught:
        parse_spec(raw)
    assert "predict = 'module:function'" in (caught.value.hint or "")
    raw["evaluation_api"]["predict"] = "evalapi_model.serve:predict"
    section = parse_spec(raw).evaluation_api
    assert section is not None
    assert gateway_module(section) == "kaggle_evaluation.kkb_evalapi_gateway"
    with pytest.raises(DryRunError, match="cannot tell the competition's gateway module"):
        gateway_module(section.model_copy(update={"module": "kaggle_evaluation.server"}))


def test_golden_evalapi_notebook(update_golden: bool, tmp_path: Path) -> None:
    result = _build(KERNELS / "evalapi", tmp_path)
    notebook = json.loads(result.notebook_path.read_text())
    assert [c["id"] for c in notebook["cells"]] == ["kkb-provenance", "kkb-environment", "kkb-inputs", "kkb-install",
                                                   "kkb-fast-commit", "kkb-inference-server", "kkb-serve"]
    code = notebook_script(result.notebook_path)
    # The competition folder is on sys.path before kaggle_evaluation is imported, and nothing calls predict early.
    assert code.index("run = evaluation.start(CODE_DIR)") < code.index("import kaggle_evaluation.kkb_evalapi_inference_server")
    rendered = normalize_provenance(result.notebook_path.read_text())
    golden = GOLDEN / "evalapi.ipynb"
    if update_golden:
        golden.write_text(rendered)
    assert golden.exists(), f"{golden} is missing: render it once with pytest --update-golden and check it"
    assert rendered == golden.read_text(), "rendered notebook changed: check it, then run pytest --update-golden"


def test_round_answer_rounds_what_predict_returns() -> None:
    frame = pd.DataFrame({"row_id": ["a", "b"], "target": [0.1 + 0.2, -0.00001], "n": [1, 2]})
    rounded = round_answer(frame, 4, ["target"])
    assert rounded["target"].tolist() == [0.3, 0.0] and str(rounded["target"].iloc[1]) == "0.0"
    assert rounded["row_id"].tolist() == ["a", "b"] and rounded["n"].tolist() == [1, 2]
    assert round_answer(pd.Series([1.23456]), 2).tolist() == [1.23]
    assert round_answer(np.float64(2.71828), 3) == np.float64(2.718) and isinstance(round_answer(np.float64(1.0), 3), np.float64)
    assert round_answer(0.123456, None) == 0.123456 and round_answer("x", 2) == "x"


# --- the commit run: run_local_gateway inside the executed notebook --------------------------------

@pytest.mark.loopback
@pytest.mark.parametrize("layout", list(Layout))
def test_commit_runs_the_local_gateway(kernel: Path, tmp_path: Path, sandboxes: list[Path], layout: Layout) -> None:
    result, report = _commit(_build(kernel, tmp_path), tmp_path, sandboxes, layout)
    assert result.ok, result.traceback_tail
    stdout = "".join(entry["data"] for entry in result.log if entry["stream_name"] == "stdout")
    competition = "input/competitions/kkb-evalapi" if layout == "current" else "input/kkb-evalapi"
    assert re.search(rf"^competition +\S+/{competition}$", stdout, re.MULTILINE), stdout
    written = pd.read_parquet(result.working_dir / "submission.parquet")
    assert len(written) == 12 and (written["target"] == written["target"].round(4)).all()
    assert report.succeeded and report.predict_calls == 3 and report.submission_rows == 12 and report.fast_calls == 0
    assert report.first_predict_seconds is not None and report.slowest_predict_seconds is not None


@pytest.mark.loopback
def test_commit_with_wrong_row_count_fails_visibly(kernel: Path, tmp_path: Path, sandboxes: list[Path]) -> None:
    evalapi_variant(kernel, "from evalapi_model.serve import predict as real\n\n\ndef predict(test):\n    return real(test).head(3)\n")
    result, report = _commit(_build(kernel, tmp_path), tmp_path, sandboxes)
    assert not result.ok and result.ename == "GatewayRuntimeError"
    assert "INVALID_SUBMISSION: Invalid predictions: expected 4 rows but received 3" in (result.evalue or "")
    assert (report.error_type, report.expected_rows, report.received_rows) == ("INVALID_SUBMISSION", 4, 3)
    assert verdict_name(report) == "Submission Scoring Error"


@pytest.mark.loopback
@pytest.mark.parametrize(("write", "model_batches"), [("sample", 0), ("first_rows", 1)])
def test_fast_commit_answers_from_the_sample(kernel: Path, tmp_path: Path, sandboxes: list[Path], write: str,
                                             model_batches: int) -> None:
    # write = "first_rows": the model answers the first batches (catching its bugs), the sample the rest.
    evalapi_variant(kernel, "from evalapi_model.serve import predict as real\n\ncalls = []\n\n\ndef predict(test):\n"
                     f"    calls.append(1)\n    assert len(calls) <= {model_batches}, 'the model ran in a fast commit'\n"
                     "    return real(test)\n")
    spec = (kernel / "kernel.toml").read_text()
    (kernel / "kernel.toml").write_text(spec.replace("enabled = false", f'enabled = true\nrows_below = 100\nwrite = "{write}"\nfirst_rows = 1'))
    result, report = _commit(_build(kernel, tmp_path), tmp_path, sandboxes)
    assert result.ok, result.traceback_tail
    assert report.succeeded and report.predict_calls == 3 and report.fast_calls == 3 - model_batches
    targets = pd.read_parquet(result.working_dir / "submission.parquet")["target"]
    assert (targets.iloc[4 * model_batches:] == 0.0).all() and (targets.iloc[:4 * model_batches] != 0.0).all()
    stdout = "".join(entry["data"] for entry in result.log if entry["stream_name"] == "stdout")
    assert "[kkb] commit run (KAGGLE_IS_COMPETITION_RERUN absent, public test has 12 rows): fast commit" in stdout


# --- the scoring rerun: serve() driven by the competition's gateway in another process -------------

@pytest.mark.loopback
def test_rerun_is_served_to_the_gateway(kernel: Path, tmp_path: Path, sandboxes: list[Path]) -> None:
    rerun = _rerun(_build(kernel, tmp_path), tmp_path, sandboxes)
    report = rerun.report
    assert report.succeeded, (report.lines(), rerun.notebook_stderr, rerun.gateway_log)
    assert json.loads((rerun.gateway_dir / "result.json").read_text()) == {"Succeeded": True}
    assert report.submission_rows == 200 and report.predict_calls == 50
    assert report.serve_seconds is not None and report.startup_limit_seconds is not None
    assert 0 < report.serve_seconds < report.startup_limit_seconds == 900
    assert report.response_timeout_seconds == 300 and report.notebook_exit is None  # blocked in serve() until stopped
    assert "scoring rerun: serve() reached" in rerun.notebook_stdout
    answers = pd.read_csv(COMPETITION / "answers.csv")
    written = pd.read_parquet(rerun.submission)
    assert written["row_id"].tolist() == answers["row_id"].tolist() and written["row_id"].dtype == "int64"
    # the model reads each symbol's x1 at the previous date: the state carried from call to call is right
    assert np.sqrt(((written["target"] - answers["target"]) ** 2).mean()) < 0.2
    # the inference server's process tree, counted as a CSV kernel's run is (PSS where /proc allows it)
    assert rerun.peak_rss_bytes > 20 * 2**20, rerun.peak_rss_bytes
    assert rerun.environment.env["KAGGLE_URL_BASE"] == "https://www.kaggle.com"  # the same environment as every run


@pytest.mark.loopback
def test_rerun_with_wrong_row_count(kernel: Path, tmp_path: Path, sandboxes: list[Path]) -> None:
    evalapi_variant(kernel, "from evalapi_model.serve import predict as real\n\n\ndef predict(test):\n    return real(test).iloc[1:]\n")
    report = _rerun(_build(kernel, tmp_path), tmp_path, sandboxes).report
    assert (report.error_type, report.error_details) == ("INVALID_SUBMISSION", "Invalid predictions: expected 4 rows but received 3")
    assert (report.expected_rows, report.received_rows, report.predict_calls) == (4, 3, 1)
    assert report.submission_rows is None and verdict_name(report) == "Submission Scoring Error"


@pytest.mark.loopback
def test_rerun_server_raises(kernel: Path, tmp_path: Path, sandboxes: list[Path]) -> None:
    evalapi_variant(kernel, "def predict(test):\n    raise ValueError('weights not found')\n")
    report = _rerun(_build(kernel, tmp_path), tmp_path, sandboxes).report
    assert (report.error_type, report.error_details) == ("SERVER_RAISED_EXCEPTION", "weights not found")
    assert verdict_name(report) == "Notebook Threw Exception"


@pytest.mark.loopback
def test_rerun_notebook_fails_before_serve(kernel: Path, tmp_path: Path, sandboxes: list[Path]) -> None:
    evalapi_variant(kernel, "import no_such_package\n")
    report = _rerun(_build(kernel, tmp_path), tmp_path, sandboxes).report
    assert report.error_type == "SERVER_CONNECTION_FAILED" and report.notebook_exit == 1
    assert "No module named 'no_such_package'" in "\n".join(report.notes)


@pytest.mark.loopback
@pytest.mark.slow
def test_rerun_server_starts_too_late(kernel: Path, tmp_path: Path, sandboxes: list[Path]) -> None:
    # A model loaded at import time (before serve()) instead of in the first predict call.
    evalapi_variant(kernel, "import time\n\ntime.sleep(4)\n\nfrom evalapi_model.serve import predict\n", startup_limit_seconds=2)
    rerun = _rerun(_build(kernel, tmp_path), tmp_path, sandboxes)
    report = rerun.report
    assert (report.error_type, report.error_details) == ("SERVER_NEVER_STARTED", "Failed to connect to server after waiting 2 seconds")
    assert report.startup_limit_seconds == 2 and report.predict_calls == 0
    assert verdict_name(report) == "Notebook Timeout"
    # Kaggle's gateway gives up at 2 s; the dry run lets the notebook run on (at most the limit again) to see whether
    # its own time, or this machine's load, passed the limit: it slept, so its own time did, whatever the load
    (check,) = report.limits
    assert check.what.startswith("the startup limit (serve() ") and report.tripped_by_load is None
    if report.serve_seconds is not None:  # reached once the gateway had gone: how late it was, said
        assert report.serve_seconds > 4 and check.finished and check.own_seconds > 2
        assert any("past the startup limit of 2 s: load models in the first predict call" in note for note in report.notes)
    else:
        assert "the notebook never reached serve()" in report.notes
        assert "serve() reached: - after the kernel started (limit 2.00 s)" in "\n".join(report.lines())


@pytest.mark.loopback
@pytest.mark.slow
def test_rerun_slow_predict_misses_the_deadline(kernel: Path, tmp_path: Path, sandboxes: list[Path]) -> None:
    # The first call may be slow (no deadline: the model loads there); the second misses the 1 s deadline.
    evalapi_variant(kernel, "import time\n\nfrom evalapi_model.serve import predict as real\n\ncalls = []\n\n\n"
                     "def predict(test):\n    calls.append(1)\n    time.sleep(1.5 if len(calls) == 1 else 3.0)\n"
                     "    return real(test)\n", response_timeout_seconds=1)
    report = _rerun(_build(kernel, tmp_path), tmp_path, sandboxes).report
    assert (report.error_type, report.error_details) == ("GRPC_DEADLINE_EXCEEDED", "Timeout exceeded: predict did not answer within 1 seconds")
    assert report.first_predict_seconds is not None and report.slowest_predict_seconds is not None
    assert report.first_predict_seconds >= 1.5 and report.response_timeout_seconds == 1
    assert report.slowest_predict_seconds >= 1 and report.slowest_in_flight and report.slowest_call == 1
    assert any("past the 1 s deadline" in note for note in report.notes)
    assert verdict_name(report) == "Notebook Timeout"
    # it slept past the deadline: no load made it slow, so the dry run says what Kaggle would say
    assert report.tripped_by_load is None and gateway_verdict(report, Judgement("OK")).name == "Notebook Timeout"


# --- deadlines on a busy machine: the wait for a CPU is not the kernel's -----------------------------------

BURN = ("import os, time\n\nfrom evalapi_model.serve import predict as real\n\ncalls = []\n\n\ndef predict(test):\n"
        "    calls.append(1)\n    if len(calls) == 2:  # half a second of CPU, on the CPU the test may keep busy\n"
        "        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        "        end = time.thread_time() + 0.5\n        while time.thread_time() < end:\n            pass\n"
        "    return real(test)\n")


@pytest.fixture
def busy_cpu() -> Iterator[None]:
    """Eight busy loops on the first CPU this process may use: a thread there gets a ninth of it."""
    with busy_loops(8):
        yield


@pytest.mark.loopback
def test_a_deadline_met_when_quiet(kernel: Path, tmp_path: Path, sandboxes: list[Path]) -> None:
    evalapi_variant(kernel, BURN, response_timeout_seconds=3)
    report = _rerun(_build(kernel, tmp_path), tmp_path, sandboxes).report
    assert report.succeeded, report.lines()
    (deadline, _) = report.limits
    assert deadline.cpu_seconds is not None
    assert deadline.what == "the response deadline of predict call 1" and deadline.cpu_seconds >= 0.5 and not deadline.passed


@pytest.mark.loopback
def test_a_deadline_tripped_by_a_busy_machine_is_not_rehearsed(kernel: Path, tmp_path: Path, sandboxes: list[Path],
                                                              busy_cpu: None) -> None:
    evalapi_variant(kernel, BURN, response_timeout_seconds=3)
    report = _rerun(_build(kernel, tmp_path), tmp_path, sandboxes).report
    assert report.error_type == "GRPC_DEADLINE_EXCEEDED" and verdict_name(report) == "Notebook Timeout", report.limits
    check = report.tripped_by_load
    # the dry run let the call run on past the deadline: it finished, having run far less than the deadline
    assert check is not None and check.waited_seconds is not None, report.limits
    assert check.own_seconds < 2.0 < check.waited_seconds, report.limits
    verdict = gateway_verdict(report, Judgement("OK"))
    assert verdict.name == "Not Rehearsed"
    assert re.search(r"the response deadline of predict call 1 \(3\.0 s\): \S+ s by the wall clock, \S+ s of CPU time, "
                     r"\S+ s waiting for a CPU \(load \d+\.\d on \d+ CPUs\): it ran \S+ s(, and had not finished)?; the rest went to "
                     r"other work on this machine", verdict.reason)
    assert any(line.startswith("  note: judged on a loaded machine: the response deadline") for line in report.lines())


# --- kkb dry-run ----------------------------------------------------------------------------------

@pytest.mark.loopback
@pytest.mark.slow
def test_dry_run_reports_the_gateway(kernel: Path, tmp_path: Path) -> None:
    from builder.rehearse.dryrun import DryRunSettings, dry_run

    evalapi_variant(kernel, "from evalapi_model.serve import predict as real\n\n\ndef predict(test):\n    return real(test).head(3)\n")
    report = dry_run(DryRunSettings(kernel_dir=kernel, data_dir=COMPETITION / "hidden", out_dir=tmp_path / "build"))
    commit, rerun = report.scenarios
    for scenario in (commit, rerun):
        assert scenario.verdict.name == "Submission Scoring Error", scenario.verdict
        assert scenario.verdict.reason == "INVALID_SUBMISSION: Invalid predictions: expected 4 rows but received 3"
        assert scenario.evaluation_api is not None and scenario.evaluation_api["error_type"] == "INVALID_SUBMISSION"
    assert rerun.evaluation_api is not None and rerun.evaluation_api["serve_seconds"] > 0 and (report.out_dir / "rerun.gateway.log").is_file()
    # the rerun's sandbox and memory are described as the commit's, not "sandbox: ; memory: no memory limit"
    assert rerun.isolation == commit.isolation and rerun.isolation_note == commit.isolation_note and "; root: " in rerun.isolation_note
    assert rerun.memory_limit == commit.memory_limit != "no memory limit"
    assert rerun.isolation == "python" or not [w for w in rerun.warnings if w.startswith("weaker sandbox")]
    saved = json.loads(report.report_path.read_text())
    assert saved["scenarios"][1]["evaluation_api"]["expected_rows"] == 4


# --- --rerun-scale: more dates, never wider batches --------------------------------------------------

def _expected_with_lags(public: pd.DataFrame, factor: int) -> pd.Series:
    """What kernels/evalapi's model answers on the public test replicated along date_id, its state carried date to date."""
    weights = json.loads((KERNELS / "evalapi" / "weights" / "linear.json").read_text())
    scaled = pd.concat([public.assign(date_id=public["date_id"] + 3 * k) for k in range(factor)], ignore_index=True)
    last: dict[int, float] = {}
    lags = []
    for _, batch in scaled.groupby("date_id", sort=False):
        lags += [last.get(symbol, 0.0) for symbol in batch["symbol_id"]]
        last.update(zip(batch["symbol_id"], batch["x1"], strict=True))
    linear = weights["intercept"] + sum(weights["coefficients"][c] * scaled[c] for c in ("x1", "x2"))
    return (linear + weights["coefficients"]["x1_lag"] * pd.Series(lags)).round(4)


@pytest.mark.loopback
def test_rerun_scale_serves_more_dates_with_the_state_carried(kernel: Path, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "builder", "dry-run", ".", "--scenario", "rerun", "--rerun-scale", "5",
                           "--out", "../out"], cwd=kernel, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "predict: 15 calls" in done.stdout and "x 5 along date_id (the gateway's batches: 3 -> 15" in done.stdout
    report = json.loads((tmp_path / "out" / "dryrun" / "report.json").read_text())["scenarios"][0]
    assert report["evaluation_api"]["predict_calls"] == 15 and report["peak_rss_bytes"] > 0
    kept = tmp_path / "out" / "dryrun" / "rerun.submission.parquet"
    assert Path(report["submission"]).name == kept.name
    written = pd.read_parquet(kept)  # the gateway's own file: its ids in their own type, in the gateway's order
    assert written["row_id"].dtype == "int64" and written["row_id"].tolist() == list(range(60))
    public = pd.read_csv(COMPETITION / "public" / "test.csv")
    assert np.allclose(written["target"], _expected_with_lags(public, 5))  # one date per batch: each lag is right


@pytest.mark.loopback
def test_state_not_reset_between_dates_fails_with_the_gateways_message(kernel: Path, tmp_path: Path) -> None:
    from builder.rehearse.dryrun import DryRunSettings, dry_run

    # the rows of every date so far are kept for the lags, and predicted on, instead of the date's own
    evalapi_variant(kernel, "import pandas as pd\nfrom evalapi_model.serve import predict as real\n\nseen = []\n\n\n"
                     "def predict(test):\n    seen.append(test)\n    return real(pd.concat(seen, ignore_index=True))\n")
    report = dry_run(DryRunSettings(kernel_dir=kernel, scenario=Scenario.RERUN, rerun_scale=5, out_dir=tmp_path / "build"))
    (rerun,) = report.scenarios
    assert rerun.verdict.name == "Submission Scoring Error"
    assert rerun.verdict.reason == "INVALID_SUBMISSION: Invalid predictions: expected 4 rows but received 8"
    assert rerun.evaluation_api is not None
    assert rerun.evaluation_api["predict_calls"] == 2 and rerun.stand_in and "along date_id" in rerun.stand_in  # the 2nd date
