"""builder.remote.kaggle_api: the real client, pointed at a scripted loopback server (no mock of the client).

The scripted server answers each RPC from a queue of (status, body, headers), so these tests pin
what kkb does with each answer: where requests go, which credentials they carry, how HTTP errors,
errors in 200 bodies and dropped connections are translated and retried, and that no secret leaks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from builder.errors import EXIT_AUTH, EXIT_REMOTE, AuthError, KkbError, RemoteError
from builder.remote import kaggle_api
from builder.remote.backoff import Backoff
from builder.remote.kaggle_api import KaggleAdapter, TransientRemoteError, connect, resolve_base_url

REPO = Path(__file__).resolve().parent.parent
KEY = "0123456789abcdef0123456789abcdef"


class Scripted(ThreadingHTTPServer):
    """Answers queued responses per RPC method name; records every request."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.script: dict[str, list[tuple[int, Any, dict[str, str]]]] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def queue(self, method: str, status: int, body: Any = None, **headers: str) -> None:
        self.script.setdefault(method, []).append((status, {} if body is None else body, headers))


class _Handler(BaseHTTPRequestHandler):
    server: Scripted

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        method = self.path.rsplit("/", 1)[-1]
        self.server.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        queue = self.server.script.get(method) or []
        status, payload, headers = queue.pop(0) if queue else (404, {"code": 404, "message": f"no {method}"}, {})
        if payload == "DROP":  # hang up without an answer: a dropped connection
            self.close_connection = True
            self.connection.close()
            return
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server() -> Iterator[Scripted]:
    scripted = Scripted()
    thread = threading.Thread(target=scripted.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield scripted
    scripted.shutdown()
    scripted.server_close()


@pytest.fixture
def creds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAGGLE_USERNAME", "alice")
    monkeypatch.setenv("KAGGLE_KEY", KEY)


def _adapter(server: Scripted, sleeps: list[float] | None = None, attempts: int = 4) -> KaggleAdapter:
    record = sleeps if sleeps is not None else []
    return KaggleAdapter(api=connect(server.url), endpoint=server.url, retry=Backoff(attempts=attempts),
                         sleep=record.append)


# -- importing and connecting ----------------------------------------------------------------------


def test_importing_kkb_does_not_import_kaggle() -> None:
    code = "import sys, builder.remote.kaggle_api, builder.remote.push, builder.cli; print('kaggle' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"


def test_connect_skips_the_packages_import_time_authentication(tmp_path: Path) -> None:
    # No credentials at all: kaggle/__init__.py would print its auth help to stdout at import.
    code = (
        "import sys, builder.remote.kaggle_api as k\n"
        "try:\n    k.connect('http://127.0.0.1:9')\nexcept k.AuthError as e:\n    print('AUTH', e.exit_code)\n"
        "import kaggle; print(hasattr(kaggle, 'api') and type(kaggle.api).__name__)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KAGGLE_CONFIG_DIR": str(tmp_path / "cfg")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, check=True)
    assert out.stdout.split("\n")[0] == f"AUTH {EXIT_AUTH}"
    assert "Authentication required" not in out.stdout + out.stderr
    assert "KaggleApi" not in out.stdout  # the package-level `kaggle.api` instance was never built


def test_no_credentials_is_an_auth_error_and_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(AuthError) as caught:
        connect("http://127.0.0.1:9")
    assert caught.value.exit_code == EXIT_AUTH and "KAGGLE_USERNAME" in (caught.value.hint or "")
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize(
    ("given", "env", "expected"),
    [
        (None, None, None),
        (None, "http://127.0.0.1:8123", "http://127.0.0.1:8123"),
        ("http://10.1.2.3:9000/", "http://127.0.0.1:1", "http://10.1.2.3:9000"),
        ("http://kaggle.internal:8080/api", None, "http://kaggle.internal:8080"),
    ],
)
def test_base_url_resolution(monkeypatch: pytest.MonkeyPatch, given: str | None, env: str | None, expected: str | None) -> None:
    if env:
        monkeypatch.setenv("KKB_KAGGLE_API", env)
    assert resolve_base_url(given) == expected


def test_bad_base_url_is_a_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KKB_KAGGLE_API", "127.0.0.1:8000")
    with pytest.raises(KkbError, match=r"\$KKB_KAGGLE_API '127.0.0.1:8000' is not an http\(s\) URL"):
        resolve_base_url()


@pytest.mark.loopback
def test_requests_go_to_the_given_host_and_port_with_basic_auth(server: Scripted, creds: None) -> None:
    server.queue("GetDatasetStatus", 200, {"status": "READY"})
    assert _adapter(server).dataset_status("alice/some-weights") == "ready"
    (request,) = server.requests
    assert request["path"] == "/api/v1/datasets.DatasetApiService/GetDatasetStatus"
    assert request["body"] == {"ownerSlug": "alice", "datasetSlug": "some-weights"}
    assert request["auth"].startswith("Basic ")


@pytest.mark.loopback
def test_env_var_points_the_client(server: Scripted, creds: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KKB_KAGGLE_API", server.url)
    server.queue("GetDatasetStatus", 200, {})  # READY's enum value 0 is NOT_YET_PERSISTED; absent = default
    adapter = KaggleAdapter.connect()
    assert adapter.endpoint == server.url and adapter.dataset_status("alice/some-weights") == "not_yet_persisted"


@pytest.mark.loopback
def test_kaggle_json_is_read_from_the_config_dir_of_this_process(server: Scripted, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "cfg"
    config.mkdir()
    (config / "kaggle.json").write_text(json.dumps({"username": "bob", "key": KEY}))
    (config / "kaggle.json").chmod(0o600)
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(config))
    adapter = KaggleAdapter.connect(server.url)
    assert adapter.username == "bob"


@pytest.mark.loopback
def test_access_token_is_introspected_at_the_given_server(server: Scripted, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAGGLE_API_TOKEN", "tok-" + KEY)
    server.queue("IntrospectToken", 200, {"active": True, "username": "carol"})
    server.queue("GetDatasetStatus", 200, {"status": "READY"})
    adapter = _adapter(server)
    assert adapter.username == "carol"
    adapter.dataset_status("carol/a-dataset")
    assert server.requests[0]["path"].endswith("/security.OAuthService/IntrospectToken")
    assert server.requests[1]["auth"] == f"Bearer tok-{KEY}"


# -- errors ------------------------------------------------------------------------------------------


@pytest.mark.loopback
def test_401_is_an_auth_error_without_the_key(server: Scripted, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAGGLE_USERNAME", "alice")
    monkeypatch.setenv("KAGGLE_KEY", KEY)
    server.queue("GetKernelSessionStatus", 401, {"code": 401, "message": f"bad key {KEY}"})
    with pytest.raises(AuthError) as caught:
        _adapter(server).kernel_status("alice/my-kernel")
    text = str(caught.value)
    assert caught.value.exit_code == EXIT_AUTH and "HTTP 401" in text and KEY not in text and "<hidden>" in text


@pytest.mark.loopback
def test_404_is_a_remote_error_naming_the_subject(server: Scripted, creds: None) -> None:
    server.queue("GetKernelSessionStatus", 404, {"code": 404, "message": "Kernel not found"})
    with pytest.raises(RemoteError) as caught:
        _adapter(server).kernel_status("alice/my-kernel", 3)
    assert caught.value.exit_code == EXIT_REMOTE
    assert "HTTP 404" in caught.value.message and "alice/my-kernel v3" in caught.value.message
    assert "Kernel not found" in caught.value.message and "slug" in (caught.value.hint or "")


@pytest.mark.loopback
def test_5xx_and_429_are_retried_with_backoff_and_retry_after(server: Scripted, creds: None) -> None:
    server.queue("GetKernelSessionStatus", 500, {"code": 500, "message": "boom"})
    server.queue("GetKernelSessionStatus", 429, {"code": 429, "message": "slow down"}, Retry_After="3")
    server.queue("GetKernelSessionStatus", 200, {"status": "RUNNING"})
    sleeps: list[float] = []
    assert _adapter(server, sleeps).kernel_status("alice/my-kernel").status == "running"
    assert len(sleeps) == 2 and 0.25 <= sleeps[0] <= 0.5 and sleeps[1] == 3.0


@pytest.mark.loopback
def test_retries_give_up_with_a_transient_remote_error(server: Scripted, creds: None) -> None:
    for _ in range(3):
        server.queue("GetKernelSessionStatus", 503, {"code": 503, "message": "unavailable"})
    sleeps: list[float] = []
    with pytest.raises(TransientRemoteError, match="HTTP 503"):
        _adapter(server, sleeps, attempts=3).kernel_status("alice/my-kernel")
    assert len(sleeps) == 2 and sleeps[1] > sleeps[0] * 1.0 - 1e-9


@pytest.mark.loopback
def test_dropped_connection_is_retried(server: Scripted, creds: None) -> None:
    server.queue("GetKernelSessionStatus", 200, "DROP")
    server.queue("GetKernelSessionStatus", 200, {"status": "COMPLETE"})
    sleeps: list[float] = []
    assert _adapter(server, sleeps).kernel_status("alice/my-kernel").status == "complete"
    assert len(sleeps) == 1


@pytest.mark.loopback
def test_refused_connection_is_a_remote_error(creds: None) -> None:
    adapter = KaggleAdapter(api=connect("http://127.0.0.1:9"), endpoint="http://127.0.0.1:9",
                            retry=Backoff(attempts=2), sleep=lambda s: None)
    with pytest.raises(RemoteError) as caught:
        adapter.kernel_status("alice/my-kernel")
    assert caught.value.message == ("cannot reach Kaggle at http://127.0.0.1:9 while reading the kernel status "
                                    "alice/my-kernel: connection refused, gave up after 2 tries in 0s")
    assert caught.value.exit_code == 3


@pytest.mark.loopback
def test_a_creating_call_is_not_blindly_retried_after_a_5xx(server: Scripted, creds: None) -> None:
    server.queue("CreateCodeSubmission", 500, {"code": 500, "message": "boom"})
    sleeps: list[float] = []
    with pytest.raises(TransientRemoteError):
        _adapter(server, sleeps).submit_code("comp", "alice/my-kernel", 2, "submission.csv", "m")
    assert sleeps == [] and len(server.requests) == 1  # the caller checks the server before trying again


@pytest.mark.loopback
def test_errors_in_a_200_body_are_raised(server: Scripted, creds: None, tmp_path: Path) -> None:
    kernel = tmp_path / "kernel"
    kernel.mkdir()
    (kernel / "k.ipynb").write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    (kernel / "kernel-metadata.json").write_text(json.dumps({
        "id": "alice/my-kernel", "title": "My Kernel", "code_file": "k.ipynb", "language": "python",
        "kernel_type": "notebook", "enable_internet": False}))
    server.queue("SaveKernel", 200, {"error": "Notebook not found"})
    with pytest.raises(RemoteError, match="Kaggle refused the kernel push: Notebook not found"):
        _adapter(server).push_kernel(kernel)
    server.queue("SaveKernel", 200, {"versionNumber": 2, "url": "u", "invalidDatasetSources": ["alice/missing-code"]})
    with pytest.raises(RemoteError, match="did not attach these inputs.*alice/missing-code"):
        _adapter(server).push_kernel(kernel)
    server.queue("SaveKernel", 200, {"versionNumber": 3, "url": "http://x/code/alice/my-kernel", "ref": "/code/alice/my-kernel"})
    pushed = _adapter(server).push_kernel(kernel)
    assert pushed.version == 3
    body = server.requests[-1]["body"]
    assert body.get("enableInternet", False) is False  # false is a default value: omitted on the wire


@pytest.mark.loopback
def test_dataset_refusal_in_body(server: Scripted, creds: None, tmp_path: Path) -> None:
    folder = tmp_path / "ds"
    folder.mkdir()
    (folder / "dataset-metadata.json").write_text(json.dumps({"id": "alice/some-weights"}))
    server.queue("CreateDatasetVersion", 200, {"status": "error", "error": "Path must be unique"})
    with pytest.raises(RemoteError, match="refused creating a dataset version alice/some-weights: Path must be unique"):
        _adapter(server).version_dataset(folder, "notes")


@pytest.mark.loopback
def test_verbose_env_never_prints_the_authorization_header(server: Scripted, creds: None,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(kaggle_api._api_class(), "args", ["--verbose"])
    server.queue("GetDatasetStatus", 200, {"status": "READY"})
    _adapter(server).dataset_status("alice/some-weights")
    captured = capsys.readouterr()
    assert "Authorization" not in captured.out + captured.err


def test_client_chatter_goes_to_the_debug_log_scrubbed(caplog: pytest.LogCaptureFixture, creds: None) -> None:
    caplog.set_level("DEBUG", logger="kkb.kaggle")
    with kaggle_api.client_output("testing", (KEY,)):
        print(f"the key is {KEY}")
    assert "the key is <hidden>" in caplog.text and KEY not in caplog.text
