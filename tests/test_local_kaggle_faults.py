"""Every injected fault, seen through the real client (and the raw wire where the client hides it)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.local_kaggle import COMPETITION, KEY, USER, make_competition, make_dataset, make_kernel, wait_kernel, wait_submission

pytestmark = pytest.mark.loopback  # every test talks to a local Kaggle over HTTP

DATASET = f"{USER}/tiny-numbers"
KERNEL = f"{USER}/parity-kernel"
AUTH = {"Authorization": "Basic " + base64.b64encode(f"{USER}:{KEY}".encode()).decode()}


def test_429_is_retried_by_the_client_after_retry_after(api, kaggle_server, tmp_path: Path) -> None:
    folder = make_dataset(tmp_path / "ds")
    assert api.dataset_create_new(str(folder), quiet=True).status == "ok"
    kaggle_server.faults.fail_rpc("CreateDatasetVersion", status=429, times=2, retry_after=0)
    assert api.dataset_create_version(str(folder), "v2", quiet=True).status == "ok"
    assert kaggle_server.faults.snapshot()["rpc"] == []


def test_500_reaches_the_caller_once(api, kaggle_server, tmp_path: Path) -> None:
    assert api.dataset_create_new(str(make_dataset(tmp_path / "ds")), quiet=True).status == "ok"
    kaggle_server.faults.fail_rpc("datasets.DatasetApiService/GetDatasetStatus", status=500, times=1)
    with pytest.raises(requests.HTTPError, match="Internal server error") as raised:
        api.dataset_status(DATASET)
    assert raised.value.response is not None and raised.value.response.status_code == 500
    assert api.dataset_status(DATASET) == "ready"


def test_a_429_carries_retry_after_on_the_wire(kaggle_server) -> None:
    kaggle_server.faults.fail_rpc("*", status=429, times=1, retry_after=7)
    answer = requests.post(f"{kaggle_server.base_url}/api/v1/kernels.KernelsApiService/ListKernels", json={}, headers=AUTH)
    assert (answer.status_code, answer.headers["Retry-After"]) == (429, "7")
    assert answer.json() == {"code": 429, "message": "Too many requests"}


def test_an_upload_broken_halfway_is_resumed_by_the_client(api, kaggle_server, tmp_path: Path) -> None:
    payload = os.urandom(200_000)
    kaggle_server.faults.break_upload(times=2, fraction=0.5)
    folder = make_dataset(tmp_path / "ds", files={"blob.bin": payload})
    assert api.dataset_create_new(str(folder), quiet=True).status == "ok"
    assert kaggle_server.faults.snapshot()["uploadBreak"] == []
    api.dataset_download_file(DATASET, "blob.bin", path=str(tmp_path / "dl"), quiet=True)
    assert (tmp_path / "dl" / "blob.bin").read_bytes() == payload


def test_resumable_upload_semantics_on_the_wire(kaggle_server) -> None:
    start = requests.post(f"{kaggle_server.base_url}/api/v1/blobs.BlobApiService/StartBlobUpload", headers=AUTH,
                          json={"type": "DATASET", "name": "x.bin", "contentLength": 10})
    url = start.json()["createUrl"]
    kaggle_server.faults.break_upload(times=1, fraction=0.4)
    assert requests.put(url, data=b"0123456789").status_code == 503
    probe = requests.put(url, headers={"Content-Range": "bytes */10", "Content-Length": "0"})
    assert (probe.status_code, probe.headers["Range"]) == (308, "bytes=0-3")
    rest = requests.put(url, data=b"456789", headers={"Content-Range": "bytes 4-9/10"})
    assert rest.status_code == 200
    assert requests.put(url, headers={"Content-Range": "bytes */10", "Content-Length": "0"}).status_code == 200
    assert requests.put(f"{kaggle_server.base_url}/upload/{'0' * 32}", data=b"x").status_code == 404


def test_a_dataset_version_stuck_not_ready(api, kaggle_server, tmp_path: Path) -> None:
    kaggle_server.faults.stall_dataset(DATASET, polls=3)
    assert api.dataset_create_new(str(make_dataset(tmp_path / "ds")), quiet=True).status == "ok"
    assert [api.dataset_status(DATASET) for _ in range(4)] == ["blobs_received"] * 3 + ["ready"]


def test_a_kernel_that_fails_then_recovers(api, kaggle_server, tmp_path: Path) -> None:
    kaggle_server.add_competition(make_competition(tmp_path / "competition"))
    kaggle_server.faults.fail_kernel(KERNEL, times=1, message="MemoryError: injected")
    folder = make_kernel(tmp_path / "k")
    api.kernels_push(str(folder))
    failed = wait_kernel(api, KERNEL)
    assert (failed.status.name, failed.failure_message) == ("ERROR", "MemoryError: injected")
    assert "MemoryError: injected" in api.kernels_logs(KERNEL)
    api.kernels_push(str(folder))
    assert wait_kernel(api, f"{KERNEL}/2").status.name == "COMPLETE"


def test_a_kernel_that_fails_in_the_scoring_rerun(api, kaggle_server, tmp_path: Path) -> None:
    kaggle_server.add_competition(make_competition(tmp_path / "competition"))
    kaggle_server.faults.fail_kernel("*", phase="rerun", description="Notebook Exceeded Allowed Compute")
    api.kernels_push(str(make_kernel(tmp_path / "k")))
    assert wait_kernel(api, KERNEL).status.name == "COMPLETE"  # the commit run is not affected
    ref = api.competition_submit_code("submission.csv", "m", COMPETITION, KERNEL, 1, quiet=True).ref
    assert wait_submission(api, ref).error_description == "Notebook Exceeded Allowed Compute"


def test_the_admin_endpoint_reads_replaces_and_clears(kaggle_server) -> None:
    url = f"{kaggle_server.base_url}/_admin/faults"
    token = {"X-KKB-Admin-Token": (kaggle_server.store.root / "admin-token").read_text().strip()}
    document: dict[str, Any] = {"rpc": [{"method": "SaveKernel", "status": 500, "times": 2}], "uploadBreak": [{"times": 1}]}
    assert requests.post(url, json=document, headers=token).json()["rpc"] == [
        {"method": "SaveKernel", "status": 500, "times": 2, "message": "Internal server error", "html": False,
         "afterCommit": False}]
    assert requests.get(url, headers=token).json()["uploadBreak"] == [{"times": 1, "fraction": 0.5}]
    rejected = requests.post(url, json={"bogus": []}, headers=token)
    assert rejected.status_code == 400 and "unknown fault kinds" in rejected.json()["message"]
    assert requests.delete(url, headers=token).json() == {
        "rpc": [], "datasetNotReady": [], "uploadBreak": [], "kernelFail": [], "staleMount": []}


def test_the_faults_file_can_be_edited_while_the_server_runs(kaggle_server) -> None:
    path = kaggle_server.store.path("faults.json")
    path.write_text(json.dumps({"rpc": [{"method": "ListKernels", "status": 503, "times": 1}]}))
    answer = requests.post(f"{kaggle_server.base_url}/api/v1/kernels.KernelsApiService/ListKernels", json={}, headers=AUTH)
    assert answer.status_code == 503
    assert json.loads(path.read_text())["rpc"] == []  # consumed, and written back
