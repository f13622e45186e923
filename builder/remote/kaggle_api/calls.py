"""One call to Kaggle: the client's output captured, transient failures retried, errors translated.

:class:`KaggleCalls` is what every service module (``datasets``, ``models``, ``kernels``, ``competitions``)
builds on: the adapter's state (the client, the server, the retry policy and its clock) and the wrapper
each operation runs through. Retries follow one policy, :class:`~builder.remote.backoff.Backoff` (a try
limit and a total time bound), for a call and for each file a call uploads. An upload answered 5xx is
retried like any 5xx; one whose server is gone ends in "cannot reach Kaggle at <url>".
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

from builder.errors import AuthError, KkbError, RemoteError
from builder.remote.backoff import Backoff, Retrying
from builder.remote.kaggle_api.client import PROD_ENDPOINT
from builder.remote.kaggle_api.translate import (
    CREDENTIALS_HINT,
    DISK_FULL_HINT,
    INSUFFICIENT_STORAGE,
    TransientRemoteError,
    UnreachableError,
    client_output,
    describe,
    is_transient,
    logger,
    request_never_sent,
    retry_after,
    scrub,
    status_of,
    translate_error,
    unreachable,
)

T = TypeVar("T")


@dataclass
class KaggleCalls:
    """The adapter's state and its call wrapper; :class:`~builder.remote.kaggle_api.KaggleAdapter` adds the
    operations. Tests may build one around a stub ``api`` (the seam twine uses)."""

    api: Any  # the client's KaggleApi (untyped): only this package touches it
    endpoint: str | None = None
    retry: Backoff = field(default_factory=Backoff)  # one call's retries, and one file upload's
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)
    on_retry: Callable[[str, BaseException | None, float], None] | None = None
    _uploads: dict[str, Retrying] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        with contextlib.suppress(AttributeError, TypeError):  # a stub api in tests may not take attributes
            self.api.kkb_upload_failed = self._upload_failed

    @property
    def where(self) -> str:
        """The server, for messages: the base URL, or kaggle.com's API."""
        return self.endpoint or PROD_ENDPOINT

    # -- identity -----------------------------------------------------------------------------

    @property
    def username(self) -> str:
        name = self.api.config_values.get("username")
        if not name:
            raise AuthError("the Kaggle credentials do not name a user", hint=CREDENTIALS_HINT)
        return str(name)

    @property
    def uploaded_bytes(self) -> int:
        return int(getattr(self.api, "kkb_uploaded_bytes", 0))

    def set_upload_callback(self, callback: Callable[[str, int], None] | None) -> None:
        self.api.kkb_on_upload = callback

    def web_url(self, path: str) -> str:
        base = "https://www.kaggle.com" if self.endpoint in (None, PROD_ENDPOINT) else self.endpoint
        return f"{base}/{path.lstrip('/')}"

    # -- the call wrapper ---------------------------------------------------------------------

    def call(self, action: str, fn: Callable[[], T], *, subject: str = "", idempotent: bool = True) -> T:
        """Run ``fn`` with the client's output captured, retrying transient failures.

        A non-idempotent call (creating a version, a submission) is retried only when the server
        cannot have acted on it (refused connection, 429); a 5xx or a dropped connection then is
        raised as a :class:`TransientRemoteError` so the caller can look at the
        server's state before trying again (and not create a duplicate).
        """
        budget: Retrying | None = None
        self._uploads.clear()  # each call's uploads get their own budgets
        while True:
            try:
                with client_output(action, self._secrets()):
                    return fn()
            except KkbError:
                raise
            except Exception as exc:
                retryable = is_transient(exc) and (idempotent or request_never_sent(exc))
                budget = budget or self.retry.start(self.clock, self.rng)
                delay = budget.next_delay(retry_after(exc)) if retryable else None
                if delay is None:
                    error = translate_error(exc, action, endpoint=self.where, subject=subject)
                    if is_transient(exc) and type(error) is RemoteError:
                        error = TransientRemoteError(error.message, error.hint)
                    if retryable and isinstance(error, UnreachableError):
                        error = unreachable(self.where, f"{action}{f' {subject}' if subject else ''}", exc,
                                            budget.spent())
                    raise error from exc
                logger.info("retrying %s in %.1fs after %s", action, delay, scrub(describe(exc)))
                if self.on_retry is not None:
                    self.on_retry(action, exc, delay)
                self.sleep(delay)

    def _upload_failed(self, path: str, url: str, status: int | None) -> None:
        """The client's upload of ``path`` did not complete: sleep before it resumes, or give up.

        ``status`` is the last answer the client saw (None: none; a 308 is the resume probe's, so the PUT
        after it got no answer). 5xx (503: a cut transfer), 429 and no answer are retried under
        :attr:`retry`, counted per file; another 4xx, and 507 (the server's disk is full), are final. Only the upload URL's origin is ever
        shown: the rest of a signed URL is a credential of its own.
        """
        name = os.path.basename(path)
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}" if parts.netloc else self.where
        if status is not None and 400 <= status < 500 and status != 429:
            raise RemoteError(f"Kaggle answered HTTP {status} to the upload of {name}",
                              hint="run the same command again; if it fails again, report it with the log (--verbose)")
        if status == INSUFFICIENT_STORAGE:  # final: a full disk does not clear itself between two tries
            raise RemoteError(f"Kaggle answered HTTP {status} (Insufficient Storage: the server's disk is full) to the "
                              f"upload of {name} at {origin}",
                              hint=DISK_FULL_HINT)
        answered = status is not None and status >= 500
        budget = self._uploads.setdefault(path, self.retry.start(self.clock, self.rng))
        delay = budget.next_delay()
        if delay is None:
            self._uploads.pop(path, None)
            if not answered:
                raise unreachable(origin, f"uploading {name}", spent=budget.spent())
            raise TransientRemoteError(
                f"Kaggle answered HTTP {status} to the upload of {name}, gave up after {budget.spent()}",
                hint="a Kaggle-side error; run the same command again later (it resumes)")
        what = f"HTTP {status}" if answered else "no answer"
        logger.info("upload of %s: %s; resuming in %.1fs", name, what, delay)
        if self.on_retry is not None:
            self.on_retry(f"uploading {name}", None, delay)
        self.sleep(delay)

    def _secrets(self) -> tuple[str, ...]:
        values = getattr(self.api, "config_values", {}) or {}
        return tuple(str(values[k]) for k in ("key", "token") if values.get(k))

    def _client(self) -> Any:
        return self.api.build_kaggle_client()

    def _unless_absent(self, fetch: Callable[[Any], T]) -> T | None:
        """``fetch(client)``, or None when Kaggle says the thing is not there: 404, or 403, which Kaggle
        answers for a slug that is not yours (and for a private one of someone else's)."""
        with self._client() as kaggle:
            try:
                return fetch(kaggle)
            except Exception as exc:
                if status_of(exc) in (403, 404):
                    return None
                raise

    def _owner_hint(self, ref: str) -> str:
        """A refusal to create something under ``owner/``: usually [kernel] owner is not the signed-in user."""
        owner = ref.partition("/")[0]
        user = (getattr(self.api, "config_values", None) or {}).get("username")
        if user and owner and user != owner:
            return (f"you are signed in as '{user}', and '{owner}' is not you: pass --owner {user}, "
                    f"or set [kernel] owner = \"{user}\" in kernel.toml")
        return "check [kernel] owner in kernel.toml (or --owner): it must be the Kaggle user of your credentials"


def split_ref(ref: str) -> tuple[str, str]:
    owner, _, slug = ref.partition("/")
    if not owner or not slug or "/" in slug:
        raise KkbError(f"'{ref}' is not an 'owner/slug' reference")
    return owner, slug


def unwrap_zip(content: bytes, file_name: str) -> bytes:
    """Kaggle may hand a single file back zipped (``name.zip``)."""
    if content[:4] != b"PK\x03\x04":
        return content
    with zipfile.ZipFile(io.BytesIO(content)) as archive:
        names = archive.namelist()
        member = file_name if file_name in names else names[0]
        return archive.read(member)
