"""Kaggle's limits as kkb reads them: submissions left today, the accelerator quota, the sessions running.

What Kaggle answers (``GetSubmissionLimits``, ``GetAcceleratorQuotaStatistics``) and what kkb works out because
Kaggle's API has no call for it (kaggle-runtime.md §9):

* the daily submission limit is team-wide and resets at **00:00 UTC** (observed; the API gives counts only);
* an account runs at most **2 GPU batch sessions** at once (observed; not in the API): the sessions running are
  found by asking the status of the recent versions of the user's GPU kernels run within 12 h (``ListKernels``
  sorted by date run, page by page until a page ran wholly before that), since a session is visible only through its
  kernel's versions;
* a version of *this* kernel still queued or running is found the same way, plus every version kkb pushed
  within a session's longest life (12 h) that it has not seen end.

Reading never fails a command: what Kaggle does not answer is a ``note``, and no check is made of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TypeVar

from builder.errors import AuthError, RemoteError
from builder.remote.history import PUSH, RUN
from builder.remote.kaggle_api import Quota, QuotaLine, SubmissionLimits
from builder.remote.session import Session

GPU_SESSION_CAP = 2  # observed (kaggle-runtime.md §9.2); Kaggle publishes no call that says it
SESSION_LIMIT_S = 12 * 3600.0  # Kaggle's longest session: an older version cannot still run
LIVE = ("queued", "running")
RECENT_VERSIONS = 3  # versions of another kernel looked at (a push to a running kernel starts a second session)
T = TypeVar("T")


@dataclass(frozen=True)
class RunningSession:
    """A version that Kaggle says is queued or running: a session of the account."""

    kernel: str
    version: int
    status: str  # queued | running
    machine_shape: str | None
    accelerator: str  # GPU | TPU | CPU

    @property
    def label(self) -> str:
        return f"{self.kernel} v{self.version} ({self.status}, {session_label(self.machine_shape, self.accelerator)})"


@dataclass(frozen=True)
class SubmissionsLeft:
    used_today: int
    left_today: int
    total: int
    limited_by_total: bool
    resets_at: datetime  # the next 00:00 UTC

    @classmethod
    def of(cls, limits: SubmissionLimits, now: datetime) -> SubmissionsLeft:
        return cls(limits.used_today, limits.left_today, limits.total, limits.limited_by_total, next_reset(now))

    @property
    def no_team(self) -> bool:
        """All zero: Kaggle's answer for a user not on a team of the competition yet (nothing known, nothing refused)."""
        return not (self.used_today or self.left_today or self.total or self.limited_by_total)

    def reset_words(self, now: datetime) -> str:
        """``00:00 UTC (01:00 local time, in 3 h 12 min)``."""
        local = self.resets_at.astimezone()
        return f"00:00 UTC ({local:%H:%M} local time, in {duration(max(0.0, (self.resets_at - now).total_seconds()))})"


