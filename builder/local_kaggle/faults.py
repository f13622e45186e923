"""Injected failures, to rehearse what Kaggle does on a bad day.

Five kinds, each counted down as it fires:

* ``rpc``: answer an RPC with an HTTP error (429 with an optional ``Retry-After``, 500, 503...) N times, with
  Kaggle's JSON error or an HTML page (``html``: a throttling front end), before the call or after it was done
  (``afterCommit``: the push went through, its answer did not);
* ``datasetNotReady``: the next new version of a dataset stays not-ready for N extra status polls;
* ``uploadBreak``: the next N blob uploads stop after a fraction of their bytes (the client resumes);
* ``kernelFail``: the next N runs of a kernel (commit run, scoring rerun or both) fail;
* ``staleMount``: the next N pushes that attach a dataset or notebook source mount the version before its
  newest one (Kaggle mounts "the latest complete version" it knows, which can lag what it reported ready).

The document lives in ``<data>/faults.json``. It can be changed from Python (:class:`Faults`' methods),
over HTTP (``GET``/``POST``/``DELETE /_admin/faults``, same JSON) or by editing the file while the
server runs: a changed file is re-read before the next request.

Every door validates the same way (``fault_schema.py``): unknown kinds, fields or statuses are
refused (400 over HTTP, :class:`LocalKaggleError` in Python, a refused start for a bad file; a bad
hand edit while running is logged and the previous faults stay), and missing fields get their
defaults, so a consumer always reads a complete entry.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
from typing import Any, Literal

from builder.errors import LocalKaggleError
from builder.kkb_runtime.vocabulary import Scenario
from builder.local_kaggle.fault_schema import KINDS, validate_document, validate_entry
from builder.local_kaggle.store import Store

# Which run a fault hits: one of the two, or either.
Phase = Scenario | Literal["any"]
log = logging.getLogger(__name__)


class Faults:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._path = store.path("faults.json")
        self._lock = threading.RLock()
        self._doc: dict[str, list[dict[str, Any]]] = _empty()
        self._mtime: int | None = None
        self._reload(strict=True)

    # -- configuration -----------------------------------------------------------------------

    def fail_rpc(self, method: str, status: int = 500, times: int = 1, retry_after: float | None = None,
                 message: str | None = None, html: bool = False, after_commit: bool = False) -> None:
        """Answer ``method`` (``"CreateDataset"``, ``"datasets.DatasetApiService/CreateDataset"`` or ``"*"``)
        with HTTP ``status`` the next ``times`` calls (``html``: as an HTML page; ``after_commit``: once the
        call has done what it asked)."""
        if not 400 <= status <= 599:
            raise LocalKaggleError(f"a fault status must be an HTTP error (4xx/5xx), not {status}")
        entry: dict[str, Any] = {"method": method, "status": status, "times": times, "html": html,
                                 "afterCommit": after_commit}
        if retry_after is not None:
            entry["retryAfter"] = retry_after
        if message:
            entry["message"] = message
        self._add("rpc", entry)

    def stall_dataset(self, dataset: str = "*", polls: int = 3) -> None:
        """Keep the next new version of ``dataset`` (``owner/slug`` or ``"*"``) not-ready for ``polls`` more polls."""
        self._add("datasetNotReady", {"dataset": dataset, "polls": polls, "times": 1})

    def break_upload(self, times: int = 1, fraction: float = 0.5) -> None:
        """Make the next ``times`` uploads stop after ``fraction`` of their bytes (the client must resume)."""
        if not 0.0 <= fraction < 1.0:
            raise LocalKaggleError(f"an upload break fraction must be in [0, 1), not {fraction}")
        self._add("uploadBreak", {"times": times, "fraction": fraction})

    def fail_kernel(self, kernel: str = "*", times: int = 1, phase: Phase = Scenario.COMMIT,
                    message: str = "RuntimeError: injected failure (local Kaggle fault)",
                    description: str = "Notebook Threw Exception") -> None:
        """Make the next ``times`` runs of ``kernel`` fail: the commit run ends in ERROR with ``message``,
        a scoring rerun ends the submission in ERROR with ``description`` (Kaggle's vocabulary)."""
        if phase not in ("commit", "rerun", "any"):
            raise LocalKaggleError(f"unknown kernel fault phase {phase!r}", hint="use commit, rerun or any")
        self._add("kernelFail", {"kernel": kernel, "times": times, "phase": phase,
                                 "message": message, "description": description})

    def stale_mount(self, source: str = "*", times: int = 1) -> None:
        """Make the next ``times`` pushes attaching ``source`` (``owner/slug`` or ``"*"``) mount its previous version."""
        self._add("staleMount", {"source": source, "times": times})

    def clear(self) -> None:
        with self._lock:
            self._doc = _empty()
            self._save()

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        with self._lock:
            self._reload()
            return copy.deepcopy(self._doc)

    def replace(self, document: dict[str, Any]) -> None:
        """Install a whole faults document (the admin endpoint's POST body), validated and completed."""
        doc = validate_document(document)
        with self._lock:
            self._doc = doc
            self._save()

    # -- consumption (server side) -----------------------------------------------------------

    def take_rpc(self, method: str) -> dict[str, Any] | None:
        short = method.rsplit("/", 1)[-1]
        return self._take("rpc", lambda e: e.get("method") in ("*", method, short))

    def take_dataset_stall(self, dataset: str) -> int:
        entry = self._take("datasetNotReady", lambda e: e.get("dataset", "*") in ("*", dataset))
        return int(entry.get("polls", 0)) if entry else 0

    def take_upload_break(self) -> float | None:
        entry = self._take("uploadBreak", lambda e: True)
        return float(entry.get("fraction", 0.5)) if entry else None

    def take_stale_mount(self, source: str) -> bool:
        owner_slug = "/".join(source.strip("/").split("/")[:2])
        return self._take("staleMount", lambda e: e.get("source", "*") in ("*", owner_slug)) is not None

    def take_kernel_failure(self, kernel: str, phase: Scenario) -> dict[str, Any] | None:
        return self._take("kernelFail", lambda e: e.get("kernel", "*") in ("*", kernel)
                          and e.get("phase", "commit") in (phase, "any"))

    # -- internals ---------------------------------------------------------------------------

    def _add(self, kind: str, entry: dict[str, Any]) -> None:
        if int(entry.get("times", 1)) < 1:
            raise LocalKaggleError("a fault must fire at least once (times >= 1)")
        entry = validate_entry(kind, entry)
        with self._lock:
            self._reload()
            self._doc[kind].append(entry)
            self._save()

    def _take(self, kind: str, matches: Any) -> dict[str, Any] | None:
        with self._lock:
            self._reload()
            for entry in self._doc[kind]:
                if matches(entry):
                    entry["times"] = int(entry.get("times", 1)) - 1
                    if entry["times"] <= 0:
                        self._doc[kind].remove(entry)
                    self._save()
                    return dict(entry)
            return None

    def _reload(self, strict: bool = False) -> None:
        """Pick up edits made to faults.json by hand while the server runs.

        An invalid file refuses the start (``strict``); while running, it is logged and the faults in
        force stay, since a request cannot be the place to report a bad hand edit.
        """
        try:
            mtime = os.stat(self._path).st_mtime_ns
        except FileNotFoundError:
            return
        if mtime == self._mtime:
            return
        self._mtime = mtime
        try:
            self._doc = validate_document(self._store.read(self._path, {}) or {})
        except LocalKaggleError as exc:
            if strict:
                raise LocalKaggleError(f"{self._path}: {exc.message}", hint=exc.hint or "fix or delete the file") from None
            log.error("local Kaggle: %s is invalid, keeping the faults in force: %s", self._path, exc.message)

    def _save(self) -> None:
        self._store.write(self._path, self._doc)
        self._mtime = os.stat(self._path).st_mtime_ns


def _empty() -> dict[str, list[dict[str, Any]]]:
    return {kind: [] for kind in KINDS}
