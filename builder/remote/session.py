"""One session with Kaggle: the adapter, the project's history, progress events, and the waits.

Every remote operation (push, submit, queries, the wheel helper kernel) runs through a :class:`Session`: it
polls with :meth:`Session.wait` (progress while waiting, a timeout) and spaces out the rounds around a
create call with :meth:`Session.retry_round`. Both use the one policy of :mod:`builder.remote.backoff`, as
the adapter's retries do; :class:`Waits` says how (every wait and every round loop has a time bound).
The library never prints: progress goes to ``settings.progress``.
"""

from __future__ import annotations

import contextlib
import random
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from builder.errors import AuthError, KkbError, RemoteError
from builder.project.credentials import kaggle_username
from builder.project.spec import KernelSpec
from builder.remote.backoff import Backoff, Retrying
from builder.remote.history import History
from builder.remote.kaggle_api import KaggleAdapter, TransientRemoteError, remove_dead_stages, retry_reason
from builder.remote.lock import LOCK_WAIT_S


@dataclass(frozen=True)
class ProgressEvent:
    """What push/submit is doing. ``waiting`` events repeat while a poll is in progress."""

    stage: str  # "build" | "weights" | "code" | "kernel" | "run" | "submission" | "retry"
    message: str
    waiting: bool = False
    elapsed: float = 0.0
    limit: float | None = None  # a wait's timeout: the progress line shows "12s / 1800s"


ProgressFn = Callable[[ProgressEvent], None]


DATASET_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Waits:
    """Polling and timeouts. A timeout left None comes from kernel.toml's ``[push]`` (:meth:`with_spec`),
    else its default: a dataset 1800 s, a run and its scoring the kernel's time limit plus queueing."""

    poll_initial_s: float = 1.0
    poll_max_s: float = 30.0
    poll_factor: float = 1.5
    dataset_timeout_s: float | None = None
    run_timeout_s: float | None = None
    scoring_timeout_s: float | None = None
    queue_margin_s: float = 3600.0
    rounds: int = 5  # attempts at a create call whose transient failure needed a look at the server
    rounds_total_s: float = 600.0  # and the time those rounds may take, all together

    @property
    def dataset_s(self) -> float:
        return self.dataset_timeout_s or DATASET_TIMEOUT_S

    def with_spec(self, spec: KernelSpec) -> Waits:
        """These waits with what kernel.toml's ``[push]`` sets filled in where none was given (--wait-*)."""
        return replace(self, dataset_timeout_s=self.dataset_timeout_s or spec.push.dataset_timeout_seconds,
                       run_timeout_s=self.run_timeout_s or spec.push.run_timeout_seconds,
                       scoring_timeout_s=self.scoring_timeout_s or spec.push.score_timeout_seconds)

    def poll(self, timeout_s: float) -> Backoff:
        """The policy of one wait: no try limit, ``timeout_s`` in all."""
        return Backoff(base_seconds=self.poll_initial_s, factor=self.poll_factor, max_seconds=self.poll_max_s,
                       attempts=None, total_seconds=timeout_s, jitter=0.4)

    def round_policy(self) -> Backoff:
        return Backoff(base_seconds=self.poll_initial_s, factor=2.0, max_seconds=self.poll_max_s,
                       attempts=self.rounds, total_seconds=self.rounds_total_s)


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
    lock_wait_s: float = LOCK_WAIT_S  # how long to wait for another push/submit of the kernel to finish
    spec: KernelSpec | None = None  # the command's loaded kernel.toml (read once per command); None: load kernel_dir's
    # Kaggle's limits before a push that will run (builder.remote.preflight): by default a limit refuses the push.
    wait_for_slot: bool = False  # wait for a GPU session slot, this kernel's running version, or the daily reset
    force: bool = False  # push anyway (the run bills; Kaggle may refuse or queue it)
    replace: bool = False  # stop this kernel's running version first (Kaggle's API: deleting the kernel)



@dataclass
class Session:
    settings: PushSettings
    adapter: KaggleAdapter
    history: History
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)

    def emit(self, stage: str, message: str, *, waiting: bool = False, elapsed: float = 0.0,
             limit: float | None = None) -> None:
        if self.settings.progress is not None:
            self.settings.progress(ProgressEvent(stage, message, waiting, elapsed, limit))

    def sleep(self, seconds: float) -> None:
        self.adapter.sleep(seconds)

    def wait(self, stage: str, what: str, probe: Callable[[], tuple[str, bool]], timeout_s: float, hint: str) -> str:
        """Poll ``probe`` (→ state, finished) with backoff and jitter until finished or ``timeout_s``."""
        budget = self.settings.waits.poll(timeout_s).start(self.clock, self.rng)
        while True:
            state, finished = probe()
            self.emit(stage, f"{what}: {state}", waiting=not finished, elapsed=budget.elapsed, limit=timeout_s)
            if finished:
                return state
            delay = budget.next_delay()
            if delay is None:
                raise RemoteError(f"timed out after {timeout_s:g}s waiting for {what} (last status: {state})", hint=hint)
            self.sleep(delay)

    def rounds(self) -> Retrying:
        """The budget of one create call's rounds (``Waits.rounds`` tries, ``Waits.rounds_total_s`` in all)."""
        return self.settings.waits.round_policy().start(self.clock, self.rng)

    def retry_round(self, rounds: Retrying, action: str, error: TransientRemoteError) -> None:
        """Sleep before the next round, or raise ``error`` when the rounds are spent."""
        delay = rounds.next_delay()
        if delay is None:
            raise error
        self.emit("retry", f"{action} failed ({error.message}); checking Kaggle and trying again in {delay:.1f}s")
        self.sleep(delay)


