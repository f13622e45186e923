"""The local Kaggle's clock: what "now" is for its limits (the daily submission reset, the GPU quota, billing).

Kaggle's limits are about time: submissions count per UTC day, GPU hours per week, a session bills while it
runs. A test cannot wait for midnight, so the server reads these times from one :class:`Clock` that runs with
the wall clock, shifted by an offset that ``set`` and ``advance`` change. The offset is kept in
``<data>/clock.json``, so ``kkb local-kaggle serve`` keeps it across a restart and ``/_admin/clock`` can move it.
Timestamps that no limit reads (a dataset's creation date) stay on the wall clock.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone

from builder.errors import LocalKaggleError
from builder.local_kaggle.store import Store

DAY_S = 24 * 3600
WEEK_S = 7 * DAY_S
# The weekly quota window: the local Kaggle's own choice (Kaggle shows its refresh time, `kaggle quota`, but
# publishes no rule): weeks start on Saturday 00:00 UTC.
WEEK_STARTS = 5  # datetime.weekday(): Monday is 0


class Clock:
    """The wall clock plus an offset (seconds) kept in ``<data>/clock.json``."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._path = store.path("clock.json")
        self._lock = threading.Lock()
        record = store.read(self._path, {}) or {}
        try:
            self._offset = float(record.get("offset", 0.0))
        except (TypeError, ValueError):
            raise LocalKaggleError(f"{self._path}: offset must be a number of seconds",
                                   hint="fix or delete the file") from None

    def now(self) -> float:
        """Seconds since the epoch, as the server's limits see them."""
        return time.time() + self._offset

    def set(self, moment: float | datetime) -> None:
        """Make ``now()`` be ``moment`` (an epoch, or an aware datetime) from here on."""
        epoch = moment.timestamp() if isinstance(moment, datetime) else float(moment)
        self._save(epoch - time.time())

    def advance(self, seconds: float) -> None:
        self._save(self._offset + float(seconds))

    def reset(self) -> None:
        self._save(0.0)

    def day_start(self, at: float | None = None) -> float:
        """00:00 UTC of the day of ``at`` (default: now): where the daily submission count starts."""
        moment = datetime.fromtimestamp(self.now() if at is None else at, tz=timezone.utc)
        return moment.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()

    def week_start(self, at: float | None = None) -> float:
        """Where the weekly accelerator quota's window starts (Saturday 00:00 UTC)."""
        day = datetime.fromtimestamp(self.day_start(at), tz=timezone.utc)
        return (day - timedelta(days=(day.weekday() - WEEK_STARTS) % 7)).timestamp()

    def _save(self, offset: float) -> None:
        with self._lock:
            self._offset = offset
            self._store.write(self._path, {"offset": offset})


def iso_utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def parse_moment(text: str) -> float:
    """An ISO 8601 time (``2026-12-01T23:59:00Z``; no zone means UTC) as an epoch."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise LocalKaggleError(f"{text!r} is not an ISO 8601 time", hint="write it as 2026-12-01T23:59:00Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()
