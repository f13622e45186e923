"""``kkb push`` / ``kkb submit`` / ``status`` / ``logs`` / ``history``: from a kernel project to a score.

``push`` builds, then brings Kaggle up to date with as little as possible: a dataset is created or
versioned only when its content hash differs from what Kaggle holds (its ``manifest.json``) or, when
Kaggle cannot say, from the last push recorded in the history; a new kernel version is pushed only
when the notebook, its metadata or a dataset changed. Every wait polls with backoff and has a timeout.
``submit`` pushes (unless given a version), waits for the kernel run, submits that version to the
competition and waits for the score.

Calls that create something on Kaggle are preceded by an *intent* record in the history
(``builder.history``), so a push interrupted after Kaggle acted adopts that version on the next run
instead of creating a duplicate. The library never prints: progress goes to ``settings.progress``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.errors import AuthError, KernelFailed, KkbError, RemoteError
from builder.history import (
    DATASET,
    DATASET_INTENT,
    KERNEL_INTENT,
    KERNEL_REFUSED,
    PUSH,
    RUN,
    SCORE,
    SUBMISSION,
    SUBMISSION_INTENT,
    History,
    HistoryRow,
)
from builder.kaggle_api import KaggleAdapter, Submission, TransientRemoteError

MANIFEST = "manifest.json"
KERNEL_METADATA = "kernel-metadata.json"

RUN_DONE = {"complete", "error", "cancel_acknowledged", "cancel_requested"}
DATASET_BAD = {"failed", "deleted"}


# --------------------------------------------------------------------------------------------
# Settings, progress and results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProgressEvent:
    """What push/submit is doing. ``waiting`` events repeat while a poll is in progress."""

    stage: str  # "build" | "weights" | "code" | "kernel" | "run" | "submission" | "retry"
    message: str
    waiting: bool = False
    elapsed: float = 0.0


ProgressFn = Callable[[ProgressEvent], None]


@dataclass(frozen=True)
class Waits:
    """Polling and timeouts. Runs and scoring default to the competition's time limit plus queueing."""

    poll_initial_s: float = 1.0
    poll_max_s: float = 30.0
    poll_factor: float = 1.5
    dataset_timeout_s: float = 1800.0
    run_timeout_s: float | None = None
    scoring_timeout_s: float | None = None
    queue_margin_s: float = 3600.0
    rounds: int = 5  # attempts at a create call whose transient failure needed a look at the server


@dataclass(frozen=True)
class PushSettings:
    kernel_dir: Path
    out_dir: Path | None = None
    owner: str | None = None
    message: str | None = None  # dataset version notes / submission description
    base_url: str | None = None  # default: $KKB_KAGGLE_API, else kaggle.com
    waits: Waits = field(default_factory=Waits)
    progress: ProgressFn | None = None
    adapter: KaggleAdapter | None = None  # the seam: tests and the demo may hand one in


@dataclass(frozen=True)
class SubmitSettings(PushSettings):
    version: int | None = None  # submit this kernel version instead of pushing
    resubmit: bool = False  # submit again even if this kernel version was already submitted


@dataclass(frozen=True)
class DatasetResult:
    ref: str
    content_hash: str
    version: int | None
    action: str  # "created" | "versioned" | "unchanged" | "adopted"
    uploaded_bytes: int


@dataclass(frozen=True)
class PushResult:
    kernel_id: str
    kernel_url: str
    kernel_version: int | None
    kernel_action: str  # "pushed" | "unchanged" | "adopted"
    code: DatasetResult
    weights: DatasetResult | None  # None: the kernel has no weights dataset
    uploaded_bytes: int
    out_dir: Path


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


# --------------------------------------------------------------------------------------------
# Shared context
# --------------------------------------------------------------------------------------------


