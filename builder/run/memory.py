"""The run's memory, counted as Kaggle's container counts it, and the limit enforced on that total.

Kaggle runs a notebook in a container whose cgroup has the machine shape's RAM: the kernel charges
what its processes really touch, once (pages shared by forked DataLoader workers, or a shared mmap,
count once), and the OOM killer ends the container when the total passes the limit. Address space is
never counted (a torch process reserves twice what it uses). Three accountants, best first:

``cgroup``
    A delegated cgroup v2 memory controller: a child cgroup of ours gets ``memory.max`` = the limit
    (no swap), the kernel's processes are moved into it when it starts (their children follow), and
    ``memory.oom.group`` makes the kernel's OOM killer end all of them at once, as the container ends.
    ``memory.current`` is sampled for the peak; ``memory.events`` says whether the killer ran.
``pss``
    Everywhere ``/proc/<pid>/smaps_rollup`` can be read (Linux ≥ 4.14): the sum of proportional set
    sizes over the kernel's process tree, plus what the sandbox's own ``/dev/shm`` holds that no process maps
    (:mod:`builder.run.shared_memory`: the container's cgroup charges those pages too), read every 0.1-2 s (less
    often far below the limit, and never more than 5 % of a core) and at once when the tree's resident total
    (cheap, checked every 0.1 s) grows past its highest so far or past the limit (PSS ≤ RSS: below the limit in
    RSS, the run is below it). A page shared by n processes counts 1/n in each, so the sum counts it
    once. Past the limit the whole tree is killed with SIGKILL.
``none``
    Where neither works (macOS, a locked /proc): the summed RSS is sampled for the report only and
    judged afterwards; nothing is enforced while the run goes, and the report says so.

:func:`choose_accounting` picks one; :data:`ACCOUNTANTS` is the one registry of them. A
:class:`MemoryWatch` samples a process tree in a thread, ends the run past the limit, and remembers
the peak, for the notebook executor and the evaluation-API supervisor alike.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psutil

from builder.kkb_runtime.steps import parent_pid
from builder.kkb_runtime.vocabulary import MemoryAccounting
from builder.run.processes import file_words
from builder.run.shared_memory import sandbox_shm_bytes

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC = Path("/proc")
SAMPLE_SECONDS = 0.1
DUTY = 20  # wait at least 20x what a sample cost (under 5 % of one core)
FAR_BELOW = 0.5  # under half the limit ...
RELAXED = 4  # ... sample 4x less often (a run's memory grows by at most a few GB/s)
RELAXED_DUTY = 80  # ... and spend about 1 % of a core: a growth of the resident total reads it at once (below)
MAX_INTERVAL = 2.0
# Every tick reads the tree's resident total (statm: microseconds); a growth past the total at the last reading reads
# the memory at once, so a run cannot pass the limit between two readings, however rare far below it.
GROWTH, GROWTH_BYTES = 1.1, 64 << 20
# A crash (SIGSEGV, SIGABRT) while the run's memory was this close to the limit is read as memory:
# allocators that cannot get pages fail in many ways, and the OOM killer may have picked a helper.
NEAR_LIMIT = 0.9


class Accountant(Protocol):
    """One way to count the run's memory."""

    kind: MemoryAccounting

    def attach(self, pids: list[int]) -> None:
        """The run's first processes (its children inherit whatever this sets up)."""

    def sample(self, processes: list[psutil.Process]) -> int:
        """The run's memory now, in bytes."""

    def killed_by_limit(self) -> bool:
        """True when the limit itself ended (part of) the run, as seen by this accountant."""

    def close(self) -> None:
        """Undo what :meth:`attach` set up."""


class PssAccountant:
    """The sum of PSS over the process tree (shared pages once), from ``/proc/<pid>/smaps_rollup``."""

    kind = MemoryAccounting.PSS

    def attach(self, pids: list[int]) -> None:
        pass

    def sample(self, processes: list[psutil.Process]) -> int:
        parts = [pss_parts(process.pid) for process in processes]
        mapped = sum(shmem for _, shmem in parts)  # of the sandbox's /dev/shm, what the processes map: counted once
        return sum(pss for pss, _ in parts) + max(0, sandbox_shm_bytes(p.pid for p in processes) - mapped)

    def killed_by_limit(self) -> bool:
        return False  # the watch itself kills, and knows it did

    def close(self) -> None:
        pass


