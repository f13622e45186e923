"""Before a push that will run, and before a submission: Kaggle's limits, asked first, so nothing is spent blind.

Every kernel kkb pushes to run is checked before anything is uploaded, by the one function ``check_before_run``
given the run it plans (a :class:`PlannedRun`): ``kkb push``/``kkb submit``'s kernel (:func:`planned_run`), the
rehearsal kernel of ``kkb dry-run --on-kaggle``, the capture kernel of ``kkb image --on-kaggle`` and the helper
kernel of ``kkb wheels --on-kaggle``; each takes ``--wait-for-slot``, ``--force`` and ``--replace``. In this order:

1. **one run per kernel**: a version of this kernel still queued or running is refused (a new version would be
   a second session while the first keeps running and billing); ``--replace`` stops it first (Kaggle's API:
   deleting the kernel), ``--wait-for-slot`` waits for it to end, ``--force`` runs both;
2. **submissions** (``kkb submit``): none left today for the team is refused, naming the reset (00:00 UTC, and
   in local time); ``--wait-for-slot`` pushes now and submits after the reset, ``--force`` pushes anyway;
3. **the accelerator quota** (GPU/TPU kernels): less left this week than the run needs (the last dry run's
   projection of the rerun, else the kernel's timeout, else the competition's time limit) is refused;
   ``--force`` pushes anyway (Kaggle stops a session when the quota runs out);
4. **the GPU session cap**: at 2 GPU sessions of the account at once, refused naming them; ``--wait-for-slot``
   waits for one to end, ``--force`` pushes anyway.

Each refusal is a :class:`~builder.errors.LimitReached` (exit 3) with the way on in its hint. Before
submitting, ``await_submission_slot`` asks again: the team may have used the last one during the run. When Kaggle
itself refuses a push at the session cap (a session kkb could not see), ``push_when_slot`` waits for a slot with
``--wait-for-slot`` and pushes again (``kkb push`` does the same within its own retry loop, ``waited_for_slot``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from builder.build import BuildResult
from builder.errors import AuthError, LimitReached, RemoteError, SessionCapReached
from builder.project.jsonfile import read_object
from builder.project.layout import DRYRUN_DIR, REPORT_FILE
from builder.project.spec import KernelSpec
from builder.remote.backoff import Retrying
from builder.remote.history import ENDED_REPLACED
from builder.remote.kaggle_api import KernelPushed
from builder.remote.limits import (
    GPU_SESSION_CAP,
    SESSION_LIMIT_S,
    RunningSession,
    SubmissionsLeft,
    duration,
    hours,
    kernel_runs,
    now_utc,
    read_quota,
    running_sessions,
    submissions_left,
)
from builder.remote.runs import spec_accelerator, stop_runs
from builder.remote.session import Session

T = TypeVar("T")


@dataclass(frozen=True)
class Needed:
    """The accelerator time a run needs, and where that number comes from (said in the quota's refusal)."""

    seconds: float
    basis: str


@dataclass(frozen=True)
class PlannedRun:
    """A kernel version kkb is about to push, which will run (a session)."""

    kernel_id: str
    machine_shape: str | None  # None: CPU
    accelerator: str  # GPU | TPU | CPU
    needed: Needed  # for the quota: what the run takes
    submit_to: str | None = None  # the competition, when the run must end in a submission (kkb submit)
    chosen_by: str = "[kernel] accelerator in kernel.toml"  # where the run's accelerator is chosen (the quota's hint)


def planned_run(build: BuildResult, *, submitting: bool) -> PlannedRun:
    """The run of the kernel ``kkb push``/``kkb submit`` pushes."""
    return PlannedRun(build.kernel_id, build.spec.kernel.machine_shape, spec_accelerator(build.spec),
                      needed_seconds(build), build.spec.competition.slug if submitting else None)


def check_before_run(ctx: Session, run: PlannedRun, *, current: int | None) -> int | None:
    """Refuse (or wait, or stop what runs) before a push that starts ``run``; ``current``: the kernel's version on
    Kaggle now (None: none yet). See the module's doc for the order. Returns the kernel's version after the checks:
    ``current``, or None where ``--replace`` deleted the kernel (its next version is 1)."""
    deleted = one_run_per_kernel(ctx, run, current)
    if run.submit_to is not None:
        daily_limit(ctx, run.submit_to)
    if run.accelerator != "CPU":
        quota_left(ctx, run)
    if run.accelerator == "GPU":
        session_cap(ctx)
    return None if deleted else current


def push_when_slot(ctx: Session, push: Callable[[], T]) -> T:
    """``push()``; refused by Kaggle itself at the GPU session cap, with ``--wait-for-slot``: wait and push again."""
    rounds = ctx.rounds()
    while True:
        try:
            return push()
        except SessionCapReached as exc:
            if not waited_for_slot(ctx, rounds, exc):
                raise


def push_to_run(ctx: Session, folder: Path, kernel_id: str, *,
                timeout_seconds: int | None = None) -> tuple[int | None, KernelPushed]:
    """Push the kernel in ``folder`` (``kernel_id``) through :func:`push_when_slot`; its new version (asked of
    Kaggle when the push's answer carries none) and Kaggle's answer."""
    pushed = push_when_slot(ctx, lambda: ctx.adapter.push_kernel(folder, timeout_seconds=timeout_seconds))
    return (pushed.version if pushed.version is not None else ctx.adapter.kernel_version(kernel_id)), pushed


def waited_for_slot(ctx: Session, rounds: Retrying, exc: SessionCapReached) -> bool:
    """Kaggle itself refused the push at the GPU session cap (a session kkb could not see, or one that started since
    it looked): with ``--wait-for-slot``, wait until a slot is free; False when the push is not to be tried again."""
    if not ctx.settings.wait_for_slot:
        return False
    session_cap(ctx)  # waits while the account's sessions kkb sees are at the cap
    delay = rounds.next_delay()
    if delay is None:
        return False
    ctx.emit("limits", f"{exc.message}: pushing again in {delay:.0f}s (--wait-for-slot)")
    ctx.sleep(delay)
    return True


def one_run_per_kernel(ctx: Session, run: PlannedRun, current: int | None) -> bool:
    """Whether ``--replace`` deleted the kernel to stop its running version (else it refused, waited, or let it be)."""
    kernel_id, settings = run.kernel_id, ctx.settings
    runs = _asked(ctx, "whether the kernel still runs", lambda: kernel_runs(
        ctx, kernel_id, current, run.machine_shape, run.accelerator))
    if not runs:
        return False
    names = "; ".join(run.label for run in runs)
    if settings.replace:
        stop_runs(ctx, kernel_id, runs, ENDED_REPLACED)
        return True
    if settings.force:
        ctx.emit("limits", f"{names} keeps running (and billing) beside the new version (--force)")
    elif settings.wait_for_slot:
        def probe() -> tuple[str, bool]:
            left = kernel_runs(ctx, kernel_id, current, run.machine_shape, run.accelerator)
            return ("; ".join(run.label for run in left) or "ended"), not left

        ctx.wait("limits", f"{kernel_id}'s running version to end", probe, SESSION_LIMIT_S,
                 hint=f"it still runs on Kaggle; kkb status {ctx.settings.kernel_dir} shows it")
    else:
        raise LimitReached(
            f"{names} is still on Kaggle: a new version of {kernel_id} would start a second session while it keeps "
            "running and billing",
            hint="wait for it to end (kkb status shows it) or pass --wait-for-slot to wait; --replace stops it "
                 "first (Kaggle's API stops a run only by deleting the kernel: every version goes); --force runs both")
    return False


def daily_limit(ctx: Session, slug: str) -> None:
    """No submission left today in competition ``slug``: refuse before the run (unless --wait-for-slot or --force
    say how to go on)."""
    left = _asked(ctx, "the submissions left", lambda: submissions_left(ctx, slug))
    if left is None:
        return
    if left.no_team:
        ctx.emit("limits", f"not checked: Kaggle counts no submissions for you in {slug} yet (no team)")
        return
    if left.left_today > 0:
        ctx.emit("limits", f"{slug}: {left.left_today} submission(s) left today")
        return
    what = _no_submission(slug, left)
    if left.limited_by_total:
        raise LimitReached(what, hint="the competition allows no more submissions from your team")
    if ctx.settings.wait_for_slot:
        ctx.emit("limits", f"{what}: pushing now, submitting once the limit resets (--wait-for-slot)")
    elif ctx.settings.force:
        ctx.emit("limits", f"{what}: pushing anyway (--force); the submission must wait for the reset")
    else:
        raise LimitReached(what, hint="--wait-for-slot pushes now and submits after the reset; --force pushes anyway "
                                      "(the run bills; submit it later with kkb submit --version N)")


def await_submission_slot(ctx: Session, spec: KernelSpec, kernel_id: str, version: int) -> None:
    """Just before submitting: a slot now, or (``--wait-for-slot``) the wait for the reset, else a refusal."""
    slug = spec.competition.slug
    left = _asked(ctx, "the submissions left", lambda: submissions_left(ctx, slug))
    if left is None or left.left_today > 0 or left.no_team:
        return
    what = _no_submission(slug, left)
    if left.limited_by_total or not ctx.settings.wait_for_slot:
        raise LimitReached(f"{what}: {kernel_id} v{version} ran and was not submitted",
                           hint=f"kkb submit --version {version} submits it once there is a slot (--wait-for-slot "
                                "waits for the reset)")

    def probe() -> tuple[str, bool]:
        now = submissions_left(ctx, slug)
        return f"{now.left_today} left", now.left_today > 0

    wait_s = (left.resets_at - now_utc()).total_seconds() + 3600  # Kaggle's midnight may come a little later
    ctx.wait("submission", f"a submission slot (the daily limit resets at {left.reset_words(now_utc())})", probe,
             max(wait_s, 60.0), hint=f"kkb submit --version {version} submits it later")


def quota_left(ctx: Session, run: PlannedRun) -> None:
    accelerator, needed = run.accelerator, run.needed
    quota = _asked(ctx, "the accelerator quota", lambda: read_quota(ctx))
    line = (quota.gpu if accelerator == "GPU" else quota.tpu) if quota is not None else None
    if quota is None or line is None:
        return
    state = (f"{accelerator} quota: {hours(line.left_s)} left this week ({hours(line.used_s)} of "
             f"{hours(line.total_s)} used), the run needs {hours(needed.seconds)} ({needed.basis})")
    if line.left_s >= needed.seconds:
        ctx.emit("limits", state)
        return
    if ctx.settings.force:
        ctx.emit("limits", f"{state}: pushing anyway (--force); Kaggle stops the session when the quota runs out")
        return
    refresh = f"it refreshes {quota.refresh:%a %d %b %H:%M} UTC" if quota.refresh else "it refreshes weekly"
    raise LimitReached(state, hint=f"{refresh}; run on another accelerator ({run.chosen_by}), or --force to push anyway")


def session_cap(ctx: Session) -> None:
    sessions = _asked(ctx, "the running sessions", lambda: _gpu_sessions(ctx))
    if sessions is None or len(sessions) < GPU_SESSION_CAP:
        return
    names = "; ".join(session.label for session in sessions)
    what = f"your account runs {len(sessions)} GPU sessions, the most Kaggle allows at once ({GPU_SESSION_CAP}): {names}"
    if ctx.settings.force:
        ctx.emit("limits", f"{what}; pushing anyway (--force): Kaggle refuses or queues it")
    elif ctx.settings.wait_for_slot:
        def probe() -> tuple[str, bool]:
            running = _gpu_sessions(ctx)
            return f"{len(running)} GPU sessions running", len(running) < GPU_SESSION_CAP

        ctx.wait("limits", "a GPU session slot", probe, SESSION_LIMIT_S,
                 hint="the sessions still run on Kaggle; kkb status lists them")
    else:
        raise LimitReached(what, hint="--wait-for-slot waits until one ends, then pushes; --force pushes anyway "
                                      "(Kaggle refuses it or queues it)")


def needed_seconds(build: BuildResult) -> Needed:
    """What the run will take: the last dry run's projection of the rerun, capped by the kernel's timeout; else the
    timeout; else the competition's time limit."""
    spec = build.spec
    timeout = spec.kernel.timeout_seconds
    report = read_object(Path(build.out_dir) / DRYRUN_DIR / REPORT_FILE)
    scenarios = [s for s in report.get("scenarios") or [] if isinstance(s, dict)]
    rerun = next((s for s in scenarios if s.get("scenario") == "rerun" and s.get("ok")), None)
    projected = rerun.get("projected_seconds") if rerun is not None else None
    if isinstance(projected, (int, float)) and projected > 0:
        seconds = min(float(projected), float(timeout)) if timeout else float(projected)
        return Needed(seconds, f"the last dry run's projection of the rerun, {duration(float(projected))}")
    return unprojected_seconds(spec)


def unprojected_seconds(spec: KernelSpec) -> Needed:
    """What a run takes where nothing projects it: the kernel's timeout, else the competition's time limit."""
    if spec.kernel.timeout_seconds:
        return Needed(float(spec.kernel.timeout_seconds), "[kernel] timeout_seconds")
    return Needed(spec.competition.time_limit_hours * 3600, "the competition's time limit: no dry run projects it")


def _no_submission(slug: str, left: SubmissionsLeft) -> str:
    if left.limited_by_total:
        return f"{slug}: your team has made all the submissions the competition allows ({left.total})"
    return (f"{slug}: no submission left today for your team ({left.used_today} made today); the daily limit resets "
            f"at {left.reset_words(now_utc())}")


def _gpu_sessions(ctx: Session) -> list[RunningSession]:
    return [session for session in running_sessions(ctx) if session.accelerator == "GPU"]


def _asked(ctx: Session, what: str, ask: Callable[[], T]) -> T | None:
    """``ask()``; when Kaggle does not answer it, the check is skipped and said (never a refusal on no answer)."""
    try:
        return ask()
    except AuthError:
        raise
    except RemoteError as exc:
        ctx.emit("limits", f"not checked: Kaggle did not say {what} ({exc.message})")
        return None