@dataclass
class _Context:
    settings: PushSettings
    adapter: KaggleAdapter
    history: History
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)

    def emit(self, stage: str, message: str, *, waiting: bool = False, elapsed: float = 0.0) -> None:
        if self.settings.progress is not None:
            self.settings.progress(ProgressEvent(stage, message, waiting, elapsed))

    def sleep(self, seconds: float) -> None:
        self.adapter.sleep(seconds)

    def wait(self, stage: str, what: str, probe: Callable[[], tuple[str, bool]], timeout_s: float, hint: str) -> str:
        """Poll ``probe`` (→ state, finished) with backoff and jitter until finished or ``timeout_s``."""
        waits = self.settings.waits
        start = self.clock()
        interval = waits.poll_initial_s
        while True:
            state, finished = probe()
            elapsed = self.clock() - start
            self.emit(stage, f"{what}: {state}", waiting=not finished, elapsed=elapsed)
            if finished:
                return state
            remaining = timeout_s - elapsed
            if remaining <= 0:
                raise RemoteError(f"timed out after {timeout_s:g}s waiting for {what} (last status: {state})", hint=hint)
            self.sleep(min(remaining, interval * self.rng.uniform(0.8, 1.2)))
            interval = min(waits.poll_max_s, interval * waits.poll_factor)

    def backoff(self, round_: int, action: str, error: KkbError) -> None:
        delay = min(self.settings.waits.poll_max_s, self.settings.waits.poll_initial_s * 2**round_)
        delay *= self.rng.uniform(0.5, 1.0)
        self.emit("retry", f"{action} failed ({error.message}); checking Kaggle and trying again in {delay:.1f}s")
        self.sleep(delay)


def push_context(settings: PushSettings) -> _Context:
    adapter = settings.adapter or KaggleAdapter.connect(settings.base_url)
    if settings.progress is not None and adapter.on_retry is None:
        def on_retry(action: str, exc: BaseException, delay: float) -> None:
            settings.progress(ProgressEvent("retry", f"{action}: transient error, retrying in {delay:.1f}s"))  # type: ignore[misc]
        adapter.on_retry = on_retry
    return _Context(settings=settings, adapter=adapter, history=_history(settings.kernel_dir, adapter))


@contextlib.contextmanager
def private_tmpdir(kernel_dir: Path) -> Iterator[Path]:
    """The client keeps resumable-upload state (and builds tar archives) under ``tempfile.gettempdir()``.

    A per-project private folder (``.kkb/tmp``, mode 0700) keeps that state away from other users
    and projects and lets a re-run resume an upload that an earlier run left unfinished.
    """
    path = Path(kernel_dir) / ".kkb" / "tmp"
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    previous = tempfile.tempdir
    tempfile.tempdir = str(path)  # gettempdir() is cached: the env var alone would not do
    try:
        yield path
    finally:
        tempfile.tempdir = previous


# --------------------------------------------------------------------------------------------
# push
# --------------------------------------------------------------------------------------------


def push(settings: PushSettings) -> PushResult:
    """Build ``settings.kernel_dir`` and bring its datasets and kernel on Kaggle up to date."""
    ctx = _LazyContext(settings)
    build = _build(settings, ctx)
    return _push_built(ctx.get(), build)


class _LazyContext:
    """Connects on first use: the build runs offline first, so its errors come before any network."""

    def __init__(self, settings: PushSettings) -> None:
        self.settings = settings
        self._ctx: _Context | None = None

    def get(self) -> _Context:
        if self._ctx is None:
            self._ctx = push_context(self.settings)
        return self._ctx


def _build(settings: PushSettings, lazy: _LazyContext) -> Any:
    from builder.build import BuildSettings, build_kernel

    if settings.progress is not None:
        settings.progress(ProgressEvent("build", f"building {settings.kernel_dir}"))
    owner = settings.owner or _owner_from_credentials(settings, lazy)
    return build_kernel(BuildSettings(kernel_dir=Path(settings.kernel_dir), out_dir=settings.out_dir, owner=owner))


def _owner_from_credentials(settings: PushSettings, lazy: _LazyContext) -> str | None:
    """Ask Kaggle only when neither kernel.toml nor KAGGLE_USERNAME/kaggle.json names the owner (token-only)."""
    from builder.credentials import kaggle_username
    from builder.spec import load_spec

    if load_spec(Path(settings.kernel_dir)).kernel.owner or kaggle_username():
        return None
    return lazy.get().adapter.username


