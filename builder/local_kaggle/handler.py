"""HTTP plumbing: routes Kaggle's RPCs, the upload PUT URL, signed downloads and the admin endpoint.

* ``POST /api/v1/<service>/<Method>`` (kagglesdk's non-PROD form) and ``POST /v1/<service>/<Method>``
  (its PROD form, used when only the endpoint host is swapped) → JSON, or a 302 for ``Download*``;
* ``PUT /upload/<token>`` → resumable blob upload (no auth: the token is the capability);
* ``GET /storage/<signature>/<path>`` → a stored file with ``Range``/``If-Range`` support (no auth);
* ``GET /api/v1/kernels/logs/stream/<owner>/<slug>`` → ``kaggle kernels logs --follow``;
* ``GET|POST|DELETE /_admin/faults`` → read, replace or clear the injected faults; ``GET|POST /_admin/clock``
  → read or move the clock of the server's limits; every ``/_admin/*`` request needs the admin token (``admin.py``).
"""

from __future__ import annotations

import email.utils
import errno
import json
import logging
import re
import time
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from builder.errors import KkbError
from builder.local_kaggle import admin, names
from builder.local_kaggle.auth import Users
from builder.local_kaggle.blobs import Blobs
from builder.local_kaggle.bodies import BodyError, read_body
from builder.local_kaggle.clock import Clock, iso_utc, parse_moment
from builder.local_kaggle.faults import Faults
from builder.local_kaggle.kernels import Kernels
from builder.local_kaggle.settings import ServerSettings
from builder.local_kaggle.store import Store
from builder.local_kaggle.wire import ApiError, Call, Redirect, version_number
from builder.local_kaggle.wire import Handler as RouteHandler


class ServerApp(Protocol):
    """What a request handler needs of the server (``LocalKaggle`` is one): the handler never imports the server."""

    store: Store
    users: Users
    faults: Faults
    clock: Clock
    blobs: Blobs
    kernels: Kernels
    routes: dict[str, RouteHandler]
    settings: ServerSettings
    admin_token: str

    @property
    def running(self) -> bool: ...

    @property
    def base_url(self) -> str: ...

log = logging.getLogger(__name__)
_RPC = re.compile(r"^/(?:api/)?v1/(?P<service>[A-Za-z0-9_.]+)/(?P<method>[A-Za-z0-9_]+)/?$")
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
_LOG_STREAM = re.compile(r"^/(?:api/)?v1/kernels/logs/stream/(?P<owner>[^/]+)/(?P<slug>[^/]+)/?$")
PUBLIC_METHODS = frozenset({"security.OAuthService/IntrospectToken"})


def make_handler(app: ServerApp) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        server_app = app
        timeout = app.settings.request_timeout_seconds  # a socket read that waits longer is cut (408)

    return Handler