def open_session(settings: PushSettings) -> Session:
    adapter = settings.adapter or KaggleAdapter.connect(settings.base_url)
    progress = settings.progress
    if progress is not None and adapter.on_retry is None:
        def on_retry(action: str, exc: BaseException | None, delay: float) -> None:
            progress(ProgressEvent("retry", f"{action}: {retry_reason(exc)}, retrying in {delay:.1f}s"))
        adapter.on_retry = on_retry
    return Session(settings=settings, adapter=adapter, history=_history(settings.kernel_dir, adapter))


@contextlib.contextmanager
def private_tmpdir(kernel_dir: Path, endpoint: str | None) -> Iterator[Path]:
    """The client keeps resumable-upload state (and builds tar archives) under ``tempfile.gettempdir()``.

    A per-project private folder (``.kkb/tmp``, mode 0700) keeps that state away from other users
    and projects and lets a re-run resume an upload that an earlier run left unfinished.

    One folder per server (``.kkb/tmp/<host>-<port>``): the client keys its state by the file's path
    alone and keeps the upload URL in it, so state left by a local Kaggle that was then restarted on
    another port would send the next push's bytes to the dead port. Each server sees only its own.
    """
    path = Path(kernel_dir) / ".kkb" / "tmp"
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    path = path / upload_state_key(endpoint)
    path.mkdir(exist_ok=True)
    path.chmod(0o700)
    remove_dead_archives(path)
    previous = tempfile.tempdir
    tempfile.tempdir = str(path)  # gettempdir() is cached: the env var alone would not do
    try:
        yield path
    finally:
        tempfile.tempdir = previous


def remove_dead_archives(folder: Path) -> list[Path]:
    """Delete the archives an upload killed mid-way left behind (the client's ``tmp*`` folders: a subfolder
    of a dataset goes up as ``tmpXXXX/<name>.tar``, removed only when the upload returns).

    Callers hold the project's lock (push, submit, the rehearsal), so no live upload owns one of them. The
    client's resume state (``.kaggle-uploads-*``) stays: it lets a re-run resume a file that is still there, and
    so do kkb's own stages (``stage-*``, see ``kaggle_api/staging.py``) until the client could no longer resume them."""
    removed = []
    for leftover in sorted(folder.glob("tmp*")):
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
            removed.append(leftover)
    return removed + remove_dead_stages(folder)


def upload_state_key(endpoint: str | None) -> str:
    """A folder name for a server: ``kaggle.com``, ``127.0.0.1-41234`` (other characters become ``_``)."""
    if endpoint is None:
        return "kaggle.com"
    parts = urlsplit(endpoint)
    name = f"{parts.hostname or 'server'}-{parts.port or parts.scheme}{parts.path}"
    return re.sub(r"[^A-Za-z0-9.-]", "_", name)


def query_session(kernel_dir: Path, base_url: str | None, adapter: KaggleAdapter | None) -> Session:
    """A session for reading only (status, logs): no build, no progress."""
    adapter = adapter or KaggleAdapter.connect(base_url)
    return Session(settings=PushSettings(kernel_dir=kernel_dir), adapter=adapter, history=_history(kernel_dir, adapter))


def _history(kernel_dir: Path, adapter: KaggleAdapter) -> History:
    return History.for_kernel(Path(kernel_dir), server=getattr(adapter, "endpoint", None))


def kernel_id_of(session: Session, spec: KernelSpec, owner: str | None = None) -> str:
    """``owner/slug`` of the project's kernel: --owner, [kernel] owner, the credentials, else whom Kaggle says we are."""
    owner = owner or session.settings.owner or spec.kernel.owner or kaggle_username()
    if not owner:
        try:
            owner = session.adapter.username
        except AuthError:
            owner = None
    if not owner:
        raise KkbError("cannot tell the kernel's owner", hint="set [kernel] owner in kernel.toml or pass --owner")
    return f"{owner}/{spec.kernel.kernel_slug}"