def _push_built(ctx: _Context, build: Any) -> PushResult:
    notes = ctx.settings.message or f"kkb push {build.kernel_id}"
    start_bytes = ctx.adapter.uploaded_bytes
    _check_kernel_metadata(Path(build.kernel_dir), build)  # before any upload: a bad kernel is not worth one
    _check_competition(ctx, build)
    with private_tmpdir(Path(ctx.settings.kernel_dir)):
        weights = None
        if build.weights_dataset:
            weights = sync_dataset(ctx, "weights", Path(build.weights_dir), build.weights_dataset, build.weights_hash,
                                    notes)
        code = sync_dataset(ctx, "code", Path(build.code_dir), build.code_dataset, build.code_hash, notes)
        wheels = _sync_wheelhouse(ctx, build, notes)
    # A new dataset version reaches the kernel only through a new kernel version: every hash counts.
    kernel_hash = _kernel_hash(Path(build.kernel_dir), code.content_hash,
                               (weights.content_hash if weights else "") + (wheels or ""))
    version, url, action = _sync_kernel(ctx, build, kernel_hash)
    uploaded = ctx.adapter.uploaded_bytes - start_bytes
    ctx.history.append(
        PUSH,
        kernel=build.kernel_id,
        kernel_hash=kernel_hash,
        kernel_version=version,
        kernel_pushed=action != "unchanged",
        url=url,
        code_dataset=code.ref,
        code_hash=code.content_hash,
        code_version=code.version,
        weights_dataset=weights.ref if weights else None,
        weights_hash=weights.content_hash if weights else None,
        weights_version=weights.version if weights else None,
        uploaded_bytes=uploaded,
    )
    return PushResult(
        kernel_id=build.kernel_id,
        kernel_url=url,
        kernel_version=version,
        kernel_action=action,
        code=code,
        weights=weights,
        uploaded_bytes=uploaded,
        out_dir=Path(build.out_dir),
    )


def _check_competition(ctx: _Context, build: Any) -> None:
    """Kaggle refuses a kernel whose competition it does not know only at the kernel push, after the
    datasets went up: ask first (one cheap call) so a typo in the slug uploads nothing."""
    slug = build.spec.competition.slug
    try:
        ctx.adapter.submissions(slug)
    except AuthError:
        raise  # credentials are the problem, not the slug: the adapter's message already says so
    except RemoteError as exc:
        raise type(exc)(f"{Path(ctx.settings.kernel_dir) / 'kernel.toml'}: competition.slug '{slug}': {exc.message}",
                        hint="use the slug from the competition's URL (kaggle.com/competitions/<slug>), and join the "
                             "competition and accept its rules first") from exc


def _sync_wheelhouse(ctx: _Context, build: Any, notes: str) -> str | None:
    """Upload the wheelhouse dataset when it changed; a helper kernel's output is attached as it is."""
    from builder.wheels import wheelhouse_source, wheelhouse_to_push

    found = wheelhouse_to_push(build.spec, Path(ctx.settings.kernel_dir), build.owner, Path(build.out_dir))
    if found is None:
        return None
    ref, folder, content_hash = found
    if wheelhouse_source(build.spec, build.owner).kind == "kernel":
        return content_hash
    return sync_dataset(ctx, "wheels", folder, ref, content_hash, notes).content_hash


# -- datasets ---------------------------------------------------------------------------------


def sync_dataset(ctx: _Context, kind: str, folder: Path, ref: str, content_hash: str, notes: str) -> DatasetResult:
    """Make ``ref``'s latest ready version hold ``content_hash``, uploading only when it does not."""
    for round_ in range(ctx.settings.waits.rounds):
        status = ctx.adapter.dataset_status(ref)
        if status is not None:
            status = _settle_dataset(ctx, kind, ref, status)
            kept = _kept_version(ctx, kind, ref, status, content_hash)
            if kept is not None:
                return kept
        before = ctx.adapter.dataset_version(ref) if status is not None else None
        ctx.history.append(DATASET_INTENT, ref=ref, hash=content_hash, version_before=before)
        bytes_before = ctx.adapter.uploaded_bytes
        action = "versioned" if status is not None else "created"
        ctx.emit(kind, f"{'uploading a new version of' if status else 'creating'} {ref}")
        try:
            if status is None:
                ctx.adapter.create_dataset(folder)
            else:
                ctx.adapter.version_dataset(folder, notes)
        except TransientRemoteError as exc:
            if round_ + 1 >= ctx.settings.waits.rounds:
                raise
            ctx.backoff(round_, f"{'creating' if status is None else 'versioning'} {ref}", exc)
            continue  # the next round looks at Kaggle first: the call may have gone through
        version = _await_dataset(ctx, kind, ref, content_hash)
        uploaded = ctx.adapter.uploaded_bytes - bytes_before
        ctx.history.append(DATASET, ref=ref, hash=content_hash, version=version, action=action, uploaded_bytes=uploaded)
        return DatasetResult(ref, content_hash, version, action, uploaded)
    raise RemoteError(f"could not create a version of {ref}")  # pragma: no cover - loop always returns or raises


