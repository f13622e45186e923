"""One Python program run inside a sandbox, as a kernel's step runs: bounded in time, naming what ran out of it.

The build runs the user's code this way (``builder.bundle.card_run``): in the sandbox :func:`builder.run.sandbox.
prepare_sandbox` lays out for the dry run, with the kernel's environment (:func:`builder.run.sandbox.kernel_environment`,
the one function every sandboxed run takes it from), ``/kaggle/working`` as the working folder and the inputs
mounted where Kaggle mounts them. :func:`run_in` starts ``python ARGS`` there and watches the program's calls
(:mod:`builder.run.calls`): one that runs longer than ``call_seconds`` ends the run and is named, as is the call a
crash (a signal) ended. Every process of the run is killed when it ends, however it ends.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import psutil

from builder.kkb_runtime.vocabulary import Layout
from builder.run.calls import CALLS_VARIABLE, Call, open_calls
from builder.run.sandbox import Sandbox, finish_run, mount_path

POLL_SECONDS = 0.05
TAIL_CHARACTERS = 4000
CALLS_FILE = "calls.jsonl"
# A program killed by a signal: a direct child's status is -N; a launcher in between exits 128 + N, as a shell does.
SIGNAL_EXIT = 128


@dataclass(frozen=True)
class ProgramRun:
    """How a sandboxed program ended."""

    returncode: int
    seconds: float
    stdout: str  # the last characters of each stream
    stderr: str
    isolation: str  # which sandbox ran it (builder.run.isolation)
    isolation_note: str
    timed_out_call: Call | None = None  # the call that ran past its bound (the run was ended)
    timed_out: bool = False  # the whole run ran past its bound, outside any call
    open_call: Call | None = None  # the innermost call still running when the program ended (a crash names it)
    left_behind: tuple[str, ...] = ()  # links and special files the program left in the sandbox, removed unread

    @property
    def signal(self) -> str | None:
        """The signal that ended the program (``SIGSEGV``), None when it exited."""
        number = -self.returncode if self.returncode < 0 else self.returncode - SIGNAL_EXIT if self.returncode > SIGNAL_EXIT else 0
        if not number or self.timed_out or self.timed_out_call is not None:
            return None
        try:
            return signal.Signals(number).name
        except ValueError:
            return f"signal {number}"


def inside(box: Sandbox, target: str, layout: Layout) -> Path:
    """Where the program sees the input mounted at ``target`` (``competitions/<slug>``): ``/kaggle/input/...`` where the
    sandbox has Kaggle's paths, else under its root (the portable mode)."""
    relative = mount_path(target, layout)
    return (Path("/kaggle/input") if box.kaggle_paths else box.input_dir) / PurePosixPath(relative)


def run_in(box: Sandbox, args: Sequence[str], *, env: Mapping[str, str] | None = None, binds: Sequence[Path] = (),
           call_seconds: float, run_seconds: float) -> ProgramRun:
    """``python ARGS`` in ``box`` (its interpreter, environment and working folder, plus ``env``); ``binds``: host
    folders the program writes at their own paths."""
    calls = box.private_dir / CALLS_FILE
    calls.write_text("")
    environ = {**box.env, **(env or {}), CALLS_VARIABLE: str(calls)}
    argv = [*box.launcher(tuple(binds)), str(box.python), *args]
    out, err = box.outputs_dir / "program.stdout", box.outputs_dir / "program.stderr"  # where the program never was
    started = time.monotonic()
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(argv, env=environ, cwd=box.working_dir, stdin=subprocess.DEVNULL, stdout=stdout,
                                   stderr=stderr, start_new_session=True)
    timed_out_call, timed_out = None, False
    try:
        while process.poll() is None:
            current = open_calls(calls)
            if current and time.monotonic() - current[-1].started > call_seconds:
                timed_out_call = current[-1]
                break
            if time.monotonic() - started > run_seconds:
                timed_out = True
                break
            time.sleep(POLL_SECONDS)
    finally:
        kill_tree(process)
    still_open = open_calls(calls)
    left = finish_run(box)
    return ProgramRun(returncode=process.returncode, seconds=round(time.monotonic() - started, 3),
                      stdout=_tail(out), stderr=_tail(err), isolation=str(box.isolation),
                      isolation_note=box.isolation_note, timed_out_call=timed_out_call, timed_out=timed_out,
                      open_call=still_open[-1] if still_open else None, left_behind=left)


def kill_tree(process: subprocess.Popen[bytes]) -> None:
    """Kill the program and everything it started (its session, and any process below it that left the session)."""
    try:
        victims = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        victims = []
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for victim in victims:
        try:
            victim.kill()
        except psutil.Error:
            pass
    process.wait()


def _tail(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-TAIL_CHARACTERS:]
    except OSError:
        return ""


__all__ = ["ProgramRun", "inside", "kill_tree", "run_in"]
