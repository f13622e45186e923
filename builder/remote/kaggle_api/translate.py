"""The client's words in kkb's terms: its exceptions become :mod:`builder.errors`, its chatter a debug log.

Foreign errors are translated where they enter (``requests`` HTTP errors, errors returned in 200 bodies,
the client's own ``ValueError``/``SystemExit``); transient failures (429, 5xx, dropped connections) are
recognised here so :meth:`~builder.remote.kaggle_api.calls.KaggleCalls.call` can retry them; secrets never
reach a message or log (:func:`scrub`).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
from collections.abc import Iterator

from builder.errors import AuthError, KkbError, RemoteError

ENV_BASE_URL = "KKB_KAGGLE_API"
INSUFFICIENT_STORAGE = 507  # the server's disk is full: final, not worth another try a moment later
DISK_FULL_HINT = ("nothing is lost: the server keeps what arrived; once it has space again (a local Kaggle: free the "
                  "disk of its data folder), run the same command again: it resumes")
HIDDEN = "<hidden>"

logger = logging.getLogger("kkb.kaggle")

CREDENTIALS_HINT = (
    "set KAGGLE_USERNAME and KAGGLE_KEY, or put kaggle.json in $KAGGLE_CONFIG_DIR or ~/.kaggle "
    "(chmod 600), or set KAGGLE_API_TOKEN (https://www.kaggle.com/settings/api)"
)


# --------------------------------------------------------------------------------------------
# Secrets and the client's own chatter
# --------------------------------------------------------------------------------------------


def _secret_values() -> list[str]:
    values = [os.environ.get(name, "") for name in ("KAGGLE_KEY", "KAGGLE_API_TOKEN")]
    return [value for value in values if len(value) >= 4]


def scrub(text: str, extra: tuple[str, ...] = ()) -> str:
    """``text`` with every known secret value replaced by ``<hidden>``."""
    for secret in [*_secret_values(), *(value for value in extra if value and len(value) >= 4)]:
        text = text.replace(secret, HIDDEN)
    return text


@contextlib.contextmanager
def client_output(action: str, secrets: tuple[str, ...] = ()) -> Iterator[None]:
    """Capture what the client prints (it prints progress, warnings and errors) into the debug log.

    The library never prints; the client's stdout/stderr lines go to ``kkb.kaggle`` at DEBUG, scrubbed.
    """
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            yield
    finally:
        text = buffer.getvalue().strip()
        if text:
            logger.debug("kaggle client output while %s:\n%s", action, scrub(text, secrets))


# --------------------------------------------------------------------------------------------
# Error translation
# --------------------------------------------------------------------------------------------


def status_of(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def html_answer(exc: BaseException) -> bool:
    """Whether Kaggle answered with a page instead of the API's JSON: its front end throttling (429/503 as HTML)."""
    response = getattr(exc, "response", None)
    if response is None:
        return False
    if getattr(exc, "kkb_not_json", False):
        return True
    content_type = str(getattr(response, "headers", {}).get("Content-Type", "")).lower()
    with contextlib.suppress(Exception):
        return "html" in content_type or str(response.text).lstrip().startswith("<")
    return "html" in content_type


def _server_message(exc: BaseException) -> str:
    """The server's own words: the client raises HTTPError(body["message"]) for JSON error bodies."""
    response = getattr(exc, "response", None)
    if response is not None and html_answer(exc):
        return "an HTML page instead of the API's JSON answer"
    if response is not None:
        with contextlib.suppress(Exception):
            body = response.json()
            if isinstance(body, dict) and body.get("message"):
                return str(body["message"])
    return str(exc)


def is_transient(exc: BaseException) -> bool:
    """429, 5xx and dropped or refused connections: worth another try."""
    import requests

    status = status_of(exc)
    if status is not None:
        return status == 429 or (status >= 500 and status != INSUFFICIENT_STORAGE) or html_answer(exc)
    return isinstance(exc, (requests.ConnectionError, requests.Timeout)) or _is_urllib3_connection(exc)


def _is_urllib3_connection(exc: BaseException) -> bool:
    import urllib3.exceptions as u3

    return isinstance(exc, (u3.ProtocolError, u3.NewConnectionError, u3.ConnectTimeoutError))


def request_never_sent(exc: BaseException) -> bool:
    """True when the server cannot have acted on the request (refused connection, 429)."""
    import requests

    if status_of(exc) == 429:
        return True
    return isinstance(exc, requests.exceptions.ConnectTimeout) or (
        isinstance(exc, requests.ConnectionError) and "NewConnectionError" in repr(exc)
    )


def retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    value = getattr(response, "headers", {}).get("Retry-After") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def translate_error(exc: BaseException, action: str, *, endpoint: str | None = None, subject: str = "") -> KkbError:
    """A foreign exception from the client → the matching :mod:`builder.errors` class with a hint."""
    import requests

    if isinstance(exc, KkbError):
        return exc
    where = endpoint or "kaggle.com"
    what = f" {subject}" if subject else ""
    status = status_of(exc)
    message = scrub(_server_message(exc))
    if status is not None:
        return _http_error(status, action, what, message, where, html=html_answer(exc))
    if isinstance(exc, (requests.ConnectionError, requests.Timeout)) or _is_urllib3_connection(exc):
        return unreachable(where, f"{action}{what}", exc)
    if isinstance(exc, ValueError):  # the client's own validation of metadata and arguments
        return KkbError(f"the kaggle client refused {action}{what}: {message}", hint="check the build output's metadata")
    return RemoteError(f"unexpected error from the kaggle client while {action}{what}: {type(exc).__name__}: {message}")


