"""Limits judged on a busy machine: the wait for a CPU beside the wall clock (``builder.run.deadlines``).

The verdicts that follow are tested where they are given: a run killed at its timeout in ``tests/test_verdict.py``,
the evaluation API's response deadline with a busy loop beside the rerun in ``tests/test_evalapi.py``.
"""

from __future__ import annotations

import time

import psutil
import pytest

from builder.run.deadlines import LimitCheck, WaitTracker, time_owed, tripped_by_load
from tests.support.busy import burner, busy_loops, first_cpu


@pytest.mark.parametrize(
    ("wall", "waited", "by_load"),
    [
        (61.0, 40.0, True),  # ran 21 s of a 60 s limit: the load passed it
        (61.0, 3.5, False),  # ran 57.5 s (> 95 % of the limit): the kernel's own time passed it
        (61.0, 1.0, False),  # hardly waited: not a loaded machine
        (30.0, 20.0, False),  # within the limit: nothing to excuse
        (61.0, None, False),  # not measured (off Linux): judged by the wall clock
    ],
)
def test_a_limit_is_passed_by_load_only_when_what_ran_stayed_under_it(wall: float, waited: float | None, by_load: bool) -> None:
    check = LimitCheck("the run's time limit", 60.0, wall, 10.0, waited, 4.0, 2, finished=False)
    assert check.by_load is by_load and (tripped_by_load([check]) is check) is by_load


def test_the_tracker_measures_the_wait_for_a_cpu_that_other_work_took() -> None:
    with busy_loops(3):  # other users' work on the same CPU
        run = burner(first_cpu(), seconds=0.6)
        tracker = WaitTracker()
        started = time.monotonic()
        while run.poll() is None:
            tracker.tick([psutil.Process(run.pid)], now=True)
            time.sleep(0.1)
        wall = time.monotonic() - started
    check = tracker.check("a step's time limit", 1.0, wall, finished=True)
    # a quarter of a CPU: 0.6 s of CPU took about 2.4 s, most of it waiting
    assert check.waited_seconds is not None and check.waited_seconds > 0.5 and check.loaded, check
    assert check.cpu_seconds is not None and 0.4 < check.cpu_seconds < 1.0 and check.own_seconds < wall


@pytest.mark.parametrize(
    ("limit", "elapsed", "waited", "owed"),
    [
        (60.0, 60.0, 20.0, 20.0),  # at the limit by the wall clock, 20 s of it spent waiting: 20 s more
        (60.0, 80.0, 25.0, 5.0),  # extended once, waited 5 s more meanwhile: 5 s more
        (60.0, 60.0, 0.05, 0.0),  # hardly waited: the limit is the kernel's
        (60.0, 100.0, 95.0, 20.0),  # owed 55 s, but the extension stops at the limit again (120 s)
        (3600.0, 3600.0, 1000.0, 300.0),  # and at five minutes
        (3.0, 3.0, 0.3, 0.3),  # a short test limit: the same rule
    ],
)
def test_a_run_at_its_limit_is_owed_the_time_it_waited_for_a_cpu(limit: float, elapsed: float, waited: float,
                                                                owed: float) -> None:
    assert time_owed(limit, elapsed, waited) == pytest.approx(owed)
