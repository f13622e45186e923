"""``LocalKaggle``: the server as a Python object (tests, the demo) and what ``kkb local-kaggle serve`` runs.

    with LocalKaggle(tmp_path / "kaggle", port=0) as server:
        server.add_user("alice", "secret-key")
        server.add_competition(Path("competitions/tiny"))
        server.faults.fail_rpc("CreateDatasetVersion", status=429, times=2, retry_after=0)
        server.accounts.configure("alice", gpu_quota_hours=1.5)   # the account's limits
        server.clock.set(datetime(2026, 12, 1, 23, 59, tzinfo=timezone.utc))  # "now" for the limits
        ... KKB_KAGGLE_API=server.base_url ...

It binds a loopback address only and never calls out: kernels run in the local sandbox.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Mapping
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from builder.errors import LocalKaggleError
from builder.local_kaggle.accounts import Account, Accounts
from builder.local_kaggle.admin import write_admin_token
from builder.local_kaggle.auth import Users
from builder.local_kaggle.blobs import Blobs
from builder.local_kaggle.clock import Clock
from builder.local_kaggle.competition import CompetitionConfig
from builder.local_kaggle.competitions import Competitions
from builder.local_kaggle.datasets import Datasets
from builder.local_kaggle.faults import Faults
from builder.local_kaggle.files import remove_tree
from builder.local_kaggle.handler import make_handler
from builder.local_kaggle.kernels import Kernels
from builder.local_kaggle.models import Models
from builder.local_kaggle.runner import KernelRunner, SandboxRunner
from builder.local_kaggle.settings import ServerSettings
from builder.local_kaggle.store import Store
from builder.local_kaggle.wire import Call, Handler, Json
from builder.local_kaggle.worker import JobQueue, Workers


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class LocalKaggle:
    """A Kaggle-compatible API server on loopback, with its state under ``data_dir``."""

    def __init__(self, data_dir: Path, port: int = 0, host: str = "127.0.0.1",
                 settings: ServerSettings | None = None, runner: KernelRunner | None = None) -> None:
        _require_loopback(host)
        self.host = host
        self.requested_port = port
        self.settings = settings or ServerSettings()
        self.store = Store(Path(data_dir))
        self.users = Users(self.store)
        self.faults = Faults(self.store)
        self.clock = Clock(self.store)  # what "now" is for the limits (submissions a day, quota, billing)
        self.accounts = Accounts(self.store, self.clock)
        self.jobs = JobQueue()
        runner = runner or SandboxRunner()
        self.blobs = Blobs(self.store, self.faults, self.settings.max_upload_bytes)
        self.datasets = Datasets(self.store, self.blobs, self.faults, self.settings)
        self.kernels = Kernels(self.store, self.datasets, self.faults, self.settings, runner, self.jobs, self.accounts)
        self.competitions = Competitions(self.store, self.blobs, self.kernels, self.faults, self.settings, runner,
                                         self.jobs, self.clock)
        self.kernels.competition_data = self.competitions.public_dir
        self.models = Models(self.store, self.blobs, self.settings)
        self.kernels.model_mount = self.models.mount
        self.routes: dict[str, Handler] = {
            **self.datasets.routes(), **self.kernels.routes(), **self.competitions.routes(), **self.models.routes(),
            **self.accounts.routes(),
            "blobs.BlobApiService/StartBlobUpload": self.blobs.start_blob_upload,
            "security.OAuthService/IntrospectToken": self._introspect_token,
        }
        self._workers = Workers(self.jobs, {"commit": self.kernels.execute_commit,
                                            "score": self.competitions.execute_scoring}, self.settings.workers)
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        # Guards /_admin/*: replaced, and written to <data>/admin-token (0600), at every start.
        self.admin_token = ""

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> LocalKaggle:
        if self._httpd is not None:
            return self
        self.admin_token = write_admin_token(self.store.root)
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        server_class = type("_BoundServer", (_Server,), {"address_family": family})
        try:
            self._httpd = server_class((self.host, self.requested_port), make_handler(self))
        except OSError as exc:
            raise LocalKaggleError(f"cannot listen on {self.host}:{self.requested_port}: {exc.strerror}",
                                   hint="pick another --port (0 picks a free one)") from exc
        # A short poll interval makes stop() (and so every test's teardown) quick.
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="local-kaggle-http", daemon=True)
        self._thread.start()
        # Sandboxes left by runs that a previous server never finished (their jobs are re-queued below).
        remove_tree(self.store.path("runs"))
        self.kernels.recover()
        self.competitions.recover()
        self._workers.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._workers.stop()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> LocalKaggle:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise LocalKaggleError("the local Kaggle is not running", hint="call start() or use it as a context manager")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """What ``KKB_KAGGLE_API`` should be set to, e.g. ``http://127.0.0.1:41234``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    # -- administration ----------------------------------------------------------------------

    def add_user(self, name: str, key: str, token: str | None = None, account: Mapping[str, Any] | None = None) -> str:
        """Register a user (HTTP Basic ``name:key``); returns an access token IntrospectToken accepts.

        ``account``: the user's limits (:class:`~builder.local_kaggle.accounts.Account`: ``gpu_quota_hours``,
        ``gpu_sessions``, ``cap_answer``, ...); later changes go through ``server.accounts.configure``."""
        if account:
            self.accounts.checked(name, **dict(account))  # a bad setting changes nothing, the key neither
        token = self.users.add(name, key, token)
        if account:
            self.accounts.configure(name, **dict(account))
        return token

    def account(self, name: str) -> Account:
        return self.accounts.account(name)

    def add_competition(self, folder: Path) -> CompetitionConfig:
        return self.competitions.add(Path(folder))

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Block until no kernel run or scoring is queued or running (for tests and the demo)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.jobs.idle():
                return True
            time.sleep(0.05)
        return self.jobs.idle()

    # -- RPCs that belong to no service module -----------------------------------------------

    def _introspect_token(self, call: Call) -> Json:
        user = self.users.user_for_token(call.text("token"))
        if user is None:
            return {"active": False}
        return {"active": True, "username": user, "clientId": "kkb-local-kaggle", "scope": "resources.admin:*"}


def _require_loopback(host: str) -> None:
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise LocalKaggleError(f"the local Kaggle binds loopback addresses only, not {host!r}",
                               hint="use 127.0.0.1 (the default) or ::1")