class _Handler(BaseHTTPRequestHandler):
    server_app: ServerApp
    protocol_version = "HTTP/1.1"
    server_version = "kkb-local-kaggle"
    sys_version = ""

    # -- verbs -------------------------------------------------------------------------------

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        match = _RPC.match(path)
        if match and f"{match['service']}/{match['method']}" in self.server_app.routes:
            body = self._read_body()
            if body is not None:
                self._rpc(f"{match['service']}/{match['method']}", body)
        elif match:
            self._refuse_unread(ApiError(404, f"Unknown method {match['service']}/{match['method']}"))
        elif path.startswith("/_admin/"):
            self._admin("POST", path)
        else:
            self._refuse_unread(ApiError(404, f"No such endpoint: POST {path}"))

    def do_PUT(self) -> None:
        path = urlsplit(self.path).path
        if not path.startswith("/upload/"):
            self._refuse_unread(ApiError(404, f"No such endpoint: PUT {path}"))
            return
        try:
            result = self.server_app.blobs.put(path[len("/upload/"):], self.headers.get, self.rfile)
        except BodyError as exc:
            self._refuse_unread(ApiError(exc.status, exc.message))
            return
        except OSError as exc:
            if exc.errno not in DISK_FULL:
                raise
            # What arrived stays (a probe answers 308 with its range): the client resumes once there is room.
            self._refuse_unread(disk_full("the upload", exc))
            return
        if result.close:
            self.close_connection = True
        self._send(result.status, b"" if result.status == 308 else b"{}", result.headers,
                   content_type="application/json")

    def do_GET(self) -> None:
        self._get(head=False)

    def do_HEAD(self) -> None:
        self._get(head=True)

    def do_DELETE(self) -> None:
        path = urlsplit(self.path).path
        if path.startswith("/_admin/"):
            self._admin("DELETE", path)
        else:
            self._refuse_unread(ApiError(404, f"No such endpoint: DELETE {path}"))

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    # -- RPC ---------------------------------------------------------------------------------

    def _rpc(self, method: str, raw: bytes) -> None:
        app = self.server_app
        handler = app.routes.get(method)
        if handler is None:
            self._error(ApiError(404, f"Unknown method {method}"))
            return
        fault = app.faults.take_rpc(method)
        if fault is not None and not fault.get("afterCommit"):
            self._fault(fault)
            return
        result = self._handled(method, handler, raw)
        if result is None:
            return
        if fault is not None:  # the call did what it asked; the answer that says so is lost on the way
            self._fault(fault)
        elif isinstance(result, Redirect):
            self._send(302, b"", {"Location": result.location})
        else:
            self._json(200, result)

    def _handled(self, method: str, handler: RouteHandler, raw: bytes) -> Any:
        """The handler's result, or None once an error was answered."""
        app = self.server_app
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            user = None if method in PUBLIC_METHODS else app.users.authenticate(self.headers.get("Authorization"))
            return handler(Call(method=method, body=body, user=user, base_url=self._base_url(),
                                max_page_size=app.settings.max_page_size))
        except ApiError as exc:
            self._error(exc)
        except (ValueError, UnicodeDecodeError) as exc:
            self._error(ApiError(400, f"Invalid request body: {exc}"))
        except KkbError as exc:
            self._error(ApiError(400, exc.message))
        except OSError as exc:
            if exc.errno in DISK_FULL:
                self._error(disk_full(f"the result of {method}", exc))
                return None
            log.exception("local Kaggle: %s failed", method)
            self._error(ApiError(500, "Internal server error"))
        except Exception:  # the server must answer, in Kaggle's shape, whatever went wrong
            log.exception("local Kaggle: %s failed", method)
            self._error(ApiError(500, "Internal server error"))
        return None

    def _fault(self, fault: dict[str, Any]) -> None:
        """An injected failure: Kaggle's JSON error, or the HTML page its front end answers when it throttles."""
        headers = {"Retry-After": _seconds(fault["retryAfter"])} if "retryAfter" in fault else {}
        status = int(fault["status"])
        message = fault.get("message") or _REASONS.get(status, "Injected failure")
        if fault.get("html"):
            self._send(status, throttled_page(status, message), headers, content_type="text/html; charset=UTF-8")
        else:
            self._error(ApiError(status, message, headers))

    # -- downloads ---------------------------------------------------------------------------

    def _get(self, head: bool) -> None:
        path = urlsplit(self.path).path
        stream = _LOG_STREAM.match(path)
        if path.startswith("/storage/"):
            self._storage(path[len("/storage/"):], head)
        elif stream:
            self._log_stream(stream["owner"], stream["slug"], parse_qs(urlsplit(self.path).query))
        elif path.startswith("/_admin/"):
            self._admin("GET", path)
        elif path in ("/", "/api/v1", "/v1"):
            self._json(200, {"server": "kkb local Kaggle", "users": len(self.server_app.users.names())})
        else:
            self._error(ApiError(404, f"No such endpoint: GET {path}"))

    def _storage(self, rest: str, head: bool) -> None:
        signature, _, quoted = rest.partition("/")
        rel = unquote(quoted)
        store = self.server_app.store
        try:
            target = names.inside(store.root, rel, "storage path")
        except ApiError:
            target = None
        if target is None or not store.verify(rel, signature) or not target.is_file():
            self._error(ApiError(404, "Not found"))
            return
        stat = target.stat()
        etag = f'"{stat.st_size:x}-{stat.st_mtime_ns:x}"'
        modified = email.utils.formatdate(stat.st_mtime, usegmt=True)
        start, end = 0, stat.st_size - 1
        status = 200
        wanted = _RANGE.match(self.headers.get("Range", "").strip())
        if_range = self.headers.get("If-Range")
        if wanted and (if_range is None or if_range in (etag, modified)):
            first, last = wanted.groups()
            if first:
                start, end = int(first), min(int(last), end) if last else end
            elif last:
                start = max(0, stat.st_size - int(last))
            if start >= stat.st_size or start > end:
                self._send(416, b"", {"Content-Range": f"bytes */{stat.st_size}"})
                return
            status = 206
        headers = {"Accept-Ranges": "bytes", "ETag": etag, "Last-Modified": modified}
        if status == 206:
            headers["Content-Range"] = f"bytes {start}-{end}/{stat.st_size}"
        length = end - start + 1 if stat.st_size else 0
        self.send_response(status)
        for key, value in {**headers, "Content-Type": "application/octet-stream", "Content-Length": str(length)}.items():
            self.send_header(key, value)
        self.end_headers()
        if head:
            return
        with target.open("rb") as handle:
            handle.seek(start)
            remaining = length
            while remaining > 0:
                chunk = handle.read(min(1 << 20, remaining))
                if not chunk:
                    break
                self.wfile.write(chunk)
                remaining -= len(chunk)

    def _log_stream(self, owner: str, slug: str, query: dict[str, list[str]]) -> None:
        """``kaggle kernels logs --follow``: the stored log once the run is over; while it runs, an SSE
        stream that is held open until the run ends (runs report their log at the end), then replayed."""
        app = self.server_app
        try:
            user = app.users.authenticate(self.headers.get("Authorization"))
            number = version_number(next(iter(query.get("versionLabel") or []), None))
            version = app.kernels.version(owner, slug, number, user)
        except ApiError as exc:
            self._error(exc)
            return
        log_path = version.folder / "log.json"
        if version.session.get("status") not in ("QUEUED", "RUNNING"):
            self._send(200, log_path.read_bytes() if log_path.exists() else b"[]", {}, content_type="application/json")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.close_connection = True  # the stream's end is the connection's end
        while app.running and app.kernels.version(owner, slug, version.number, user).session.get("status") in (
                "QUEUED", "RUNNING"):
            time.sleep(0.2)
        entries = json.loads(log_path.read_text(encoding="utf-8")) if log_path.exists() else []
        for entry in entries:
            self.wfile.write(f"data: {json.dumps(entry)}\n\n".encode())
        self.wfile.write(b"data: END_OF_LOG\n\n")

    # -- admin -------------------------------------------------------------------------------

    def _admin(self, verb: str, path: str) -> None:
        """``/_admin/*``: the token is checked before anything else, the body read only after it."""
        if not admin.token_matches(self.server_app.admin_token, self.headers.get(admin.HEADER)):
            self._refuse_unread(ApiError(401, f"The /_admin endpoints need the admin token: send {admin.HEADER} "
                                              f"with the content of {admin.TOKEN_FILE} in the server's data folder"))
            return
        raw = self._read_body()
        if raw is None:
            return
        if path == "/_admin/clock" and verb in ("GET", "POST"):
            self._admin_clock(raw if verb == "POST" else b"")
        elif path != "/_admin/faults":
            self._error(ApiError(404, f"No such endpoint: {verb} {path}"))
        elif verb == "GET":
            self._json(200, self.server_app.faults.snapshot())
        elif verb == "DELETE":
            self.server_app.faults.clear()
            self._json(200, self.server_app.faults.snapshot())
        else:
            self._admin_faults_post(raw)

    def _admin_faults_post(self, raw: bytes) -> None:
        try:
            self.server_app.faults.replace(json.loads(raw or b"{}"))
        except ValueError as exc:
            self._error(ApiError(400, f"the faults document is not JSON: {exc}"))
            return
        except KkbError as exc:
            self._error(ApiError(400, exc.message + (f" ({exc.hint})" if exc.hint else "")))
            return
        self._json(200, self.server_app.faults.snapshot())

    def _admin_clock(self, raw: bytes) -> None:
        """``/_admin/clock``: what "now" is for the server's limits; POST ``{"now": ISO}`` or ``{"advance": S}``."""
        clock = self.server_app.clock
        try:
            change = json.loads(raw or b"{}")
            if not isinstance(change, dict) or set(change) - {"now", "advance"}:
                raise ValueError('give {"now": "2026-12-01T23:59:00Z"} or {"advance": SECONDS}')
            if "now" in change:
                clock.set(parse_moment(str(change["now"])))
            if "advance" in change:
                clock.advance(float(change["advance"]))
        except (ValueError, TypeError) as exc:
            self._error(ApiError(400, f"the clock change is not valid: {exc}"))
            return
        except KkbError as exc:
            self._error(ApiError(400, exc.message))
            return
        self._json(200, {"now": iso_utc(clock.now())})

    # -- helpers -----------------------------------------------------------------------------

    def _base_url(self) -> str:
        """How this client reaches us, so the URLs we hand out (uploads, downloads) work for it."""
        host = self.headers.get("Host")
        return f"http://{host}" if host else self.server_app.base_url

    def _read_body(self) -> bytes | None:
        """The whole body, within ``ServerSettings.max_body_bytes``; ``None`` once a refusal was answered."""
        try:
            return read_body(self.rfile, self.headers.get, self.server_app.settings.max_body_bytes)
        except BodyError as exc:
            self._refuse_unread(ApiError(exc.status, exc.message))
            return None

    def _refuse_unread(self, error: ApiError) -> None:
        """Answer ``error`` without reading (the rest of) the body: the connection cannot be reused then."""
        if self.headers.get("Content-Length", "0").strip() != "0" or self.headers.get("Transfer-Encoding"):
            self.close_connection = True
        self._error(error)

    def _json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode("utf-8"), {}, content_type="application/json")

    def _error(self, error: ApiError) -> None:
        payload = json.dumps({"code": error.status, "message": error.message}).encode("utf-8")
        self._send(error.status, payload, error.headers, content_type="application/json")

    def _send(self, status: int, payload: bytes, headers: dict[str, str], content_type: str | None = None) -> None:
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        for key, value in headers.items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if payload and self.command != "HEAD":
            self.wfile.write(payload)


_REASONS = {429: "Too many requests", 500: "Internal server error", 502: "Bad gateway", 503: "Service unavailable"}
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
INSUFFICIENT_STORAGE = 507


def disk_full(what: str, exc: OSError) -> ApiError:
    """A full disk under the server's data folder, answered as HTTP 507 (Insufficient Storage), never a dropped
    connection: the client then reports the server's words, not "cannot reach"."""
    return ApiError(INSUFFICIENT_STORAGE, f"Insufficient storage: the local Kaggle's disk is full ({exc.strerror}) "
                                          f"while storing {what}; free space in its data folder, then resume")


def throttled_page(status: int, message: str) -> bytes:
    """What Kaggle's front end answers a throttled request with: an HTML page, not the API's JSON error."""
    return (f"<!DOCTYPE html>\n<html lang=en><meta charset=utf-8><title>Error {status} ({message})</title>"
            f"<p><b>{status}.</b> <ins>That's an error.</ins><p>{message}. Please try again later."
            f"<ins>That's all we know.</ins></html>\n").encode()


def _seconds(value: Any) -> str:
    number = float(value)
    return str(int(number)) if number.is_integer() else str(number)

