"""Projections that do not depend on the machine's load: a step kept from a CPU by other work is counted by
the time it ran (its wait for a CPU taken out), the lower end never rises, the wall clock keeps the high end."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

import pytest

from builder.bundle.kernel_config import section
from builder.kkb_runtime.config import StepSection
from builder.kkb_runtime.inputs import Inputs
from builder.kkb_runtime.steps import run_step
from builder.kkb_runtime.timing import BatchTiming, FoldTiming, StepTiming
from builder.project.spec import Step
from builder.rehearse.projection import RunTimes, project_rerun
from tests.support.busy import busy_loops


def _card(per_row: float, slow: float, rows: int = 64) -> StepTiming:
    batch = BatchTiming(16, 0.0, 16 * per_row * slow)
    fold = FoldTiming(1.0 * slow, 0.01 * slow, batch, (batch,) * (rows // 16 - 1))
    return StepTiming(rows, "cpu", "cpu (2 cores)", 2, 1.0 * slow, 0.05 * slow, 2.0 * slow, 0.01 * slow, (fold,))


def _runs(slow: float, waited: float) -> list[RunTimes]:
    """One card step: ``slow`` times slower by the wall clock, ``waited`` of its time runnable and waiting."""
    timing = _card(0.02, slow)
    seconds = 4.0 + 64 * 0.02 * slow + 0.06 * slow
    step = {"name": "cnn", "seconds": seconds, "timing": timing.to_json(), "cpu_seconds": seconds * (1 - waited),
            "run_delay_seconds": seconds * waited, "load": 2.0 + 4 * waited, "cpus": 2}
    return [RunTimes(64, seconds + 3.0, (step,))]


def test_a_card_kept_from_its_cpus_projects_as_on_a_quiet_machine() -> None:
    quiet = project_rerun(_runs(1.0, 0.0), 10_000, None, None)
    busy = project_rerun(_runs(3.0, 2 / 3), 10_000, None, None)
    assert quiet.load is None and busy.load is not None
    assert busy.seconds / quiet.seconds == pytest.approx(1.0, rel=0.05)
    assert busy.low <= quiet.low * 1.01  # the lower end never rises because other work shared the CPUs
    assert busy.high >= 2.5 * quiet.seconds  # the wall clock still bounds it from above
    assert busy.basis()[-1].startswith("load: machine load 4.7 on 2 CPUs: the steps waited for a CPU (the least a step "
                                       "ran: 33% of its time); the range counts only the time they ran")


def test_a_step_that_waits_for_io_keeps_its_time() -> None:
    """Sleeping, reading, waiting for a GPU: slow by the wall clock, never waiting for a CPU."""
    runs = _runs(3.0, 0.0)
    assert project_rerun(runs, 10_000, None, None) == dataclasses.replace(project_rerun(runs, 10_000, None, None), load=None)
    assert project_rerun(runs, 10_000, None, None).seconds > 2.5 * project_rerun(_runs(1.0, 0.0), 10_000, None, None).seconds


WORK = "import sys\nx = 0\nfor i in range(6_000_000):\n    x += i % 7\nopen(sys.argv[1], 'w').write('id,target\\na,1\\n')\n"


@contextmanager
def _on_one_cpu(busy: int) -> Iterator[None]:
    """This process and its children on one CPU, with ``busy`` spinning processes beside them."""
    before = os.sched_getaffinity(0)
    cpu = min(before)
    os.sched_setaffinity(0, {cpu})
    try:
        with busy_loops(busy, cpu, own_sessions=False):
            yield
    finally:
        os.sched_setaffinity(0, before)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/schedstat").is_file(), reason="the kernel keeps no scheduler statistics")
def test_a_projection_with_two_busy_processes_beside_it_stays_within_1_5x_of_the_quiet_one(tmp_path: Path) -> None:
    (tmp_path / "work.py").write_text(WORK)
    inputs = Inputs(code=tmp_path, weights=None, competition=tmp_path, working=tmp_path)
    step = section(StepSection, Step(name="features", run="python work.py {out}"), "steps[0]")

    def measured(busy: int) -> RunTimes:
        with _on_one_cpu(busy):
            result = run_step(step, inputs, tmp_path / "kkb_kernel.json", tmp_path)
        return RunTimes(1, result.seconds + 1.0, (asdict(result),))

    quiet, busy = measured(0), measured(2)
    assert busy.steps[0]["seconds"] > 1.5 * quiet.steps[0]["seconds"]  # the busy loops did take the CPU
    assert busy.steps[0]["run_delay_seconds"] > 0.3 * busy.steps[0]["seconds"]
    at_quiet, at_busy = (project_rerun([run], 1000, None, None) for run in (quiet, busy))
    assert at_busy.seconds <= 1.5 * at_quiet.seconds and at_busy.low <= 1.5 * at_quiet.low