def _kept_version(ctx: _Context, kind: str, ref: str, status: str, content_hash: str) -> DatasetResult | None:
    """The existing latest version when it already holds ``content_hash`` (nothing to upload)."""
    if status in DATASET_BAD:
        return None
    remote = _remote_hash(ctx, ref)
    intent = ctx.history.open_intent(DATASET_INTENT, DATASET, "ref", ref)
    if remote is not None:
        same = remote == content_hash
    else:  # the server cannot show the manifest: trust what we recorded
        last = ctx.history.last(DATASET, ref=ref)
        same = bool(last and last.get("hash") == content_hash)
    version = ctx.adapter.dataset_version(ref)
    adopted = (
        remote is None
        and intent is not None
        and intent.get("hash") == content_hash
        and version is not None
        and (intent.get("version_before") is None or version > intent["version_before"])
    )
    if not (same or adopted):
        return None
    action = "adopted" if (intent is not None and intent.get("hash") == content_hash) else "unchanged"
    ctx.emit(kind, f"{ref} unchanged ({content_hash[:19]}…)" if action == "unchanged" else f"{ref}: adopting v{version}")
    if action == "adopted":
        ctx.history.append(DATASET, ref=ref, hash=content_hash, version=version, action=action, uploaded_bytes=0)
    return DatasetResult(ref, content_hash, version, action, 0)


def _remote_hash(ctx: _Context, ref: str) -> str | None:
    raw = ctx.adapter.dataset_file(ref, MANIFEST)
    if raw is None:
        return None
    try:
        value = json.loads(raw.decode("utf-8")).get("content_hash")
    except (ValueError, UnicodeDecodeError, AttributeError):
        return None
    return str(value) if value else None


def _settle_dataset(ctx: _Context, kind: str, ref: str, status: str) -> str:
    """Wait out a version still being processed (e.g. left by an interrupted push)."""
    if status == "ready" or status in DATASET_BAD:
        return status
    return _wait_dataset_status(ctx, kind, ref)


def _wait_dataset_status(ctx: _Context, kind: str, ref: str) -> str:
    def probe() -> tuple[str, bool]:
        state = ctx.adapter.dataset_status(ref) or "not found"
        return state, state == "ready" or state in DATASET_BAD

    return ctx.wait(
        kind,
        f"dataset {ref}",
        probe,
        ctx.settings.waits.dataset_timeout_s,
        hint="Kaggle is still processing the upload; run the same command again later (nothing is uploaded twice)",
    )


def _await_dataset(ctx: _Context, kind: str, ref: str, content_hash: str) -> int | None:
    """Wait until the new version is ready and is the one Kaggle serves; return its number."""

    def probe() -> tuple[str, bool]:
        state = ctx.adapter.dataset_status(ref) or "not found"
        if state in DATASET_BAD:
            return state, True
        if state != "ready":
            return state, False
        remote = _remote_hash(ctx, ref)
        # "ready" may still describe the previous version for a moment; the manifest tells which one.
        if remote is not None and remote != content_hash:
            return "ready (previous version)", False
        return state, True

    state = ctx.wait(
        kind,
        f"dataset {ref}",
        probe,
        ctx.settings.waits.dataset_timeout_s,
        hint="Kaggle is still processing the upload; run the same command again later (nothing is uploaded twice)",
    )
    if state in DATASET_BAD:
        raise RemoteError(
            f"Kaggle could not process the new version of {ref} (status: {state})",
            hint="run the push again; if it fails again, look at the dataset page on Kaggle",
        )
    return ctx.adapter.dataset_version(ref)


