"""Blob uploads with Google Cloud Storage's resumable-upload semantics, as the client expects them.

``StartBlobUpload`` reserves a token and a ``createUrl``; the client then ``PUT``s the bytes there
(no auth header: the URL is the capability). A ``PUT`` with ``Content-Range: bytes */<size>`` and no
body is a probe: 200 when complete, 308 with ``Range: bytes=0-<last>`` when partial (no ``Range``
when nothing arrived), 404 when the token is unknown. A ``PUT`` with ``Content-Range: bytes a-b/size``
continues at ``a``. The token is what the create call names in ``files[].token``.

Bodies are read in pieces and never beyond what ``StartBlobUpload`` announced (``bodies.py``): a PUT
that would go past it is a 413 before a byte is read. A body the server will not read (an unknown
token's, a refused one's) ends the connection instead of being drained, unless it is tiny.
"""

from __future__ import annotations

import re
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from io import BufferedIOBase
from pathlib import Path

from builder.local_kaggle import names
from builder.local_kaggle.bodies import BodyError, check_length, iter_body
from builder.local_kaggle.faults import Faults
from builder.local_kaggle.store import Store
from builder.local_kaggle.wire import ApiError, Call, Json, bad_request, now

_RANGE = re.compile(r"^bytes (?:(\d+)-(\d+)|\*)/(\d+|\*)$")
_DRAIN_LIMIT = 1 << 16  # a body up to this size is read and dropped to keep the connection; larger ones close it
BLOB_TYPES = ("DATASET", "MODEL", "INBOX", "COMPETITION_SOLUTION", "SUBMISSION")


@dataclass(frozen=True)
class PutResult:
    status: int
    headers: dict[str, str]
    close: bool = False   # the body was not read: the connection cannot be reused


@dataclass(frozen=True)
class Blob:
    token: str
    name: str
    kind: str
    path: Path
    size: int


