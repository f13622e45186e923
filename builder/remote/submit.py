"""``kkb submit``: push (unless given a version), wait for the kernel run, submit that version, wait for the score.

A submission is preceded by an *intent* record in the history, so an interrupted submit finds the
submission Kaggle made instead of spending another of the day's submissions.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from builder.errors import AuthError, KernelFailed, RemoteError
from builder.project.spec import KernelSpec, spec_of
from builder.remote.hints import dry_run_hint, tail_block
from builder.remote.history import MOUNTED, PUSH, RUN, SCORE, SUBMISSION, SUBMISSION_INTENT
from builder.remote.kaggle_api import Submission, TransientRemoteError, parse_log
from builder.remote.lock import kernel_lock
from builder.remote.mounted import expected_inputs, raise_if_differs, verify_mounted
from builder.remote.outputs import fetch_run_output, keep_run_output, kept_output
from builder.remote.preflight import await_submission_slot, daily_limit
from builder.remote.push import LazySession, PushResult, build_for_push, push_built, with_spec
from builder.remote.queries import record_score_once
from builder.remote.runs import record_run, spec_accelerator
from builder.remote.session import PushSettings, Session, kernel_id_of, open_session

RUN_DONE = {"complete", "error", "cancel_acknowledged", "cancel_requested"}


@dataclass(frozen=True)
class SubmitSettings(PushSettings):
    version: int | None = None  # submit this kernel version instead of pushing
    resubmit: bool = False  # submit again even if this kernel version was already submitted


@dataclass(frozen=True)
class SubmitResult:
    kernel_id: str
    kernel_version: int
    competition: str
    submission_ref: int
    status: str
    public_score: str
    server_message: str
    push: PushResult | None


def submit(settings: SubmitSettings) -> SubmitResult:
    """Push (unless ``settings.version``), wait for the run, submit that version, wait for the score."""
    settings = with_spec(settings)
    with kernel_lock(Path(settings.kernel_dir), "submit", settings.lock_wait_s):
        return _submit(settings)


def _submit(settings: SubmitSettings) -> SubmitResult:
    spec = spec_of(settings.spec, settings.kernel_dir)
    pushed: PushResult | None = None
    if settings.version is None:
        lazy = LazySession(settings)
        build = build_for_push(settings, lazy)
        ctx = lazy.get()
        pushed = push_built(ctx, build, submitting=True)  # a new version: Kaggle's limits were asked before it
        kernel_id, version = pushed.kernel_id, pushed.kernel_version
        if version is None:
            raise RemoteError(f"Kaggle did not report a version for {kernel_id}", hint="pass --version N")
    else:
        ctx = open_session(settings)
        kernel_id, version = kernel_id_of(ctx, spec), settings.version
    if (pushed is None or pushed.kernel_action != "pushed") and _needs_submission(ctx, settings, kernel_id, version):
        daily_limit(ctx, spec.competition.slug)  # no run is started, but waiting for one that cannot be submitted is no better
    _await_run(ctx, spec, kernel_id, version)
    _after_run(ctx, spec, kernel_id, version, pushed)
    return _submit_version(ctx, settings, spec, kernel_id, version, pushed)


def _needs_submission(ctx: Session, settings: SubmitSettings, kernel_id: str, version: int) -> bool:
    """Whether submitting this version makes a new submission (the history knows of none that did not fail)."""
    record = ctx.history.last(SUBMISSION, kernel=kernel_id, kernel_version=version)
    if settings.resubmit or record is None:
        return True
    score = ctx.history.last(SCORE, ref=record.get("ref"))
    return score is not None and score.get("status") != "complete"


def _await_run(ctx: Session, spec: KernelSpec, kernel_id: str, version: int) -> None:
    timeout = ctx.settings.waits.run_timeout_s or _run_budget(ctx, spec)

    def probe() -> tuple[str, bool]:
        state = ctx.adapter.kernel_status(kernel_id, version).status
        return state, state in RUN_DONE

    state = ctx.wait(
        "run", f"kernel run {kernel_id} v{version}", probe, timeout,
        hint=f"the run goes on without kkb: kkb submit --version {version} picks it up later",
    )
    if state == "complete":
        return
    status = ctx.adapter.kernel_status(kernel_id, version)
    entries = ctx.adapter.kernel_log(kernel_id, version)
    if ctx.history.last(RUN, kernel=kernel_id, version=version) is None:
        record_run(ctx, kernel_id, version, state, machine_shape=spec.kernel.machine_shape,
                   accelerator=spec_accelerator(spec), failure=status.failure_message, log=entries)
    raise KernelFailed(
        f"kernel run {kernel_id} v{version} ended in {state.upper()}"
        + (f": {status.failure_message}" if status.failure_message else "")
        + tail_block(entries, status.failure_message),
        hint=f"kkb logs {ctx.settings.kernel_dir} --version {version} shows the whole log; "
        f"kkb dry-run {ctx.settings.kernel_dir} reproduces the run locally",
    )


def _after_run(ctx: Session, spec: KernelSpec, kernel_id: str, version: int, pushed: PushResult | None) -> None:
    """The completed run: its session in the history, what it found mounted checked against what was pushed (never
    submitted when they differ), its submission file kept (what kkb compare --kernel compares a new file with)."""
    kept = kept_output(ctx, spec, kernel_id, version)
    mounted = ctx.history.last(MOUNTED, kernel=kernel_id, kernel_version=version)
    recorded = ctx.history.last(RUN, kernel=kernel_id, version=version) is not None
    if kept is None or mounted is None or not recorded:
        with tempfile.TemporaryDirectory(prefix="kkb-output-") as folder:
            scratch = Path(folder)
            fetched = fetch_run_output(ctx, kernel_id, version, scratch)
            if not recorded:
                log = parse_log(_read_log(scratch)) if fetched else []
                record_run(ctx, kernel_id, version, "complete", machine_shape=spec.kernel.machine_shape,
                           accelerator=spec_accelerator(spec), log=log)
            if fetched and mounted is None:
                mounted = verify_mounted(ctx, kernel_id, version, scratch,
                                         expected_inputs(ctx, kernel_id, version, pushed))
            if fetched and kept is None:
                keep_run_output(ctx, spec, kernel_id, version, scratch)
    raise_if_differs(mounted, kernel_id, version)


def _read_log(folder: Path) -> str:
    """The run's log the client saved beside its output (``<slug>.log``)."""
    logs = sorted(folder.glob("*.log"))
    return logs[0].read_text(encoding="utf-8", errors="replace") if logs else ""


