"""A step's time as if it had its CPUs to itself: the projection's answer to a busy machine.

A step on a machine where other work shares the CPUs takes longer by the wall clock: it is runnable and
waits for a CPU. ``kkb_runtime.steps`` records, per step, that wait (``run_delay_seconds``, the kernel's
scheduler statistics of the step's process), its process tree's CPU time (user + system), the 1-minute
load average and the CPUs it could use. A step that waits (for I/O, a GPU, a sleep) is not slowed by the
load and keeps its time; one kept from a CPU has every time scaled by the share it ran (the wall time less
the wait, over the wall time). The projection's range comes from those times, its high end at least the
wall clock's central (:func:`builder.rehearse.projection.project_rerun`): the lower end never rises because
other work shared the CPUs. A quiet machine leaves every time as measured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from builder.kkb_runtime.timing import BatchTiming, FoldTiming, StepTiming

KAGGLE_CPU_CORES = 4  # Kaggle's CPU sessions (and the CPU side of its GPU sessions)
LOST = 0.95  # a step that waited for a CPU more than 5 % of its time: the load shaped its time
MIN_SHARE = 0.05  # never scale a step by less (a record gone wrong must not make it free)


@dataclass(frozen=True)
class Load:
    """The machine's load when the steps ran, and the lowest CPU share a step got."""

    load: float
    cpus: int
    share: float

    def basis(self) -> str:
        return (f"machine load {self.load:.1f} on {self.cpus} CPUs: the steps waited for a CPU (the least a step ran: "
                f"{self.share:.0%} of its time); the range counts only the time they ran, as on CPUs of their "
                f"own like a Kaggle session's {KAGGLE_CPU_CORES} cores; the high end at least the wall clock's")


def machine_load(steps: Sequence[Mapping[str, Any]]) -> Load | None:
    """The load when some step lost time to other work (its share below :data:`LOST`); None when none did."""
    shares = [share for step in steps if (share := own_share(step)) is not None]
    if not shares or min(shares) >= LOST:
        return None
    records = [(float(step["load"]), int(step["cpus"])) for step in steps if step.get("load") is not None and step.get("cpus")]
    load, cpus = max(records, default=(0.0, 0))
    return Load(load=load, cpus=cpus, share=min(shares))


def own_share(step: Mapping[str, Any]) -> float | None:
    """The part of the step's wall time it was not kept waiting for a CPU (``run_delay_seconds``); None without a record."""
    delay, wall = step.get("run_delay_seconds"), float(step.get("seconds") or 0.0)
    if delay is None or wall <= 0:
        return None
    return min(1.0, max(MIN_SHARE, (wall - float(delay)) / wall))


def on_own_cpus(step: Mapping[str, Any]) -> dict[str, Any]:
    """The step's record with every time scaled by its CPU share (a card's phases and batches too)."""
    share = own_share(step)
    if share is None or share >= 1.0:
        return dict(step)
    timing = step.get("timing")
    parsed = timing if isinstance(timing, StepTiming) else StepTiming.from_json(timing)
    scaled: dict[str, Any] = {**step, "seconds": float(step.get("seconds") or 0.0) * share}
    if parsed is not None:
        scaled["timing"] = _scaled(parsed, share)
    return scaled


def _scaled(timing: StepTiming, share: float) -> StepTiming:
    def batch(item: BatchTiming | None) -> BatchTiming | None:
        return None if item is None else replace(item, data_seconds=item.data_seconds * share,
                                                  compute_seconds=item.compute_seconds * share)

    def fold(item: FoldTiming) -> FoldTiming:
        return replace(item, load_seconds=item.load_seconds * share, loader_start_seconds=item.loader_start_seconds * share,
                       first_batch=batch(item.first_batch), steady=tuple(b for b in map(batch, item.steady) if b),
                       probe=tuple(b for b in map(batch, item.probe) if b), probe_seconds=item.probe_seconds * share)

    return replace(timing, startup_seconds=None if timing.startup_seconds is None else timing.startup_seconds * share,
                   setup_seconds=timing.setup_seconds * share, imports_seconds=timing.imports_seconds * share,
                   write_seconds=timing.write_seconds * share, folds=tuple(fold(f) for f in timing.folds))
