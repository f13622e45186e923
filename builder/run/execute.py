"""Run a notebook on a real ipykernel inside a Kaggle-like sandbox, and measure it.

The kernel is this interpreter (``sys.executable``: the venv kkb runs in) started from a kernelspec
written into the sandbox, behind the namespace launcher when the sandbox has one. While it runs, a
thread samples the resident memory of the kernel and every process below it (and GPU memory through
``nvidia-smi`` where there is one), and a watchdog kills the whole process tree when the run's
timeout passes: a hung kernel, or a step it started, cannot outlive the run. The executed notebook
is written even when the run fails (papermill's rule: the evidence always survives).
"""

from __future__ import annotations

import json
import re
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import psutil
from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_core.utils import run_sync
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

from builder.errors import DryRunError
from builder.kkb_runtime.vocabulary import MemoryAccounting
from builder.project.kaggle_env import KernelEnvironment
from builder.run.deadlines import LimitCheck, time_owed
from builder.run.monitor import RunMonitor
from builder.run.sandbox import Sandbox, SandboxSpec, finish_run, input_snapshot, input_writes, prepare_sandbox
from builder.run.skew import Skew, interpreter_versions, recorded_imports, version_skews

EXECUTED_NOTEBOOK = "__notebook__.ipynb"  # the name Kaggle gives the executed notebook in a run's output
STEPS_RECORD = "kkb_steps.json"  # written by kkb_runtime.steps in the working dir
KERNEL_NAME = "kkb-sandbox"
STARTUP_SECONDS = 60
TRACEBACK_LINES = 25
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# A unix socket path has at most 107 bytes; the kernel's ipc sockets need room for "-<port>".
IPC_PATH_LIMIT = 90


@dataclass(frozen=True)
class ExecutionResult:
    root: Path
    working_dir: Path
    executed_notebook: Path
    ok: bool
    timed_out: bool
    failed_cell: int | None
    ename: str | None
    evalue: str | None
    traceback_tail: str | None
    wall_seconds: float
    peak_rss_bytes: int
    peak_gpu_bytes: int | None
    log: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    isolation: str = "python"
    isolation_note: str = ""
    memory_limit_bytes: int | None = None  # the run's limit (the machine shape's RAM or --memory), None: none
    working_bytes: int = 0  # what the run left in /kaggle/working (largest seen while it ran)
    working_limit_bytes: int | None = None
    disk_exceeded: bool = False  # killed: /kaggle/working grew past what Kaggle keeps
    mounts: tuple[tuple[Path, Path], ...] = ()  # (host source, target under root/input): what the kernel saw there
    memory_accounting: MemoryAccounting = MemoryAccounting.NONE  # how peak_rss_bytes was counted (builder.run.memory)
    memory_exceeded: bool = False  # the run was ended by the memory limit (killed, as Kaggle's OOM killer ends it)
    memory_step: str | None = None  # the kkb step running when the limit ended the run
    root_filesystem: str = ""  # how the container's file system was made writable (builder.run.overlay)
    version_skew: tuple[Skew, ...] = ()  # imported packages whose version differs from the image's (builder.run.skew)
    environment: KernelEnvironment = KernelEnvironment(())  # what the kernel's environment held (builder.project.kaggle_env)
    time_limit_check: LimitCheck | None = None  # killed at its timeout: the CPU time and the wait for a CPU beside it
    left_behind: tuple[str, ...] = ()  # links and special files the run left, removed unread (builder.run.sandbox_files)


def execute_notebook(notebook: Path, sandbox: SandboxSpec, root: Path,
                     progress: Callable[[str], None] | None = None) -> ExecutionResult:
    """Execute ``notebook`` in a new sandbox at ``root``; the sandbox is left in place for the caller.

    ``progress`` is called with each ``[kkb] step ...`` line the kernel prints (a step starting).
    """
    nb = _read_notebook(Path(notebook))
    box = prepare_sandbox(sandbox, root)
    with tempfile.TemporaryDirectory(prefix="kkb-ipc-") as short_dir:
        run = _Run(nb, box, _kernel_manager(box, Path(short_dir)), sandbox.timeout_seconds, sandbox.working_limit_bytes)
        run.client.progress = progress
        run.execute()
    return run.result()