def unreachable(where: str, doing: str, exc: BaseException | None = None, spent: str = "") -> UnreachableError:
    """"cannot reach Kaggle at <url>": no server, a refused or dropped connection, a timeout."""
    reason = _connection_failure(exc) if exc is not None else "no answer"
    after = f", gave up after {spent}" if spent else ""
    return UnreachableError(
        f"cannot reach Kaggle at {where} while {doing}: {reason}{after}",
        hint=f"check the network and that the server is up (${ENV_BASE_URL} points kkb at another server); "
        "run the same command again later: it resumes",
    )


def _connection_failure(exc: BaseException) -> str:
    """What went wrong with the connection, in words (never the exception's text: it may quote URLs)."""
    import requests

    chain = repr(exc)
    if "ConnectionRefused" in chain or "Connection refused" in chain:
        return "connection refused"
    if isinstance(exc, requests.Timeout) or "Timeout" in chain:
        return "timed out"
    if "NameResolution" in chain or "Name or service not known" in chain:
        return "the host name does not resolve"
    return "the connection dropped"


def _http_error(status: int, action: str, what: str, message: str, where: str, html: bool = False) -> KkbError:
    if html:
        return RemoteError(f"Kaggle is throttling: it answered HTTP {status} with an HTML page (not the API's JSON) "
                           f"while {action}{what}",
                           hint="Kaggle limits how fast an account calls its API; wait a few minutes and run the same "
                                "command again (it resumes and never pushes twice)")
    text = f"Kaggle answered HTTP {status} while {action}{what}: {message}"
    if status == 401:
        return AuthError(text, hint=f"the credentials were rejected by {where}; {CREDENTIALS_HINT}")
    if status == 403:
        return AuthError(
            text,
            hint="accept the competition rules on its /rules page, and check that [kernel] owner matches your "
            "Kaggle username",
        )
    if status == 404:
        return NotFoundError(text, hint="check the owner and slug (kernel.toml), and that the resource exists")
    if status == 409:
        return RemoteError(text, hint="the title or slug is already used by another kernel or dataset of yours")
    if status == 429:
        return RemoteError(text, hint="Kaggle is rate-limiting this account; wait a few minutes and run it again")
    if status == INSUFFICIENT_STORAGE:
        return RemoteError(text, hint=DISK_FULL_HINT)
    if status >= 500:
        return RemoteError(text, hint="a Kaggle-side error; run the same command again later (it resumes)")
    return RemoteError(text)


# How Kaggle refused a push it could not start (kaggle-runtime.md §9.2): the account's GPU sessions at their cap
# (2), or no accelerator quota left this week. Matched case-insensitively, in a body's error or an HTTP error.
SESSION_CAP_TEXTS = ("batch gpu session count", "session count of", "toomanyassignments", "precondition failed")
QUOTA_TEXTS = ("no accelerator quota", "accelerator quota exceeded", "exceeded the number of hours allowed")
SESSION_CAP_HINT = ("Kaggle runs at most 2 GPU batch sessions of an account at once: wait for one to end (kkb status "
                    "lists them), or pass --wait-for-slot to wait for a free one")
QUOTA_HINT = "the week's GPU quota is spent: kkb status shows what is left and when it refreshes"


def limit_refusal(text: str) -> str | None:
    """``"session cap"`` or ``"quota"`` when ``text`` is one of Kaggle's refusals of a push over a limit."""
    lowered = text.lower()
    if any(words in lowered for words in SESSION_CAP_TEXTS):
        return "session cap"
    if any(words in lowered for words in QUOTA_TEXTS):
        return "quota"
    return None


class TransientRemoteError(RemoteError):
    """A 429, 5xx or dropped connection that outlived the retries, or hit a non-idempotent call.

    The server may or may not have acted: callers check its state before trying again.
    """


class UnreachableError(TransientRemoteError):
    """No answer at all: no server, a refused or dropped connection, a timeout ("cannot reach Kaggle at")."""


class NotFoundError(RemoteError):
    """Kaggle answered 404: the thing asked for does not exist (as opposed to: no answer)."""


def retry_reason(exc: BaseException | None) -> str:
    """Why a call is tried again, for people: throttling (an HTML page), an HTTP status, or no answer."""
    if exc is None:
        return "no answer"
    status = status_of(exc)
    if html_answer(exc) or status == 429:
        return f"Kaggle is throttling (HTTP {status}{', an HTML page' if html_answer(exc) else ''})"
    return describe(exc)


def describe(exc: BaseException) -> str:
    """For the retry log: ``HTTP 503`` or the exception's class (never its text: it may quote URLs)."""
    status = status_of(exc)
    return f"HTTP {status}" if status is not None else type(exc).__name__
