"""How many tasks (processes and their threads) a sandboxed run may have: a fork bomb ends in ``EAGAIN``, not in a
machine that stops answering.

Two ways, the first this machine allows:

``pids cgroup``
    Where kkb runs as root (the kernel then shares root's user with the host, which ``RLIMIT_NPROC`` never limits):
    a child of kkb's own pids cgroup (cgroup v2 with the ``pids`` controller delegated, or the v1 ``pids``
    hierarchy) with ``pids.max``; the launcher joins it before anything else (``--join-cgroup``), so every process of
    the run is counted, and whatever is left in it when the run ends is killed.
``RLIMIT_NPROC``
    Everywhere else: the launcher sets it just before the command starts, inside the run's own user namespace, where
    only the run's tasks are counted.

``$KKB_SANDBOX_PROCESSES`` sets the number (default :data:`DEFAULT_TASKS`: far above what a notebook with DataLoader
workers and their threads starts, far below what takes a machine down).
"""

from __future__ import annotations

import atexit
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from builder.errors import DryRunError

TASKS_VARIABLE = "KKB_SANDBOX_PROCESSES"
DEFAULT_TASKS = 8192
CGROUP_ROOT = Path("/sys/fs/cgroup")
RECORD = "pids-cgroup"  # in the sandbox's private folder: the cgroup to remove with the sandbox
PREFIX = "kkb-run-"  # kkb-run-<pid of the kkb that made it>-<random>


@dataclass(frozen=True)
class ProcessLimit:
    """The run's task limit and how it is enforced."""

    tasks: int
    cgroup: Path | None = None  # the pids cgroup the run joins; None: RLIMIT_NPROC in the run's user namespace
    enforced: bool = True  # False: kkb runs as root and no pids cgroup could be made (the report says so)

    def describe(self) -> str:
        if self.cgroup is not None:
            return f"at most {self.tasks} tasks (a pids cgroup)"
        if self.enforced:
            return f"at most {self.tasks} tasks (RLIMIT_NPROC in the run's user namespace)"
        return f"no task limit enforced (kkb runs as root and no pids cgroup can be made here; {self.tasks} asked)"

    def launcher_options(self) -> list[str]:
        """kkb's launcher's options for this limit (``--join-cgroup`` also prefixes bubblewrap)."""
        return ["--processes", str(self.tasks), *self.join_options()]

    def join_options(self) -> list[str]:
        return ["--join-cgroup", str(self.cgroup / "cgroup.procs")] if self.cgroup is not None else []


def task_limit() -> int:
    """``$KKB_SANDBOX_PROCESSES``, else :data:`DEFAULT_TASKS`; a positive whole number."""
    text = os.environ.get(TASKS_VARIABLE, "").strip()
    if not text:
        return DEFAULT_TASKS
    if not text.isdigit() or int(text) < 1:
        raise DryRunError(f"{TASKS_VARIABLE}={text!r} is not a positive number of tasks",
                          hint=f"give the most processes and threads a sandboxed run may have (default {DEFAULT_TASKS})")
    return int(text)


def process_limit(private_dir: Path) -> ProcessLimit:
    """The limit for a run whose sandbox keeps its records in ``private_dir`` (a cgroup made there is recorded)."""
    tasks = task_limit()
    if os.geteuid() != 0:
        return ProcessLimit(tasks)
    parent = pids_cgroup()
    if parent is None:
        return ProcessLimit(tasks, enforced=False)
    _sweep(parent)
    folder = parent / f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        folder.mkdir()
        (folder / "pids.max").write_text(str(tasks))
    except OSError:
        _remove(folder)
        return ProcessLimit(tasks, enforced=False)
    (private_dir / RECORD).write_text(str(folder))
    if not _made:
        atexit.register(_remove_made)  # a sandbox laid out and never run (or whose caller died) leaves nothing behind
    _made.append(folder)
    return ProcessLimit(tasks, folder)


_made: list[Path] = []  # the cgroups this process made


def _remove_made() -> None:
    for folder in _made:
        if folder.is_dir():
            _remove(folder)


def _sweep(parent: Path) -> None:
    """Empty cgroups a kkb process that has ended left behind (killed before it could remove them)."""
    try:
        children = [child for child in parent.iterdir() if child.name.startswith(PREFIX)]
    except OSError:
        return
    for child in children:
        owner = child.name[len(PREFIX):].partition("-")[0]
        if owner.isdigit() and not _alive(int(owner)):
            try:
                child.rmdir()  # fails while a process is in it: then it is not stale
            except OSError:
                continue


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pids_cgroup(root: Path = CGROUP_ROOT) -> Path | None:
    """Our own pids cgroup where a child of it can be made: v2 with ``pids`` delegated, else the v1 hierarchy."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "" and "pids" in file_words(root / path.lstrip("/") / "cgroup.subtree_control"):
            candidate = root / path.lstrip("/")
        elif "pids" in controllers.split(","):
            candidate = root / "pids" / path.lstrip("/")
        else:
            continue
        if os.access(candidate, os.W_OK):
            return candidate
    return None


def file_words(path: Path) -> list[str]:
    """A cgroup file's words (its controllers), [] where it cannot be read."""
    try:
        return path.read_text().split()
    except OSError:
        return []


def release(private_dir: Path) -> None:
    """After the run: kill whatever is still in the run's pids cgroup (the namespaces' own end took the rest) and
    remove it."""
    record = private_dir / RECORD
    try:
        folder = Path(record.read_text().strip())
    except OSError:
        return
    if folder.name.startswith(PREFIX):
        _remove(folder)
    record.unlink(missing_ok=True)


def _remove(folder: Path) -> None:
    for _ in range(50):
        try:
            pids = [int(pid) for pid in (folder / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pids = []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                continue
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if not pids:
                return  # not ours to remove (a file system that is no cgroup)
            time.sleep(0.02)  # killed, not yet gone


__all__ = ["DEFAULT_TASKS", "TASKS_VARIABLE", "ProcessLimit", "process_limit", "release", "task_limit"]
