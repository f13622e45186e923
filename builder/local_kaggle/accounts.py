"""Accounts and their sessions: the weekly accelerator quota, the GPU session cap, what each run bills.

What Kaggle does and this copies (sources: docs/local-kaggle.md, "Kaggle's limits"):

* every pushed version that runs is a **session** of its owner's account; one pushed to a kernel whose
  earlier version still runs is a second session, and both bill;
* a GPU or TPU session bills its wall-clock time (a T4 x2 once, not per card) against the account's
  **weekly quota** (``GetAcceleratorQuotaStatistics``: used, total, refresh time), from its start until it
  ends: complete, error, or its kernel deleted (Kaggle's API stops a session no other way);
* an account runs at most ``gpu_sessions`` (2) GPU batch sessions at once; a push over the cap is refused
  with one of the texts Kaggle was seen to answer (``cap_answer``), and one with no quota left too.

Account settings live in ``<data>/accounts.json`` (``kkb local-kaggle add-user --gpu-quota-hours``, or
:meth:`Accounts.configure`); sessions in ``<data>/sessions.json``. Times come from the server's
:class:`~builder.local_kaggle.clock.Clock`, which tests move.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from builder.errors import LocalKaggleError
from builder.local_kaggle.clock import WEEK_S, Clock
from builder.local_kaggle.store import Store
from builder.local_kaggle.wire import Call, Handler, Json, iso

SERVICE = "kernels.KernelsApiService"
GPU, TPU = "gpu", "tpu"
CapAnswer = Literal["session count", "too many assignments", "412"]
# How Kaggle refused a GPU push over the cap, as seen (kaggle-runtime.md §9.2): in the body, or HTTP 412.
CAP_TEXTS: dict[str, str] = {
    "session count": "Maximum batch GPU session count of {cap} reached",
    "too many assignments": "TooManyAssignments: the maximum batch GPU session count of {cap} is reached",
    "412": "Precondition failed",
}
NO_QUOTA = "Unable to start a {kind} session: no accelerator quota left ({used:.1f} of {total:.1f} hours used this week)"


class Account(BaseModel):
    """One account's limits (``extra="forbid"``: a misspelt setting is refused, naming it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu_quota_hours: float = Field(30.0, ge=0, description="GPU hours a week (30 is common, 60 seen)")
    tpu_quota_hours: float = Field(20.0, ge=0, description="TPU hours a week")
    gpu_used_hours: float = Field(0.0, ge=0, description="GPU hours used this week before this server's runs")
    tpu_used_hours: float = Field(0.0, ge=0, description="TPU hours used this week before this server's runs")
    gpu_sessions: int = Field(2, ge=0, description="GPU batch sessions at once")
    cap_answer: CapAnswer = "session count"


@dataclass(frozen=True)
class Refusal:
    """Why a push may not start its session: ``status`` None is an error in the 200 body, else an HTTP error."""

    message: str
    status: int | None = None


