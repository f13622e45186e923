"""Deadlines and time limits judged on a busy machine: how much of the time the load took.

A run on a machine shared with other work is slower by the wall clock: its processes are runnable and wait for a
CPU. At load 5 on two cores torch's two threads made one update 10-13 s instead of 0.27 s; a 60 s response deadline
tripped and said nothing about Kaggle, whose session has its CPUs to itself. So every deadline and time limit the dry
run judges (the evaluation API's response deadline per call and its startup limit, the run's time limit) comes with
what was measured beside the wall clock (:class:`LimitCheck`): the CPU time, the time spent waiting for a CPU (the
kernel's scheduler statistics, ``schedstat``), the load average and the CPUs. The time the run *ran* is the wall time
less that wait (:attr:`LimitCheck.own`): a limit passed by the wall clock but not by it was tripped only because of
the load, and is ``Not Rehearsed`` for that reason, never a Kaggle verdict; one passed by it too is the failure.

:class:`WaitTracker` measures a process tree's wait from the host (the dry run's monitor, the evaluation-API
supervisor); kkb's evaluation runtime measures each predict call from inside (``kkb_runtime.predict_stats``).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil

from builder.kkb_runtime.predict_stats import load_now, thread_waits
from builder.run.limits import duration_text
from builder.run.load import LOST

WAIT_SAMPLE_SECONDS = 0.5  # waits are cumulative: sampling more often only sharpens which thread waited


@dataclass(frozen=True)
class LimitCheck:
    """One limit and the time against it: the wall clock, and beside it the CPU time and the wait for a CPU."""

    what: str  # "the response deadline of predict call 3", "the startup limit", "the run's time limit"
    limit_seconds: float
    wall_seconds: float
    cpu_seconds: float | None = None
    waited_seconds: float | None = None  # runnable, waiting for a CPU that other work had
    load: float | None = None  # the 1-minute load average then
    cpus: int | None = None
    finished: bool = True  # False: abandoned at the limit (a call past its deadline, a run killed at its timeout)

    @property
    def own_seconds(self) -> float:
        """The wall time less the wait for a CPU: what it took (or had taken) running, as on CPUs of its own."""
        return max(self.wall_seconds - (self.waited_seconds or 0.0), 0.0)

    @property
    def loaded(self) -> bool:
        """The machine was oversubscribed: more than 5 % of the time went to waiting for a CPU."""
        return self.waited_seconds is not None and self.waited_seconds > (1 - LOST) * self.wall_seconds

    @property
    def passed(self) -> bool:
        return self.wall_seconds > self.limit_seconds

    @property
    def by_load(self) -> bool:
        """Passed by the wall clock only: what it ran stayed under the limit (with a 5 % margin)."""
        return self.passed and self.loaded and self.own_seconds < LOST * self.limit_seconds

    def words(self) -> str:
        measured = [f"{duration_text(self.wall_seconds)} by the wall clock"]
        if self.cpu_seconds is not None:
            measured.append(f"{duration_text(self.cpu_seconds)} of CPU time")
        if self.waited_seconds is not None:
            measured.append(f"{duration_text(self.waited_seconds)} waiting for a CPU")
        machine = f"load {self.load:.1f} on {self.cpus} CPUs" if self.load is not None and self.cpus else "the machine's load"
        return f"{self.what} ({duration_text(self.limit_seconds)}): {', '.join(measured)} ({machine})"

    def reason(self) -> str:
        """Why this limit says nothing about Kaggle (a check that :attr:`by_load`)."""
        left = "" if self.finished else ", and had not finished when the limit ended it"
        return (f"not rehearsed: {self.words()}: it ran {duration_text(self.own_seconds)}{left}; the rest went to other "
                "work on this machine, which a Kaggle session does not share: rehearse it on a quiet machine, or on "
                "Kaggle's (kkb dry-run --on-kaggle)")

    def note(self) -> str:
        """For a report: a limit judged while the machine was oversubscribed, passed or not."""
        verdict = "passed by the wall clock only" if self.by_load else "passed" if self.passed else "met"
        return f"judged on a loaded machine: {self.words()}: {verdict}, ran {duration_text(self.own_seconds)}"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "own_seconds": round(self.own_seconds, 3), "loaded": self.loaded, "by_load": self.by_load}


EXTENSION_CAP_SECONDS = 300.0  # a run's time limit is extended by the load's share at most this much (and the limit)
MIN_EXTENSION_SECONDS = 0.1


def time_owed(limit: float, elapsed: float, waited: float) -> float:
    """At a run's time limit by the wall clock: the seconds it is owed because it waited for a CPU that a Kaggle session
    would have had (its own time, the wall less that wait, has not reached the limit yet), 0 when none.

    The run goes on for them, so that one killed at last had the whole limit to itself (the failure, Kaggle's) and one
    that ends meanwhile was over the limit only because of the load (``Not Rehearsed``); the extension is capped at
    the limit again and :data:`EXTENSION_CAP_SECONDS`, past which the run is ended and judged as it stands."""
    owed = limit - max(elapsed - waited, 0.0)
    cap = min(limit, EXTENSION_CAP_SECONDS) - max(elapsed - limit, 0.0)
    owed = min(owed, cap)
    return owed if owed >= MIN_EXTENSION_SECONDS else 0.0


def tripped_by_load(checks: tuple[LimitCheck, ...] | list[LimitCheck]) -> LimitCheck | None:
    """The first limit passed only because of the load, if one was."""
    return next((check for check in checks if check.by_load), None)


@dataclass
class WaitTracker:
    """A process tree's wait for a CPU and CPU time, sampled from the host every :data:`WAIT_SAMPLE_SECONDS`.

    A sample's wait is the largest wait any thread of the tree added since the last sample (threads that run side by
    side wait side by side; processes that run one after the other add up across samples); the CPU time is each
    process's last reading, summed (a process that ended keeps its last)."""

    waited: float = 0.0
    _due: float = 0.0
    _waits: dict[int, float] = field(default_factory=dict)
    _cpu: dict[int, float] = field(default_factory=dict)

    def tick(self, processes: list[psutil.Process], now: bool = False) -> None:
        if not now and time.monotonic() < self._due:
            return
        self._due = time.monotonic() + WAIT_SAMPLE_SECONDS
        step = 0.0
        for process in processes:
            for tid, seconds in thread_waits(process.pid).items():
                step = max(step, seconds - self._waits.get(tid, 0.0))
                self._waits[tid] = seconds
            try:
                times = process.cpu_times()
                self._cpu[process.pid] = times.user + times.system
            except psutil.Error:
                continue
        self.waited += max(step, 0.0)

    @property
    def cpu_seconds(self) -> float:
        return sum(self._cpu.values())

    def check(self, what: str, limit: float, wall: float, finished: bool) -> LimitCheck:
        load, cpus = load_now()
        return LimitCheck(what, limit, wall, round(self.cpu_seconds, 3), round(self.waited, 3), load, cpus, finished)


