"""The push/submission history of one kernel project: ``kernels/NAME/.kkb/history.jsonl``.

Append-only JSON lines, each written with one ``write`` and fsynced, so a crash leaves at most one
torn last line (skipped on read) and never a half-rewritten file. Besides what ``kkb history`` shows
(pushes, runs, submissions, scores), it holds *intent* records written just before a call that
creates something on Kaggle (a dataset version, a kernel version, a submission): when a push is
interrupted after Kaggle acted but before the result was recorded, the next run finds the intent,
sees the server moved on, and adopts that version instead of creating a duplicate.

Each record names its server (``kaggle.com`` or the ``KKB_KAGGLE_API`` base URL): what a local
Kaggle holds says nothing about kaggle.com, so lookups only see records of the server in use.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from builder.errors import KkbError

STATE_DIR = ".kkb"
HISTORY_FILE = "history.jsonl"
DEFAULT_SERVER = "kaggle.com"

# Event names (the "event" key of a record).
DATASET_INTENT = "dataset-intent"
DATASET = "dataset"
KERNEL_INTENT = "kernel-intent"
KERNEL_REFUSED = "kernel-refused"  # the push was refused: never adopt what it may have left on Kaggle
PUSH = "push"
RUN = "run"
SUBMISSION_INTENT = "submission-intent"
SUBMISSION = "submission"
SCORE = "score"
REHEARSAL_INTENT = "rehearsal-intent"  # written before the rehearsal kernel is pushed (adopted after an interruption)
REHEARSAL = "rehearsal"  # kkb dry-run --on-kaggle: a private rehearsal kernel's run, never submitted
KERNEL_DELETED = "kernel-deleted"  # kkb deleted the kernel on Kaggle to stop a run: older records are another kernel's
MOUNTED = "mounted"  # what a run found mounted for kkb's inputs, against what kkb pushed

# How a run ended (a ``run`` record's ``ended``): Kaggle's end, or kkb's doing.
ENDED_COMPLETE, ENDED_ERROR, ENDED_CANCELLED = "complete", "error", "cancelled"
ENDED_BY_KKB = "cancelled by kkb"  # kkb stop
ENDED_REPLACED = "replaced"  # stopped by kkb push/submit --replace, to run the new version instead


def history_path(kernel_dir: Path) -> Path:
    return Path(kernel_dir) / STATE_DIR / HISTORY_FILE


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class HistoryRow:
    """One line of ``kkb history``: a push or a submission (with its score when known)."""

    when: str
    kind: str  # "push" | "submission" | "rehearsal"
    kernel: str
    kernel_version: int | None
    code_hash: str
    weights_hash: str
    code_version: int | None
    weights_version: int | None
    submission_ref: int | None
    status: str
    score: str
    server: str = DEFAULT_SERVER
    session: str = ""  # a run's machine: "GPU NvidiaTeslaT4", "CPU"
    billed_seconds: float | None = None  # a run's accelerator time (None: a CPU run, or not known)


class History:
    """Read and append the records of one kernel project, as seen from one server."""

    def __init__(self, path: Path, server: str | None = None) -> None:
        self.path = Path(path)
        self.server = server or DEFAULT_SERVER

    @classmethod
    def for_kernel(cls, kernel_dir: Path, server: str | None = None) -> History:
        return cls(history_path(kernel_dir), server)

    # -- writing ------------------------------------------------------------------------------

    def append(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one record durably (one write, flush, fsync) and return it."""
        record = {"time": now_iso(), "event": event, "server": self.server, **fields}
        line = json.dumps(record, sort_keys=True, default=str) + "\n"
        created = not self.path.exists()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                if _ends_torn(fd):  # a crash mid-write: keep the torn line apart from this record
                    line = "\n" + line
                os.write(fd, line.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            if created:
                _fsync_dir(self.path.parent)  # the new file's name must survive a crash too
        except OSError as exc:
            raise KkbError(f"cannot write the push history {self.path}: {exc.strerror or exc}",
                           hint="check the permissions of the kernel folder") from exc
        return record

    # -- reading ------------------------------------------------------------------------------

    def records(self) -> list[dict[str, Any]]:
        """This server's complete records, oldest first (a torn or garbled line is skipped)."""
        return [r for r in self.all_records() if r.get("server", DEFAULT_SERVER) == self.server]

    def all_records(self) -> list[dict[str, Any]]:
        """Every complete record of every server, oldest first."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise KkbError(f"cannot read the push history {self.path}: {exc.strerror or exc}") from exc
        return list(_parse_lines(text.splitlines()))

    def last(self, event: str, **match: Any) -> dict[str, Any] | None:
        """The newest record of ``event`` whose fields equal ``match``.

        When ``match`` names a ``kernel``, records older than kkb's deletion of that kernel are not looked at:
        its version numbers start again at 1, and "v1" before is another kernel's."""
        record: dict[str, Any]  # declared: mypy's narrowing on ``==`` with Any would make it Any
        for record in reversed(self.records()):
            if record.get("event") == KERNEL_DELETED and "kernel" in match and record.get("kernel") == match["kernel"]:
                return None
            if record.get("event") == event and all(record.get(k) == v for k, v in match.items()):
                return record
        return None

    def open_intent(self, intent: str, done: str, key: str, value: Any) -> dict[str, Any] | None:
        """The newest ``intent`` record for ``key == value`` not followed by a ``done`` record for it."""
        record: dict[str, Any]
        for record in reversed(self.records()):
            if record.get("event") == KERNEL_DELETED:
                return None  # what was intended before a deletion is of a kernel that no longer exists
            if record.get(key) != value:
                continue
            if record.get("event") == done:
                return None
            if record.get("event") == intent:
                return record
        return None

    def kernel_records(self, kernel: str) -> list[dict[str, Any]]:
        """This server's records of ``kernel`` since kkb last deleted it (its versions before are another kernel's)."""
        records = self.records()
        cut = max((index for index, record in enumerate(records)
                   if record.get("event") == KERNEL_DELETED and record.get("kernel") == kernel), default=-1)
        return [record for record in records[cut + 1:] if record.get("kernel") == kernel]

    def last_push(self) -> dict[str, Any] | None:
        return self.last(PUSH)

    def rows(self) -> list[HistoryRow]:
        """Pushes and submissions to every server, oldest first, each submission with its latest score."""
        records = self.all_records()
        scores = {(r.get("server"), r.get("ref")): r for r in records if r.get("event") == SCORE}
        rows = []
        for record in records:
            if record.get("event") == PUSH:
                rows.append(_push_row(record))
            elif record.get("event") == SUBMISSION:
                rows.append(_submission_row(record, scores.get((record.get("server"), record.get("ref")))))
            elif record.get("event") == REHEARSAL:
                rows.append(_rehearsal_row(record))
            elif record.get("event") == RUN:
                rows.append(_run_row(record))
        return rows


def _parse_lines(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line torn by a crash mid-write
        if isinstance(record, dict) and "event" in record:
            yield record


def _ends_torn(fd: int) -> bool:
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot fsync a directory
    finally:
        os.close(fd)


def _row(record: dict[str, Any], kind: str, status: str, score: str = "", submission_ref: int | None = None) -> HistoryRow:
    """The columns every kind of record shares: when, which kernel version, which code and weights."""
    return HistoryRow(
        when=str(record.get("time", "")),
        kind=kind,
        kernel=str(record.get("kernel", "")),
        kernel_version=record.get("kernel_version"),
        code_hash=str(record.get("code_hash") or ""),
        weights_hash=str(record.get("weights_hash") or ""),
        code_version=record.get("code_version"),
        weights_version=record.get("weights_version"),
        submission_ref=submission_ref,
        status=status,
        score=score,
        server=str(record.get("server") or DEFAULT_SERVER),
    )


def _push_row(record: dict[str, Any]) -> HistoryRow:
    return _row(record, "push", "pushed" if record.get("kernel_pushed") else "unchanged")


def _submission_row(record: dict[str, Any], score: dict[str, Any] | None) -> HistoryRow:
    status = str(score.get("status", "")) if score else "pending"
    detail = str(score.get("public_score") or score.get("error_description") or "") if score else ""
    return _row(record, "submission", status, detail, submission_ref=record.get("ref"))


def _run_row(record: dict[str, Any]) -> HistoryRow:
    """A kernel run: how it ended, on which machine, and what it billed."""
    row = _row(record, "run", str(record.get("ended") or record.get("status") or ""))
    billed = record.get("billed_seconds")
    return replace(row, kernel_version=record.get("version"), session=str(record.get("session") or ""),
                   billed_seconds=float(billed) if isinstance(billed, (int, float)) else None)


def _rehearsal_row(record: dict[str, Any]) -> HistoryRow:
    verdict = record.get("verdict") or {}
    scale = record.get("scale") or 1
    return _row(record, "rehearsal", str(verdict.get("name") or record.get("status") or ""), f"x{scale}" if scale != 1 else "")