class Accounts:
    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._settings_path = store.path("accounts.json")
        self._sessions_path = store.path("sessions.json")

    def routes(self) -> dict[str, Handler]:
        return {f"{SERVICE}/GetAcceleratorQuotaStatistics": self.get_accelerator_quota_statistics}

    # -- settings ----------------------------------------------------------------------------

    def configure(self, user: str, **changes: Any) -> Account:
        """Change ``user``'s limits (the others keep their values); returns the account as it now is."""
        with self._store.lock:
            account = self.checked(user, **changes)
            everyone = self._store.read(self._settings_path, {}) or {}
            everyone[user] = account.model_dump()
            self._store.write(self._settings_path, everyone)
        return account

    def checked(self, user: str, **changes: Any) -> Account:
        """``user``'s account with ``changes``, validated and not stored (a refusal names the setting)."""
        current = (self._store.read(self._settings_path, {}) or {}).get(user, {})
        try:
            return Account.model_validate({**current, **changes})
        except ValidationError as exc:
            error = exc.errors()[0]
            raise LocalKaggleError(f"account {user}: {error['loc'][0]}: {error['msg']}",
                                   hint=f"settings: {', '.join(Account.model_fields)}") from None

    def account(self, user: str) -> Account:
        return Account.model_validate((self._store.read(self._settings_path, {}) or {}).get(user, {}))

    # -- sessions ----------------------------------------------------------------------------

    def refusal(self, user: str, accelerator: str | None) -> Refusal | None:
        """Why ``user`` may not start one more ``accelerator`` session now (None: it may)."""
        if accelerator is None:
            return None
        account = self.account(user)
        total = account.gpu_quota_hours if accelerator == GPU else account.tpu_quota_hours
        used = self.used_seconds(user, accelerator) / 3600
        if used >= total:
            return Refusal(NO_QUOTA.format(kind=accelerator.upper(), used=used, total=total))
        if accelerator == GPU and len(self.live(user, GPU)) >= account.gpu_sessions:
            text = CAP_TEXTS[account.cap_answer].format(cap=account.gpu_sessions)
            return Refusal(text, 412 if account.cap_answer == "412" else None)
        return None

    def open(self, user: str, kernel: str, version: int, accelerator: str | None) -> int:
        """A new session, queued: it holds a slot of the cap from now, and bills once it starts."""
        with self._store.lock:
            number = self._store.next_id("session")
            sessions = self._sessions()
            sessions.append({"id": number, "user": user, "kernel": kernel, "version": version,
                             "accelerator": accelerator, "queued": self._clock.now(), "started": None,
                             "ended": None, "end": None})
            self._store.write(self._sessions_path, sessions)
        return number

    def start(self, number: int) -> None:
        self._update(number, lambda s: s["started"] is None and s["ended"] is None, started=self._clock.now())

    def end(self, number: int, how: str) -> None:
        """End a session (``how``: complete, error, deleted); a session already ended keeps its end."""
        self._update(number, lambda s: s["ended"] is None, ended=self._clock.now(), end=how)

    def end_kernel(self, kernel: str, how: str) -> list[int]:
        """End every live session of ``kernel`` (``owner/slug``): a deleted kernel stops billing."""
        ended = [s["id"] for s in self._sessions() if s["kernel"] == kernel and s["ended"] is None]
        for number in ended:
            self.end(number, how)
        return ended

    def is_live(self, number: int) -> bool:
        return any(s["id"] == number and s["ended"] is None for s in self._sessions())

    def live(self, user: str, accelerator: str | None = None) -> list[Json]:
        return [s for s in self._sessions() if s["user"] == user and s["ended"] is None
                and (accelerator is None or s["accelerator"] == accelerator)]

    def sessions(self, user: str) -> list[Json]:
        """Every session of ``user`` with what it billed (``billed_seconds``), oldest first."""
        return [{**s, "billed_seconds": self.billed_seconds(s)} for s in self._sessions() if s["user"] == user]

    def billed_seconds(self, session: Json, since: float | None = None) -> float:
        """What ``session`` billed (since ``since``): from its start to its end, or to now while it runs."""
        if session["started"] is None or session["accelerator"] is None:
            return 0.0
        start = max(float(session["started"]), since or 0.0)
        end = float(session["ended"]) if session["ended"] is not None else self._clock.now()
        return max(0.0, end - start)

    def used_seconds(self, user: str, accelerator: str) -> float:
        """This week's use: what the account had used before, plus what its sessions billed since the week began."""
        account = self.account(user)
        before = account.gpu_used_hours if accelerator == GPU else account.tpu_used_hours
        week = self._clock.week_start()
        return before * 3600 + sum(self.billed_seconds(s, since=week) for s in self._sessions()
                                   if s["user"] == user and s["accelerator"] == accelerator)

    # -- the RPC -----------------------------------------------------------------------------

    def get_accelerator_quota_statistics(self, call: Call) -> Json:
        """``kaggle quota``: each accelerator's used and total time, and when the week's window resets."""
        user = call.require_user()
        account = self.account(user)
        quotas = {}
        for kind, hours in ((GPU, account.gpu_quota_hours), (TPU, account.tpu_quota_hours)):
            quotas[f"{kind}Quota"] = {"timeUsed": _duration(self.used_seconds(user, kind)),
                                      "totalTimeAllowed": _duration(hours * 3600)}
        return {"quotaRefreshTime": iso(self._clock.week_start() + WEEK_S), **quotas}

    # -- internals ---------------------------------------------------------------------------

    def _sessions(self) -> list[Json]:
        return list(self._store.read(self._sessions_path, []) or [])

    def _update(self, number: int, when: Any, **changes: Any) -> None:
        with self._store.lock:
            sessions = self._sessions()
            for session in sessions:
                if session["id"] == number and when(session):
                    session.update(changes)
            self._store.write(self._sessions_path, sessions)


def accelerator_of(meta: Json) -> str | None:
    """``gpu``, ``tpu`` or None (CPU) for a version's machine shape and flags, as Kaggle bills them."""
    shape = str(meta.get("machineShape") or "")
    if shape.lower().startswith("tpu") or meta.get("enableTpu"):
        return TPU
    if shape or meta.get("enableGpu"):
        return GPU  # every other shape is a GPU one (NvidiaTeslaT4, NvidiaL4, A100, H100, RTX Pro 6000)
    return None


def _duration(seconds: float) -> str:
    """A protobuf Duration as kagglesdk's ``TimeDeltaSerializer`` reads it: ``"151.5s"``."""
    return f"{max(0.0, seconds):.3f}s"
