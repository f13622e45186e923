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
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil

from builder.errors import DryRunError
from builder.kkb_runtime.vocabulary import Layout, MemoryAccounting, Scenario
from builder.project.jsonfile import read_object
from builder.project.kaggle_env import KernelEnvironment
from builder.project.spec import EvaluationApiSection, KernelSpec
from builder.rehearse.evalapi_report import (
    ERROR_CLASSES,
    STATE_FILE,
    EvalApiReport,
    limit_notes,
    predict_steps,
    rerun_report,
    rows_in,
    verdict_name,
    verdict_reason,
)
from builder.run.deadlines import LimitCheck, WaitTracker, evaluation_checks
from builder.run.gateway import Gateway, evaluation_section, free_port, gateway_module, sandbox_env
from builder.run.isolation import GUEST_DIR as RUN_GUESTS
from builder.run.isolation import IsolationRequest
from builder.run.memory import MemoryWatch
from builder.run.sandbox import Mount, Sandbox, SandboxSpec, finish_run, prepare_sandbox
from builder.run.sandbox_files import read_regular
from builder.run.skew import Skew, interpreter_versions, recorded_imports, version_skews

GUEST = RUN_GUESTS / "evalapi_guest.py"
GUEST_DIR = "evalapi"  # under the sandbox's private dir: scripts, records, logs
GATEWAY_DIR = "gateway"  # under the sandbox root: the gateway container's working dir
GRACE_SECONDS = 2.0
LOG_TAIL_LINES = 20


# --- settings ----------------------------------------------------------------------------------

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
    expected, received = rows_in(error.get("details"))
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
        notes=tuple(notes + limit_notes(stats.get("slowest_seconds"), section.response_timeout_seconds, None, None)),
        limits=evaluation_checks(state, stats.get("slowest_seconds"), False, section.response_timeout_seconds, None, None),
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
    environment: KernelEnvironment = KernelEnvironment(())
    version_skew: tuple[Skew, ...] = ()  # what the notebook and gateway imported, against the image (builder.run.skew)
    time_limit_check: LimitCheck | None = None  # killed at its timeout: the notebook's CPU time and wait beside it
    steps: list[dict[str, Any]] = field(default_factory=list)  # predict as the projection fits it (evalapi_fit)
    left_behind: tuple[str, ...] = ()  # links and special files the run left, removed unread


def rehearse_rerun(notebook: Path, spec: KernelSpec, sandbox: SandboxSpec, root: Path, *,
                   timeout_seconds: float) -> RerunResult:
    """Run the scoring rerun in a new sandbox at ``root``, made as ``sandbox`` says (the dry run's scenario sandbox:
    its interpreter, variables, memory limit and mounts): the notebook blocks in ``serve()`` while the competition's
    gateway drives it from another process over the mounted competition data."""
    return rehearse_gateway_rerun(notebook, evaluation_section(spec), spec.competition.slug, sandbox.mounts, root,
                                  timeout_seconds=timeout_seconds, base=sandbox)


