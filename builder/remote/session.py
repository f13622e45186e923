"""One session with Kaggle: the adapter, the project's history, progress events, and one wait/backoff policy.

Every remote operation (push, submit, queries, the wheel helper kernel) runs through a :class:`Session`: it
polls with :meth:`Session.wait` (backoff with jitter, a timeout, progress while waiting) and spaces out
retried create calls with :meth:`Session.backoff`. The library never prints: progress goes to
``settings.progress``.
"""

from __future__ import annotations

import contextlib
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from builder.errors import AuthError, KkbError, RemoteError
from builder.project.credentials import kaggle_username
from builder.project.spec import KernelSpec
from builder.remote.history import History
from builder.remote.kaggle_api import KaggleAdapter


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



@dataclass
class Session:
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


def open_session(settings: PushSettings) -> Session:
    adapter = settings.adapter or KaggleAdapter.connect(settings.base_url)
    progress = settings.progress
    if progress is not None and adapter.on_retry is None:
        def on_retry(action: str, exc: BaseException, delay: float) -> None:
            progress(ProgressEvent("retry", f"{action}: transient error, retrying in {delay:.1f}s"))
        adapter.on_retry = on_retry
    return Session(settings=settings, adapter=adapter, history=_history(settings.kernel_dir, adapter))


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
