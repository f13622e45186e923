"""Tunable behaviour of the local Kaggle (timings that Kaggle itself does not publish)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerSettings:
    """How the local Kaggle paces itself.

    Attributes:
        dataset_ready_seconds: a new dataset version is not READY until this long after its creation
            (Kaggle processes uploads for a while; a kernel pushed before then still sees the old version).
        dataset_ready_polls: ...and until ``GetDatasetStatus`` has answered "not ready" this many times.
        commit_timeout_seconds: run-time cap of a commit run when the push sets none
            (Kaggle's session limit is 12 hours).
        rerun_timeout_seconds: run-time cap of a scoring rerun; ``None`` uses the competition's
            ``time_limit_hours``. Lowering it rehearses "Notebook Timeout" quickly.
        workers: kernel runs executed at the same time (commit runs and scoring reruns share them).
    """

    dataset_ready_seconds: float = 1.0
    dataset_ready_polls: int = 0
    commit_timeout_seconds: float = 12 * 3600
    rerun_timeout_seconds: float | None = None
    workers: int = 1