def _run_budget(ctx: Session, spec: KernelSpec) -> float:
    limit = spec.kernel.timeout_seconds or spec.competition.time_limit_hours * 3600
    return float(limit) + ctx.settings.waits.queue_margin_s


def _submit_version(ctx: Session, settings: SubmitSettings, spec: KernelSpec, kernel_id: str, version: int,
                    pushed: PushResult | None) -> SubmitResult:
    competition = spec.competition.slug
    message = settings.message or f"kkb {kernel_id} v{version}"
    ref, server_message = _existing_submission(ctx, kernel_id, version) if not settings.resubmit else (None, "")
    if ref is None:
        await_submission_slot(ctx, spec, kernel_id, version)  # the team may have used the last one meanwhile
        ref, server_message = _create_submission(ctx, spec, kernel_id, version, message, pushed)
    result = _await_score(ctx, spec, ref)
    record_score_once(ctx, result)
    if result.status != "complete":
        raise KernelFailed(
            f"submission #{ref} of {kernel_id} v{version} to {competition} failed: "
            f"{result.error_description or result.status.upper()}",
            hint=dry_run_hint(result.error_description, ctx.settings.kernel_dir, spec.competition.metric),
        )
    return SubmitResult(kernel_id, version, competition, ref, result.status, result.public_score, server_message, pushed)