@dataclass(frozen=True)
class Limits:
    """What ``kkb status`` shows of the platform around the kernel (``--json``: the same fields)."""

    competition: str
    submissions: SubmissionsLeft | None
    gpu: QuotaLine | None
    tpu: QuotaLine | None
    quota_refresh: datetime | None
    sessions: tuple[RunningSession, ...]
    session_cap: int = GPU_SESSION_CAP
    notes: tuple[str, ...] = field(default_factory=tuple)  # what Kaggle did not answer

    def to_json(self) -> dict[str, object]:
        """``kkb status --json``'s ``limits``: times in ISO 8601 UTC, quota in hours."""
        submissions = self.submissions
        return {
            "competition": self.competition,
            "submissions": None if submissions is None else {
                "used_today": submissions.used_today, "left_today": submissions.left_today, "total": submissions.total,
                "limited_by_total": submissions.limited_by_total, "resets_at": _iso(submissions.resets_at)},
            "gpu_quota": _quota_json(self.gpu, self.quota_refresh),
            "tpu_quota": _quota_json(self.tpu, self.quota_refresh),
            "sessions": [{"kernel": s.kernel, "version": s.version, "status": s.status, "machine_shape": s.machine_shape,
                          "accelerator": s.accelerator} for s in self.sessions],
            "session_cap": self.session_cap,
            "notes": list(self.notes),
        }


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def next_reset(now: datetime) -> datetime:
    """The next 00:00 UTC after ``now``: when the team's daily submissions start again."""
    day = now.astimezone(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    return day + timedelta(days=1)


def duration(seconds: float) -> str:
    """``2 h 05 min``, ``12 min``, ``40 s``."""
    if seconds >= 3600:
        return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"
    if seconds >= 60:
        return f"{int(seconds // 60)} min"
    return f"{int(seconds)} s"


def hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def session_label(machine_shape: str | None, accelerator: str) -> str:
    return f"{accelerator} {machine_shape}" if machine_shape and accelerator != "CPU" else accelerator


def accelerator_of(machine_shape: str | None, gpu: bool, tpu: bool) -> str:
    if tpu or str(machine_shape or "").lower().startswith("tpu"):
        return "TPU"
    return "GPU" if gpu or machine_shape else "CPU"


# -- reading ---------------------------------------------------------------------------------------


def submissions_left(ctx: Session, competition: str) -> SubmissionsLeft:
    return SubmissionsLeft.of(ctx.adapter.submission_limits(competition), now_utc())


def read_quota(ctx: Session) -> Quota:
    return ctx.adapter.quota()


def kernel_runs(ctx: Session, kernel_id: str, current: int | None, machine_shape: str | None = None,
                accelerator: str = "CPU") -> tuple[RunningSession, ...]:
    """The versions of ``kernel_id`` still queued or running: its current one, and those kkb pushed lately."""
    if current is None:
        return ()  # no version on Kaggle: nothing of it runs
    since = now_utc() - timedelta(seconds=SESSION_LIMIT_S)
    records = ctx.history.kernel_records(kernel_id)
    versions = {current}
    for record in records:
        version = record.get("kernel_version")
        if record.get("event") == PUSH and isinstance(version, int) and _time(record) >= since and version <= current:
            versions.add(version)
    ended = {record.get("version") for record in records if record.get("event") == RUN}
    running = []
    for version in sorted(v for v in versions if v == current or v not in ended):
        status = ctx.adapter.kernel_status(kernel_id, version).status
        if status in LIVE:
            running.append(RunningSession(kernel_id, version, status, machine_shape, accelerator))
    return tuple(running)


def running_sessions(ctx: Session) -> tuple[RunningSession, ...]:
    """The account's sessions Kaggle says are queued or running, among its GPU and TPU kernels run within a
    session's longest life (the account's kernels page by page, newest run first, down to the first page run before
    that: one on page 2 runs as well)."""
    since = now_utc() - timedelta(seconds=SESSION_LIMIT_S)
    found = []
    kernels = [k for k in ctx.adapter.my_kernels(run_since=since) if (k.gpu or k.tpu) and k.current_version
               and (k.last_run is None or k.last_run >= since)]
    for kernel in kernels:
        accelerator = accelerator_of(kernel.machine_shape, kernel.gpu, kernel.tpu)
        newest = int(kernel.current_version or 0)
        for version in range(newest, max(0, newest - RECENT_VERSIONS), -1):
            status = ctx.adapter.kernel_status(kernel.ref, version).status
            if status in LIVE:
                found.append(RunningSession(kernel.ref, version, status, kernel.machine_shape, accelerator))
    return tuple(found)


def read_limits(ctx: Session, competition: str) -> Limits:
    """Everything ``kkb status`` shows; what Kaggle does not answer becomes a note."""
    notes: list[str] = []
    submissions = _asked(notes, "the submissions left", lambda: submissions_left(ctx, competition))
    quota = _asked(notes, "the accelerator quota", lambda: read_quota(ctx))
    sessions = _asked(notes, "the running sessions", lambda: running_sessions(ctx))
    return Limits(competition=competition, submissions=submissions, gpu=quota.gpu if quota else None,
                  tpu=quota.tpu if quota else None, quota_refresh=quota.refresh if quota else None,
                  sessions=sessions or (), notes=tuple(notes))


def _asked(notes: list[str], what: str, ask: Callable[[], T]) -> T | None:
    """``ask()``, or None with a note when Kaggle refuses or does not answer (never an error: it is information)."""
    try:
        return ask()
    except AuthError:
        raise
    except RemoteError as exc:
        notes.append(f"Kaggle did not say {what}: {exc.message}")
        return None


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z") if moment else None


def _quota_json(line: QuotaLine | None, refresh: datetime | None) -> dict[str, object] | None:
    if line is None:
        return None
    return {"used_hours": round(line.used_s / 3600, 3), "total_hours": round(line.total_s / 3600, 3),
            "left_hours": round(line.left_s / 3600, 3), "refresh_at": _iso(refresh)}


def _time(record: dict[str, object]) -> datetime:
    try:
        return datetime.fromisoformat(str(record.get("time", "")).replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=timezone.utc)
