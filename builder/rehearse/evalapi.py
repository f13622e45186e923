"""Dry runs of evaluation-API kernels: the gateway's verdict, the time to ``serve()``, the slowest ``predict``.

Kaggle scores these competitions without a ``submission.csv``: the notebook wraps ``predict`` in the
competition's inference server (``kaggle_evaluation``, shipped in the competition data) and

``commit``
    calls ``run_local_gateway(paths)``: the competition's gateway runs in the notebook's process on
    the public test and writes ``submission.parquet``. The ordinary dry run does this by executing
    the notebook; :func:`commit_report` reads what kkb's runtime recorded (``kkb_evaluation.json``).
``rerun``
    calls ``serve()``, which blocks, while Kaggle's gateway, in another container, calls ``predict``
    batch by batch on the hidden test. :func:`rehearse_rerun` does the same in a sandbox: the
    notebook (as a script, rerun variable set) and the competition's gateway as a separate process
    (``evalapi_guest.py``), then reads the gateway's ``result.json``.

Both give an :class:`EvalApiReport`: the gateway's error class (``SERVER_NEVER_STARTED``,
``SERVER_RAISED_EXCEPTION``, ``INVALID_SUBMISSION`` with expected and received rows,
``GRPC_DEADLINE_EXCEEDED``, ...) next to the time to reach ``serve()`` and the slowest ``predict``
call, against the competition's limits. kkb's own stand-in competition honours
``KKB_EVALAPI_STARTUP_LIMIT_SECONDS`` / ``KKB_EVALAPI_RESPONSE_TIMEOUT_SECONDS`` (set from
``[evaluation_api]``) and ``KKB_EVALAPI_PORT``; a real competition's package ignores them and
enforces its own limits, which the report reads from its gateway.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil

from builder.errors import DryRunError
from builder.kkb_runtime.vocabulary import Layout, MemoryAccounting, Scenario, SubmissionKind
from builder.project.jsonfile import read_object
from builder.project.spec import EvaluationApiSection, KernelSpec
from builder.rehearse.memory import MemoryWatch
from builder.rehearse.verdict import OK, SCORING_ERROR, THREW, TIMEOUT
from builder.run.isolation import GUEST_DIR as RUN_GUESTS
from builder.run.isolation import IsolationRequest
from builder.run.sandbox import Mount, Sandbox, SandboxSpec, prepare_sandbox

GUEST = RUN_GUESTS / "evalapi_guest.py"
STATE_FILE = "kkb_evaluation.json"  # written by kkb_runtime.evaluation in the working dir
GUEST_DIR = "evalapi"  # under the sandbox's private dir: scripts, records, logs
GATEWAY_DIR = "gateway"  # under the sandbox root: the gateway container's working dir
# Kaggle's gateway error classes (kaggle_evaluation/core/base_gateway.py).
ERROR_CLASSES = ("SERVER_NEVER_STARTED", "SERVER_CONNECTION_FAILED", "SERVER_RAISED_EXCEPTION", "SERVER_MISSING_ENDPOINT",
                 "GATEWAY_RAISED_EXCEPTION", "INVALID_SUBMISSION", "GRPC_DEADLINE_EXCEEDED")
_ROWS = re.compile(r"expected (\d+) rows but received (\d+)")
_CLASS_IN_TEXT = re.compile(r"\b(" + "|".join(ERROR_CLASSES) + r")\b")
# How long a gateway may keep running after the notebook died (Kaggle's fails at once: no container).
GRACE_SECONDS = 2.0
LOG_TAIL_LINES = 20


@dataclass(frozen=True)
class EvalApiReport:
    """What the gateway said, and the two times the competition limits."""

    scenario: Scenario
    succeeded: bool
    error_type: str | None = None  # one of ERROR_CLASSES, or the exception's type when it is not the gateway's
    error_details: str | None = None
    expected_rows: int | None = None
    received_rows: int | None = None
    serve_seconds: float | None = None  # kernel start -> serve() (rerun only)
    startup_limit_seconds: float | None = None
    predict_calls: int = 0
    fast_calls: int = 0
    first_predict_seconds: float | None = None  # no deadline on the first call
    slowest_predict_seconds: float | None = None  # calls after the first
    slowest_call: int | None = None
    slowest_in_flight: bool = False  # the slowest call had not finished when the run ended
    response_timeout_seconds: float | None = None
    predict_seconds_total: float = 0.0
    submission_rows: int | None = None
    notebook_exit: int | None = None  # rerun: the notebook ended by itself (it should block in serve())
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return self.succeeded

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        data["ok"] = self.ok
        return data

    def lines(self) -> list[str]:
        """The report as people read it (the CLI prints these)."""
        head = "gateway: succeeded" if self.succeeded else f"gateway: {self.error_type}: {self.error_details or ''}".rstrip(": ")
        lines = [head]
        if self.expected_rows is not None:
            lines.append(f"  rows: expected {self.expected_rows}, received {self.received_rows}")
        if self.scenario == "rerun":
            lines.append(f"  serve() reached: {_seconds(self.serve_seconds)} after the kernel started "
                         f"(limit {_seconds(self.startup_limit_seconds)})")
        slowest = _seconds(self.slowest_predict_seconds) + (" (still running when the run ended)" if self.slowest_in_flight else "")
        lines.append(f"  predict: {self.predict_calls} calls, first {_seconds(self.first_predict_seconds)} (no deadline), "
                     f"slowest later call {slowest} (deadline {_seconds(self.response_timeout_seconds)})")
        if self.submission_rows is not None:
            lines.append(f"  submission.parquet: {self.submission_rows} rows")
        lines += [f"  note: {note}" for note in self.notes]
        return lines


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


# --- settings ----------------------------------------------------------------------------------

def gateway_module(section: EvaluationApiSection | Gateway) -> str:
    """``[evaluation_api] gateway_module``, else Kaggle's naming: ``<comp>_inference_server`` → ``<comp>_gateway``."""
    if section.gateway_module:
        return section.gateway_module
    if section.module.endswith("_inference_server"):
        return section.module[: -len("_inference_server")] + "_gateway"
    raise DryRunError(f"[evaluation_api] module = '{section.module}': cannot tell the competition's gateway module from it",
                      hint="set [evaluation_api] gateway_module, e.g. 'kaggle_evaluation.<comp>_gateway'")