class Blobs:
    def __init__(self, store: Store, faults: Faults, max_upload_bytes: int = 1 << 40) -> None:
        self._store = store
        self._faults = faults
        self._max_upload_bytes = max_upload_bytes

    # -- RPCs --------------------------------------------------------------------------------

    def start_blob_upload(self, call: Call) -> Json:
        user = call.require_user()
        kind = call.text("type", "API_BLOB_TYPE_UNSPECIFIED").upper()
        if kind not in BLOB_TYPES:
            raise bad_request(f"Unsupported blob type {kind!r}")
        return self.start(user, kind, call.text("name"), call.integer("contentLength") or 0, call.base_url)

    def start(self, user: str, kind: str, name: str, length: int, base_url: str) -> Json:
        names.file_name(name, "blob name")
        if length < 0:
            raise bad_request("contentLength must not be negative")
        if length > self._max_upload_bytes:
            raise ApiError(413, f"The file {name} is too large: {length} bytes, the limit is {self._max_upload_bytes}")
        token = secrets.token_hex(16)
        folder = self._store.path("blobs", token)
        folder.mkdir(parents=True)
        (folder / "data").write_bytes(b"")
        self._store.write(folder / "blob.json", {"token": token, "name": name, "type": kind, "user": user,
                                                 "contentLength": length, "complete": length == 0,
                                                 "created": now()})
        return {"token": token, "createUrl": f"{base_url}/upload/{token}"}

    # -- the PUT URL -------------------------------------------------------------------------

    def put(self, token: str, headers: Callable[[str], str | None], body: BufferedIOBase) -> PutResult:
        """One PUT to the upload URL; raises :class:`BodyError` for a body it will not read."""
        length = check_length(headers, self._max_upload_bytes)
        meta = self._meta(token)
        if meta is None:
            return _refuse(404, body, headers, length)
        size = int(meta["contentLength"])
        data = self._store.path("blobs", token, "data")
        received = data.stat().st_size
        content_range = (headers("Content-Range") or "").strip()
        start = 0
        if content_range:
            match = _RANGE.match(content_range)
            if not match:
                return _refuse(400, body, headers, length)
            if match.group(1) is None:  # "bytes */size": a status probe
                progress = self._progress(meta, received)
                return _refuse(progress.status, body, headers, length, progress.headers)
            start = int(match.group(1))
            if start > received:  # a hole: the client must probe and continue where we are
                progress = self._progress(meta, received)
                return _refuse(progress.status, body, headers, length, progress.headers)
        elif meta["complete"] and received == size:
            return _refuse(200, body, headers, length)
        if length is not None and start + length > size:
            raise BodyError(413, f"The upload is larger than announced: {start} + {length} bytes > {size}")
        keep = self._bytes_to_keep(start, size)
        written = _write_from(data, start, body, headers, keep, limit=max(0, size - start))
        received = start + written
        complete = received >= size and keep is None
        if received > size:
            with data.open("r+b") as handle:
                handle.truncate(size)
            return PutResult(400, {})
        with self._store.lock:
            meta["complete"] = complete
            self._store.write(self._store.path("blobs", token, "blob.json"), meta)
        if not complete:
            # GCS answers 503 when a transfer is cut; the client then probes and resumes.
            return PutResult(503, {})
        return PutResult(200, {})

    # -- use by the create calls -------------------------------------------------------------

    def resolve(self, token: str, user: str, kind: str | None = None) -> Blob:
        meta = self._meta(token)
        if meta is None or meta.get("user") != user or (kind and meta.get("type") != kind):
            raise bad_request(f"Invalid upload token {token!r}: start the upload with this account and finish it")
        if not meta.get("complete"):
            raise bad_request(f"The upload of {meta['name']!r} is not complete")
        return Blob(token, meta["name"], meta["type"], self._store.path("blobs", token, "data"), int(meta["contentLength"]))

    def discard(self, token: str) -> None:
        shutil.rmtree(self._store.path("blobs", token), ignore_errors=True)

    # -- internals ---------------------------------------------------------------------------

    def _meta(self, token: str) -> Json | None:
        if not re.fullmatch(r"[0-9a-f]{32}", token):
            return None
        meta = self._store.read(self._store.path("blobs", token, "blob.json"))
        return meta if isinstance(meta, dict) else None

    def _progress(self, meta: Json, received: int) -> PutResult:
        if meta["complete"]:
            return PutResult(200, {})
        if received <= 0:
            return PutResult(308, {})
        return PutResult(308, {"Range": f"bytes=0-{received - 1}"})

    def _bytes_to_keep(self, start: int, size: int) -> int | None:
        """How many bytes of this PUT to keep when an upload-break fault fires (``None``: all of them)."""
        fraction = self._faults.take_upload_break()
        if fraction is None:
            return None
        return max(0, int(size * fraction) - start)


def _refuse(status: int, body: BufferedIOBase, headers: Callable[[str], str | None], length: int | None,
            answer_headers: dict[str, str] | None = None) -> PutResult:
    """Answer ``status`` without using the body: a small plain one is read and dropped, anything larger
    (or chunked) closes the connection instead."""
    if length is not None and length <= _DRAIN_LIMIT:
        _drain(body, headers)
        return PutResult(status, dict(answer_headers or {}))
    return PutResult(status, dict(answer_headers or {}), close=length is not None or _chunked(headers))


def _chunked(headers: Callable[[str], str | None]) -> bool:
    return (headers("Transfer-Encoding") or "").strip().lower() == "chunked"


def _drain(body: BufferedIOBase, headers: Callable[[str], str | None]) -> None:
    """Read and drop a probe's (or a tiny refused) body; never more than the drain limit."""
    for _ in iter_body(body, headers, _DRAIN_LIMIT):
        pass


def _write_from(path: Path, start: int, body: BufferedIOBase, headers: Callable[[str], str | None], keep: int | None,
                limit: int) -> int:
    """Write the body at ``start`` (at most ``limit`` bytes); keep only ``keep`` bytes (the rest is read and
    dropped, like a cut transfer)."""
    written = 0
    with path.open("r+b") as handle:
        handle.seek(start)
        handle.truncate(start)
        for chunk in iter_body(body, headers, limit):
            if keep is not None:
                chunk = chunk[: max(0, keep - written)]
            if chunk:
                handle.write(chunk)
                written += len(chunk)
    return written