# -- kernel -----------------------------------------------------------------------------------


def _kernel_hash(kernel_dir: Path, code_hash: str, weights_hash: str) -> str:
    """What makes a kernel version: its metadata, its notebook, and the datasets it reads."""
    digest = hashlib.sha256()
    for path in sorted(kernel_dir.iterdir()):
        if path.is_file():
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(f"{code_hash}\0{weights_hash}".encode())
    return "sha256:" + digest.hexdigest()


def _check_kernel_metadata(kernel_dir: Path, build: Any) -> None:
    """Refuse to push a kernel that could not run as a code-competition submission."""
    path = kernel_dir / KERNEL_METADATA
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise KkbError(f"{path}: cannot read the kernel metadata: {exc}", hint="run kkb build again") from exc
    problems = []
    if meta.get("enable_internet") not in (False, "false"):
        problems.append("enable_internet must be false (Kaggle's default is true)")
    if meta.get("id") != build.kernel_id:
        problems.append(f"id is {meta.get('id')!r}, expected {build.kernel_id!r}")
    sources = set(meta.get("dataset_sources") or [])
    missing = [ref for ref in (build.code_dataset, build.weights_dataset) if ref and ref not in sources]
    if missing:
        problems.append(f"dataset_sources lacks {missing}")
    if not meta.get("competition_sources"):
        problems.append("competition_sources is empty")
    if problems:
        raise KkbError(f"{path}: " + "; ".join(problems), hint="this is a kkb build bug; report it with the file")


def _sync_kernel(ctx: _Context, build: Any, kernel_hash: str) -> tuple[int | None, str, str]:
    """Push a new kernel version unless the current one already has ``kernel_hash``."""
    kernel_id = build.kernel_id
    current = ctx.adapter.kernel_version(kernel_id)
    last = ctx.history.last(PUSH, kernel=kernel_id)
    default_url = ctx.adapter.web_url(f"code/{kernel_id}")
    if last and last.get("kernel_hash") == kernel_hash and current is not None and current == last.get("kernel_version"):
        ctx.emit("kernel", f"{kernel_id} v{current} unchanged")
        return current, str(last.get("url") or default_url), "unchanged"
    adopted = _adopt_kernel(ctx, kernel_id, kernel_hash, current)
    if adopted is not None:
        return adopted, default_url, "adopted"
    timeout = build.spec.kernel.timeout_seconds
    for round_ in range(ctx.settings.waits.rounds):
        ctx.history.append(KERNEL_INTENT, kernel=kernel_id, kernel_hash=kernel_hash, version_before=current)
        ctx.emit("kernel", f"pushing {kernel_id}")
        try:
            pushed = ctx.adapter.push_kernel(Path(build.kernel_dir), timeout_seconds=timeout)
        except TransientRemoteError as exc:
            if round_ + 1 >= ctx.settings.waits.rounds:
                raise
            ctx.backoff(round_, f"pushing {kernel_id}", exc)
            adopted = _adopt_kernel(ctx, kernel_id, kernel_hash, current)
            if adopted is not None:
                return adopted, default_url, "adopted"
            continue
        except RemoteError as exc:
            # Kaggle answered and refused (it may still have saved a version without its inputs): the
            # next push must push again, not adopt that version as if an interrupted push had made it.
            ctx.history.append(KERNEL_REFUSED, kernel=kernel_id, kernel_hash=kernel_hash, reason=exc.message)
            raise
        version = pushed.version if pushed.version is not None else ctx.adapter.kernel_version(kernel_id)
        ctx.emit("kernel", f"{kernel_id} v{version} pushed")
        return version, pushed.url or default_url, "pushed"
    raise RemoteError(f"could not push {kernel_id}")  # pragma: no cover