def sandbox_env(section: EvaluationApiSection | Gateway, port: int | None = None) -> dict[str, str]:
    """Variables kkb's stand-in competition reads (a real competition's package ignores them)."""
    env = {"KKB_EVALAPI_STARTUP_LIMIT_SECONDS": str(section.startup_limit_seconds)}
    if section.response_timeout_seconds:
        env["KKB_EVALAPI_RESPONSE_TIMEOUT_SECONDS"] = str(section.response_timeout_seconds)
    if port is not None:
        env["KKB_EVALAPI_PORT"] = str(port)
    return env


def free_port() -> int:
    """A loopback port nobody listens on now; where the sandbox shares the host's network, it keeps
    parallel dry runs apart."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def evaluation_section(spec: KernelSpec) -> EvaluationApiSection:
    if spec.submission.kind is not SubmissionKind.EVALUATION_API or spec.evaluation_api is None:
        raise DryRunError("not an evaluation-API kernel", hint="set [submission] kind = 'evaluation-api' and [evaluation_api]")
    return spec.evaluation_api


def missing_gateway_package(spec: KernelSpec, data: Path) -> str | None:
    """Why the dry run cannot rehearse here when the local competition data lacks the gateway's package.

    Kaggle's competition data ships ``kaggle_evaluation/``; a partial download, or a copy made without it, does
    not: the kernel's import of the server fails here for a reason that says nothing about Kaggle."""
    package = evaluation_section(spec).module.split(".")[0]
    if (data / package / "__init__.py").is_file() or (data / f"{package}.py").is_file():
        return None
    return (f"the local competition data has no {package} package ({data / package} is missing); download the full "
            f"data (kaggle competitions download -c {spec.competition.slug}), which has it")


# --- the commit run ----------------------------------------------------------------------------

