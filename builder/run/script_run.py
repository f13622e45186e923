"""A script kernel run as Kaggle runs one: ``python /kaggle/src/script.py`` from ``/kaggle/working``.

Kaggle keeps a script kernel's code at ``/kaggle/src/script.py`` and runs it with the image's ``python``, working
folder ``/kaggle/working``, so ``__file__`` is that path; what it prints is the run's log, and an uncaught exception
ends the process with a traceback on stderr and a non-zero exit (Kaggle's ``Notebook Threw Exception``). Here the
script is copied to the sandbox root's ``src/`` (``/kaggle/src`` inside the namespaces; the portable sandbox has no
``/kaggle`` and runs ``$KKB_KAGGLE_ROOT/src/script.py``) and started behind the sandbox's
launcher, measured and killed by the same monitor as a notebook's kernel (memory, ``/kaggle/working``'s size, the
timeout). The evidence the dry run keeps is the script as it ran (``__script__.py``, Kaggle's name in a run's output)
and the log.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import psutil

from builder.errors import DryRunError
from builder.run.execute import TRACEBACK_LINES, ExecutionResult, RunLog, Watched, tail
from builder.run.sandbox import Sandbox, SandboxSpec, input_snapshot, input_writes, prepare_sandbox

SOURCE_DIR = "src"  # /kaggle/src: where Kaggle keeps a script kernel's code
SCRIPT_NAME = "script.py"
EXECUTED_SCRIPT = "__script__.py"  # the name Kaggle gives the script in a run's output
KAGGLE_SCRIPT = f"/kaggle/{SOURCE_DIR}/{SCRIPT_NAME}"
_TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$")


def execute_script(script: Path, sandbox: SandboxSpec, root: Path,
                   progress: Callable[[str], None] | None = None) -> ExecutionResult:
    """Run ``script`` as Kaggle runs a script kernel, in a new sandbox at ``root`` (left in place for the caller)."""
    if not Path(script).is_file():
        raise DryRunError(f"{script}: script not found", hint="build the kernel first (kkb build)")
    box = prepare_sandbox(sandbox, root)
    source = box.root / SOURCE_DIR
    source.mkdir()
    shutil.copyfile(script, source / SCRIPT_NAME)
    shutil.copyfile(script, box.outputs_dir / EXECUTED_SCRIPT)  # what is kept: where the kernel never writes
    run = _ScriptRun(box, sandbox.timeout_seconds, sandbox.working_limit_bytes)
    run.log.progress = progress
    path = KAGGLE_SCRIPT if box.kaggle_paths else str(source / SCRIPT_NAME)
    run.execute([*box.launcher(), str(box.python), path])
    return run.result(path)


class _ScriptRun(Watched):
    def __init__(self, box: Sandbox, timeout: float | None, working_limit: int | None) -> None:
        self.log = RunLog(time.monotonic())
        super().__init__(box, timeout, working_limit, self.log)
        self.returncode: int | None = None
        self.wall = 0.0

    def execute(self, argv: list[str]) -> None:
        inputs = input_snapshot(self.box) if self.box.isolation == "python" else None
        try:
            process = subprocess.Popen(argv, cwd=self.box.working_dir, env=self.box.env, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise DryRunError(f"the script could not start ({self.box.isolation} sandbox): {exc}",
                              hint="to use the portable sandbox, set KKB_SANDBOX_ISOLATION=python") from None
        readers = [threading.Thread(target=self._read, args=(stream, name), daemon=True)
                   for stream, name in ((process.stdout, "stdout"), (process.stderr, "stderr"))]
        for reader in readers:
            reader.start()
        try:
            self.watch(process.pid)  # the same monitor and limits as a notebook's kernel
        except psutil.Error:
            pass  # it ended already: its exit code says how
        self.returncode = process.wait()
        self.wall = time.monotonic() - self.log.started
        for reader in readers:
            reader.join(timeout=5)
        self.stop_watching()
        self.seal()
        if inputs is not None:
            written = input_writes(self.box, inputs)
            if written:
                self.log._log("stderr", f"[kkb sandbox] the script wrote into /kaggle/input ({', '.join(written[:5])}): "
                                        "on Kaggle that fails with 'Read-only file system'\n")

    def _read(self, stream: IO[bytes] | None, name: str) -> None:
        if stream is None:
            return
        for line in iter(stream.readline, b""):
            self.log._log(name, line.decode("utf-8", errors="replace"))
        stream.close()

    def result(self, script: str) -> ExecutionResult:
        ok = self.returncode == 0 and not (self.timed_out or self.disk_exceeded or self.memory_exceeded)
        ename, evalue, traceback = (None, None, None) if ok else self._error(script)
        return self.measured(self.box.outputs_dir / EXECUTED_SCRIPT, ok, None, ename, evalue, traceback, self.wall)

    def _error(self, script: str) -> tuple[str, str, str | None]:
        """(exception name, message, traceback tail): a limit that ended it, the script's traceback, else its exit."""
        stderr = "".join(entry["data"] for entry in self.log.entries if entry["stream_name"] == "stderr")
        limit = self.limit_reason()
        if limit is not None:
            return ("Timeout" if self.timed_out else "MemoryLimit"), limit, tail(stderr, TRACEBACK_LINES) or None
        raised = script_exception(stderr, script)
        if raised is not None:
            return raised
        how = f"killed by signal {-self.returncode}" if self.returncode is not None and self.returncode < 0 else \
            f"exit code {self.returncode}"
        return "ScriptExited", f"the script ended with {how}", tail(stderr, TRACEBACK_LINES) or None


def script_exception(stderr: str, script: str) -> tuple[str, str, str] | None:
    """(name, message, traceback tail) of the exception that ended ``script``, from what Python printed on ``stderr``.

    The traceback is the last one whose first frame is the script's top level: a message may quote another traceback
    (a failed step's stderr). Python names an exception outside ``builtins`` by its module
    (``kkb_runtime.steps.StepFailed``): the name kept is the class's, as a notebook's error reports it. A message of
    several lines keeps them all."""
    start = stderr.rfind(f'{_TRACEBACK}\n  File "{script}"')
    if start < 0:
        return None
    lines = stderr[start:].rstrip("\n").splitlines()[1:]
    body = next((index for index, line in enumerate(lines) if line and not line.startswith(" ")), None)
    match = _EXCEPTION_LINE.match(lines[body]) if body is not None else None
    if body is None or match is None:
        return None
    message = "\n".join([match.group(2) or "", *lines[body + 1:]]).strip("\n")
    return match.group(1).rsplit(".", 1)[-1], message, tail(stderr[start:], TRACEBACK_LINES)


__all__ = ["EXECUTED_SCRIPT", "KAGGLE_SCRIPT", "execute_script", "script_exception"]
