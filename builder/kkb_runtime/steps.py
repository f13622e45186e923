"""Run each inference step in its own process.

A separate process per model is the only reliable way to give GPU memory back between models
(``del model; torch.cuda.empty_cache()`` leaves the CUDA context and fragments behind). A failing
step stops the notebook with the step's name and the tail of its stderr, which is more than Kaggle
will ever show.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from .config import StepSection
from .inputs import Inputs
from .timing import StepTiming
from .user_errors import user_error

STEPS_RECORD = "kkb_steps.json"
STEP_META_SUFFIX = ".meta.json"  # next to a step's output: measurements only the step's process can make
STDERR_TAIL_LINES = 40
PEAK_LINE = "[kkb] step '{name}' peak memory: {peak} bytes"


class StepFailed(RuntimeError):
    """A step exited non-zero, timed out, or wrote no output."""


@dataclass(frozen=True)
class StepResult:
    name: str
    output: str
    seconds: float
    peak_rss_bytes: int
    returncode: int
    peak_gpu_bytes: int | None = None  # what the step itself recorded (see write_step_meta); None on CPU
    rows: int | None = None  # card steps (write_step_meta): rows predicted, model load and inference times,
    load_seconds: float | None = None  # so the dry run can separate fixed from per-row cost
    infer_seconds: float | None = None
    batch_seconds: list[float] | None = None
    timing: StepTiming | None = None  # a card step's phases apart from its steady batches (kkb_runtime.timing)
    # The step's process tree's CPU time (user + system), the seconds its process waited, runnable, for a CPU
    # (other work had them: /proc/PID/schedstat), the 1-minute load average at its end and the CPUs it could
    # use: a projection on a busy machine takes out what the load added (builder.run.load).
    cpu_seconds: float | None = None
    run_delay_seconds: float | None = None
    load: float | None = None
    cpus: int | None = None
    features: dict[str, Any] | None = None  # a table card's feature table: computed here or read (kkb_runtime.features)
    inputs: dict[str, Any] | None = None  # what the card fed its model, when the dry run asked (kkb_runtime.cards.views)


def step_command(run: str, values: Mapping[str, str]) -> list[str]:
    """The argv of a step: placeholders filled, a leading ``python`` is this kernel's interpreter,
    and a relative script path (``python predict.py``) is found in the code dataset, because steps
    run in the working dir, where Kaggle lets them write."""
    argv = [part.format(**values) for part in shlex.split(run)]
    if argv and argv[0] in ("python", "python3"):
        argv[0] = sys.executable
        if len(argv) > 1 and argv[1].endswith(".py") and not Path(argv[1]).is_absolute():
            argv[1] = str(Path(values["code"]) / argv[1])
    return argv


def step_environment(inputs: Inputs, config_path: Path, name: str, out: Path, row_limit: int | None,
                     extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra or {})  # the step's own `env`, under kkb's variables (the spec refuses overriding those)
    env.update(
        KKB_CODE_DIR=str(inputs.code),
        KKB_WEIGHTS_DIR=str(inputs.weights or ""),
        KKB_COMPETITION_DIR=str(inputs.competition),
        KKB_KERNEL_CONFIG=str(config_path),
        KKB_STEP_NAME=name,
        KKB_STEP_OUT=str(out),
        PYTHONPATH=os.pathsep.join(filter(None, [str(inputs.code), env.get("PYTHONPATH", "")])),
        PYTHONUNBUFFERED="1",
    )
    env.pop("KKB_ROW_LIMIT", None)
    if row_limit is not None:
        env["KKB_ROW_LIMIT"] = str(row_limit)
    return env


def _pump(stream: IO[str], sink: IO[str], tail: collections.deque[str] | None) -> None:
    for line in stream:
        sink.write(line)
        sink.flush()
        if tail is not None:
            tail.append(line)


def run_step(step: StepSection, inputs: Inputs, config_path: Path, out_dir: Path,
             row_limit: int | None = None) -> StepResult:
    name = step.name
    out = out_dir / f"{name}.csv"
    out.unlink(missing_ok=True)
    Path(str(out) + STEP_META_SUFFIX).unlink(missing_ok=True)
    values = {"out": str(out), "code": str(inputs.code), "weights": str(inputs.weights or ""),
              "data": str(inputs.competition), "python": sys.executable}
    argv = step_command(step.run, values)
    timeout = step.timeout_seconds
    print(f"[kkb] step {name}: {shlex.join(argv)}", flush=True)
    started, cpu_before = time.perf_counter(), _children_cpu()
    tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
    process = subprocess.Popen(argv, cwd=inputs.working, env=step_environment(inputs, config_path, name, out, row_limit,
                                                                               step.env),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
    delay = _RunDelay(process.pid)
    pumps = [threading.Thread(target=_pump, args=(process.stdout, sys.stdout, None), daemon=True),
             threading.Thread(target=_pump, args=(process.stderr, sys.stderr, tail), daemon=True),
             threading.Thread(target=delay.follow, args=(process,), daemon=True)]
    for pump in pumps:
        pump.start()
    try:
        returncode = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise StepFailed(f"step '{name}' timed out after {timeout} s") from None
    finally:
        for pump in pumps:
            pump.join(timeout=5)
    seconds = time.perf_counter() - started
    # ru_maxrss of waited-for children is in KiB on Linux: the largest child so far.
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    if returncode != 0:
        # The user's own error first (file, line, code); the last line gives the dry run the step's peak, for
        # "Notebook Exceeded Allowed Compute".
        said = user_error("".join(tail), Path(inputs.code))
        raise StepFailed(f"step '{name}' failed with exit code {returncode}{f': {said}' if said else ''}\n"
                         f"--- stderr (last {len(tail)} lines) ---\n" + "".join(tail) + f"\n{PEAK_LINE.format(name=name, peak=peak)}")
    if not out.is_file():
        raise StepFailed(f"step '{name}' exited 0 but wrote no output at {out} (write it to $KKB_STEP_OUT or {{out}})")
    meta = read_step_meta(out)
    return StepResult(name=name, output=str(out), seconds=round(seconds, 3), peak_rss_bytes=peak, returncode=returncode,
                      peak_gpu_bytes=meta.get("peak_gpu_bytes"), rows=meta.get("rows"), load_seconds=meta.get("load_seconds"),
                      infer_seconds=meta.get("infer_seconds"), batch_seconds=meta.get("batch_seconds"),
                      timing=StepTiming.from_json(meta.get("timing")), cpu_seconds=round(_children_cpu() - cpu_before, 3),
                      run_delay_seconds=delay.seconds, load=round(os.getloadavg()[0], 2), cpus=_cpus(),
                      features=meta.get("features"), inputs=meta.get("inputs"))


class _RunDelay:
    """The step process's time spent runnable but waiting for a CPU, read until it exits (None where the
    kernel does not keep scheduler statistics)."""

    def __init__(self, pid: int) -> None:
        self.path = Path(f"/proc/{pid}/schedstat")
        self.seconds: float | None = None

    def follow(self, process: subprocess.Popen[str]) -> None:
        if not self._ours():  # a /proc of another PID namespace: its numbers are some other process's
            return
        while process.poll() is None:
            try:
                self.seconds = round(int(self.path.read_text().split()[1]) / 1e9, 3)
            except (OSError, IndexError, ValueError):
                return
            time.sleep(0.05)


    def _ours(self) -> bool:
        return parent_pid(self.path.parent) == os.getpid()


def parent_pid(proc_dir: Path) -> int:
    """The parent pid in ``proc_dir/stat`` (``/proc/<pid>``); -1 once the process is gone.

    The stat line is "pid (comm) state ppid ...", and the comm may hold spaces and parentheses."""
    try:
        with open(proc_dir / "stat", "rb") as handle:
            return int(handle.read().rpartition(b")")[2].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _cpus() -> int | None:
    """The CPUs this process may run on (Linux's affinity), else the machine's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _children_cpu() -> float:
    """User + system seconds of every waited-for descendant so far (a step and what it waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def write_step_meta(out: Path, **fields: Any) -> None:
    """Called by a step (``kkb_runtime predict`` does): GPU memory can only be read inside the process
    that used it, since CUDA gives it back when the process ends."""
    Path(str(out) + STEP_META_SUFFIX).write_text(json.dumps(fields))


def add_step_meta(out: Path, **fields: Any) -> None:
    """Add ``fields`` to what the step recorded so far (its runner writes the file first)."""
    write_step_meta(out, **{**read_step_meta(out), **fields})


def read_step_meta(out: Path) -> dict[str, Any]:
    try:
        meta = json.loads(Path(str(out) + STEP_META_SUFFIX).read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def record_steps(results: list[StepResult], working: Path) -> Path:
    """``kkb_steps.json`` in the working dir: the dry run reads per-step time and memory from it."""
    path = working / STEPS_RECORD
    path.write_text(json.dumps([asdict(result) for result in results], indent=1))
    return path