def commit_report(working_dir: Path, spec: KernelSpec) -> EvalApiReport:
    """The commit run's gateway outcome, from what kkb's runtime recorded while the notebook ran."""
    section = evaluation_section(spec)
    state = read_state(working_dir)
    error = state.get("error") or {}
    stats = state.get("predict") or {}
    expected, received = _rows(error.get("details"))
    notes = []
    if not state:
        notes.append(f"the notebook wrote no {STATE_FILE}: it stopped before kkb's evaluation runtime started")
    elif state.get("mode") != "local":
        notes.append("the notebook never called run_local_gateway()")
    succeeded = bool(state) and state.get("mode") == "local" and not error and state.get("submission_rows") is not None
    return EvalApiReport(
        scenario=Scenario.COMMIT, succeeded=succeeded, error_type=error.get("type"), error_details=error.get("details"),
        expected_rows=expected, received_rows=received, startup_limit_seconds=section.startup_limit_seconds,
        predict_calls=int(stats.get("calls") or 0), fast_calls=int(stats.get("fast_calls") or 0),
        first_predict_seconds=stats.get("first_seconds"), slowest_predict_seconds=stats.get("slowest_seconds"),
        slowest_call=stats.get("slowest_call"), response_timeout_seconds=section.response_timeout_seconds,
        predict_seconds_total=float(stats.get("total_seconds") or 0.0), submission_rows=state.get("submission_rows"),
        notes=tuple(notes + _limit_notes(stats.get("slowest_seconds"), section.response_timeout_seconds, None, None)),
    )


def read_state(working_dir: Path) -> dict[str, Any]:
    return read_object(Path(working_dir) / STATE_FILE)


# --- the scoring rerun -------------------------------------------------------------------------

@dataclass(frozen=True)
class RerunResult:
    """One rehearsed rerun: the report plus what the dry run saves and judges."""

    report: EvalApiReport
    root: Path
    working_dir: Path
    gateway_dir: Path
    submission: Path | None  # the gateway's submission.parquet
    wall_seconds: float
    timed_out: bool
    peak_rss_bytes: int  # the notebook's process tree (the gateway is Kaggle's container, not the kernel's)
    notebook_stdout: str
    notebook_stderr: str
    gateway_log: str
    # The sandbox and memory, described as for a CSV kernel's run.
    isolation: str = "python"
    isolation_note: str = ""
    memory_limit_bytes: int | None = None
    memory_accounting: MemoryAccounting = MemoryAccounting.NONE
    memory_exceeded: bool = False


@dataclass(frozen=True)
class Gateway:
    """The competition facts a scoring rerun needs, where no kernel spec is at hand (the local Kaggle
    reads them from competition.toml); the dry run passes the kernel's ``[evaluation_api]`` instead."""

    gateway_module: str
    gateway_paths: tuple[str, ...] = ()
    startup_limit_seconds: int = 900
    response_timeout_seconds: int | None = None
    module: str = ""


def rehearse_rerun(notebook: Path, spec: KernelSpec, mounts: tuple[Mount, ...], root: Path, *,
                   timeout_seconds: float, layout: Layout = Layout.CURRENT,
                   isolation: IsolationRequest = "auto", memory_bytes: int | None = None) -> RerunResult:
    """Run the scoring rerun in a new sandbox at ``root``: the notebook blocks in ``serve()`` while the
    competition's gateway drives it from another process over the mounted competition data."""
    return rehearse_gateway_rerun(notebook, evaluation_section(spec), spec.competition.slug, mounts, root,
                                  timeout_seconds=timeout_seconds, layout=layout, isolation=isolation,
                                  memory_bytes=memory_bytes)