def resident_bytes(processes: list[psutil.Process]) -> int:
    """The summed RSS of ``processes`` (shared pages counted in each: an upper bound of their PSS)."""
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except psutil.Error:
            continue
    return total


class RssAccountant:
    """The summed RSS (shared pages counted in every process: over-states), for the report only."""

    kind = MemoryAccounting.NONE

    def attach(self, pids: list[int]) -> None:
        pass

    def sample(self, processes: list[psutil.Process]) -> int:
        return resident_bytes(processes) + sandbox_shm_bytes(process.pid for process in processes)

    def killed_by_limit(self) -> bool:
        return False

    def close(self) -> None:
        pass


class CgroupAccountant:
    """A child cgroup v2 with ``memory.max``: the kernel's own OOM killer enforces the limit, as on Kaggle."""

    kind = MemoryAccounting.CGROUP

    def __init__(self, parent: Path, limit_bytes: int) -> None:
        self.folder = parent / f"kkb-run-{uuid.uuid4().hex[:12]}"
        self.folder.mkdir()
        for name, value in (("memory.max", str(limit_bytes)), ("memory.swap.max", "0"), ("memory.oom.group", "1")):
            try:
                (self.folder / name).write_text(value)
            except OSError:
                if name == "memory.max":
                    raise

    def attach(self, pids: list[int]) -> None:
        for pid in pids:
            try:
                (self.folder / "cgroup.procs").write_text(str(pid))
            except OSError:
                continue  # it ended already

    def sample(self, processes: list[psutil.Process]) -> int:
        return _read_int(self.folder / "memory.current")

    def peak(self) -> int:
        return _read_int(self.folder / "memory.peak")  # kernels >= 5.19; 0 where absent

    def killed_by_limit(self) -> bool:
        return cgroup_events(self.folder / "memory.events").get("oom_kill", 0) > 0

    def close(self) -> None:
        try:
            for pid in (self.folder / "cgroup.procs").read_text().split():
                try:
                    os.kill(int(pid), 9)
                except OSError:
                    continue
            self.folder.rmdir()
        except OSError:
            pass  # still busy with dying processes: an empty cgroup left behind is harmless


def pss_bytes(pid: int) -> int:
    """One process's proportional set size (0 when it ended or cannot be read)."""
    return pss_parts(pid)[0]


def pss_parts(pid: int) -> tuple[int, int]:
    """One process's proportional set size and the part of it that is shared memory (``Pss_Shmem``, Linux >= 5.8;
    0 where absent); (0, 0) when it ended or cannot be read."""
    pss = shmem = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            for line in handle:
                if line.startswith(b"Pss:"):
                    pss = int(line.split()[1]) * 1024
                elif line.startswith(b"Pss_Shmem:"):
                    shmem = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0, 0
    return pss, shmem