def rehearse_gateway_rerun(notebook: Path, section: EvaluationApiSection | Gateway, slug: str, mounts: tuple[Mount, ...],
                           root: Path, *, timeout_seconds: float, layout: Layout = Layout.CURRENT,
                           isolation: IsolationRequest = "auto", memory_bytes: int | None = None,
                           base: SandboxSpec | None = None) -> RerunResult:
    """:func:`rehearse_rerun` from the gateway's settings and the competition slug alone (``base``: the sandbox to
    make, else one with ``mounts``, ``layout``, ``isolation`` and ``memory_bytes``)."""
    spec = base or SandboxSpec(mounts=tuple(mounts), rerun=True, layout=layout, isolation=isolation, memory_bytes=memory_bytes)
    box = prepare_sandbox(replace(spec, rerun=True, extra_env={**spec.extra_env, **sandbox_env(section, free_port())}), root)
    competition = _competition_mount(box, slug)
    guest = _stage_guest(box.private_dir / GUEST_DIR, notebook)
    gateway_dir = box.root / GATEWAY_DIR
    gateway_dir.mkdir()
    paths = [str(competition / path) for path in section.gateway_paths]
    # The supervisor, the notebook and the gateway run on the kernel's interpreter (kkb env's with --image-env)
    argv = box.launcher() + [str(box.python), str(guest / GUEST.name), "supervise", "--notebook", str(guest / "notebook.py"),
                             "--working", str(box.working_dir), "--gateway-dir", str(gateway_dir),
                             "--competition", str(competition), "--gateway-module", gateway_module(section),
                             "--paths", json.dumps(paths), "--record", str(guest / "supervisor.json"),
                             "--grace", str(GRACE_SECONDS)]
    started = time.monotonic()
    timed_out, memory = _run_supervisor(argv, box.env, guest, timeout_seconds, box.memory_bytes)
    wall = time.monotonic() - started
    left = finish_run(box)  # nothing of the run is left: its links go before kkb reads what it wrote
    result = _rerun_result(box.root, box.working_dir, gateway_dir, guest, section, wall, timed_out, memory.peak, timeout_seconds)
    report = result.report
    if report.error_type == "SERVER_NEVER_STARTED" and report.serve_seconds is None and report.startup_limit_seconds:
        # serve() never reached: the notebook's whole run stands against the startup limit, its wait for a CPU beside it
        limit = float(report.startup_limit_seconds)
        report = replace(report, limits=(*report.limits, memory.waits.check(
            "the startup limit (serve() not reached)", limit, max(limit, wall - GRACE_SECONDS), finished=False)))
    return replace(result, report=report, isolation=box.isolation, isolation_note=f"{box.isolation_note}; root: {box.root_filesystem}",
                   memory_limit_bytes=box.memory_bytes, memory_accounting=memory.kind, memory_exceeded=memory.exceeded,
                   environment=box.environment, left_behind=left,
                   time_limit_check=memory.waits.check("the run's time limit", timeout_seconds, wall, finished=False)
                   if timed_out else None,
                   version_skew=version_skews(recorded_imports(box.private_dir), versions=interpreter_versions(box.python)))


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
    """The inference server's memory as the CSV path counts it (:class:`builder.run.memory.MemoryWatch` on the
    notebook's process tree, the gateway left out: it is Kaggle's other container), once its pid is known."""

    limit: int | None
    watch: MemoryWatch | None = None
    peak: int = 0
    kind: MemoryAccounting = MemoryAccounting.NONE
    exceeded: bool = False
    waits: WaitTracker = field(default_factory=WaitTracker)  # its wait for a CPU: a timeout on a busy machine

    def sample(self, record: Path, supervisor: int, kill: Callable[[], None]) -> None:
        if self.watch is None:
            pid = (_watched_record(record).get("pids") or {}).get("notebook")
            host = host_pid(supervisor, int(pid)) if pid else None
            if host is None:
                return
            try:
                self.watch = MemoryWatch(host, self.limit, kill)
            except psutil.Error:
                return
        processes = self.watch.tree()
        self.watch.tick(processes)
        self.waits.tick(processes)
        self.peak, self.kind, self.exceeded = self.watch.peak, self.watch.kind, self.watch.exceeded

    def close(self) -> None:
        if self.watch is not None:
            self.watch.tick(now=True)
            self.watch.close()
            self.peak, self.exceeded = self.watch.peak, self.watch.exceeded


def _watched_record(path: Path) -> dict[str, Any]:
    """The supervisor's record while the run goes: read as a regular file or not at all (the run could swap it)."""
    try:
        value = json.loads(read_regular(path) or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def host_pid(ancestor: int, pid: int) -> int | None:
    """The host's pid of the process a sandbox knows as ``pid``: in its own PID namespace (bwrap, kkb's launcher) the
    supervisor records the namespace's numbers, so find the descendant of ``ancestor`` whose innermost ``NSpid`` is
    ``pid`` (without a PID namespace the two are the same)."""
    try:
        descendants = psutil.Process(ancestor).children(recursive=True)
    except psutil.Error:
        return None
    for process in descendants:
        try:
            status = Path(f"/proc/{process.pid}/status").read_text()
        except OSError:
            continue
        ids = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [str(process.pid)])
        if ids and ids[-1] == str(pid):
            return int(process.pid)
    return None


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
            memory.sample(guest / "supervisor.json", process.pid, lambda: _kill_session(process))
            time.sleep(0.1)
    finally:
        if process.poll() is None:  # interrupted: leave nothing behind
            _kill_session(process)
        memory.close()
    return False, memory


def _kill_session(process: subprocess.Popen[bytes]) -> None:
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
    report = rerun_report((section.startup_limit_seconds, section.response_timeout_seconds), supervisor, gateway, result,
                          state, texts, timed_out, timeout,
                          submission if submission.is_file() else None)
    return RerunResult(report=report, root=root, working_dir=working, gateway_dir=gateway_dir,
                       submission=submission if submission.is_file() else None, wall_seconds=round(wall, 3),
                       timed_out=timed_out, peak_rss_bytes=peak, notebook_stdout=texts["notebook.stdout"],
                       notebook_stderr=texts["notebook.stderr"], gateway_log=texts["gateway.log"],
                       steps=predict_steps(state, gateway, peak))


# --- small helpers -------------------------------------------------------------------------------

def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


__all__ = ["ERROR_CLASSES", "EvalApiReport", "RerunResult", "commit_report",
           "notebook_script", "read_state", "rehearse_rerun", "rerun_report", "verdict_name", "verdict_reason"]