def rehearse_gateway_rerun(notebook: Path, section: EvaluationApiSection | Gateway, slug: str, mounts: tuple[Mount, ...],
                           root: Path, *, timeout_seconds: float, layout: Layout = Layout.CURRENT,
                           isolation: IsolationRequest = "auto", memory_bytes: int | None = None) -> RerunResult:
    """:func:`rehearse_rerun` from the gateway's settings and the competition slug alone."""
    box = prepare_sandbox(SandboxSpec(mounts=tuple(mounts), rerun=True, layout=layout, isolation=isolation,
                                      extra_env=sandbox_env(section, free_port()), memory_bytes=memory_bytes), root)
    competition = _competition_mount(box, slug)
    guest = _stage_guest(box.private_dir / GUEST_DIR, notebook)
    gateway_dir = box.root / GATEWAY_DIR
    gateway_dir.mkdir()
    paths = [str(competition / path) for path in section.gateway_paths]
    argv = box.launcher() + [sys.executable, str(guest / GUEST.name), "supervise", "--notebook", str(guest / "notebook.py"),
                             "--working", str(box.working_dir), "--gateway-dir", str(gateway_dir),
                             "--competition", str(competition), "--gateway-module", gateway_module(section),
                             "--paths", json.dumps(paths), "--record", str(guest / "supervisor.json"),
                             "--grace", str(GRACE_SECONDS)]
    started = time.monotonic()
    timed_out, memory = _run_supervisor(argv, box.env, guest, timeout_seconds, box.memory_bytes)
    wall = time.monotonic() - started
    result = _rerun_result(box.root, box.working_dir, gateway_dir, guest, section, wall, timed_out, memory.peak, timeout_seconds)
    return replace(result, isolation=box.isolation, isolation_note=f"{box.isolation_note}; root: {box.root_filesystem}",
                   memory_limit_bytes=box.memory_bytes, memory_accounting=memory.kind, memory_exceeded=memory.exceeded)


def _competition_mount(box: Sandbox, slug: str) -> Path:
    for _, target in box.mounts:
        if target.name == slug:
            return target
    raise DryRunError(f"no competition mount for {slug} in the sandbox", hint="mount the competition data as competitions/<slug>")


def _stage_guest(folder: Path, notebook: Path) -> Path:
    """The supervisor and the notebook's code as a script, inside the sandbox (visible in its namespace)."""
    folder.mkdir(parents=True)
    shutil.copyfile(GUEST, folder / GUEST.name)
    (folder / "notebook.py").write_text(notebook_script(notebook))
    return folder