def _adopt_kernel(ctx: _Context, kernel_id: str, kernel_hash: str, current: int | None) -> int | None:
    """A version an interrupted push created: the intent is open and Kaggle moved past it."""
    intent = ctx.history.open_intent(KERNEL_INTENT, PUSH, "kernel_hash", kernel_hash)
    if intent is None or intent.get("kernel") != kernel_id:
        return None
    if ctx.history.open_intent(KERNEL_INTENT, KERNEL_REFUSED, "kernel_hash", kernel_hash) is None:
        return None  # Kaggle refused that push: whatever it saved is not ours to adopt
    now = ctx.adapter.kernel_version(kernel_id) if current is None else current
    before = intent.get("version_before")
    if now is None or (before is not None and now <= before):
        return None
    ctx.emit("kernel", f"{kernel_id}: adopting v{now} from an interrupted push")
    return now


# --------------------------------------------------------------------------------------------
# submit
# --------------------------------------------------------------------------------------------


def submit(settings: SubmitSettings) -> SubmitResult:
    """Push (unless ``settings.version``), wait for the run, submit that version, wait for the score."""
    from builder.spec import load_spec

    spec = load_spec(Path(settings.kernel_dir))
    pushed: PushResult | None = None
    if settings.version is None:
        lazy = _LazyContext(settings)
        build = _build(settings, lazy)
        ctx = lazy.get()
        pushed = _push_built(ctx, build)
        kernel_id, version = pushed.kernel_id, pushed.kernel_version
        if version is None:
            raise RemoteError(f"Kaggle did not report a version for {kernel_id}", hint="pass --version N")
    else:
        ctx = push_context(settings)
        kernel_id, version = _kernel_id(ctx, spec), settings.version
    _await_run(ctx, spec, kernel_id, version)
    return _submit_version(ctx, spec, kernel_id, version, pushed)


def _await_run(ctx: _Context, spec: Any, kernel_id: str, version: int) -> None:
    timeout = ctx.settings.waits.run_timeout_s or _run_budget(ctx, spec)

    def probe() -> tuple[str, bool]:
        state = ctx.adapter.kernel_status(kernel_id, version).status
        return state, state in RUN_DONE

    state = ctx.wait(
        "run", f"kernel run {kernel_id} v{version}", probe, timeout,
        hint=f"the run goes on without kkb: kkb submit --version {version} picks it up later",
    )
    status = ctx.adapter.kernel_status(kernel_id, version)
    ctx.history.append(RUN, kernel=kernel_id, version=version, status=state, failure=status.failure_message)
    if state != "complete":
        entries = ctx.adapter.kernel_log(kernel_id, version)
        raise KernelFailed(
            f"kernel run {kernel_id} v{version} ended in {state.upper()}"
            + (f": {status.failure_message}" if status.failure_message else "")
            + _tail_block(entries, status.failure_message),
            hint=f"kkb logs {ctx.settings.kernel_dir} --version {version} shows the whole log; "
            f"kkb dry-run {ctx.settings.kernel_dir} reproduces the run locally",
        )


def _run_budget(ctx: _Context, spec: Any) -> float:
    limit = spec.kernel.timeout_seconds or spec.competition.time_limit_hours * 3600
    return float(limit) + ctx.settings.waits.queue_margin_s


def _submit_version(ctx: _Context, spec: Any, kernel_id: str, version: int, pushed: PushResult | None) -> SubmitResult:
    settings = ctx.settings
    assert isinstance(settings, SubmitSettings)
    competition = spec.competition.slug
    message = settings.message or f"kkb {kernel_id} v{version}"
    ref, server_message = _existing_submission(ctx, kernel_id, version) if not settings.resubmit else (None, "")
    if ref is None:
        ref, server_message = _create_submission(ctx, spec, kernel_id, version, message, pushed)
    result = _await_score(ctx, spec, ref)
    _record_score_once(ctx, result)
    if result.status != "complete":
        raise KernelFailed(
            f"submission #{ref} of {kernel_id} v{version} to {competition} failed: "
            f"{result.error_description or result.status.upper()}",
            hint=dry_run_hint(result.error_description, ctx.settings.kernel_dir),
        )
    return SubmitResult(kernel_id, version, competition, ref, result.status, result.public_score, server_message, pushed)


