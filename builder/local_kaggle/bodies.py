"""Reading request bodies without trusting them: a size limit, a checked ``Content-Length``, chunks.

The audit sent a 200 MB body (the server read it whole, grew to ~470 MB, then answered 404) and a
``Content-Length`` of 10¹² (no answer at all). Now:

* ``Content-Length`` must be one non-negative decimal number (else 400); a body larger than the
  limit is answered 413 at once, from the header, without reading it;
* ``Transfer-Encoding: chunked`` is read chunk by chunk and counted against the same limit;
* bytes are read in pieces of at most :data:`PIECE`, never ``read(length)`` in one go;
* a body that stops arriving is cut by the socket timeout (``ServerSettings.request_timeout_seconds``)
  and answered 408; a body shorter than announced is a 400.

Every refusal is a :class:`BodyError`; the handler answers it and closes the connection, since the
rest of the body may still be on the wire. The limits are ``ServerSettings.max_body_bytes`` (RPC and
admin bodies) and ``max_upload_bytes`` (the blob PUT endpoint, bounded also by the size its
``StartBlobUpload`` announced).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from io import BufferedIOBase

PIECE = 1 << 16
Headers = Callable[[str], "str | None"]


class BodyError(Exception):
    """A body the server will not read; answered with ``status`` and ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def declared_length(headers: Headers) -> int | None:
    """``Content-Length`` as a number, ``None`` when absent; 400 when it is not one plain number."""
    raw = headers("Content-Length")
    if raw is None:
        return None
    text = raw.strip()
    if not text.isdigit() or not text.isascii() or len(text) > 30:
        raise BodyError(400, f"Invalid Content-Length {raw[:40]!r}: it must be one non-negative number of bytes")
    return int(text)


def is_chunked(headers: Headers) -> bool:
    return (headers("Transfer-Encoding") or "").strip().lower() == "chunked"


def check_length(headers: Headers, limit: int) -> int | None:
    """The declared length, refused (413) when over ``limit`` before a byte is read."""
    length = declared_length(headers)
    if length is not None and is_chunked(headers):
        raise BodyError(400, "A request cannot have both Content-Length and Transfer-Encoding: chunked")
    if length is not None and length > limit:
        raise BodyError(413, f"Request body too large: {length} bytes, the limit is {limit}")
    return length


def iter_body(body: BufferedIOBase, headers: Headers, limit: int) -> Iterator[bytes]:
    """The body in pieces (plain or chunked), never more than ``limit`` bytes in all."""
    length = check_length(headers, limit)
    try:
        if is_chunked(headers):
            yield from _chunked(body, limit)
            return
        remaining = length or 0
        while remaining > 0:
            piece = body.read(min(PIECE, remaining))
            if not piece:
                raise BodyError(400, f"The request body ended after {(length or 0) - remaining} of {length} bytes")
            remaining -= len(piece)
            yield piece
    except TimeoutError:
        raise BodyError(408, "The request body stopped arriving (timed out)") from None


def read_body(body: BufferedIOBase, headers: Headers, limit: int) -> bytes:
    return b"".join(iter_body(body, headers, limit))


def _chunked(body: BufferedIOBase, limit: int) -> Iterator[bytes]:
    total = 0
    while True:
        line = body.readline(1024).strip()
        try:
            size = int(line.split(b";")[0], 16)
        except ValueError:
            raise BodyError(400, f"Invalid chunk size {line[:20]!r} in a chunked body") from None
        if size < 0:
            raise BodyError(400, "Invalid negative chunk size in a chunked body")
        if size == 0:
            while body.readline(1024).strip():  # trailers
                pass
            return
        total += size
        if total > limit:
            raise BodyError(413, f"Request body too large: more than {limit} bytes")
        remaining = size
        while remaining > 0:
            piece = body.read(min(PIECE, remaining))
            if not piece:
                raise BodyError(400, "The chunked request body ended early")
            remaining -= len(piece)
            yield piece
        body.readline(8)