def cgroup_events(path: Path) -> dict[str, int]:
    """``memory.events`` as a dict (``{"oom_kill": 1, ...}``); empty when unreadable."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    events: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if value.strip().isdigit():
            events[name] = int(value)
    return events


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def delegated_cgroup(root: Path = CGROUP_ROOT) -> Path | None:
    """Our own cgroup v2 folder when a child of it can get a memory controller, else None.

    The memory controller must be enabled in our cgroup's ``cgroup.subtree_control`` (cgroup v2 lets
    a cgroup with processes in it enable nothing for its children, so kkb does not try to enable it).
    """
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    unified = [line.split(":", 2)[2] for line in lines if line.startswith("0::")]
    if not unified or "memory" not in file_words(root / "cgroup.controllers"):
        return None
    own = root / unified[0].lstrip("/")
    if "memory" not in file_words(own / "cgroup.subtree_control") or not os.access(own, os.W_OK):
        return None
    return own


def pss_readable() -> bool:
    return pss_bytes(os.getpid()) > 0


@dataclass(frozen=True)
class AccountingChoice:
    """The accounting a run uses, and why better ones were not used."""

    kind: MemoryAccounting
    skipped: tuple[str, ...] = ()


def choose_accounting(limit_bytes: int | None, requested: str | None = None) -> AccountingChoice:
    """The best accounting this machine allows; ``$KKB_MEMORY_ACCOUNTING`` (cgroup, pss, none) overrides it."""
    requested = requested or os.environ.get("KKB_MEMORY_ACCOUNTING") or None
    skipped: list[str] = []
    order = [MemoryAccounting(requested)] if requested in set(MemoryAccounting) else list(MemoryAccounting)
    for kind in order:
        problem = AVAILABLE[kind](limit_bytes)
        if problem is None:
            return AccountingChoice(kind, tuple(skipped))
        skipped.append(f"{kind}: {problem}")
    return AccountingChoice(MemoryAccounting.NONE, tuple(skipped))


def _cgroup_problem(limit_bytes: int | None) -> str | None:
    if not limit_bytes:
        return "no limit to set"
    return None if delegated_cgroup() is not None else "no delegated cgroup v2 memory controller here"


def _pss_problem(limit_bytes: int | None) -> str | None:
    return None if pss_readable() else "/proc/<pid>/smaps_rollup cannot be read here"


def _no_problem(limit_bytes: int | None) -> str | None:
    return None


def _cgroup(limit_bytes: int | None) -> Accountant:
    parent = delegated_cgroup()
    if parent is None or not limit_bytes:
        return PssAccountant()
    try:
        return CgroupAccountant(parent, limit_bytes)
    except OSError:
        return PssAccountant()


# The one registry: per accounting, whether it works here, and how to make one for a run.
AVAILABLE: dict[MemoryAccounting, Callable[[int | None], str | None]] = {
    MemoryAccounting.CGROUP: _cgroup_problem,
    MemoryAccounting.PSS: _pss_problem,
    MemoryAccounting.NONE: _no_problem,
}
ACCOUNTANTS: dict[MemoryAccounting, Callable[[int | None], Accountant]] = {
    MemoryAccounting.CGROUP: _cgroup,
    MemoryAccounting.PSS: lambda limit: PssAccountant(),
    MemoryAccounting.NONE: lambda limit: RssAccountant(),
}
DESCRIPTIONS: dict[MemoryAccounting, str] = {
    MemoryAccounting.CGROUP: "cgroup v2 memory.max on the whole run (the kernel's OOM killer ends it, as on Kaggle)",
    MemoryAccounting.PSS: "the run's summed PSS (shared pages once), read every 0.1-2 s and at once when the resident "
                          "total reaches a new high; the whole run is killed past it",
    MemoryAccounting.NONE: "not enforced while the run goes: the summed RSS is judged afterwards",
}


class MemoryWatch:
    """Samples a process tree's memory in a thread; past the limit, ends the whole run (``kill``)."""

    def __init__(self, pid: int, limit_bytes: int | None, kill: Callable[[], None],
                 kind: MemoryAccounting | None = None, sample_seconds: float = SAMPLE_SECONDS) -> None:
        self.kind = kind or choose_accounting(limit_bytes).kind
        self.accountant = ACCOUNTANTS[self.kind](limit_bytes)
        self.kind = self.accountant.kind  # a cgroup that could not be made falls back to PSS
        self.limit = limit_bytes if self.kind != MemoryAccounting.NONE else None
        self.kill, self.sample_seconds = kill, sample_seconds
        self.root = psutil.Process(pid)
        self.seen: dict[int, psutil.Process] = {pid: self.root}
        self._parents: dict[int, int] = {}  # every pid in /proc at the last tick -> its parent when first seen
        self._members: set[int] = {pid}  # the live pids of the tree
        self._due, self._resident_seen = 0.0, 0  # the next reading of the memory; the highest resident total a reading saw
        self.peak = 0
        self.exceeded_at: int | None = None  # the total that passed the limit (this watch killed the run)
        self.accountant.attach([process.pid for process in self.tree()])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="kkb-memory", daemon=True)

    @property
    def exceeded(self) -> bool:
        return self.exceeded_at is not None or self.accountant.killed_by_limit()

    def start(self) -> MemoryWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if isinstance(self.accountant, CgroupAccountant):
            self.peak = max(self.peak, self.accountant.peak())

    def close(self) -> None:
        self.stop()
        self.accountant.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.tick()
            self._stop.wait(self.sample_seconds)

    def tick(self, processes: list[psutil.Process] | None = None, now: bool = False) -> None:
        """One tick: the tree's resident total (cheap); the memory itself when due, when that total grew past what
        it was at the last reading, or ``now``. Reading smaps_rollup of a torch process costs ~30 ms of CPU: at
        every tick that would be a third of a core taken from the run."""
        processes = self.tree() if processes is None else processes
        # what a sandbox's /dev/shm holds grows no process's resident size: it is part of the cheap total too
        started = time.monotonic()
        resident = resident_bytes(processes) + sandbox_shm_bytes(process.pid for process in processes)
        # Read at once only where it may matter: past the highest resident total read so far (a new peak), or past
        # the limit (PSS <= RSS: below it, the limit cannot have been passed). A run's second and later steps load
        # the same libraries again; their growth up to the earlier high is read when due, not at every 10 %.
        grew = resident > self._resident_seen * GROWTH + GROWTH_BYTES or (self.limit and resident > self.limit)
        if now or started >= self._due or grew:
            # The cost in this thread's CPU time, not the wall clock: on a loaded machine a reading waits for a CPU,
            # and a wall-clock cost would stretch the interval past short runs' peaks.
            cpu = time.thread_time()
            total = self.sample(processes)
            self._due = started + self.interval(total, time.thread_time() - cpu)
            self._resident_seen = max(self._resident_seen, resident)

    def interval(self, total: int, cost: float) -> float:
        """The wait before the next reading of the memory, ``cost`` the CPU seconds the last one took: it keeps to a
        few percent of a core, and far below the limit to about 1 % (a growth of the resident total reads it sooner:
        :meth:`tick`)."""
        if self.limit and total < self.limit * FAR_BELOW:
            return min(max(cost * RELAXED_DUTY, self.sample_seconds * RELAXED), MAX_INTERVAL)
        return max(self.sample_seconds, cost * DUTY)

    def tree(self) -> list[psutil.Process]:
        """The root (while it runs) and every live process descended from it, orphans re-parented away included (the
        container counts them too); remembers each one seen, to kill it later.

        A process's parent is read once, when its pid first appears in ``/proc``: psutil's ``children`` reads every
        process's stat at every call, milliseconds a tick on a busy machine, taken from the run."""
        try:
            pids = {int(name) for name in os.listdir(PROC) if name.isdigit()}
        except OSError:  # no /proc (macOS): psutil's scan
            return self._tree_by_scan()
        for gone in self._parents.keys() - pids:
            del self._parents[gone]
        self._members &= pids
        new = [pid for pid in pids if pid not in self._parents]
        for pid in new:
            self._parents[pid] = parent_pid(PROC / str(pid))
        added = True
        while added:  # a child may appear in the same tick as its parent, in any order
            added = False
            for pid in new:
                if pid not in self._members and self._parents[pid] in self._members:
                    try:
                        self.seen[pid] = psutil.Process(pid)
                    except psutil.Error:
                        continue
                    self._members.add(pid)
                    added = True
        return [self.seen[pid] for pid in sorted(self._members)]

    def _tree_by_scan(self) -> list[psutil.Process]:
        children: list[psutil.Process]
        try:
            children = self.root.children(recursive=True)
        except psutil.Error:
            children = []
        for child in children:
            self.seen.setdefault(child.pid, child)
        alive = [self.root] if self.root.is_running() else []
        return alive + children

    def sample(self, processes: list[psutil.Process] | None = None) -> int:
        """The total now; past the limit the run is killed (once) and the total remembered."""
        total = self.accountant.sample(self.tree() if processes is None else processes)
        self.peak = max(self.peak, total)
        if self.limit and total > self.limit and self.exceeded_at is None:
            self.exceeded_at = total
            self.kill()
        return total


def near_limit(peak: int, limit: int | None) -> bool:
    return bool(limit) and peak >= NEAR_LIMIT * (limit or 0)
