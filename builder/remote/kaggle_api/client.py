"""The real ``kaggle`` client, imported without its import-time authentication, and :func:`connect`.

``kaggle/__init__.py`` runs ``KaggleApi().authenticate()`` at import: it prints auth help to stdout, may
call the network (``KAGGLE_API_TOKEN`` → IntrospectToken against PROD) and reads credentials before kkb has
pointed anything anywhere. So the client is imported lazily (inside functions), under a bare ``kaggle``
package module, and only through :func:`_api_class`.

* :func:`connect` builds an authenticated ``KaggleApi`` that talks to kaggle.com, or to any server
  speaking Kaggle's API when ``base_url`` / ``$KKB_KAGGLE_API`` is given (only the base URL changes).
* :class:`KkbApi` is kkb's half of that ``KaggleApi`` subclass: a configurable base URL and, once a
  :class:`~builder.remote.kaggle_api.KaggleAdapter` holds it, kkb's retry policy in place of the client's
  own loops. Its ``with_retry`` (10 tries of up to ~2 minutes on StartBlobUpload, create calls and
  GetSubmission) tries once and leaves retrying to the adapter's ``call``; the urllib3 retries it mounts on
  every upload PUT (10 tries with backoff up to 120 s each, invisible from outside) are replaced by a
  single try, and its resume loop asks the adapter, after each failed PUT, for the sleep before the next
  one, which gives up when the budget is spent.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import importlib.util
import os
import sys
import types
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import urlsplit

from builder.errors import AuthError, KkbError
from builder.project.credentials import check_kaggle_json
from builder.remote.kaggle_api.translate import CREDENTIALS_HINT, ENV_BASE_URL, client_output, logger, translate_error

if TYPE_CHECKING:  # pragma: no cover - typing only; importing kaggle at runtime authenticates
    from kaggle.api.kaggle_api_extended import KaggleApi
    from kaggle.api.kaggle_api_extended import KaggleApi as _ClientApi
else:
    _ClientApi = object  # at run time the client's class joins in _api_class(), once it may be imported

PROD_ENDPOINT = "https://api.kaggle.com"

T = TypeVar("T")


def _install_quiet_kaggle_package() -> None:
    """Register ``kaggle`` as a bare package so importing its submodules skips ``__init__``.

    ``kaggle_api_extended`` only needs ``kaggle.__version__`` from the package, which we provide.
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
    """The ``KaggleApi`` subclass kkb uses (built once, on first use): :class:`KkbApi` over the client's class."""
    _install_quiet_kaggle_package()
    try:
        from kaggle.api.kaggle_api_extended import KaggleApi
    except ModuleNotFoundError as exc:  # six is the usual culprit (kaggle-api.md §0.2)
        raise KkbError(f"the kaggle client cannot be imported: {exc}", hint="pip install 'kaggle==2.2.5' six") from exc
    # The base class exists only now: the subclass is made here, from kkb's half and the client's.
    return type("KkbKaggleApi", (KkbApi, KaggleApi), {"__module__": __name__, "__qualname__": "KkbKaggleApi"})


def _one_try(*_args: Any, **_kwargs: Any) -> Any:
    from urllib3.util.retry import Retry

    return Retry(0, read=False)  # requests' own default: fail at once, the resume loop decides


@contextlib.contextmanager
def _single_try_puts(active: bool) -> Iterator[None]:
    """upload_complete() mounts Retry(total=10, backoff_factor=0.5) on the PUT's session: against a
    dead server that sleeps for minutes inside one call, out of kkb's sight. While kkb's policy is in
    charge, the module's name (used there only) means a single try; kkb uploads one file at a time."""
    if not active:
        yield
        return
    from kaggle.api import kaggle_api_extended

    original = kaggle_api_extended.Retry
    kaggle_api_extended.Retry = _one_try
    try:
        yield
    finally:
        kaggle_api_extended.Retry = original


class KkbApi(_ClientApi):  # type: ignore[misc]  # the client is untyped: its class is Any to mypy
    """kkb's half of ``KaggleApi`` (the class :func:`_api_class` makes puts the client's after it): a
    configurable base URL and, once a :class:`KaggleAdapter` holds it, kkb's retry policy in place of the
    client's own loops; the wire is unchanged. Used bare (``connect()``, the local Kaggle's tests) it
    retries as the client does."""

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
        return 10_000 if self.kkb_policy else int(super().MAX_UPLOAD_RESUME_ATTEMPTS)

    def with_retry(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> Callable[..., T]:
        if not self.kkb_policy:
            return cast("Callable[..., T]", super().with_retry(func, *args, **kwargs))
        # One try: KaggleAdapter.call retries under kkb's policy, and only where a retry cannot duplicate.
        return func

    def _is_upload_successful(self, response: Any) -> bool:
        self.kkb_put_status = int(response.status_code)  # the client keeps no other trace of it
        return bool(super()._is_upload_successful(response))

    def build_kaggle_client(self) -> Any:
        from kagglesdk import KaggleClient
        from kagglesdk.kaggle_env import KaggleEnv

        # verbose is forced off: the client's verbose mode prints the Authorization header.
        args = [arg for arg in self.args if arg not in ("--verbose", "-v")]
        creds = {
            "username": self.config_values.get(self.CONFIG_NAME_USER),
            "password": self.config_values.get(self.CONFIG_NAME_KEY),
            "api_token": self.config_values.get(self.CONFIG_NAME_TOKEN),
            "response_processor": _log_newer_client_version,
        }
        if self.kkb_endpoint is None:
            client = self.build_kaggle_client_with_params(args=args, **creds)
        elif self.kkb_endpoint == PROD_ENDPOINT:
            client = KaggleClient(env=KaggleEnv.PROD, verbose=False, **creds)
        else:
            # TEST gives the non-production URL shape ({base}/api/v1/...) and no IAP header;
            # only its endpoint (hard-wired to localhost:7777) is replaced.
            client = KaggleClient(env=KaggleEnv.TEST, verbose=False, **creds)
            client.http_client()._endpoint = self.kkb_endpoint
        _json_answers_only(client.http_client())
        return client

    def upload_complete(self, path: str, url: str, quiet: bool, resume: bool = False) -> Any:
        from kaggle.models.kaggle_models_extended import ResumableUploadResult

        self.kkb_put_status = None
        with _single_try_puts(self.kkb_policy):
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


def _json_answers_only(http: Any) -> None:
    """An answer that is not JSON (the HTML page Kaggle's front end sends when it throttles, even as a 200) makes
    the client's parser raise "Expecting value: line 1 column 1": a decoding error with no status. Raised here
    as the HTTP error it is, with the answer (its status, its ``Retry-After``), marked ``kkb_not_json``."""
    import requests

    parse = http._prepare_response

    def prepare(response_type: Any, http_response: Any) -> Any:
        try:
            return parse(response_type, http_response)
        except ValueError as exc:  # requests' JSONDecodeError
            error = requests.HTTPError(f"HTTP {http_response.status_code}: the answer is not JSON", response=http_response)
            error.kkb_not_json = True  # type: ignore[attr-defined]
            raise error from exc

    http._prepare_response = prepare


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
