"""``kkb status`` / ``logs`` / ``history`` / ``stop``: what Kaggle and the project's history say about the kernel.

``status`` also shows the platform around it (``builder.remote.limits``): the team's submissions left today and
when they reset, the accelerator quota left, the account's sessions running; and records how a run it sees ended.
``stop`` stops this kernel's running versions (Kaggle's API: deleting the kernel).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.errors import RemoteError
from builder.project.spec import KernelSpec, spec_of
from builder.remote.history import ENDED_BY_KKB, PUSH, RUN, SCORE, SUBMISSION, History, HistoryRow
from builder.remote.kaggle_api import KaggleAdapter, NotFoundError, Submission
from builder.remote.limits import Limits, RunningSession, kernel_runs, read_limits
from builder.remote.lock import LOCK_WAIT_S, kernel_lock
from builder.remote.runs import ENDS, record_run, spec_accelerator, stop_runs
from builder.remote.session import Session, kernel_id_of, query_session


@dataclass(frozen=True)
class StatusResult:
    kernel_id: str
    kernel_version: int | None
    run_status: str | None
    failure_message: str
    last_push: dict[str, Any] | None
    submission: Submission | None
    limits: Limits | None = None  # the platform around the kernel (None: not asked)


@dataclass(frozen=True)
class LogsResult:
    kernel_id: str
    kernel_version: int | None
    entries: list[dict[str, Any]]


@dataclass(frozen=True)
class QuerySettings:
    """For ``status`` and ``logs``: which kernel project, optionally which version."""

    kernel_dir: Path
    version: int | None = None
    owner: str | None = None
    base_url: str | None = None
    adapter: KaggleAdapter | None = None
    spec: KernelSpec | None = None  # the command's loaded kernel.toml (read once per command); None: load kernel_dir's
    limits: bool = True  # status: ask Kaggle's limits too (submissions, quota, sessions)


def status(settings: QuerySettings) -> StatusResult:
    """The latest push, the state of its kernel run, the latest submission's state on Kaggle, and Kaggle's limits."""
    ctx, spec, kernel_id, last_push, version = _kernel_version(settings)
    run_status, failure = None, ""
    if version is not None:
        with contextlib.suppress(NotFoundError):  # a version Kaggle does not know; no answer is an error
            run = ctx.adapter.kernel_status(kernel_id, version)
            run_status, failure = run.status, run.failure_message
            _record_end(ctx, spec, kernel_id, version, run_status, failure)
    submission = None
    record = ctx.history.last(SUBMISSION, kernel=kernel_id)
    if record is not None:
        submission = ctx.adapter.submission(int(record["ref"]))
        if submission.status in ("complete", "error"):
            record_score_once(ctx, submission)
    limits = read_limits(ctx, spec.competition.slug) if settings.limits else None
    return StatusResult(kernel_id, version, run_status, failure, last_push, submission, limits)


def _record_end(ctx: Session, spec: KernelSpec, kernel_id: str, version: int, state: str, failure: str) -> None:
    """A run seen ended that the history has not recorded yet: how it ended, and what it billed (from its log)."""
    if state not in ENDS or ctx.history.last(RUN, kernel=kernel_id, version=version) is not None:
        return
    record_run(ctx, kernel_id, version, state, machine_shape=spec.kernel.machine_shape,
               accelerator=spec_accelerator(spec), failure=failure, log=ctx.adapter.kernel_log(kernel_id, version))


@dataclass(frozen=True)
class StopResult:
    kernel_id: str
    stopped: tuple[RunningSession, ...]  # the versions that were running (empty: none was)


def stop(settings: QuerySettings) -> StopResult:
    """``kkb stop``: stop the kernel's versions still queued or running (Kaggle's API: delete the kernel)."""
    with kernel_lock(Path(settings.kernel_dir), "stop", LOCK_WAIT_S):
        spec = spec_of(settings.spec, settings.kernel_dir)
        ctx = query_session(settings.kernel_dir, settings.base_url, settings.adapter)
        kernel_id = kernel_id_of(ctx, spec, settings.owner)
        current = ctx.adapter.kernel_version(kernel_id)
        runs = kernel_runs(ctx, kernel_id, current, spec.kernel.machine_shape, spec_accelerator(spec))
        if settings.version is not None:
            runs = tuple(run for run in runs if run.version == settings.version)
        if runs:
            stop_runs(ctx, kernel_id, runs, ENDED_BY_KKB)
        return StopResult(kernel_id, runs)


def _kernel_version(settings: QuerySettings) -> tuple[Session, KernelSpec, str, dict[str, Any] | None, int | None]:
    """The session, the kernel's id, its last push, and the version asked about: --version, else the last
    pushed one, else Kaggle's current one."""
    spec = spec_of(settings.spec, settings.kernel_dir)
    ctx = query_session(settings.kernel_dir, settings.base_url, settings.adapter)
    kernel_id = kernel_id_of(ctx, spec, settings.owner)
    last_push = ctx.history.last(PUSH, kernel=kernel_id)
    version = settings.version or (last_push or {}).get("kernel_version") or ctx.adapter.kernel_version(kernel_id)
    return ctx, spec, kernel_id, last_push, version


def record_score_once(ctx: Session, item: Submission) -> None:
    last = ctx.history.last(SCORE, ref=item.ref)
    if last is None or last.get("status") != item.status:
        ctx.history.append(SCORE, ref=item.ref, status=item.status, public_score=item.public_score,
                           private_score=item.private_score, error_description=item.error_description)


def logs(settings: QuerySettings) -> LogsResult:
    """The log of a kernel run (default: the latest pushed version)."""
    ctx, _, kernel_id, _, version = _kernel_version(settings)
    if version is None:
        raise RemoteError(f"{kernel_id} has no version on Kaggle yet", hint=f"kkb push {settings.kernel_dir} first")
    return LogsResult(kernel_id, version, ctx.adapter.kernel_log(kernel_id, version))


def history(kernel_dir: Path) -> list[HistoryRow]:
    """Every push and submission of the project, oldest first (offline: the local record)."""
    return History.for_kernel(Path(kernel_dir)).rows()


