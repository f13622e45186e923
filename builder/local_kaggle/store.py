"""The local Kaggle's on-disk state: JSON records plus plain folders under one data directory.

Everything the server knows lives here, so a restart on the same data directory loses nothing::

    <data>/users.json                      users, API keys and access tokens
    <data>/counters.json                   id sequences (datasets, kernels, submissions)
    <data>/secret                          HMAC key of the signed download URLs (stable across restarts)
    <data>/faults.json                     injected faults (see faults.py)
    <data>/admin-token                     the token /_admin/* needs, new at every start, mode 0600 (admin.py)
    <data>/blobs/<token>/{blob.json,data}  uploads (resumable)
    <data>/datasets/<owner>/<slug>/dataset.json, versions/<n>/files/...
    <data>/kernels/<owner>/<slug>/kernel.json, versions/<n>/{source,session.json,output/,log.json}
    <data>/competitions/<slug>/{competition.toml,public/,hidden/,answers.csv}
    <data>/submissions/<ref>/{submission.json,run/}

Writes are atomic (temporary file + ``os.replace``); one re-entrant lock serialises
read-modify-write cycles between the HTTP threads and the kernel worker.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

from builder.errors import LocalKaggleError
from builder.local_kaggle import names
from builder.local_kaggle.names import SLUG  # noqa: F401 - where the services have always found it


class Store:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LocalKaggleError(
                f"cannot create the local Kaggle data directory {self.root}: {exc.strerror}",
                hint="pass --data-dir with a writable folder",
            ) from exc
        self.lock = threading.RLock()
        self._secret = self._load_secret()

    # -- paths -------------------------------------------------------------------------------

    def path(self, *parts: str | int) -> Path:
        return self.root.joinpath(*(str(part) for part in parts))

    def relative(self, path: Path) -> str:
        return path.resolve().relative_to(self.root).as_posix()

    # -- JSON records ------------------------------------------------------------------------

    def read(self, path: Path, default: Any = None) -> Any:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return default
        except json.JSONDecodeError as exc:
            raise LocalKaggleError(
                f"the local Kaggle record {path} is corrupt: {exc}",
                hint="restore it or start with a fresh --data-dir",
            ) from exc

    def write(self, path: Path, value: Any) -> None:
        self.write_text(path, json.dumps(value, indent=1, sort_keys=True))

    def write_text(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)

    def next_id(self, sequence: str) -> int:
        with self.lock:
            counters = self.read(self.path("counters.json"), {})
            value = int(counters.get(sequence, 0)) + 1
            counters[sequence] = value
            self.write(self.path("counters.json"), counters)
            return value

    # -- signed URLs (kernel output files and downloads need no auth header, like GCS links) --

    def sign(self, relpath: str) -> str:
        return hmac.new(self._secret, relpath.encode("utf-8"), hashlib.sha256).hexdigest()[:32]

    def verify(self, relpath: str, signature: str) -> bool:
        return hmac.compare_digest(self.sign(relpath), signature)

    def _load_secret(self) -> bytes:
        path = self.path("secret")
        if not path.exists():
            path.write_text(secrets.token_hex(32), encoding="utf-8")
            path.chmod(0o600)
        return path.read_text(encoding="utf-8").strip().encode("ascii")


class VersionRecord(TypedDict):
    """One uploaded version of a dataset or a model's variation, as its record keeps it: ready once past ``readyAt``
    and ``pollsNeeded`` status polls (``ServerSettings.dataset_ready_*``, a stall fault adds polls)."""

    number: int
    notes: str
    created: float
    creator: str
    readyAt: float
    pollsNeeded: int
    polls: int
    status: str  # PROCESSING | READY (| DELETED, a dataset's)


class OwnedRecords:
    """JSON records kept per owner and slug: ``<data>/<kind>/<owner>/<slug>/<file>`` (datasets, kernels)."""

    def __init__(self, store: Store, kind: str, file: str) -> None:
        self.store, self.kind, self.file = store, kind, file

    def dir(self, owner: str, slug: str) -> Path:
        """The record's folder; a name that is no slug never becomes a path (400, see names.py)."""
        return self.store.path(self.kind, names.slug(owner, "owner"), names.slug(slug, "slug"))

    def load(self, owner: str, slug: str) -> Any:
        """The record, ``None`` when there is none, including for names that cannot be slugs."""
        if not names.is_slug(owner or "") or not names.is_slug(slug or ""):
            return None
        return self.store.read(self.dir(owner, slug) / self.file)

    def source(self, source: str, can_read: Callable[[Any], bool]) -> tuple[Any, str | None] | None:
        """The record a kernel's source ``owner/slug`` or ``owner/slug/VERSION`` names, with its version part (None
        when absent); ``None`` when the source is malformed, names nothing, or ``can_read`` refuses the record."""
        parts = source.strip("/").split("/")
        if len(parts) not in (2, 3):
            return None
        record = self.load(parts[0], parts[1])
        if record is None or not can_read(record):
            return None
        return record, parts[2] if len(parts) == 3 else None

    def save(self, record: Any) -> None:
        self.store.write(self.dir(record["owner"], record["slug"]) / self.file, record)

    def all(self) -> list[Any]:
        root = self.store.path(self.kind)
        return [r for r in (self.store.read(p) for p in sorted(root.glob(f"*/*/{self.file}"))) if r] if root.exists() else []
