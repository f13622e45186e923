"""The admin token that guards ``/_admin/*``, and the small client kkb's own tools use to send it.

``/_admin/faults`` changes what the server does to everybody's requests, so another process on the
machine must not reach it just by knowing the port. At every start the server writes a fresh random
token to ``<data>/admin-token`` (mode 0600: readable by whoever owns the data folder, the same
person who could edit ``faults.json`` directly); a request to ``/_admin/*`` must carry it in the
``X-KKB-Admin-Token`` header, else it is answered 401 without being looked at.

Readers: :class:`AdminClient` (``kkb local-kaggle faults``, the tests), and anyone with ``curl``:
``curl -H "X-KKB-Admin-Token: $(cat DATA/admin-token)" http://127.0.0.1:PORT/_admin/faults``.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from builder.errors import LocalKaggleError

TOKEN_FILE = "admin-token"
HEADER = "X-KKB-Admin-Token"


def write_admin_token(data_dir: Path) -> str:
    """A fresh token in ``<data>/admin-token``, created 0600 (never world-readable, even for a moment)."""
    path = Path(data_dir) / TOKEN_FILE
    token = secrets.token_hex(24)
    tmp = path.with_name(f".{TOKEN_FILE}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(token + "\n")
    os.replace(tmp, path)
    return token


def read_admin_token(data_dir: Path) -> str:
    path = Path(data_dir) / TOKEN_FILE
    try:
        token = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        raise LocalKaggleError(f"no admin token at {path}",
                               hint="start the local Kaggle on this --data-dir first (it writes the token)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LocalKaggleError(f"cannot read the admin token {path}: {exc}") from None
    if not token:
        raise LocalKaggleError(f"the admin token file {path} is empty", hint="restart the local Kaggle to write a new one")
    return token


def token_matches(expected: str, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(expected.encode("ascii"), (given or "").strip().encode("utf-8"))


class AdminClient:
    """``/_admin/faults`` and ``/_admin/clock`` over HTTP with the token read from the server's data folder."""

    def __init__(self, base_url: str, data_dir: Path, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = read_admin_token(data_dir)
        self.timeout = timeout

    def faults(self) -> dict[str, Any]:
        return self._call("GET")

    def set_faults(self, document: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", document)

    def clear_faults(self) -> dict[str, Any]:
        return self._call("DELETE")

    def clock(self, now: str | None = None, advance: float | None = None) -> dict[str, Any]:
        """The server's clock (``{"now": ISO}``), set to ``now`` or moved by ``advance`` seconds first."""
        change = {key: value for key, value in (("now", now), ("advance", advance)) if value is not None}
        return self._call("POST" if change else "GET", change or None, endpoint="clock")

    def _call(self, method: str, document: dict[str, Any] | None = None, endpoint: str = "faults") -> dict[str, Any]:
        data = json.dumps(document).encode("utf-8") if document is not None else None
        request = urllib.request.Request(f"{self.base_url}/_admin/{endpoint}", data=data, method=method,
                                         headers={HEADER: self.token, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return dict(json.loads(answer.read() or b"{}"))
        except urllib.error.HTTPError as exc:
            message = _message(exc.read())
            raise LocalKaggleError(f"the local Kaggle refused {method} /_admin/{endpoint}: {message}",
                                   hint="check the document, and that --data-dir is the server's") from None
        except urllib.error.URLError as exc:
            raise LocalKaggleError(f"cannot reach the local Kaggle at {self.base_url}: {exc.reason}",
                                   hint="is it running? (kkb local-kaggle serve)") from None


def _message(body: bytes) -> str:
    try:
        return str(json.loads(body).get("message") or body.decode("utf-8", "replace"))
    except (ValueError, AttributeError):
        return body.decode("utf-8", "replace")
