"""What an evaluation-API kernel's ``predict`` calls cost: time, rows, CPU, and the wait for a CPU.

The dry run projects a rerun from these numbers and judges the competition's deadlines by them
(``builder.run.deadlines``): the first call (the model load, no deadline) apart from the rest, the rest per row;
and for a call past its deadline, how much of its wall time it *ran* and how much it waited, runnable, for a CPU that
other work had (the kernel's scheduler statistics of each of the process's threads, ``/proc/self/task/*/schedstat``).
A call that tripped its deadline only because the machine was oversubscribed says nothing about Kaggle's CPUs.

Constant size whatever the number of calls (a rerun can call predict tens of thousands of times): sums, the slowest
call, and a bounded sample of the later calls' seconds per row. The wait for a CPU is read only in kkb's sandbox
(``$KKB_SANDBOX_NETLOG``): on Kaggle nobody reads it. Standard library only.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

SAMPLE = 200  # later calls' seconds per row kept (a uniform sample of them all): the projection's spread
_PROC = Path("/proc")


def thread_waits(pid: int | str = "self") -> dict[int, float]:
    """Seconds each thread of a process (this one by default) has waited, runnable, for a CPU (``schedstat``'s second
    field, ``/proc/PID/task/TID/schedstat``); {} off Linux or once the process is gone."""
    waits: dict[int, float] = {}
    tasks = _PROC / str(pid) / "task"
    try:
        names = os.listdir(tasks)
    except OSError:
        return waits
    for task in names:
        try:
            with open(tasks / task / "schedstat", "rb") as handle:
                waits[int(task)] = int(handle.read().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            continue
    return waits


def load_now() -> tuple[float | None, int | None]:
    """The 1-minute load average and the CPUs this process may run on."""
    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:
        load = None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return load, cpus


@dataclass(frozen=True)
class CallTime:
    wall: float
    cpu: float  # the process's CPU time (every thread, user + system) during the call
    waited: float | None  # the longest any of its threads waited for a CPU during the call; None: not measured

    @property
    def own(self) -> float:
        """The call's time less what it spent waiting for a CPU: what it takes on CPUs of its own."""
        return max(self.wall - (self.waited or 0.0), 0.0)


@dataclass
class CallClock:
    """Started when a call starts; :meth:`now` reads what it has cost so far."""

    wall: float
    cpu: float
    waits: dict[int, float] | None

    @classmethod
    def start(cls, measure_waits: bool) -> CallClock:
        return cls(time.perf_counter(), time.process_time(), thread_waits() if measure_waits else None)

    def now(self) -> CallTime:
        waited = None
        if self.waits is not None:
            waited = max((seconds - self.waits.get(tid, 0.0) for tid, seconds in thread_waits().items()), default=0.0)
        return CallTime(time.perf_counter() - self.wall, time.process_time() - self.cpu, waited)


@dataclass
class PredictStats:
    """Constant-size timings of the predict calls (see the module docstring)."""

    calls: int = 0
    fast_calls: int = 0
    first_seconds: float | None = None
    first_rows: int | None = None
    slowest_seconds: float | None = None  # calls after the first: the ones the response deadline applies to
    slowest_call: int | None = None
    slowest_cpu_seconds: float | None = None
    slowest_waited_seconds: float | None = None
    total_seconds: float = 0.0
    rows: int = 0  # rows answered, every call
    later_cpu_seconds: float = 0.0  # calls after the first: CPU time, and the wait for a CPU (summed over calls)
    later_waited_seconds: float = 0.0
    later_rates: list[float] = field(default_factory=list)  # seconds per row of a sample of the later calls
    load: float | None = None  # the 1-minute load average at the last call's end, and the CPUs there
    cpus: int | None = None
    in_flight_since: float | None = None  # epoch seconds; set while a call runs
    in_flight_call: int | None = None
    in_flight_cpu_seconds: float | None = None  # what the running call has cost so far (the sandbox's watcher)
    in_flight_waited_seconds: float | None = None

    def started(self, index: int) -> None:
        self.in_flight_since, self.in_flight_call = time.time(), index
        self.in_flight_cpu_seconds = self.in_flight_waited_seconds = None

    def running(self, spent: CallTime) -> None:
        """The call in flight has cost ``spent`` so far (read while it runs: a call past its deadline never returns)."""
        if self.in_flight_since is not None:
            self.in_flight_cpu_seconds, self.in_flight_waited_seconds = round(spent.cpu, 3), _rounded(spent.waited)
            self.load, self.cpus = load_now()

    def finished(self, index: int, spent: CallTime, fast: bool, rows: int | None) -> None:
        self.calls += 1
        self.fast_calls += int(fast)
        self.total_seconds += spent.wall
        self.rows += rows or 0
        self.in_flight_since = self.in_flight_call = self.in_flight_cpu_seconds = self.in_flight_waited_seconds = None
        self.load, self.cpus = load_now()
        if index == 0:
            self.first_seconds, self.first_rows = spent.wall, rows
            return
        self.later_cpu_seconds += spent.cpu
        self.later_waited_seconds += spent.waited or 0.0
        if rows:
            self._sample(spent.wall / rows, index)
        if self.slowest_seconds is None or spent.wall > self.slowest_seconds:
            self.slowest_seconds, self.slowest_call = spent.wall, index
            self.slowest_cpu_seconds, self.slowest_waited_seconds = round(spent.cpu, 3), _rounded(spent.waited)

    def _sample(self, rate: float, index: int) -> None:
        """Reservoir sampling: every later call has the same chance of being in :attr:`later_rates`."""
        if len(self.later_rates) < SAMPLE:
            self.later_rates.append(rate)
            return
        slot = random.randrange(index)
        if slot < SAMPLE:
            self.later_rates[slot] = rate


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def rows_of(answer: object) -> int | None:
    """Rows of what predict returned (a frame or series, pandas or polars); None for a scalar."""
    try:
        return len(answer) if hasattr(answer, "__len__") and not isinstance(answer, (str, bytes)) else None
    except TypeError:
        return None