def notebook_script(notebook: Path) -> str:
    """The notebook's code cells in order, as one script (kkb's cells use no IPython magics)."""
    import nbformat

    try:
        nb = nbformat.read(notebook, as_version=4) if notebook.suffix == ".ipynb" else None
    except Exception as exc:  # nbformat raises several unrelated types for a bad file
        raise DryRunError(f"{notebook}: not a readable notebook: {exc}", hint="rebuild it with kkb build") from None
    if nb is None:
        return notebook.read_text()
    cells = [f"# %% {cell.get('id', index)}\n{cell.source}" for index, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    return "\n\n".join(cells) + "\n"


@dataclass
class _NotebookMemory:
    """The notebook's memory as the CSV path counts it (:class:`builder.rehearse.memory.MemoryWatch`), once its pid is known."""

    limit: int | None
    watch: MemoryWatch | None = None
    peak: int = 0
    kind: MemoryAccounting = MemoryAccounting.NONE
    exceeded: bool = False

    def sample(self, record: Path, kill: Callable[[], None]) -> None:
        if self.watch is None:
            pid = (read_object(record).get("pids") or {}).get("notebook")
            if not pid:
                return
            try:
                self.watch = MemoryWatch(int(pid), self.limit, kill)
            except psutil.Error:
                return
        self.watch.sample()
        self.peak, self.kind, self.exceeded = self.watch.peak, self.watch.kind, self.watch.exceeded

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()
            self.exceeded = self.watch.exceeded


def _run_supervisor(argv: list[str], env: dict[str, str], guest: Path, timeout: float,
                    memory_bytes: int | None = None) -> tuple[bool, _NotebookMemory]:
    """Start the supervisor in its own session; sample the notebook's memory (past the limit, the whole run is
    ended, as Kaggle's OOM killer ends the container); kill everything at the timeout."""
    with open(guest / "supervisor.log", "wb") as log:
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    memory = _NotebookMemory(memory_bytes)
    try:
        while process.poll() is None:
            if time.monotonic() > deadline:
                _kill_session(process)
                return True, memory
            memory.sample(guest / "supervisor.json", lambda: _kill_session(process))
            time.sleep(0.1)
    finally:
        if process.poll() is None:  # interrupted: leave nothing behind
            _kill_session(process)
        memory.close()
    return False, memory


def _kill_session(process: subprocess.Popen) -> None:
    # Only our own session: the supervisor was started with start_new_session, its children share it.
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _rerun_result(root: Path, working: Path, gateway_dir: Path, guest: Path, section: EvaluationApiSection | Gateway,
                  wall: float,
                  timed_out: bool, peak: int, timeout: float) -> RerunResult:
    supervisor = read_object(guest / "supervisor.json")
    gateway = read_object(guest / "gateway.json")
    result = read_object(gateway_dir / "result.json")
    state = read_state(working)
    submission = gateway_dir / "submission.parquet"
    texts = {name: _read_text(guest / name) for name in ("notebook.stdout", "notebook.stderr", "gateway.log")}
    report = rerun_report(section, supervisor, gateway, result, state, texts, timed_out, timeout,
                          submission if submission.is_file() else None)
    return RerunResult(report=report, root=root, working_dir=working, gateway_dir=gateway_dir,
                       submission=submission if submission.is_file() else None, wall_seconds=round(wall, 3),
                       timed_out=timed_out, peak_rss_bytes=peak, notebook_stdout=texts["notebook.stdout"],
                       notebook_stderr=texts["notebook.stderr"], gateway_log=texts["gateway.log"])


def rerun_report(section: EvaluationApiSection | Gateway, supervisor: dict[str, Any], gateway: dict[str, Any],
                 result: dict[str, Any], state: dict[str, Any], texts: dict[str, str], timed_out: bool, timeout: float,
                 submission: Path | None) -> EvalApiReport:
    """Put the records together: the gateway's ``result.json`` decides; the rest explains."""
    stats = state.get("predict") or {}
    error_type, details = _rerun_error(result, gateway, supervisor, texts, timed_out, timeout)
    expected, received = _rows(details)
    slowest, in_flight = _slowest(stats, supervisor)
    startup = gateway.get("startup_limit_seconds") or section.startup_limit_seconds
    deadline = gateway.get("response_timeout_seconds") or section.response_timeout_seconds
    serve = state.get("serve_seconds") if state.get("mode") == "serve" else None
    notes = _rerun_notes(state, supervisor, texts) + _limit_notes(slowest, deadline, serve, startup)
    return EvalApiReport(
        scenario=Scenario.RERUN, succeeded=bool(result.get("Succeeded")) and not timed_out, error_type=error_type,
        error_details=details, expected_rows=expected, received_rows=received, serve_seconds=serve,
        startup_limit_seconds=startup, predict_calls=int(gateway.get("calls") or stats.get("calls") or 0),
        fast_calls=int(stats.get("fast_calls") or 0), first_predict_seconds=stats.get("first_seconds"),
        slowest_predict_seconds=slowest, slowest_call=stats.get("in_flight_call") if in_flight else stats.get("slowest_call"),
        slowest_in_flight=in_flight, response_timeout_seconds=deadline,
        predict_seconds_total=float(stats.get("total_seconds") or 0.0),
        submission_rows=_parquet_rows(submission) if submission else None,
        notebook_exit=supervisor.get("notebook_exit"), notes=tuple(notes),
    )


def _rerun_error(result: dict[str, Any], gateway: dict[str, Any], supervisor: dict[str, Any], texts: dict[str, str],
                 timed_out: bool, timeout: float) -> tuple[str | None, str | None]:
    if timed_out:
        return "Timeout", f"the rerun exceeded its timeout of {timeout:g} s and was killed"
    if result:
        return (None, None) if result.get("Succeeded") else (result.get("ErrorName"), result.get("ErrorDetails"))
    if supervisor.get("gateway_stopped"):
        # Kaggle's gateway would fail at once: the inference container (and its host name) is gone.
        return "SERVER_CONNECTION_FAILED", (f"the notebook ended (exit code {supervisor.get('notebook_exit')}) before "
                                            "the gateway finished; on Kaggle the gateway then cannot reach the server")
    log = _tail(texts.get("gateway.log", ""), LOG_TAIL_LINES)
    found = _CLASS_IN_TEXT.search(log)
    return (found.group(1) if found else "GATEWAY_RAISED_EXCEPTION"), f"the gateway wrote no result.json:\n{log}"


def _slowest(stats: dict[str, Any], supervisor: dict[str, Any]) -> tuple[float | None, bool]:
    """The slowest call after the first, counting one still running when the gateway gave up."""
    slowest = stats.get("slowest_seconds")
    since, call = stats.get("in_flight_since"), stats.get("in_flight_call")
    ended = supervisor.get("notebook_stopped") or supervisor.get("gateway_finished")
    if since and call and ended:
        running = float(ended) - float(since)
        if slowest is None or running > slowest:
            return round(running, 3), True
    return slowest, False


def _rerun_notes(state: dict[str, Any], supervisor: dict[str, Any], texts: dict[str, str]) -> list[str]:
    notes = []
    if not state:
        notes.append(f"the notebook wrote no {STATE_FILE}: it stopped before kkb's evaluation runtime started")
    elif state.get("mode") != "serve":
        notes.append("the notebook never reached serve()")
    if supervisor.get("notebook_exit") is not None:
        stderr = _tail(texts.get("notebook.stderr", ""), 6)
        notes.append(f"the notebook ended by itself (exit code {supervisor['notebook_exit']}) instead of blocking in "
                     f"serve()" + (f":\n{stderr}" if stderr else ""))
    return notes


def _limit_notes(slowest: float | None, deadline: float | None, serve: float | None, startup: float | None) -> list[str]:
    notes = []
    if serve is not None and startup and serve > startup:
        notes.append(f"serve() was reached {serve:.1f} s after the start, past the startup limit of {startup:g} s: "
                     "load models in the first predict call, not before serve()")
    elif serve is not None and startup and serve > 0.5 * startup:
        notes.append(f"serve() was reached after {serve / startup:.0%} of the startup limit")
    if slowest is not None and deadline and slowest > deadline:
        notes.append(f"the slowest predict call after the first took {slowest:.2f} s, past the {deadline:g} s deadline")
    elif slowest is not None and deadline and slowest > 0.5 * deadline:
        notes.append(f"the slowest predict call after the first used {slowest / deadline:.0%} of the {deadline:g} s deadline")
    return notes


# --- verdicts ------------------------------------------------------------------------------------

def verdict_name(report: EvalApiReport) -> str:
    """Kaggle's status for a failed evaluation-API submission. Kaggle maps gateway errors to canned
    messages it does not document; this is kkb's reading of them."""
    if report.succeeded:
        return OK
    if report.error_type in ("SERVER_NEVER_STARTED", "GRPC_DEADLINE_EXCEEDED", "Timeout"):
        return TIMEOUT
    if report.error_type == "INVALID_SUBMISSION":
        return SCORING_ERROR
    return THREW


def verdict_reason(report: EvalApiReport) -> str:
    if report.succeeded:
        return f"the competition's gateway succeeded ({report.predict_calls} predict calls)"
    return f"{report.error_type}: {report.error_details}" if report.error_details else str(report.error_type)


# --- small helpers -------------------------------------------------------------------------------

def _rows(details: str | None) -> tuple[int | None, int | None]:
    match = _ROWS.search(details or "")
    return (int(match.group(1)), int(match.group(2))) if match else (None, None)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def _parquet_rows(path: Path) -> int | None:
    import pandas as pd

    try:
        return len(pd.read_parquet(path))
    except Exception:
        return None


__all__ = ["ERROR_CLASSES", "EvalApiReport", "RerunResult", "commit_report", "gateway_module",
           "notebook_script", "read_state", "rehearse_rerun", "rerun_report", "sandbox_env", "verdict_name", "verdict_reason"]