def _read_notebook(path: Path) -> nbformat.NotebookNode:
    if not path.is_file():
        raise DryRunError(f"{path}: notebook not found", hint="build the kernel first (kkb build)")
    try:
        notebook: nbformat.NotebookNode = nbformat.read(path, as_version=4)
    except Exception as exc:  # nbformat raises several unrelated types for a bad file
        raise DryRunError(f"{path}: not a readable notebook: {exc}", hint="rebuild it with kkb build") from None
    return notebook


# --- the kernel ---------------------------------------------------------------------------------


def _kernel_manager(box: Sandbox, short_dir: Path) -> AsyncKernelManager:
    """A kernel on this interpreter, in the sandbox's namespaces; nbclient starts it with the sandbox's env.

    Async, as nbclient expects: with a blocking client its wait for output blocks the event loop, and
    it would never notice that the watchdog killed the kernel.
    """
    spec_dir = box.private_dir / "kernels"
    options: dict[str, Any] = {}
    binds: tuple[Path, ...] = ()
    if box.isolation != "python":
        # No TCP between namespaces: the kernel's sockets are unix sockets, reachable through the file system.
        ipc = box.private_dir / "ipc" / "k"
        if len(str(ipc)) >= IPC_PATH_LIMIT:
            ipc, binds = short_dir / "k", (short_dir,)  # outside the root: the kernel must see it at its path
        ipc.parent.mkdir(parents=True, exist_ok=True)
        options = {"transport": "ipc", "ip": str(ipc)}
    _write_kernelspec(spec_dir / KERNEL_NAME, box.launcher(binds) + [str(box.python), "-m", "ipykernel_launcher", "-f", "{connection_file}"])
    return AsyncKernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec_dir)]),
                              connection_file=str(box.private_dir / "connection.json"), **options)


