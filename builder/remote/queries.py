"""``kkb status`` / ``logs`` / ``history``: what Kaggle and the project's history say about the kernel."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.errors import RemoteError
from builder.project.spec import KernelSpec, spec_of
from builder.remote.history import PUSH, SCORE, SUBMISSION, History, HistoryRow
from builder.remote.kaggle_api import KaggleAdapter, NotFoundError, Submission
from builder.remote.session import Session, kernel_id_of, query_session


@dataclass(frozen=True)
class StatusResult:
    kernel_id: str
    kernel_version: int | None
    run_status: str | None
    failure_message: str
    last_push: dict[str, Any] | None
    submission: Submission | None


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


def status(settings: QuerySettings) -> StatusResult:
    """The latest push, the state of its kernel run, and the latest submission's state on Kaggle."""
    ctx, kernel_id, last_push, version = _kernel_version(settings)
    run_status, failure = None, ""
    if version is not None:
        with contextlib.suppress(NotFoundError):  # a version Kaggle does not know; no answer is an error
            run = ctx.adapter.kernel_status(kernel_id, version)
            run_status, failure = run.status, run.failure_message
    submission = None
    record = ctx.history.last(SUBMISSION, kernel=kernel_id)
    if record is not None:
        submission = ctx.adapter.submission(int(record["ref"]))
        if submission.status in ("complete", "error"):
            record_score_once(ctx, submission)
    return StatusResult(kernel_id, version, run_status, failure, last_push, submission)


def _kernel_version(settings: QuerySettings) -> tuple[Session, str, dict[str, Any] | None, int | None]:
    """The session, the kernel's id, its last push, and the version asked about: --version, else the last
    pushed one, else Kaggle's current one."""
    spec = spec_of(settings.spec, settings.kernel_dir)
    ctx = query_session(settings.kernel_dir, settings.base_url, settings.adapter)
    kernel_id = kernel_id_of(ctx, spec, settings.owner)
    last_push = ctx.history.last(PUSH, kernel=kernel_id)
    version = settings.version or (last_push or {}).get("kernel_version") or ctx.adapter.kernel_version(kernel_id)
    return ctx, kernel_id, last_push, version


def record_score_once(ctx: Session, item: Submission) -> None:
    last = ctx.history.last(SCORE, ref=item.ref)
    if last is None or last.get("status") != item.status:
        ctx.history.append(SCORE, ref=item.ref, status=item.status, public_score=item.public_score,
                           private_score=item.private_score, error_description=item.error_description)


def logs(settings: QuerySettings) -> LogsResult:
    """The log of a kernel run (default: the latest pushed version)."""
    ctx, kernel_id, _, version = _kernel_version(settings)
    if version is None:
        raise RemoteError(f"{kernel_id} has no version on Kaggle yet", hint=f"kkb push {settings.kernel_dir} first")
    return LogsResult(kernel_id, version, ctx.adapter.kernel_log(kernel_id, version))


def history(kernel_dir: Path) -> list[HistoryRow]:
    """Every push and submission of the project, oldest first (offline: the local record)."""
    return History.for_kernel(Path(kernel_dir)).rows()


