"""A kernel version's run as the history keeps it: its session, how it ended, what it billed; and stopping one.

A ``run`` record (``kkb history``, ``--json``) holds the session (``GPU NvidiaTeslaT4``, ``CPU``), how it ended
(``complete``, ``error``, ``cancelled`` by someone on Kaggle, ``cancelled by kkb`` with ``kkb stop``,
``replaced`` by ``--replace``) and its billed accelerator time: the last timestamp of Kaggle's own log of the
run (seconds since the session started) when there is one, else what kkb saw from its push to the end
(``billed_basis``: ``log`` or ``observed``). A CPU session bills no quota (None).

Stopping: Kaggle's API stops a running session only by deleting its kernel (``CancelKernelSession`` takes a
session id no answer carries: kaggle-cli #1169, #1174); deleting stopped the billing in the field notes
(kaggle-runtime.md §9.2). Every version goes with it and the next push creates the kernel again at version 1,
so a ``kernel-deleted`` record separates what came before (:meth:`History.last`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from builder.project.spec import KernelSpec
from builder.remote.history import (
    ENDED_CANCELLED,
    ENDED_COMPLETE,
    ENDED_ERROR,
    KERNEL_DELETED,
    PUSH,
    RUN,
)
from builder.remote.limits import RunningSession, accelerator_of, session_label
from builder.remote.session import Session

ENDS = {"complete": ENDED_COMPLETE, "error": ENDED_ERROR, "cancel_requested": ENDED_CANCELLED,
        "cancel_acknowledged": ENDED_CANCELLED}


def spec_accelerator(spec: KernelSpec) -> str:
    return accelerator_of(spec.kernel.machine_shape, spec.kernel.uses_gpu, spec.kernel.uses_tpu)


def record_run(ctx: Session, kernel_id: str, version: int, status: str, *, machine_shape: str | None,
               accelerator: str, failure: str = "", ended: str | None = None,
               log: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """Append the ``run`` record of ``kernel_id`` v``version`` (``ended``: kkb's doing, else Kaggle's status)."""
    seconds, basis = _billed(ctx, kernel_id, version, log)
    return ctx.history.append(
        RUN, kernel=kernel_id, version=version, status=status, failure=failure,
        ended=ended or ENDS.get(status, status), session=session_label(machine_shape, accelerator),
        billed_seconds=round(seconds, 1) if seconds is not None and accelerator != "CPU" else None,
        billed_basis=basis if accelerator != "CPU" else None)


def stop_runs(ctx: Session, kernel_id: str, runs: Sequence[RunningSession], ended: str) -> None:
    """Stop ``runs`` (versions of ``kernel_id``) the one way Kaggle's API can: delete the kernel; record it."""
    versions = ", ".join(f"v{run.version}" for run in runs)
    ctx.emit("kernel", f"stopping {kernel_id} {versions}: deleting the kernel on Kaggle (its API stops a run no "
                       "other way; every version goes, the next push creates it again)")
    ctx.adapter.delete_kernel(kernel_id)
    for run in runs:
        record_run(ctx, kernel_id, run.version, run.status, machine_shape=run.machine_shape,
                   accelerator=run.accelerator, ended=ended)
    ctx.history.append(KERNEL_DELETED, kernel=kernel_id, versions=[run.version for run in runs], reason=ended)
    ctx.emit("kernel", f"{kernel_id} {versions} stopped ({ended})")


def _billed(ctx: Session, kernel_id: str, version: int, log: Sequence[dict[str, Any]]) -> tuple[float | None, str]:
    times = [float(entry["time"]) for entry in log if isinstance(entry.get("time"), (int, float))]
    if times and max(times) > 0:
        return max(times), "log"
    pushed = ctx.history.last(PUSH, kernel=kernel_id, kernel_version=version)
    if pushed is None:
        return None, "unknown"
    try:
        since = datetime.fromisoformat(str(pushed.get("time")).replace("Z", "+00:00"))
    except ValueError:
        return None, "unknown"
    return max(0.0, (datetime.now(timezone.utc) - since).total_seconds()), "observed"
