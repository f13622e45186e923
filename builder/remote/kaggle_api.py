"""The one door to Kaggle: the real ``kaggle`` client, in process, behind a narrow adapter.

This is the only module in ``builder/`` that imports ``kaggle``, and it does so lazily (inside
functions): the package's ``__init__`` authenticates at import time, printing help to stdout when
no credentials exist and making an HTTP call when ``KAGGLE_API_TOKEN`` is set.

* :func:`connect` builds an authenticated ``KaggleApi`` that talks to kaggle.com, or to any server
  speaking Kaggle's API when ``base_url`` / ``$KKB_KAGGLE_API`` is given (only the base URL changes).
* :class:`KaggleAdapter` exposes the few operations push/submit need. Foreign errors are translated
  where they enter (``requests`` HTTP errors, errors returned in 200 bodies, the client's own
  ``ValueError``/``SystemExit``) into :mod:`builder.errors`; transient failures (429, 5xx, dropped
  connections) are retried with exponential backoff and jitter; secrets never reach a message or log.

Retries follow one policy, :class:`~builder.remote.backoff.Backoff` (a try limit and a total time
bound). The client's own loops are put under it: its ``with_retry`` (10 tries of up to ~2 minutes on
StartBlobUpload, create calls and GetSubmission) tries once and leaves retrying to :meth:`KaggleAdapter.call`;
the urllib3 retries it mounts on every upload PUT (10 tries with backoff up to 120 s each, invisible
from outside) are replaced by a single try, and its resume loop asks the adapter, after each failed
PUT, for the sleep before the next one (:meth:`KaggleAdapter._upload_failed`), which gives up when the
budget is spent. An upload answered 5xx is retried like any 5xx; one whose server is gone ends in
"cannot reach Kaggle at <url>".
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import importlib.util
import io
import json
import logging
import os
import random
import sys
import time
import types
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import urlsplit

from builder.errors import AuthError, KkbError, RemoteError
from builder.project.credentials import check_kaggle_json
from builder.remote.backoff import Backoff, Retrying

if TYPE_CHECKING:  # pragma: no cover - typing only; importing kaggle at runtime authenticates
    from kaggle.api.kaggle_api_extended import KaggleApi

ENV_BASE_URL = "KKB_KAGGLE_API"
PROD_ENDPOINT = "https://api.kaggle.com"
HIDDEN = "<hidden>"

logger = logging.getLogger("kkb.kaggle")

T = TypeVar("T")

CREDENTIALS_HINT = (
    "set KAGGLE_USERNAME and KAGGLE_KEY, or put kaggle.json in $KAGGLE_CONFIG_DIR or ~/.kaggle "
    "(chmod 600), or set KAGGLE_API_TOKEN (https://www.kaggle.com/settings/api)"
)


# --------------------------------------------------------------------------------------------
# Importing the client without its import-time authentication
# --------------------------------------------------------------------------------------------


def _install_quiet_kaggle_package() -> None:
    """Register ``kaggle`` as a bare package so importing its submodules skips ``__init__``.

    ``kaggle/__init__.py`` runs ``KaggleApi().authenticate()`` at import: it prints auth help to
    stdout, may call the network (``KAGGLE_API_TOKEN`` → IntrospectToken against PROD) and reads
    credentials before we have pointed anything anywhere. ``kaggle_api_extended`` only needs
    ``kaggle.__version__`` from the package, which we provide.
    """
    if "kaggle" in sys.modules:
        return
    spec = importlib.util.find_spec("kaggle")  # finds the package without executing it
    if spec is None or spec.submodule_search_locations is None:
        raise KkbError(
            "the kaggle client is not installed",
            hint="pip install 'kaggle==2.2.5' six (kaggle 2.2.5 imports six without declaring it)",
        )
    package = types.ModuleType("kaggle")
    package.__path__ = list(spec.submodule_search_locations)
    package.__spec__ = spec
    package.__file__ = spec.origin
    package.__package__ = "kaggle"
    package.__version__ = importlib.metadata.version("kaggle")  # type: ignore[attr-defined]
    sys.modules["kaggle"] = package


@functools.lru_cache(maxsize=1)
def _api_class() -> type[KaggleApi]:
    """The ``KaggleApi`` subclass kkb uses (built once, on first use)."""
    _install_quiet_kaggle_package()
    try:
        from kaggle.api import kaggle_api_extended
        from kaggle.api.kaggle_api_extended import KaggleApi
        from kaggle.models.kaggle_models_extended import ResumableUploadResult
        from kagglesdk import KaggleClient
        from kagglesdk.kaggle_env import KaggleEnv
        from urllib3.util.retry import Retry
    except ModuleNotFoundError as exc:  # six is the usual culprit (kaggle-api.md §0.2)
        raise KkbError(f"the kaggle client cannot be imported: {exc}", hint="pip install 'kaggle==2.2.5' six") from exc

    def one_try(*_args: Any, **_kwargs: Any) -> Retry:
        return Retry(0, read=False)  # requests' own default: fail at once, the resume loop decides

    @contextlib.contextmanager
    def single_try_puts(active: bool) -> Iterator[None]:
        """upload_complete() mounts Retry(total=10, backoff_factor=0.5) on the PUT's session: against a
        dead server that sleeps for minutes inside one call, out of kkb's sight. While kkb's policy is in
        charge, the module's name (used there only) means a single try; kkb uploads one file at a time."""
        if not active:
            yield
            return
        original = kaggle_api_extended.Retry  # type: ignore[attr-defined]
        kaggle_api_extended.Retry = one_try  # type: ignore[attr-defined]
        try:
            yield
        finally:
            kaggle_api_extended.Retry = original  # type: ignore[attr-defined]

    class KkbKaggleApi(KaggleApi):
        """``KaggleApi`` with a configurable base URL and, once a :class:`KaggleAdapter` holds it, kkb's
        retry policy in place of the client's own loops; the wire is unchanged. Used bare (``connect()``,
        the local Kaggle's tests) it retries as the client does."""

        kkb_endpoint: str | None = None
        kkb_uploaded_bytes: int = 0
        kkb_on_upload: Callable[[str, int], None] | None = None
        # Set by KaggleAdapter: called after a PUT that did not complete, with (path, upload URL, HTTP status
        # or None when no answer came); sleeps before the next try, or raises when the budget is spent or
        # the answer is final. The client's resume loop (10 tries) is then bounded by kkb's Backoff alone.
        kkb_upload_failed: Callable[[str, str, int | None], None] | None = None
        kkb_put_status: int | None = None

        @property
        def kkb_policy(self) -> bool:
            return self.kkb_upload_failed is not None

        @property
        def MAX_UPLOAD_RESUME_ATTEMPTS(self) -> int:  # the client's name for its resume loop's limit
            return 10_000 if self.kkb_policy else KaggleApi.MAX_UPLOAD_RESUME_ATTEMPTS

        def with_retry(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> Callable[..., T]:
            if not self.kkb_policy:
                return cast("Callable[..., T]", super().with_retry(func, *args, **kwargs))
            # One try: KaggleAdapter.call retries under kkb's policy, and only where a retry cannot duplicate.
            return func

        def _is_upload_successful(self, response: Any) -> bool:
            self.kkb_put_status = int(response.status_code)  # the client keeps no other trace of it
            return bool(super()._is_upload_successful(response))

        def build_kaggle_client(self) -> Any:
            # verbose is forced off: the client's verbose mode prints the Authorization header.
            args = [arg for arg in self.args if arg not in ("--verbose", "-v")]
            creds = {
                "username": self.config_values.get(self.CONFIG_NAME_USER),
                "password": self.config_values.get(self.CONFIG_NAME_KEY),
                "api_token": self.config_values.get(self.CONFIG_NAME_TOKEN),
                "response_processor": _log_newer_client_version,
            }
            if self.kkb_endpoint is None:
                return KaggleApi.build_kaggle_client_with_params(args=args, **creds)
            if self.kkb_endpoint == PROD_ENDPOINT:
                return KaggleClient(env=KaggleEnv.PROD, verbose=False, **creds)
            # TEST gives the non-production URL shape ({base}/api/v1/...) and no IAP header;
            # only its endpoint (hard-wired to localhost:7777) is replaced.
            client = KaggleClient(env=KaggleEnv.TEST, verbose=False, **creds)
            client.http_client()._endpoint = self.kkb_endpoint
            return client

        def upload_complete(self, path: str, url: str, quiet: bool, resume: bool = False) -> Any:
            self.kkb_put_status = None
            with single_try_puts(self.kkb_policy):
                result = super().upload_complete(path, url, quiet, resume=resume)
            if result == ResumableUploadResult.COMPLETE:
                # Counted here (not guessed from the folder) so "a no-op push uploads zero bytes" is measured.
                size = os.path.getsize(path)
                self.kkb_uploaded_bytes += size
                if self.kkb_on_upload is not None:
                    self.kkb_on_upload(os.path.basename(path), size)
            elif result in (ResumableUploadResult.INCOMPLETE, ResumableUploadResult.FAILED):
                if self.kkb_upload_failed is None:
                    return result
                # FAILED is any answer but 200/201/503 (a 500 too): the client would give up with
                # "Upload unsuccessful". The adapter sleeps and lets the loop resume, or raises.
                self.kkb_upload_failed(path, url, self.kkb_put_status)
                return ResumableUploadResult.INCOMPLETE
            return result

    return KkbKaggleApi


def _log_newer_client_version(response: Any) -> None:
    """Replaces the client's version check, which prints to stdout."""
    latest = response.headers.get("X-Kaggle-APIVersion")
    if latest:
        logger.debug("server reports kaggle client version %s", latest)


# --------------------------------------------------------------------------------------------
# connect()
# --------------------------------------------------------------------------------------------


def resolve_base_url(base_url: str | None = None) -> str | None:
    """``base_url``, else ``$KKB_KAGGLE_API``, else None (kaggle.com), validated and normalised."""
    raw = base_url if base_url is not None else os.environ.get(ENV_BASE_URL) or None
    if raw is None:
        return None
    parts = urlsplit(raw.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        source = "base_url" if base_url is not None else f"${ENV_BASE_URL}"
        raise KkbError(
            f"{source} '{raw}' is not an http(s) URL",
            hint=f"write it as http://HOST:PORT, e.g. {ENV_BASE_URL}=http://127.0.0.1:8765",
        )
    endpoint = raw.strip().rstrip("/")
    # The client appends /api/v1/... for non-production servers; accept a base that already has /api.
    if endpoint.endswith("/api"):
        endpoint = endpoint[: -len("/api")]
    return endpoint


def _config_dir() -> str:
    """Where kaggle.json lives, decided now (the client decides once, at import, in its class body)."""
    configured = os.environ.get("KAGGLE_CONFIG_DIR")
    if configured:
        return configured
    legacy = os.path.join(os.path.expanduser("~"), ".kaggle")
    if sys.platform.startswith("linux") and not os.path.exists(legacy):
        xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
        return os.path.join(xdg, "kaggle")
    return legacy


def connect(base_url: str | None = None) -> KaggleApi:
    """An authenticated in-process ``KaggleApi`` pointed at ``base_url`` / ``$KKB_KAGGLE_API`` / kaggle.com.

    Credentials come from the standard places, in the client's own order: ``KAGGLE_API_TOKEN``
    (or ``~/.kaggle/access_token``), then ``KAGGLE_USERNAME``/``KAGGLE_KEY`` or ``kaggle.json``,
    then OAuth credentials. Raises :class:`AuthError` when none are found.
    """
    endpoint = resolve_base_url(base_url)
    api = _api_class()()
    api.kkb_endpoint = endpoint
    api.config_dir = _config_dir()
    api.config = os.path.join(api.config_dir, api.config_file)
    with client_output("authenticating"):
        try:
            api.authenticate()
        except SystemExit as exc:  # the client calls exit(1) when it finds no credentials
            check_kaggle_json()  # or when a kaggle.json is malformed: say that, naming the file
            raise AuthError("no Kaggle credentials found", hint=CREDENTIALS_HINT) from exc
        except Exception as exc:
            raise translate_error(exc, "authenticating", endpoint=endpoint) from exc
    return api


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


def _status_of(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _server_message(exc: BaseException) -> str:
    """The server's own words: the client raises HTTPError(body["message"]) for JSON error bodies."""
    response = getattr(exc, "response", None)
    if response is not None:
        with contextlib.suppress(Exception):
            body = response.json()
            if isinstance(body, dict) and body.get("message"):
                return str(body["message"])
    return str(exc)


def is_transient(exc: BaseException) -> bool:
    """429, 5xx and dropped or refused connections: worth another try."""
    import requests

    status = _status_of(exc)
    if status is not None:
        return status == 429 or status >= 500
    return isinstance(exc, (requests.ConnectionError, requests.Timeout)) or _is_urllib3_connection(exc)


def _is_urllib3_connection(exc: BaseException) -> bool:
    import urllib3.exceptions as u3

    return isinstance(exc, (u3.ProtocolError, u3.NewConnectionError, u3.ConnectTimeoutError))


def request_never_sent(exc: BaseException) -> bool:
    """True when the server cannot have acted on the request (refused connection, 429)."""
    import requests

    if _status_of(exc) == 429:
        return True
    return isinstance(exc, requests.exceptions.ConnectTimeout) or (
        isinstance(exc, requests.ConnectionError) and "NewConnectionError" in repr(exc)
    )


def _retry_after(exc: BaseException) -> float | None:
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
    status = _status_of(exc)
    message = scrub(_server_message(exc))
    if status is not None:
        return _http_error(status, action, what, message, where)
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


def _http_error(status: int, action: str, what: str, message: str, where: str) -> KkbError:
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
    if status >= 500:
        return RemoteError(text, hint="a Kaggle-side error; run the same command again later (it resumes)")
    return RemoteError(text)


class TransientRemoteError(RemoteError):
    """A 429, 5xx or dropped connection that outlived the retries, or hit a non-idempotent call.

    The server may or may not have acted: callers check its state before trying again.
    """


class UnreachableError(TransientRemoteError):
    """No answer at all: no server, a refused or dropped connection, a timeout ("cannot reach Kaggle at")."""


class NotFoundError(RemoteError):
    """Kaggle answered 404: the thing asked for does not exist (as opposed to: no answer)."""


# --------------------------------------------------------------------------------------------
# Plain results the rest of kkb sees (never the client's own objects)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetPushed:
    ref: str
    url: str


@dataclass(frozen=True)
class KernelPushed:
    ref: str
    url: str
    version: int | None


@dataclass(frozen=True)
class KernelStatus:
    status: str  # lower-case KernelWorkerStatus name: queued, running, complete, error, ...
    failure_message: str


@dataclass(frozen=True)
class Submission:
    ref: int
    status: str  # lower-case SubmissionStatus name: pending, complete, error
    public_score: str
    private_score: str
    error_description: str
    description: str
    date: str


@dataclass
class KaggleAdapter:
    """The operations push/submit/status/logs need, in kkb's terms.

    Built with :meth:`connect`; tests may build one around a stub ``api`` (the seam twine uses).
    """

    api: Any
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

    @classmethod
    def connect(cls, base_url: str | None = None, **kwargs: Any) -> KaggleAdapter:
        endpoint = resolve_base_url(base_url)
        return cls(api=connect(endpoint), endpoint=endpoint, **kwargs)

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
                delay = budget.next_delay(_retry_after(exc)) if retryable else None
                if delay is None:
                    error = translate_error(exc, action, endpoint=self.where, subject=subject)
                    if is_transient(exc) and type(error) is RemoteError:
                        error = TransientRemoteError(error.message, error.hint)
                    if retryable and isinstance(error, UnreachableError):
                        error = unreachable(self.where, f"{action}{f' {subject}' if subject else ''}", exc,
                                            budget.spent())
                    raise error from exc
                logger.info("retrying %s in %.1fs after %s", action, delay, scrub(_describe(exc)))
                if self.on_retry is not None:
                    self.on_retry(action, exc, delay)
                self.sleep(delay)

    def _upload_failed(self, path: str, url: str, status: int | None) -> None:
        """The client's upload of ``path`` did not complete: sleep before it resumes, or give up.

        ``status`` is the last answer the client saw (None: none; a 308 is the resume probe's, so the PUT
        after it got no answer). 5xx (503: a cut transfer), 429 and no answer are retried under
        :attr:`retry`, counted per file; another 4xx is final. Only the upload URL's origin is ever
        shown: the rest of a signed URL is a credential of its own.
        """
        name = os.path.basename(path)
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}" if parts.netloc else self.where
        if status is not None and 400 <= status < 500 and status != 429:
            raise RemoteError(f"Kaggle answered HTTP {status} to the upload of {name}",
                              hint="run the same command again; if it fails again, report it with the log (--verbose)")
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
                if _status_of(exc) in (403, 404):
                    return None
                raise

    # -- datasets -----------------------------------------------------------------------------

    def dataset_status(self, ref: str) -> str | None:
        """Lower-case status of the dataset's latest version (``ready``, ...), or None if it does not exist."""
        from kagglesdk.datasets.types.dataset_api_service import ApiGetDatasetStatusRequest

        owner, slug = _split_ref(ref)

        def get() -> str | None:
            request = ApiGetDatasetStatusRequest()
            request.owner_slug, request.dataset_slug = owner, slug
            return self._unless_absent(lambda kaggle: kaggle.datasets.dataset_api_client.get_dataset_status(request).status.name.lower())

        return self.call("reading the dataset status", get, subject=ref)

    def dataset_version(self, ref: str) -> int | None:
        """The dataset's current version number (None when the server does not say)."""
        from kagglesdk.datasets.types.dataset_api_service import ApiGetDatasetRequest

        owner, slug = _split_ref(ref)

        def get() -> int | None:
            request = ApiGetDatasetRequest()
            request.owner_slug, request.dataset_slug = owner, slug
            with self._client() as kaggle:
                number = kaggle.datasets.dataset_api_client.get_dataset(request).current_version_number
            return int(number) if number else None

        return self.call("reading the dataset version", get, subject=ref)

    def dataset_file(self, ref: str, file_name: str) -> bytes | None:
        """One file of the dataset's latest version, or None when it or the dataset is missing."""
        from kagglesdk.datasets.types.dataset_api_service import ApiDownloadDatasetRequest

        owner, slug = _split_ref(ref)

        def get() -> bytes | None:
            request = ApiDownloadDatasetRequest()
            request.owner_slug, request.dataset_slug, request.file_name = owner, slug, file_name
            content = self._unless_absent(lambda kaggle: kaggle.datasets.dataset_api_client.download_dataset(request).content)
            return None if content is None else _unwrap_zip(content, file_name)

        return self.call("downloading a dataset file", get, subject=f"{ref}/{file_name}")

    def create_dataset(self, folder: Path, *, public: bool = False) -> DatasetPushed:
        def create() -> Any:
            return self.api.dataset_create_new(str(folder), public=public, quiet=True, dir_mode="tar")

        response = self.call("creating the dataset", create, subject=_folder_ref(folder), idempotent=False)
        return self._dataset_pushed(response, "creating the dataset", folder)

    def version_dataset(self, folder: Path, notes: str) -> DatasetPushed:
        def version() -> Any:
            return self.api.dataset_create_version(str(folder), notes, quiet=True, dir_mode="tar")

        response = self.call("creating a dataset version", version, subject=_folder_ref(folder), idempotent=False)
        return self._dataset_pushed(response, "creating a dataset version", folder)

    def _dataset_pushed(self, response: Any, action: str, folder: Path) -> DatasetPushed:
        # The client returns refusals in a 200 body (status "error") and the kaggle CLI exits 0 on them.
        error = getattr(response, "error", None) or ""
        status = str(getattr(response, "status", "") or "").lower()
        invalid_tags = list(getattr(response, "invalid_tags", None) or [])
        if error or status == "error":
            raise RemoteError(
                f"Kaggle refused {action} {_folder_ref(folder)}: {scrub(error or 'status error')}",
                hint=self._owner_hint(_folder_ref(folder)) if "permission" in error.lower()
                else "see the dataset-metadata.json in " + str(folder),
            )
        if invalid_tags:
            logger.info("Kaggle ignored invalid dataset tags: %s", invalid_tags)
        return DatasetPushed(ref=str(getattr(response, "ref", "") or _folder_ref(folder)), url=str(response.url or ""))

    # -- inputs kkb does not build (issue 14) --------------------------------------------------

    def dataset_readable(self, ref: str) -> bool:
        """Whether ``owner/slug`` (or ``owner/slug/VERSION``) exists and this user may read it."""
        from kagglesdk.datasets.types.dataset_api_service import ApiListDatasetFilesRequest

        owner, slug, *version = ref.split("/")

        def get() -> bool:
            request = ApiListDatasetFilesRequest()
            request.owner_slug, request.dataset_slug, request.page_size = owner, slug, 1
            if version:
                request.dataset_version_number = int(version[0])
            response = self._unless_absent(lambda kaggle: kaggle.datasets.dataset_api_client.list_dataset_files(request))
            return response is not None and not getattr(response, "error_message", "")

        return self.call("looking up a dataset input", get, subject=ref)

    def model_version_readable(self, ref: str) -> bool:
        """Whether the model version ``owner/model/framework/variation/VERSION`` exists and this user may read it."""
        from kagglesdk.models.types.model_api_service import ApiListModelInstanceVersionFilesRequest

        owner, model, framework, variation, version = ref.split("/")

        def get() -> bool:
            request = ApiListModelInstanceVersionFilesRequest()
            request.owner_slug, request.model_slug, request.instance_slug = owner, model, variation
            request.framework = self._framework(framework)
            request.version_number, request.page_size = int(version), 1
            with self._client() as kaggle:
                try:
                    kaggle.models.model_api_client.list_model_instance_version_files(request)
                except Exception as exc:
                    if _status_of(exc) in (400, 403, 404):
                        return False
                    raise
            return True

        return self.call("looking up a model input", get, subject=ref)

    def kernel_output_readable(self, ref: str) -> bool:
        """Whether the notebook ``owner/slug`` (or ``owner/slug/VERSION``) exists and this user may read it."""
        from kagglesdk.kernels.types.kernels_api_service import ApiGetKernelRequest

        owner, slug, *version = ref.split("/")

        def get() -> bool:
            request = ApiGetKernelRequest()
            request.user_name, request.kernel_slug = owner, slug
            if version:
                request.version_label = f"v{version[0]}"
            return self._unless_absent(lambda kaggle: kaggle.kernels.kernels_api_client.get_kernel(request)) is not None

        return self.call("looking up a notebook input", get, subject=ref)

    # -- Kaggle Models (weights published as a Model) -------------------------------------------

    def model_exists(self, model: str) -> bool:
        """Whether ``owner/model-slug`` exists (and this user can see it)."""
        from kagglesdk.models.types.model_api_service import ApiGetModelRequest

        owner, slug = _split_ref(model)

        def get() -> bool:
            request = ApiGetModelRequest()
            request.owner_slug, request.model_slug = owner, slug
            return self._unless_absent(lambda kaggle: kaggle.models.model_api_client.get_model(request)) is not None

        return self.call("reading the model", get, subject=model)

    def model_instance_version(self, instance: str) -> int | None:
        """The newest ready version of ``owner/model/framework/variation``: None when the variation does not
        exist, 0 when it exists but no version is ready yet (Kaggle is still processing the first one)."""
        from kagglesdk.models.types.model_api_service import ApiGetModelInstanceRequest

        owner, model, framework, variation = instance.split("/")

        def get() -> int | None:
            request = ApiGetModelInstanceRequest()
            request.owner_slug, request.model_slug, request.instance_slug = owner, model, variation
            request.framework = self._framework(framework)
            instance = self._unless_absent(lambda kaggle: kaggle.models.model_api_client.get_model_instance(request))
            return None if instance is None else int(instance.version_number or 0)

        return self.call("reading the model variation", get, subject=instance)

    def model_file(self, instance: str, version: int, file_name: str) -> bytes | None:
        """One file of a model version, or None when it (or the version) is missing."""
        from kagglesdk.models.types.model_api_service import ApiDownloadModelInstanceVersionRequest

        owner, model, framework, variation = instance.split("/")

        def get() -> bytes | None:
            request = ApiDownloadModelInstanceVersionRequest()
            request.owner_slug, request.model_slug, request.instance_slug = owner, model, variation
            request.framework, request.version_number, request.path = self._framework(framework), version, file_name
            content = self._unless_absent(lambda kaggle: kaggle.models.model_api_client.download_model_instance_version(request).content)
            return None if content is None else _unwrap_zip(content, file_name)

        return self.call("downloading a model file", get, subject=f"{instance}/{version}/{file_name}")

    def create_model(self, folder: Path) -> None:
        """``CreateModel`` from ``model-metadata.json`` in ``folder``."""
        response = self.call("creating the model", lambda: self.api.model_create_new(str(folder)),
                             subject=str(folder), idempotent=False)
        self._model_created(response, "creating the model", folder)

    def create_model_instance(self, folder: Path) -> None:
        """``CreateModelInstance`` (the variation and its version 1) from ``model-instance-metadata.json`` and the files."""
        response = self.call("creating the model variation",
                             lambda: self.api.model_instance_create(str(folder), quiet=True, dir_mode="tar"),
                             subject=str(folder), idempotent=False)
        self._model_created(response, "creating the model variation", folder)

    def version_model_instance(self, instance: str, folder: Path, notes: str) -> None:
        """``CreateModelInstanceVersion``: the files of ``folder`` as the variation's next version."""
        response = self.call("creating a model version",
                             lambda: self.api.model_instance_version_create(instance, str(folder), notes, quiet=True,
                                                                            dir_mode="tar"),
                             subject=instance, idempotent=False)
        self._model_created(response, "creating a model version", folder)

    def _model_created(self, response: Any, action: str, folder: Path) -> None:
        # Like datasets, refusals come back in a 200 body (``error``; ``id`` 0) and the CLI exits 0 on them.
        error = str(getattr(response, "error", "") or "")
        if error or not getattr(response, "id", 0):
            raise RemoteError(f"Kaggle refused {action} from {folder}: {scrub(error or 'no id in the answer')}",
                              hint=self._owner_hint(_model_owner(folder)) if "permission" in error.lower()
                              else "see model-metadata.json and model-instance-metadata.json in " + str(folder))

    def _framework(self, name: str) -> Any:
        """``pytorch`` → ``ModelFramework.MODEL_FRAMEWORK_PY_TORCH``, as the client's own commands map it."""
        from kagglesdk.models.types.model_enums import ModelFramework

        return self.api.lookup_enum(ModelFramework, ModelFramework.MODEL_FRAMEWORK_API, name)

    # -- kernels ------------------------------------------------------------------------------

    def kernel_version(self, kernel: str) -> int | None:
        """The kernel's current version number, or None when it does not exist (yet)."""
        from kagglesdk.kernels.types.kernels_api_service import ApiGetKernelRequest

        owner, slug = _split_ref(kernel)

        def get() -> int | None:
            request = ApiGetKernelRequest()
            request.user_name, request.kernel_slug = owner, slug
            metadata = self._unless_absent(lambda kaggle: kaggle.kernels.kernels_api_client.get_kernel(request).metadata)
            if metadata is None:
                return None
            number = getattr(metadata, "current_version_number", None)
            return int(number) if number else None

        return self.call("reading the kernel", get, subject=kernel)

    def push_kernel(self, folder: Path, *, timeout_seconds: int | None = None) -> KernelPushed:
        """``SaveKernel`` from a folder holding ``kernel-metadata.json`` and the notebook."""

        def push() -> Any:
            timeout = str(timeout_seconds) if timeout_seconds else None
            return self.api.kernels_push(str(folder), timeout=timeout)

        response = self.call("pushing the kernel", push, subject=str(folder), idempotent=False)
        return self._kernel_pushed(response)

    def _owner_hint(self, ref: str) -> str:
        """A refusal to create something under ``owner/``: usually [kernel] owner is not the signed-in user."""
        owner = ref.partition("/")[0]
        user = (getattr(self.api, "config_values", None) or {}).get("username")
        if user and owner and user != owner:
            return (f"you are signed in as '{user}', and '{owner}' is not you: pass --owner {user}, "
                    f"or set [kernel] owner = \"{user}\" in kernel.toml")
        return "check [kernel] owner in kernel.toml (or --owner): it must be the Kaggle user of your credentials"

    def _kernel_pushed(self, response: Any) -> KernelPushed:
        error = getattr(response, "error", None) or ""
        if error:
            raise RemoteError(f"Kaggle refused the kernel push: {scrub(error)}", hint=_kernel_error_hint(error))
        invalid = {
            "dataset": list(getattr(response, "invalid_dataset_sources", None) or []),
            "competition": list(getattr(response, "invalid_competition_sources", None) or []),
            "kernel": list(getattr(response, "invalid_kernel_sources", None) or []),
            "model": list(getattr(response, "invalid_model_sources", None) or []),
        }
        bad = {kind: names for kind, names in invalid.items() if names}
        if bad:
            # Kaggle still saves the kernel, just without those inputs: the run would fail later, so stop now.
            listing = "; ".join(f"{kind} sources {names}" for kind, names in bad.items())
            hints = []
            if "competition" in bad:
                hints.append("check [competition] slug in kernel.toml: it is the name in the competition's URL "
                             "(kaggle.com/competitions/<slug>), and you must have accepted its rules")
            if bad.keys() - {"competition"}:
                hints.append("a dataset must be ready and yours (or public)")
            raise RemoteError(f"Kaggle did not attach these inputs to the kernel: {listing}", hint="; ".join(hints))
        version = getattr(response, "version_number", None)
        ref = str(getattr(response, "ref", "") or "")
        return KernelPushed(ref=ref, url=str(getattr(response, "url", "") or ""), version=int(version) if version else None)

    def kernel_status(self, kernel: str, version: int | None = None) -> KernelStatus:
        from kagglesdk.kernels.types.kernels_api_service import ApiGetKernelSessionStatusRequest

        owner, slug = _split_ref(kernel)

        def get() -> KernelStatus:
            request = ApiGetKernelSessionStatusRequest()
            request.user_name, request.kernel_slug = owner, slug
            if version:
                request.version_label = f"v{version}"
            with self._client() as kaggle:
                response = kaggle.kernels.kernels_api_client.get_kernel_session_status(request)
            return KernelStatus(status=response.status.name.lower(), failure_message=response.failure_message or "")

        return self.call("reading the kernel status", get, subject=_versioned(kernel, version))

    def kernel_log(self, kernel: str, version: int | None = None) -> list[dict[str, Any]]:
        """The run's log as Kaggle stores it: ``[{"stream_name", "time", "data"}, ...]`` (empty if none)."""
        from kagglesdk.kernels.types.kernels_api_service import ApiListKernelSessionOutputRequest

        owner, slug = _split_ref(kernel)

        def get() -> str:
            request = ApiListKernelSessionOutputRequest()
            request.user_name, request.kernel_slug = owner, slug
            request.page_size, request.page_token = 20, ""
            if version:
                request.version_label = f"v{version}"
            with self._client() as kaggle:
                return kaggle.kernels.kernels_api_client.list_kernel_session_output(request).log or ""

        return parse_log(self.call("fetching the kernel log", get, subject=_versioned(kernel, version)))

    def kernel_output(self, kernel: str, version: int | None, dest: Path) -> list[Path]:
        """Download a run's output files (every page) and its log (``<slug>.log``) into ``dest``."""
        _split_ref(kernel)
        dest.mkdir(parents=True, exist_ok=True)

        def download() -> list[str]:
            files, _ = self.api.kernels_output(f"{kernel}/{version}" if version else kernel, str(dest), force=True,
                                               quiet=True)
            return list(files)

        return [Path(path) for path in self.call("downloading the kernel output", download,
                                                 subject=_versioned(kernel, version))]

    # -- competitions -------------------------------------------------------------------------

    def download_competition(self, competition: str, folder: Path) -> Path:
        """The competition's data files, downloaded (``DownloadDataFiles``) and unpacked into ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)

        def download() -> None:
            self.api.competition_download_files(competition, path=str(folder), force=True, quiet=True)

        self.call("downloading the competition data", download, subject=competition)
        for archive in sorted(folder.glob("*.zip")):  # all files come as <competition>.zip
            with zipfile.ZipFile(archive) as bundle:
                _safe_extract(bundle, folder)
            archive.unlink()
        return folder


    def submit_code(
        self, competition: str, kernel: str, version: int, file_name: str, message: str
    ) -> tuple[int, str]:
        """``CreateCodeSubmission``: returns (submission ref, the server's message)."""

        def submit() -> Any:
            return self.api.competition_submit_code(
                file_name, message, competition=competition, kernel=kernel, kernel_version=version, quiet=True
            )

        response = self.call("submitting to the competition", submit, subject=competition, idempotent=False)
        ref = getattr(response, "ref", None)
        server_message = str(getattr(response, "message", "") or "")
        if not ref:
            raise RemoteError(
                f"Kaggle did not accept the submission to {competition}: {scrub(server_message) or 'no submission ref'}",
                hint="check the daily submission limit and that the kernel version finished",
            )
        return int(ref), server_message

    def submission(self, ref: int) -> Submission:
        def get() -> Any:
            from kagglesdk.competitions.types.competition_api_service import ApiGetSubmissionRequest

            request = ApiGetSubmissionRequest()
            request.ref = int(ref)
            with self._client() as kaggle:
                return kaggle.competitions.competition_api_client.get_submission(request)

        return _submission(self.call("reading the submission", get, subject=f"#{ref}"))

    def submissions(self, competition: str) -> list[Submission]:
        def get() -> Any:
            return self.api.competition_submissions(competition)

        return [_submission(item) for item in self.call("listing submissions", get, subject=competition) or []]

    def kernel_source(self, kernel: str) -> str | None:
        """The current version's code as Kaggle serves it (notebook JSON or script), None when there is none."""
        from kagglesdk.kernels.types.kernels_api_service import ApiGetKernelRequest

        owner, slug = _split_ref(kernel)

        def get() -> str | None:
            request = ApiGetKernelRequest()
            request.user_name, request.kernel_slug = owner, slug
            blob = self._unless_absent(lambda kaggle: kaggle.kernels.kernels_api_client.get_kernel(request).blob)
            source = getattr(blob, "source", None) if blob is not None else None
            return str(source) if source else None

        return self.call("reading the kernel's code", get, subject=kernel)


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _describe(exc: BaseException) -> str:
    status = _status_of(exc)
    return f"HTTP {status}" if status is not None else type(exc).__name__


def _split_ref(ref: str) -> tuple[str, str]:
    owner, _, slug = ref.partition("/")
    if not owner or not slug or "/" in slug:
        raise KkbError(f"'{ref}' is not an 'owner/slug' reference")
    return owner, slug


def _versioned(ref: str, version: int | None) -> str:
    return f"{ref} v{version}" if version else ref


def _folder_ref(folder: Path) -> str:
    with contextlib.suppress(OSError, ValueError, KeyError):
        return str(json.loads((folder / "dataset-metadata.json").read_text())["id"])
    return str(folder)


def _model_owner(folder: Path) -> str:
    with contextlib.suppress(OSError, ValueError, KeyError):
        return str(json.loads((folder / "model-metadata.json").read_text())["ownerSlug"]) + "/"
    return ""


def _safe_extract(bundle: zipfile.ZipFile, folder: Path) -> None:
    root = folder.resolve()
    for member in bundle.namelist():
        target = (folder / member).resolve()
        if target != root and root not in target.parents:
            raise RemoteError(f"the competition archive holds a path outside its folder: {member!r}",
                              hint="download the data with `kaggle competitions download` and pass --data")
    bundle.extractall(folder)


def _unwrap_zip(content: bytes, file_name: str) -> bytes:
    """Kaggle may hand a single file back zipped (``name.zip``)."""
    if content[:4] != b"PK\x03\x04":
        return content
    with zipfile.ZipFile(io.BytesIO(content)) as archive:
        names = archive.namelist()
        member = file_name if file_name in names else names[0]
        return archive.read(member)


def _kernel_error_hint(error: str) -> str:
    lowered = error.lower()
    if "machine shape" in lowered or "accelerator" in lowered:
        return ("choose another [kernel] accelerator in kernel.toml (gpu = T4 x2, or none): GPU shapes need a "
                "phone-verified account and weekly quota left, and some shapes only exist in some competitions")
    if "not found" in lowered:
        return "the kernel id in kernel-metadata.json must be owner/slugify(title) and owned by you"
    if "title" in lowered or "slug" in lowered:
        return "Kaggle derives the slug from the title: keep [kernel] title and slug consistent"
    return "see kernel-metadata.json in the build output"


def parse_log(text: str) -> list[dict[str, Any]]:
    """Kaggle's log is a JSON array of ``{stream_name, time, data}``; tolerate plain text too."""
    if not text.strip():
        return []
    with contextlib.suppress(ValueError):
        entries = json.loads(text)
        if isinstance(entries, list):
            return [entry for entry in entries if isinstance(entry, dict)]
    return [{"stream_name": "stdout", "time": 0.0, "data": text}]


def _submission(item: Any) -> Submission:
    status = getattr(item, "status", None)
    name = getattr(status, "name", str(status or "pending")).lower()
    date = getattr(item, "date", None)
    return Submission(
        ref=int(getattr(item, "ref", 0) or 0),
        status=name,
        public_score=str(getattr(item, "public_score", "") or ""),
        private_score=str(getattr(item, "private_score", "") or ""),
        error_description=str(getattr(item, "error_description", "") or ""),
        description=str(getattr(item, "description", "") or ""),
        date=date.isoformat() if hasattr(date, "isoformat") else str(date or ""),
    )
