"""Measuring a kernel's run and ending it: its process tree, memory as Kaggle's container counts it, GPU memory,
the size of ``/kaggle/working``, its wait for a CPU; every process it ever started killed at its end."""

from __future__ import annotations

import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from builder.run.deadlines import WaitTracker
from builder.run.memory import MemoryWatch

SAMPLE_SECONDS = 0.1
DISK_SAMPLE_SECONDS = 2.0
KILL_WAIT_SECONDS = 5.0
GPU_SAMPLE_SECONDS = 1.0


class RunMonitor:
    """Samples the kernel's process tree: its memory as Kaggle counts it, GPU memory, every process ever
    seen (to kill it).

    Memory is counted by :class:`builder.run.memory.MemoryWatch` (a cgroup, or summed PSS: shared
    pages once) and the whole run is ended past the limit (``on_memory_full``), as the container's OOM
    killer ends it. Only where neither works is summed RSS sampled, for the report, and kkb's runtime's
    per-step peaks (``ru_maxrss``) are taken into the peak too.
    """

    def __init__(self, pid: int, working: Path | None = None, working_limit: int | None = None,
                 on_disk_full: Callable[[], None] | None = None, memory_limit: int | None = None,
                 on_memory_full: Callable[[], None] | None = None) -> None:
        self.working, self.working_limit, self.on_disk_full = working, working_limit, on_disk_full
        self.working_bytes = 0
        self._last_disk = 0.0
        self.memory = MemoryWatch(pid, memory_limit, on_memory_full or (lambda: None))
        self.root = self.memory.root
        self.seen = self.memory.seen
        self.peak_gpu: int | None = None
        self.waits = WaitTracker()  # the tree's wait for a CPU: a timeout on a busy machine is judged by it
        self._gpu = GpuSampler()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="kkb-monitor", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(SAMPLE_SECONDS)

    @property
    def peak_rss(self) -> int:
        return self.memory.peak

    def sample(self, memory_now: bool = False) -> None:
        """The process tree every tick (cheap: it remembers every process, to kill it); the memory when due."""
        processes = self._tree()
        self.memory.tick(processes, now=memory_now)
        self.waits.tick(processes, now=memory_now)
        gpu = self._gpu.sample({process.pid for process in processes})
        if gpu is not None:
            self.peak_gpu = max(self.peak_gpu or 0, gpu)
        if self.working is not None and time.monotonic() - self._last_disk >= DISK_SAMPLE_SECONDS:
            self.sample_disk()

    def sample_disk(self) -> None:
        """The size of /kaggle/working; past the limit the run is killed, as a full disk stops it on Kaggle."""
        self._last_disk = time.monotonic()
        if self.working is None:
            return
        self.working_bytes = max(self.working_bytes, folder_bytes(self.working))
        if self.working_limit and self.working_bytes > self.working_limit and self.on_disk_full is not None:
            self.on_disk_full()

    def _tree(self) -> list[psutil.Process]:
        return self.memory.tree()

    def kill_all(self) -> None:
        """Kill the kernel and everything it started, including orphans re-parented to init."""
        self._tree()
        victims = [process for process in self.seen.values() if alive(process)]
        for process in victims:
            try:
                process.kill()
            except psutil.Error:
                pass
        # A killed process that is not our child stays a zombie until its parent (bwrap, or init) reaps it:
        # dead is enough, so poll for "not alive" instead of psutil.wait_procs, which waits for the reaping.
        deadline = time.monotonic() + KILL_WAIT_SECONDS
        while any(alive(process) for process in victims) and time.monotonic() < deadline:
            time.sleep(0.02)


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` (their sizes; symlinks count as the link, not the target)."""
    total = 0
    for path in Path(folder).rglob("*"):
        try:
            info = path.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            total += info.st_size
    return total


def alive(process: psutil.Process) -> bool:
    """Running and not a zombie (a killed process nobody reaped yet is dead enough)."""
    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


class GpuSampler:
    """The largest per-GPU memory used by the given pids, from ``nvidia-smi`` (absent: always None)."""

    def __init__(self) -> None:
        self.command = shutil.which("nvidia-smi")
        self.last = 0.0

    def sample(self, pids: set[int]) -> int | None:
        if self.command is None or time.monotonic() - self.last < GPU_SAMPLE_SECONDS:
            return None
        self.last = time.monotonic()
        try:
            out = subprocess.run([self.command, "--query-compute-apps=gpu_uuid,pid,used_memory",
                                  "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            self.command = None
            return None
        if out.returncode != 0:
            self.command = None
            return None
        return gpu_bytes(out.stdout, pids)


def gpu_bytes(csv_text: str, pids: set[int]) -> int | None:
    """The largest per-GPU memory the ``pids`` use, from ``nvidia-smi``'s ``gpu_uuid,pid,used_memory`` (MiB) rows."""
    per_gpu: dict[str, int] = {}
    for line in csv_text.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 3 or not parts[1].isdigit() or int(parts[1]) not in pids:
            continue
        try:
            per_gpu[parts[0]] = per_gpu.get(parts[0], 0) + int(float(parts[2]) * 1024 * 1024)
        except ValueError:
            continue
    return max(per_gpu.values()) if per_gpu else None
