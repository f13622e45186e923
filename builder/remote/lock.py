"""One push or submit per kernel project at a time: a file lock in ``kernels/NAME/.kkb/lock``.

Two ``kkb push`` of one kernel side by side would both build into ``build/NAME``, both look at Kaggle,
and both create versions (one adopting the other's by luck). :func:`kernel_lock` takes an exclusive
``fcntl.flock`` on the project's lock file for the whole command; a second command waits for it under
the one backoff policy (bounded by ``wait_s``) and then fails naming the holder: the holder writes its
pid, command and start time into the lock file once it holds it.

``flock`` locks belong to the open file, so the kernel releases the lock when the holder exits or
dies, whatever the cause: a stale lock file is never a problem (its old contents are only read while
someone holds the lock). A lock file on a network file system without ``flock`` support fails at
once with the system's message.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from builder.errors import KkbError, LockedError
from builder.remote.backoff import Backoff

LOCK_FILE = "lock"
LOCK_WAIT_S = 30.0


@contextlib.contextmanager
def kernel_lock(kernel_dir: Path, command: str, wait_s: float = LOCK_WAIT_S,
                sleep: Callable[[float], None] = time.sleep) -> Iterator[Path]:
    """Hold the project's lock while the block runs; wait up to ``wait_s`` for another holder to finish."""
    path = Path(kernel_dir) / ".kkb" / LOCK_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise KkbError(f"{path}: cannot open the lock file: {exc.strerror}",
                       hint=f"kkb needs to write in {path.parent}") from None
    try:
        _acquire(fd, path, command, wait_s, sleep)
        _write_holder(fd, command)
        yield path
    finally:
        os.close(fd)  # closing releases the flock


def _acquire(fd: int, path: Path, command: str, wait_s: float, sleep: Callable[[float], None]) -> None:
    budget = Backoff(base_seconds=0.05, factor=1.5, max_seconds=2.0, attempts=None, total_seconds=wait_s).start()
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        except OSError as exc:
            raise KkbError(f"{path}: cannot lock: {exc.strerror}",
                           hint="keep the kernel project on a local file system") from None
        delay = budget.next_delay()
        if delay is None:
            raise LockedError(
                f"{path.parent.parent}: {_holder(path)} is running on this kernel project; "
                f"kkb {command} waited {wait_s:g}s for it",
                hint="let it finish (or stop it) and run the command again; one push or submit of a kernel runs "
                "at a time")
        sleep(delay)


def _write_holder(fd: int, command: str) -> None:
    since = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    record = json.dumps({"pid": os.getpid(), "command": command, "since": since}) + "\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, record.encode(), 0)


def _holder(path: Path) -> str:
    """``kkb push (pid 123, since 2026-…Z)``, or a vaguer phrase while the holder has not written yet."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        return f"kkb {record['command']} (pid {int(record['pid'])}, since {record['since']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another kkb command"
