"""Kaggle's wire conventions, shared by every service of the local Kaggle.

The real client (kagglesdk) sends ``POST .../v1/<package.Service>/<Method>`` with a camelCase JSON body
and parses camelCase JSON back; an error is any status >= 400 with ``{"code": N, "message": ...}``.
Its parser calls typed setters, so a response must never carry ``null`` (a ``null`` datetime crashes
the parser) and numbers must have the declared type (a score is a *string*, a ref an *int*).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

Json = dict[str, Any]


class ApiError(Exception):
    """An RPC failure, answered as ``{"code": status, "message": message}`` with that HTTP status."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


def not_found(message: str) -> ApiError:
    return ApiError(404, message)


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def forbidden(message: str) -> ApiError:
    return ApiError(403, message)


@dataclass(frozen=True)
class Redirect:
    """A ``Download*`` RPC answer: the client follows the 302 and saves the final URL's last segment."""

    location: str


@dataclass
class Call:
    """One authenticated RPC as the services see it."""

    method: str                 # "datasets.DatasetApiService/CreateDataset"
    body: Json
    user: str | None            # None: anonymous
    base_url: str               # how the client reaches us, e.g. "http://127.0.0.1:8123"
    extra: dict[str, Any] = field(default_factory=dict)
    max_page_size: int | None = None  # ServerSettings.max_page_size: a list answer holds at most this many

    def require_user(self) -> str:
        if self.user is None:
            raise ApiError(401, "Unauthenticated")
        return self.user

    def text(self, key: str, default: str = "") -> str:
        value = self.body.get(key, default)
        return value if isinstance(value, str) else str(value)

    def integer(self, key: str) -> int | None:
        value = self.body.get(key)
        if value is None or value == "":
            return None
        try:
            return int(value)
        except (TypeError, ValueError):
            raise bad_request(f"{key} must be an integer, got {value!r}") from None

    def flag(self, key: str, default: bool) -> bool:
        value = self.body.get(key, default)
        if isinstance(value, str):  # the client accepts "true"/"false" strings in metadata files
            return value.strip().lower() == "true"
        return bool(value)

    def strings(self, key: str) -> list[str]:
        value = self.body.get(key) or []
        if isinstance(value, str):
            return [value]
        return [str(item) for item in value]


Handler = Callable[[Call], "Json | Redirect"]


def iso(epoch: float) -> str:
    """Kaggle's timestamp format: ``2026-01-02T03:04:05.678Z``."""
    moment = datetime.fromtimestamp(epoch, tz=timezone.utc).replace(tzinfo=None)
    return moment.isoformat(timespec="milliseconds") + "Z"


def now() -> float:
    return time.time()


def compact(obj: Json) -> Json:
    """Drop ``None`` values: the client's parser cannot take ``null`` for typed fields."""
    return {key: value for key, value in obj.items() if value is not None}


def paginate(items: Sequence[Any], page_token: str | None, page_size: int | None, default_size: int = 20,
             page: int | None = None) -> tuple[list[Any], str]:
    """Slice ``items`` the way Kaggle pages: an opaque token (here: the offset) and ``nextPageToken`` ("" at the end).

    Lists also take the older ``page`` (1-based page number); a token, when given, wins (the client
    sends ``page: 1`` alongside an empty token).
    """
    size = page_size if page_size and page_size > 0 else default_size
    try:
        start = int(page_token) if page_token else 0
    except ValueError:
        raise bad_request(f"Invalid page token {page_token!r}") from None
    if not page_token and page is not None:
        if page < 1:
            raise bad_request(f"Page number must be >= 1, got {page}")
        start = (page - 1) * size
    chunk = list(items[start : start + size])
    next_token = str(start + size) if start + size < len(items) else ""
    return chunk, next_token


def paginate_call(items: Sequence[Any], call: Call, default_size: int = 20) -> tuple[list[Any], str]:
    """:func:`paginate` with the request's ``pageToken``, ``pageSize`` and ``page``, within the server's page size."""
    size = call.integer("pageSize")
    size = size if size and size > 0 else default_size
    if call.max_page_size:
        size = min(size, call.max_page_size)
    return paginate(items, call.text("pageToken"), size, default_size, page=call.integer("page"))


def version_number(label: str | None) -> int | None:
    """``versionLabel`` is ``"v<N>"`` (the client prefixes digits); a bare number is accepted too."""
    if not label:
        return None
    text = label[1:] if label[:1] in ("v", "V") else label
    if not text.isdigit():
        raise not_found(f"Version {label!r} not found")
    return int(text)