def _existing_submission(ctx: _Context, kernel_id: str, version: int) -> tuple[int | None, str]:
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
    ctx: _Context, spec: Any, kernel_id: str, version: int, message: str, pushed: PushResult | None
) -> tuple[int, str]:
    competition = spec.competition.slug
    known = {item.ref for item in ctx.adapter.submissions(competition)}
    intent = ctx.history.open_intent(SUBMISSION_INTENT, SUBMISSION, "kernel_version", version)
    if intent is not None and intent.get("kernel") == kernel_id:
        found = _find_new_submission(ctx, competition, set(intent.get("known", [])), intent.get("message", ""))
        if found is not None:
            return _record_submission(ctx, kernel_id, version, competition, found, "", pushed, message), ""
    for round_ in range(ctx.settings.waits.rounds):
        ctx.history.append(SUBMISSION_INTENT, kernel=kernel_id, kernel_version=version, message=message, known=sorted(known))
        ctx.emit("submission", f"submitting {kernel_id} v{version} to {competition}")
        try:
            ref, server_message = ctx.adapter.submit_code(competition, kernel_id, version, spec.submission.file, message)
        except TransientRemoteError as exc:
            if round_ + 1 >= ctx.settings.waits.rounds:
                raise
            ctx.backoff(round_, "submitting", exc)
            found = _find_new_submission(ctx, competition, known, message)
            if found is not None:
                return _record_submission(ctx, kernel_id, version, competition, found, "", pushed, message), ""
            continue
        return _record_submission(ctx, kernel_id, version, competition, ref, server_message, pushed, message), server_message
    raise RemoteError(f"could not submit to {competition}")  # pragma: no cover


def _find_new_submission(ctx: _Context, competition: str, known: set[int], message: str) -> int | None:
    for item in ctx.adapter.submissions(competition):
        if item.ref not in known and item.description == message:
            return item.ref
    return None


