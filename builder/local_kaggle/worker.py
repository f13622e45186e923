"""Background kernel runs: commit runs of pushed versions and scoring reruns of submissions.

Jobs are identified by plain tuples and their state lives in the store (session.json,
submission.json), so a restart re-queues whatever was QUEUED, RUNNING or PENDING when the server
stopped. A job that raises does not kill its worker: the handler is expected to record the failure.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

Job = tuple[str, ...]   # ("commit", owner, slug, "3", session id) or ("score", "17")
log = logging.getLogger(__name__)


class JobQueue:
    def __init__(self) -> None:
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._pending: set[Job] = set()
        self._lock = threading.Lock()
        self.closed = False  # set when the server stops: a run finishing later must not write its result

    def put(self, job: Job) -> None:
        with self._lock:
            if job in self._pending:  # recovery and a live push must not run a job twice
                return
            self._pending.add(job)
        self._queue.put(job)

    def get(self, timeout: float) -> Job | None:
        try:
            job = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        return job

    def done(self, job: Job) -> None:
        with self._lock:
            self._pending.discard(job)

    def idle(self) -> bool:
        with self._lock:
            return not self._pending

    def wake(self, count: int) -> None:
        for _ in range(count):
            self._queue.put(None)


class Workers:
    def __init__(self, jobs: JobQueue, handlers: dict[str, Callable[..., None]], count: int) -> None:
        self._jobs = jobs
        self._handlers = handlers
        self._count = max(1, count)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._stop.clear()
        self._jobs.closed = False
        for index in range(self._count):
            thread = threading.Thread(target=self._loop, name=f"local-kaggle-worker-{index}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop taking jobs; a run in progress finishes in the background (its state is re-queued on restart)."""
        self._stop.set()
        self._jobs.closed = True
        self._jobs.wake(len(self._threads))
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()

    def _loop(self) -> None:
        while not self._stop.is_set():
            job = self._jobs.get(timeout=0.5)
            if job is None:
                continue
            if self._stop.is_set():
                self._jobs.done(job)
                return
            try:
                self._handlers[job[0]](*job[1:])
            except Exception:  # the handler records failures; this is the last line of defence
                log.exception("local Kaggle job %s failed", job)
            finally:
                self._jobs.done(job)
