"""The one wait/backoff policy of every loop that talks to Kaggle again after a failure or a "not yet".

A :class:`Backoff` is exponential with jitter and bounded twice: by a number of tries and by a total
time. Every loop that retries or polls starts one :class:`Retrying` (its running budget) and asks it,
after each failure, for the sleep before the next try; ``None`` means the budget is spent and the loop
must give up. Three kinds of loop use it:

* the adapter's retries of one call (429, 5xx, dropped connections) and of one file upload
  (:mod:`builder.remote.kaggle_api`), and the client's own upload loop through it;
* the session's rounds around a create call whose failure needed a look at the server first;
* the session's polls (dataset ready, kernel run, scoring): no try limit, the wait's timeout as total.

The time bound counts from the start of the loop: no sleep is chosen that would end past it, so a
loop lasts at most ``total_seconds`` plus its last try. Clock, randomness and sleep are injected by
the owner of the loop (tests run in zero time).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Backoff:
    """Sleep ``base_seconds * factor**n`` (at most ``max_seconds``, the part ``jitter`` of it random)
    between tries; stop after ``attempts`` tries (``None``: no limit) or ``total_seconds``."""

    base_seconds: float = 0.5
    factor: float = 2.0
    max_seconds: float = 30.0
    attempts: int | None = 6
    total_seconds: float = 120.0
    jitter: float = 0.5  # 0: fixed delays; 0.5: between half and all of the delay

    def __post_init__(self) -> None:
        if self.attempts is not None and self.attempts < 1:
            raise ValueError(f"Backoff.attempts must be at least 1, not {self.attempts}")
        if not self.total_seconds >= 0 or self.total_seconds == float("inf"):
            raise ValueError(f"Backoff.total_seconds must be a finite number of seconds, not {self.total_seconds}")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"Backoff.jitter must be in [0, 1], not {self.jitter}")

    def delay(self, retry: int, rng: random.Random) -> float:
        """The sleep before retry number ``retry`` (0 for the first retry), jitter applied."""
        ceiling = min(self.max_seconds, self.base_seconds * self.factor ** min(retry, 64))  # a long poll: no overflow
        return ceiling * (1.0 - self.jitter) + rng.uniform(0.0, ceiling * self.jitter)

    def start(self, clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None) -> Retrying:
        return Retrying(self, clock, rng or random.Random())


@dataclass
class Retrying:
    """One loop's budget: how many tries were made, since when, and the next sleep."""

    policy: Backoff
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)
    tries: int = 1  # the loop's first try is under way when the budget starts
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()

    @property
    def elapsed(self) -> float:
        return self.clock() - self.started

    @property
    def remaining(self) -> float:
        return max(0.0, self.policy.total_seconds - self.elapsed)

    def next_delay(self, retry_after: float | None = None) -> float | None:
        """The sleep before the next try (the server's ``Retry-After`` if it gave one, capped at
        ``max_seconds``), or ``None`` when the tries or the time are spent."""
        attempts = self.policy.attempts
        if attempts is not None and self.tries >= attempts:
            return None
        remaining = self.remaining
        if remaining <= 0:
            return None
        delay = self.policy.delay(self.tries - 1, self.rng) if retry_after is None else min(retry_after,
                                                                                           self.policy.max_seconds)
        self.tries += 1
        return min(delay, remaining)

    def spent(self) -> str:
        """For messages: ``3 tries in 12s``."""
        return f"{self.tries} {'try' if self.tries == 1 else 'tries'} in {self.elapsed:.0f}s"