def _record_submission(
    ctx: _Context, kernel_id: str, version: int, competition: str, ref: int, server_message: str,
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


def _await_score(ctx: _Context, spec: Any, ref: int) -> Submission:
    timeout = ctx.settings.waits.scoring_timeout_s or _run_budget(ctx, spec)
    latest: dict[str, Submission] = {}

    def probe() -> tuple[str, bool]:
        latest["item"] = ctx.adapter.submission(ref)
        state = latest["item"].status
        return state, state in ("complete", "error")

    ctx.wait("submission", f"scoring of submission #{ref}", probe, timeout,
             hint="scoring goes on without kkb: kkb status shows it later")
    return latest["item"]


# Kaggle's error descriptions for code submissions → what the local rehearsal checks for each.
DRY_RUN_CHECKS = {
    "notebook timeout": "the dry run times the scoring rerun on hidden-size test data against "
    "[competition] time_limit_hours and reports 'Notebook Timeout'",
    "notebook threw exception": "the dry run runs the scoring rerun (KAGGLE_IS_COMPETITION_RERUN set, hidden "
    "test data, internet off) and shows the exception with its traceback",
    "submission csv not found": "the dry run checks that the rerun writes [submission] file into "
    "/kaggle/working under exactly that name",
    "submission scoring error": "the dry run checks the CSV against sample_submission.csv: same ids in any order, "
    "the same columns, one row per id, no NaN or infinite values",
    "notebook exceeded allowed compute": "the dry run reports peak RAM and GPU memory and the wall time "
    "against Kaggle's limits",
}


def dry_run_hint(error_description: str, kernel_dir: Path | str) -> str:
    """What ``kkb dry-run`` would check for Kaggle's ``error_description``."""
    key = (error_description or "").strip().lower()
    for name, check in DRY_RUN_CHECKS.items():
        if name in key:
            return f"{check}: kkb dry-run {kernel_dir}"
    if "kaggle error" in key:
        return "a Kaggle-side failure: submit the same version again with kkb submit --version N --resubmit"
    return f"kkb dry-run {kernel_dir} rehearses the scoring rerun locally"


def _tail_block(entries: list[dict[str, Any]], failure_message: str, limit: int = 30) -> str:
    tail = exception_tail(entries, limit)
    last = tail.strip().splitlines()[-1] if tail.strip() else ""
    if not last or last in failure_message:  # Kaggle's failure message already shows the exception
        return ""
    return f"\n--- end of the kernel log ---\n{tail}"


def exception_tail(entries: list[dict[str, Any]], limit: int = 30) -> str:
    """The last traceback in a Kaggle log (or its last lines when there is none)."""
    text = "".join(str(entry.get("data", "")) for entry in entries)
    lines = text.rstrip().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    chosen = lines[starts[-1]:] if starts else lines
    return "\n".join(chosen[-limit:])


# --------------------------------------------------------------------------------------------
# status, logs, history
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuerySettings:
    """For ``status`` and ``logs``: which kernel project, optionally which version."""

    kernel_dir: Path
    version: int | None = None
    owner: str | None = None
    base_url: str | None = None
    adapter: KaggleAdapter | None = None


def status(settings: QuerySettings) -> StatusResult:
    """The latest push, the state of its kernel run, and the latest submission's state on Kaggle."""
    from builder.spec import load_spec

    spec = load_spec(Path(settings.kernel_dir))
    ctx = _query_context(settings)
    kernel_id = _kernel_id(ctx, spec, settings.owner)
    last_push = ctx.history.last(PUSH, kernel=kernel_id)
    version = settings.version or (last_push or {}).get("kernel_version") or ctx.adapter.kernel_version(kernel_id)
    run_status, failure = None, ""
    if version is not None:
        with contextlib.suppress(RemoteError):
            run = ctx.adapter.kernel_status(kernel_id, version)
            run_status, failure = run.status, run.failure_message
    submission = None
    record = ctx.history.last(SUBMISSION, kernel=kernel_id)
    if record is not None:
        submission = ctx.adapter.submission(int(record["ref"]))
        if submission.status in ("complete", "error"):
            _record_score_once(ctx, submission)
    return StatusResult(kernel_id, version, run_status, failure, last_push, submission)


def _record_score_once(ctx: _Context, item: Submission) -> None:
    last = ctx.history.last(SCORE, ref=item.ref)
    if last is None or last.get("status") != item.status:
        ctx.history.append(SCORE, ref=item.ref, status=item.status, public_score=item.public_score,
                           private_score=item.private_score, error_description=item.error_description)


def logs(settings: QuerySettings) -> LogsResult:
    """The log of a kernel run (default: the latest pushed version)."""
    from builder.spec import load_spec

    spec = load_spec(Path(settings.kernel_dir))
    ctx = _query_context(settings)
    kernel_id = _kernel_id(ctx, spec, settings.owner)
    last_push = ctx.history.last(PUSH, kernel=kernel_id)
    version = settings.version or (last_push or {}).get("kernel_version") or ctx.adapter.kernel_version(kernel_id)
    if version is None:
        raise RemoteError(f"{kernel_id} has no version on Kaggle yet", hint=f"kkb push {settings.kernel_dir} first")
    return LogsResult(kernel_id, version, ctx.adapter.kernel_log(kernel_id, version))


def history(kernel_dir: Path) -> list[HistoryRow]:
    """Every push and submission of the project, oldest first (offline: the local record)."""
    return History.for_kernel(Path(kernel_dir)).rows()


def _query_context(settings: QuerySettings) -> _Context:
    adapter = settings.adapter or KaggleAdapter.connect(settings.base_url)
    return _Context(settings=PushSettings(kernel_dir=settings.kernel_dir), adapter=adapter,
                    history=_history(settings.kernel_dir, adapter))


def _history(kernel_dir: Path, adapter: KaggleAdapter) -> History:
    return History.for_kernel(Path(kernel_dir), server=getattr(adapter, "endpoint", None))


def _kernel_id(ctx: _Context, spec: Any, owner: str | None = None) -> str:
    from builder.credentials import kaggle_username

    owner = owner or ctx.settings.owner or spec.kernel.owner or kaggle_username()
    if not owner:
        try:
            owner = ctx.adapter.username
        except AuthError:
            owner = None
    if not owner:
        raise KkbError("cannot tell the kernel's owner", hint="set [kernel] owner in kernel.toml or pass --owner")
    return f"{owner}/{spec.kernel.kernel_slug}"