def evaluation_checks(state: dict[str, Any], slowest: float | None, in_flight: bool, deadline: float | None,
                      serve: float | None, startup: float | None) -> tuple[LimitCheck, ...]:
    """An evaluation-API run's two limits, from what kkb's runtime recorded (``kkb_evaluation.json``): the slowest
    predict call after the first (or the one still running when the gateway gave up) against the response deadline,
    and the time to reach ``serve()`` against the startup limit."""
    stats = state.get("predict") or {}
    checks = []
    if deadline and slowest is not None:
        prefix = "in_flight" if in_flight else "slowest"
        call = stats.get("in_flight_call") if in_flight else stats.get("slowest_call")
        checks.append(LimitCheck(f"the response deadline of predict call {call}", float(deadline), float(slowest),
                                 stats.get(f"{prefix}_cpu_seconds"), stats.get(f"{prefix}_waited_seconds"),
                                 stats.get("load"), stats.get("cpus"), finished=not in_flight))
    spent = state.get("serve_spent") or {}
    if startup and serve is not None:
        checks.append(LimitCheck("the startup limit (serve() reached)", float(startup), float(serve),
                                 spent.get("cpu_seconds"), spent.get("waited_seconds"), spent.get("load"), spent.get("cpus")))
    return tuple(checks)