def _write_kernelspec(folder: Path, argv: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    spec = {"argv": argv, "display_name": "Python 3 (kkb sandbox)", "language": "python",
            "metadata": {"debugger": False}}
    (folder / "kernel.json").write_text(json.dumps(spec, indent=1))


def _stop_kernel(km: AsyncKernelManager, kc: Any) -> None:
    """Close the client's channels and reap the (already killed) kernel; never raises."""
    try:
        if kc is not None:
            kc.stop_channels()
        if km.has_kernel:
            run_sync(km.shutdown_kernel)(now=True)
    except Exception:
        pass


# --- one run ------------------------------------------------------------------------------------


class RunLog:
    """Kaggle's log of a run: every stream output with its time since the run started; the kkb step running;
    a progress line per step started or done (a notebook's cells and a script's output alike)."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.entries: list[dict[str, Any]] = []
        self.current_cell: int | None = None
        self.current_step: str | None = None  # the kkb step last started (named when the memory limit ends the run)
        self.progress: Callable[[str], None] | None = None

    def _log(self, stream: str, text: str) -> None:
        self.entries.append({"stream_name": stream, "time": round(time.monotonic() - self.started, 3), "data": text})
        for line in text.splitlines():
            if line.startswith("[kkb] step ") and not line.startswith("[kkb] step '"):  # not "step 'x' peak memory"
                self.current_step = line[len("[kkb] step "):].partition(": ")[0]
        if self.progress is not None:
            where = f"cell {self.current_cell}" if self.current_cell is not None else "script"
            for line in text.splitlines():
                if line.startswith("[kkb] step ") and " peak memory: " in line:  # a failed step's last line
                    self.progress(f"{where}: {line[6:].partition(' peak memory: ')[0]} failed")
                elif line.startswith("[kkb] step "):  # "step NAME: argv" when it starts, "step NAME: 1.2 s" when done
                    name, _, what = line[6:].partition(": ")
                    done = what.endswith(" s") and what[:-2].replace(".", "", 1).isdigit()
                    self.progress(f"{where}: {name} {'done in ' + what if done else 'started'}")


class _Client(RunLog, NotebookClient):
    """nbclient, plus Kaggle's log: every stream output with its time since the run started."""

    def __init__(self, nb: nbformat.NotebookNode, started: float, **kwargs: Any) -> None:
        NotebookClient.__init__(self, nb, **kwargs)
        RunLog.__init__(self, started)
        self.on_cell_start = self._cell_started

    def _cell_started(self, cell: Any, cell_index: int) -> None:
        self.current_cell = cell_index

    def output(self, outs: list[Any], msg: dict[str, Any], display_id: str | None, cell_index: int) -> Any:
        content = msg.get("content", {})
        if msg["msg_type"] == "stream":
            self._log(content.get("name", "stdout"), content.get("text", ""))
        elif msg["msg_type"] == "error":
            self._log("stderr", strip_ansi("\n".join(content.get("traceback", []))) + "\n")
        return super().output(outs, msg, display_id, cell_index)


class Watched:
    """What every run has, whatever runs (a notebook's kernel, a script): the monitor of its process tree, the limits
    that end it (the timeout, the memory, /kaggle/working's size), why it ended, and its :class:`ExecutionResult`."""

    def __init__(self, box: Sandbox, timeout: float | None, working_limit: int | None, run_log: RunLog) -> None:
        self.box, self.timeout, self.working_limit, self.run_log = box, timeout, working_limit, run_log
        self.timed_out = self.disk_exceeded = self.memory_exceeded = False
        self.memory_step: str | None = None
        self.monitor: RunMonitor | None = None
        self.watchdog: threading.Timer | None = None
        self.watch_started = time.monotonic()
        self.left_behind: tuple[str, ...] = ()

    def watch(self, pid: int) -> None:
        """Watch ``pid``'s process tree, and start the clock for the timeout."""
        self.monitor = RunMonitor(pid, self.box.working_dir, self.working_limit, self._on_disk_full, self.box.memory_bytes,
                                self._on_memory_full)
        self.monitor.start()
        self.watch_started = time.monotonic()
        if self.timeout:
            self._start_watchdog(self.timeout)

    def _start_watchdog(self, seconds: float) -> None:
        self.watchdog = threading.Timer(seconds, self._on_timeout)
        self.watchdog.daemon = True
        self.watchdog.start()

    def stop_watching(self) -> None:
        """Stop the clock; kill everything the run started (on Kaggle the container ends with the run)."""
        if self.watchdog:
            self.watchdog.cancel()
        if self.monitor:
            self.monitor.stop()
            self.monitor.sample(memory_now=True)
            self.monitor.sample_disk()
            self.monitor.kill_all()
            self.monitor.memory.close()
            self.memory_exceeded = self.memory_exceeded or self.monitor.memory.exceeded

    def seal(self) -> None:
        """Once nothing of the run is left running: its links and special files removed, before kkb reads anything."""
        self.left_behind = finish_run(self.box)

    def _on_timeout(self) -> None:
        """The time limit by the wall clock; a run that waited for CPUs goes on for what it is owed
        (:func:`builder.run.deadlines.time_owed`), then is killed."""
        if self.monitor and self.timeout:
            owed = time_owed(self.timeout, time.monotonic() - self.watch_started, self.monitor.waits.waited)
            if owed > 0:
                self._start_watchdog(owed)
                return
        self.timed_out = True
        if self.monitor:
            self.monitor.kill_all()

    def _on_disk_full(self) -> None:
        self.disk_exceeded = True
        if self.monitor:
            self.monitor.kill_all()

    def _on_memory_full(self) -> None:
        """The run's memory passed the limit: end all of it, as Kaggle's OOM killer ends the container."""
        self.memory_exceeded = True
        self.memory_step = self.run_log.current_step
        if self.monitor:
            self.monitor.kill_all()

    def limit_reason(self) -> str | None:
        """Why a limit ended the run (the timeout, the memory), in words; None when none did."""
        if self.timed_out:
            return f"the run exceeded its timeout of {self.timeout:g} s and was killed with its child processes"
        if self.memory_exceeded and self.monitor:
            watch = self.monitor.memory
            return (f"the run's memory ({watch.kind}) reached {watch.exceeded_at or watch.peak} bytes, past the limit of "
                    f"{watch.limit} bytes: the whole run was killed, as Kaggle's OOM killer ends the container")
        return None

    def measured(self, executed: Path, ok: bool, failed_cell: int | None, ename: str | None, evalue: str | None,
                 traceback_tail: str | None, wall_seconds: float) -> ExecutionResult:
        """The run's result: how it ended, the steps the runtime recorded, memory as it was counted."""
        box, monitor = self.box, self.monitor
        steps = read_steps(box.working_dir)
        sampled = monitor.peak_rss if monitor else 0
        accounting = monitor.memory.kind if monitor else MemoryAccounting.NONE
        # ru_maxrss counts shared pages in full: only where nothing better was sampled does it raise the peak.
        step_peaks = [int(step.get("peak_rss_bytes") or 0) for step in steps] if accounting == MemoryAccounting.NONE else []
        gpu = [int(step["peak_gpu_bytes"]) for step in steps if step.get("peak_gpu_bytes")]
        if monitor and monitor.peak_gpu is not None:
            gpu.append(monitor.peak_gpu)
        return ExecutionResult(
            root=box.root, working_dir=box.working_dir, executed_notebook=executed, ok=ok, timed_out=self.timed_out,
            failed_cell=failed_cell, ename=ename, evalue=evalue, traceback_tail=traceback_tail,
            wall_seconds=round(wall_seconds, 3), peak_rss_bytes=max([sampled, *step_peaks]),
            peak_gpu_bytes=max(gpu) if gpu else None, log=self.run_log.entries, steps=steps, isolation=box.isolation,
            isolation_note=f"{box.isolation_note}; root: {box.root_filesystem}", memory_limit_bytes=box.memory_bytes,
            working_bytes=monitor.working_bytes if monitor else 0, working_limit_bytes=self.working_limit,
            disk_exceeded=self.disk_exceeded, mounts=box.mounts, memory_accounting=accounting,
            memory_exceeded=self.memory_exceeded,
            memory_step=self.memory_step or (self.run_log.current_step if self.memory_exceeded else None),
            root_filesystem=box.root_filesystem,
            version_skew=version_skews(recorded_imports(box.private_dir), versions=interpreter_versions(box.python)),
            environment=box.environment, left_behind=self.left_behind,
            time_limit_check=monitor.waits.check("the run's time limit", float(self.timeout), wall_seconds,
                                                 finished=not self.timed_out)
            if monitor and self.timeout and (self.timed_out or wall_seconds > self.timeout) else None,
        )


class _Run(Watched):
    def __init__(self, nb: nbformat.NotebookNode, box: Sandbox, km: AsyncKernelManager, timeout: float | None,
                 working_limit: int | None = None) -> None:
        self.nb, self.km = nb, km
        self.started = time.monotonic()
        self.wall = 0.0
        self.error: BaseException | None = None
        self.client = _Client(nb, self.started, km=km, timeout=int(timeout) + 1 if timeout else None,
                              startup_timeout=STARTUP_SECONDS, allow_errors=False, record_timing=True,
                              resources={"metadata": {"path": str(box.working_dir)}})
        super().__init__(box, timeout, working_limit, self.client)
        self.client.on_notebook_start = self._kernel_ready

    def _kernel_ready(self, notebook: Any = None) -> None:
        """nbclient started the kernel: watch its process tree, and start the clock for the timeout."""
        try:
            self.watch(self.km.provisioner.pid)  # type: ignore[union-attr]
        except (psutil.Error, AttributeError, TypeError):
            return  # it died already: nbclient reports the dead kernel

    def execute(self) -> None:
        inputs = input_snapshot(self.box) if self.box.isolation == "python" else None
        try:
            with self.box.kernel_log.open("ab") as log:  # the kernel's own stdout/stderr, for startup failures
                self.client.execute(env=self.box.env, cwd=str(self.box.working_dir), stdout=log, stderr=log)
        except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
            self.error = exc
        except RuntimeError as exc:  # the kernel died before it answered
            if not self.timed_out:
                raise _startup_error(self.box, str(exc)) from None
            self.error = exc
        finally:
            self._finish()
            self.seal()
            if inputs is not None:
                self._report_input_writes(inputs)
            self._write_notebook()

    def _finish(self) -> None:
        """Stop the clock; kill the kernel and everything it started (on Kaggle the container ends with the run)."""
        if not self.wall:
            self.wall = time.monotonic() - self.started
        self.stop_watching()
        _stop_kernel(self.km, self.client.kc)
        self.client.kc = None

    def _report_input_writes(self, before: dict[str, tuple[int, int]]) -> None:
        """Root writes through file modes: say so in the log, since on Kaggle the write would have failed."""
        written = input_writes(self.box, before)
        if written:
            shown = ", ".join(written[:5]) + (", ..." if len(written) > 5 else "")
            self.client._log("stderr", f"[kkb sandbox] the kernel wrote into /kaggle/input ({shown}): on Kaggle that fails "
                                       "with 'Read-only file system'; this sandbox could not stop it (no namespaces, running as root)\n")

    @property
    def failed_cell(self) -> int | None:
        return self.client.current_cell if self.error is not None else None

    def _write_notebook(self) -> None:
        nb = self.nb
        nb.metadata["kkb_execution"] = {"ok": self.error is None, "timed_out": self.timed_out,
                                         "wall_seconds": round(self.wall, 3), "isolation": self.box.isolation,
                                         "failed_cell": self.failed_cell}
        if self.error is not None:
            nb.cells.insert(0, nbformat.v4.new_markdown_cell(self._banner()))
        nbformat.write(nb, self.box.outputs_dir / EXECUTED_NOTEBOOK)
        if self.error is not None:
            nb.cells.pop(0)  # keep cell indices as in the source notebook

    def _banner(self) -> str:
        what = "timed out" if self.timed_out else f"failed: `{self._ename()}`"
        return f"**kkb: this run {what} in cell {self.failed_cell}** (cell numbers count from 0, without this banner)."

    def _ename(self) -> str | None:
        if self.timed_out:
            return "Timeout"
        if isinstance(self.error, CellExecutionError):
            return self.error.ename
        return type(self.error).__name__ if self.error is not None else None

    def _evalue(self) -> str | None:
        limit = self.limit_reason()
        if limit is not None:
            return limit
        if isinstance(self.error, CellExecutionError):
            return self.error.evalue
        return str(self.error) if self.error is not None else None

    def _traceback(self) -> str | None:
        if isinstance(self.error, CellExecutionError) and not self.timed_out:
            return tail(strip_ansi(self.error.traceback), TRACEBACK_LINES)
        if self.error is not None:
            stderr = "".join(entry["data"] for entry in self.client.entries if entry["stream_name"] == "stderr")
            return tail(stderr, TRACEBACK_LINES) or None
        return None

    def result(self) -> ExecutionResult:
        return self.measured(self.box.outputs_dir / EXECUTED_NOTEBOOK, self.error is None, self.failed_cell, self._ename(),
                             self._evalue(), self._traceback(), self.wall)


def _startup_error(box: Sandbox, what: str) -> DryRunError:
    try:
        log = tail(box.kernel_log.read_text(errors="replace"), 15)
    except OSError:
        log = ""
    return DryRunError(f"the kernel did not start ({box.isolation} sandbox): {what}" + (f"\n{log}" if log else ""),
                       hint=f"full kernel log: {box.kernel_log}; to use the portable sandbox, set KKB_SANDBOX_ISOLATION=python")


def read_steps(working_dir: Path) -> list[dict[str, Any]]:
    """Per-step records of kkb's runtime (``kkb_steps.json``: a list, or ``{"steps": [...]}``); [] if absent."""
    path = Path(working_dir) / STEPS_RECORD
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    steps = data.get("steps", []) if isinstance(data, dict) else data
    return [step for step in steps if isinstance(step, dict)] if isinstance(steps, list) else []


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


def tail(text: str, lines: int) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])