def _existing_submission(ctx: Session, kernel_id: str, version: int) -> tuple[int | None, str]:
    """A submission of this very version already made (not one that failed): wait for it instead."""
    record = ctx.history.last(SUBMISSION, kernel=kernel_id, kernel_version=version)
    if record is None:
        return None, ""
    score = ctx.history.last(SCORE, ref=record.get("ref"))
    if score is not None and score.get("status") != "complete":
        return None, ""
    try:  # the server must still know it as ours (a local Kaggle may have been reset)
        known = ctx.adapter.submission(int(record["ref"]))
    except AuthError:
        raise
    except RemoteError:
        return None, ""
    if known.description != record.get("message", known.description):
        return None, ""
    ctx.emit("submission", f"#{record['ref']} already submits {kernel_id} v{version}")
    return int(record["ref"]), str(record.get("server_message", ""))


def _create_submission(
    ctx: Session, spec: KernelSpec, kernel_id: str, version: int, message: str, pushed: PushResult | None
) -> tuple[int, str]:
    competition = spec.competition.slug
    known = {item.ref for item in ctx.adapter.submissions(competition)}
    intent = ctx.history.open_intent(SUBMISSION_INTENT, SUBMISSION, "kernel_version", version)
    if intent is not None and intent.get("kernel") == kernel_id:
        found = _find_new_submission(ctx, competition, set(intent.get("known", [])), intent.get("message", ""))
        if found is not None:
            return _record_submission(ctx, kernel_id, version, competition, found, "", pushed, message), ""
    rounds = ctx.rounds()
    while True:
        ctx.history.append(SUBMISSION_INTENT, kernel=kernel_id, kernel_version=version, message=message, known=sorted(known))
        ctx.emit("submission", f"submitting {kernel_id} v{version} to {competition}")
        try:
            ref, server_message = ctx.adapter.submit_code(competition, kernel_id, version, spec.submission.file, message)
        except TransientRemoteError as exc:
            ctx.retry_round(rounds, "submitting", exc)
            found = _find_new_submission(ctx, competition, known, message)
            if found is not None:
                return _record_submission(ctx, kernel_id, version, competition, found, "", pushed, message), ""
            continue
        return _record_submission(ctx, kernel_id, version, competition, ref, server_message, pushed, message), server_message


def _find_new_submission(ctx: Session, competition: str, known: set[int], message: str) -> int | None:
    for item in ctx.adapter.submissions(competition):
        if item.ref not in known and item.description == message:
            return item.ref
    return None


def _record_submission(
    ctx: Session, kernel_id: str, version: int, competition: str, ref: int, server_message: str,
    pushed: PushResult | None, message: str,
) -> int:
    last = ctx.history.last(PUSH, kernel=kernel_id, kernel_version=version) or {}
    ctx.history.append(
        SUBMISSION, ref=ref, kernel=kernel_id, kernel_version=version, competition=competition, message=message,
        server_message=server_message,
        code_hash=pushed.code.content_hash if pushed else last.get("code_hash", ""),
        weights_hash=pushed.weights.content_hash if pushed and pushed.weights else last.get("weights_hash"),
        code_version=pushed.code.version if pushed else last.get("code_version"),
        weights_version=pushed.weights.version if pushed and pushed.weights else last.get("weights_version"),
    )
    ctx.emit("submission", f"submitted: #{ref}")
    return ref


def _await_score(ctx: Session, spec: KernelSpec, ref: int) -> Submission:
    timeout = ctx.settings.waits.scoring_timeout_s or _run_budget(ctx, spec)
    latest: dict[str, Submission] = {}

    def probe() -> tuple[str, bool]:
        latest["item"] = ctx.adapter.submission(ref)
        state = latest["item"].status
        return state, state in ("complete", "error")

    ctx.wait("submission", f"scoring of submission #{ref}", probe, timeout,
             hint="scoring goes on without kkb: kkb status shows it later")
    return latest["item"]


