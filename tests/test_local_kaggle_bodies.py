"""Request bodies: a limit (413 unread), a checked Content-Length (400), chunked bodies, and always an answer.

Sent over raw sockets, since no well-behaved client sends these. Each case reads the server's answer
(the socket timeout is only a guard against a hang, never an assertion about speed).
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
from pathlib import Path
from typing import Any

import pytest
import requests

from builder.local_kaggle import ServerSettings
from tests.support.local_kaggle import KEY, USER, start_server

pytestmark = pytest.mark.loopback  # a local Kaggle over loopback HTTP

AUTH = "Basic " + base64.b64encode(f"{USER}:{KEY}".encode()).decode()
LIMITS = ServerSettings(dataset_ready_seconds=0.0, max_body_bytes=1000, max_upload_bytes=5000,
                        request_timeout_seconds=1.0)
LIST_KERNELS = "/api/v1/kernels.KernelsApiService/ListKernels"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with start_server(tmp_path_factory.mktemp("bodies") / "data", settings=LIMITS) as srv:
        yield srv


def raw(server: Any, head: str, body: bytes = b"", finish: bool = False) -> tuple[int, dict[str, str], Any]:
    """Send ``head`` (request line and headers) and ``body`` as they are; return the answer."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode("latin-1") + b"\r\n" + body)
        if finish:
            sock.shutdown(socket.SHUT_WR)
        answer = http.client.HTTPResponse(sock)
        answer.begin()
        payload = answer.read()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, json.loads(payload) if payload else None


def post(path: str, *headers: str) -> str:
    return "\n".join([f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Authorization: {AUTH}", *headers, ""])


@pytest.mark.parametrize(
    ("head", "body", "status", "message"),
    [
        (post(LIST_KERNELS, "Content-Length: 1000000000000"), b"", 413,
         "Request body too large: 1000000000000 bytes, the limit is 1000"),
        (post(LIST_KERNELS, "Content-Length: 1001"), b"{", 413, "Request body too large: 1001 bytes, the limit is 1000"),
        (post(LIST_KERNELS, "Content-Length: abc"), b"", 400,
         "Invalid Content-Length 'abc': it must be one non-negative number of bytes"),
        (post(LIST_KERNELS, "Content-Length: -5"), b"", 400,
         "Invalid Content-Length '-5': it must be one non-negative number of bytes"),
        (post(LIST_KERNELS, "Content-Length: 2", "Transfer-Encoding: chunked"), b"{}", 400,
         "A request cannot have both Content-Length and Transfer-Encoding: chunked"),
        (post(LIST_KERNELS, "Transfer-Encoding: chunked"), b"400\r\n" + b" " * 1024 + b"\r\n0\r\n\r\n", 413,
         "Request body too large: more than 1000 bytes"),
        (post(LIST_KERNELS, "Transfer-Encoding: chunked"), b"zz\r\n", 400, "Invalid chunk size b'zz' in a chunked body"),
        (post("/nowhere", "Content-Length: 1000000000000"), b"", 404, "No such endpoint: POST /nowhere"),
        (post("/api/v1/x.Y/Nope", "Content-Length: 1000000000000"), b"", 404, "Unknown method x.Y/Nope"),
        (post("/_admin/faults", "Content-Length: 1000000000000"), b"", 401,
         "The /_admin endpoints need the admin token: send X-KKB-Admin-Token with the content of admin-token in "
         "the server's data folder"),
        ("PUT /upload/" + "0" * 32 + " HTTP/1.1\nHost: x\nContent-Length: 1000000000000\n", b"", 413,
         "Request body too large: 1000000000000 bytes, the limit is 5000"),
    ],
    ids=["huge-length", "one-over", "not-a-number", "negative", "both", "chunked-over", "bad-chunk", "unknown-path",
         "unknown-method", "admin-unauthorised", "upload-over-limit"],
)
def test_bad_bodies_are_answered_unread(server, head: str, body: bytes, status: int, message: str) -> None:
    answer_status, headers, answer = raw(server, head, body)
    assert (answer_status, answer) == (status, {"code": status, "message": message})
    assert headers.get("connection") == "close"


def test_a_chunked_body_within_the_limit_is_read(server) -> None:
    status, _, answer = raw(server, post(LIST_KERNELS, "Transfer-Encoding: chunked"), b"2\r\n{}\r\n0\r\n\r\n")
    assert (status, answer) == (200, {"kernels": [], "nextPageToken": ""})


def test_a_body_shorter_than_announced_is_a_400(server) -> None:
    status, _, answer = raw(server, post(LIST_KERNELS, "Content-Length: 100"), b"{}", finish=True)
    assert (status, answer["message"]) == (400, "The request body ended after 2 of 100 bytes")


def test_a_body_that_stops_arriving_is_cut_with_408(server) -> None:
    status, _, answer = raw(server, post(LIST_KERNELS, "Content-Length: 100"), b"{}")
    assert (status, answer["message"]) == (408, "The request body stopped arriving (timed out)")


def _start_upload(server: Any, length: int) -> requests.Response:
    return requests.post(f"{server.base_url}/api/v1/blobs.BlobApiService/StartBlobUpload", timeout=30,
                         headers={"Authorization": AUTH}, json={"type": "DATASET", "name": "x.bin", "contentLength": length})


def test_an_upload_announcing_more_than_the_limit_is_refused(server) -> None:
    answer = _start_upload(server, 5001)
    assert (answer.status_code, answer.json()["message"]) == (413, "The file x.bin is too large: 5001 bytes, the limit is 5000")


def test_a_put_larger_than_announced_is_refused_unread(server) -> None:
    url = _start_upload(server, 10).json()["createUrl"]
    token = url.rsplit("/", 1)[1]
    status, _, answer = raw(server, f"PUT /upload/{token} HTTP/1.1\nHost: x\nContent-Length: 11\n")
    assert (status, answer["message"]) == (413, "The upload is larger than announced: 0 + 11 bytes > 10")
    assert requests.put(url, data=b"0123456789", timeout=30).status_code == 200  # the upload itself still works


def test_an_rpc_body_within_the_limit_still_works_through_the_client(server, tmp_path: Path, monkeypatch) -> None:
    from tests.support.local_kaggle import connect_as, make_dataset

    api = connect_as(monkeypatch, server.base_url)
    folder = make_dataset(tmp_path / "ds", files={"n.csv": "n\n1\n"})
    assert api.dataset_create_new(str(folder), quiet=True).status == "ok"
