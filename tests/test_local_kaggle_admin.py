"""``/_admin/*`` and the faults document: the admin token, entry validation, and workers that always finish.

A fault table (each bad entry refused with an exact message, each missing field defaulted), the
token's file and its check, and the audit's crash: a worker error ends the run or the submission as
ERROR with the exception, never RUNNING or PENDING.
"""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path
from typing import Any

import pytest
import requests
from typer.testing import CliRunner

from builder.cli import app as kkb_app
from builder.cli import main as cli_main
from builder.errors import LocalKaggleError
from builder.local_kaggle import LocalKaggle
from builder.local_kaggle.admin import AdminClient, read_admin_token
from builder.local_kaggle.fault_schema import validate_document
from tests.support.local_kaggle import (
    COMPETITION,
    KEY,
    USER,
    admin_client,
    make_competition,
    make_kernel,
    start_server,
    wait_kernel,
    wait_submission,
)

KERNEL = f"{USER}/parity-kernel"
AUTH = {"Authorization": "Basic " + base64.b64encode(f"{USER}:{KEY}".encode()).decode()}
EMPTY: dict[str, list[object]] = {"rpc": [], "datasetNotReady": [], "uploadBreak": [], "kernelFail": [], "staleMount": []}

pytestmark = pytest.mark.loopback


@pytest.fixture
def server(kaggle_server: LocalKaggle) -> LocalKaggle:
    return kaggle_server


# -- the admin token -------------------------------------------------------------------------


def test_the_token_is_written_0600_at_start_and_renewed_at_each(tmp_path: Path) -> None:
    with start_server(tmp_path / "data") as first:
        path = first.store.root / "admin-token"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert read_admin_token(first.store.root) == first.admin_token
    with start_server(tmp_path / "data") as second:
        assert second.admin_token != first.admin_token
        assert read_admin_token(second.store.root) == second.admin_token


@pytest.mark.parametrize(
    ("verb", "headers"),
    [("GET", {}), ("POST", {}), ("DELETE", {}), ("GET", {"X-KKB-Admin-Token": "guess"}),
     ("POST", {"X-KKB-Admin-Token": ""}), ("GET", AUTH)],
    ids=["get-none", "post-none", "delete-none", "get-wrong", "post-empty", "user-credentials"],
)
def test_admin_requests_without_the_token_are_refused(server, verb: str, headers: dict[str, str]) -> None:
    server.faults.fail_rpc("SaveKernel", status=500)
    answer = requests.request(verb, f"{server.base_url}/_admin/faults", headers=headers,
                              json={"rpc": []} if verb == "POST" else None, timeout=30)
    assert answer.status_code == 401
    assert answer.json()["message"] == ("The /_admin endpoints need the admin token: send X-KKB-Admin-Token with "
                                        "the content of admin-token in the server's data folder")
    assert len(server.faults.snapshot()["rpc"]) == 1  # nothing changed


def test_an_unknown_admin_path_needs_the_token_before_it_is_a_404(server) -> None:
    assert requests.get(f"{server.base_url}/_admin/state", timeout=30).status_code == 401
    client = admin_client(server)
    answer = requests.get(f"{server.base_url}/_admin/state", headers={"X-KKB-Admin-Token": client.token}, timeout=30)
    assert (answer.status_code, answer.json()["message"]) == (404, "No such endpoint: GET /_admin/state")


def test_the_admin_client_reads_the_token_from_the_data_folder(server) -> None:
    client = admin_client(server)
    assert client.set_faults({"uploadBreak": [{"times": 2}]})["uploadBreak"] == [{"times": 2, "fraction": 0.5}]
    assert client.faults()["uploadBreak"] == [{"times": 2, "fraction": 0.5}]
    assert client.clear_faults() == EMPTY


def test_the_admin_client_explains_a_missing_token(tmp_path: Path) -> None:
    with pytest.raises(LocalKaggleError, match=r"no admin token at .*admin-token") as raised:
        AdminClient("http://127.0.0.1:9", tmp_path)
    assert raised.value.hint == "start the local Kaggle on this --data-dir first (it writes the token)"


def test_kkb_local_kaggle_faults_sets_shows_and_clears(server, tmp_path: Path) -> None:
    data = str(server.store.root)
    document = tmp_path / "faults.json"
    document.write_text(json.dumps({"rpc": [{"method": "ListKernels", "status": 503}]}))
    cli = CliRunner()
    shown = cli.invoke(kkb_app, ["local-kaggle", "faults", "--url", server.base_url, "-d", data, "--set", str(document)])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["rpc"] == [{"method": "ListKernels", "status": 503, "times": 1,
                                                "message": "Service unavailable", "html": False, "afterCommit": False}]
    assert json.loads(cli.invoke(kkb_app, ["local-kaggle", "faults", "--url", server.base_url, "-d", data]).output)[
        "rpc"][0]["status"] == 503
    cleared = cli.invoke(kkb_app, ["local-kaggle", "faults", "--url", server.base_url, "-d", data, "--clear"])
    assert json.loads(cleared.output) == EMPTY


@pytest.mark.parametrize(
    ("content", "start"),
    [("{nope", "cannot read the faults document "), ('{"rcp": []}', "the local Kaggle refused POST /_admin/faults: "
                                                                     "unknown fault kinds ['rcp']")],
    ids=["not-json", "refused"],
)
def test_kkb_local_kaggle_faults_reports_bad_documents(server, tmp_path: Path, content: str, start: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    document = tmp_path / "faults.json"
    document.write_text(content)
    code = cli_main(["local-kaggle", "faults", "--url", server.base_url, "-d", str(server.store.root),
                     "--set", str(document)])
    assert code == 1
    assert start in " ".join(capsys.readouterr().err.split())
    assert len(server.faults.snapshot()["rpc"]) == 0


def test_the_admin_client_explains_a_server_that_is_not_there(server) -> None:
    client = admin_client(server)
    client.base_url = "http://127.0.0.1:9"
    with pytest.raises(LocalKaggleError, match=r"cannot reach the local Kaggle at http://127.0.0.1:9"):
        client.faults()


# -- the faults document ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"rcp": []}, "unknown fault kinds ['rcp'] (did you mean 'rpc'?) (known: rpc, datasetNotReady, uploadBreak, "
                      "kernelFail, staleMount)"),
        ({"rpc": {}}, "faults.rpc must be a list of objects"),
        ({"rpc": ["x"]}, "faults.rpc[0] must be an object, not str"),
        ({"rpc": [{"method": "X", "status": 200}]},
         "faults.rpc[0]: 'status': Input should be greater than or equal to 400 (got 200) "
         "(a rpc fault takes: times, method, status, retryAfter, message, html, afterCommit)"),
        ({"rpc": [{"method": "X", "status": 700}]},
         "faults.rpc[0]: 'status': Input should be less than or equal to 599 (got 700) "
         "(a rpc fault takes: times, method, status, retryAfter, message, html, afterCommit)"),
        ({"rpc": [{"method": "X"}]}, "faults.rpc[0]: 'status' is required "
                                     "(a rpc fault takes: times, method, status, retryAfter, message, html, afterCommit)"),
        ({"rpc": [{"method": "X", "status": 500, "mesage": "m"}]},
         "faults.rpc[0]: unknown field 'mesage' (did you mean 'message'?) "
         "(a rpc fault takes: times, method, status, retryAfter, message, html, afterCommit)"),
        ({"rpc": [{"method": "X", "status": 500, "times": 0}]},
         "faults.rpc[0]: 'times': Input should be greater than or equal to 1 (got 0) "
         "(a rpc fault takes: times, method, status, retryAfter, message, html, afterCommit)"),
        ({"uploadBreak": [{"fraction": 1.0}]},
         "faults.uploadBreak[0]: 'fraction': Input should be less than 1 (got 1.0) "
         "(a uploadBreak fault takes: times, fraction)"),
        ({"kernelFail": [{"phase": "later"}]},
         "faults.kernelFail[0]: 'phase': Input should be 'commit', 'rerun' or 'any' (got 'later') "
         "(a kernelFail fault takes: times, kernel, phase, message, description)"),
        ({"kernelFail": [{"description": "Out Of Luck"}]},
         "faults.kernelFail[0]: 'description': Input should be 'Notebook Threw Exception', 'Notebook Timeout', "
         "'Notebook Exceeded Allowed Compute', 'Submission CSV Not Found', 'Submission Scoring Error' or "
         "'Kaggle Error' (got 'Out Of Luck') (a kernelFail fault takes: times, kernel, phase, message, description)"),
        ({"datasetNotReady": [{"polls": -1}]},
         "faults.datasetNotReady[0]: 'polls': Input should be greater than or equal to 0 (got -1) "
         "(a datasetNotReady fault takes: times, dataset, polls)"),
    ],
    ids=["kind", "not-a-list", "not-an-object", "status-2xx", "status-700", "no-status", "unknown-field", "times-0",
         "fraction", "phase", "description", "polls"],
)
def test_bad_fault_documents_are_refused_with_400(server, document: dict[str, Any], message: str) -> None:
    server.faults.fail_rpc("SaveKernel", status=500)
    answer = requests.post(f"{server.base_url}/_admin/faults", json=document,
                           headers={"X-KKB-Admin-Token": server.admin_token}, timeout=30)
    assert (answer.status_code, answer.json()["message"]) == (400, message)
    assert len(server.faults.snapshot()["rpc"]) == 1  # the faults in force stay


def test_a_body_that_is_not_json_is_refused(server) -> None:
    answer = requests.post(f"{server.base_url}/_admin/faults", data=b"{nope",
                           headers={"X-KKB-Admin-Token": server.admin_token}, timeout=30)
    assert answer.status_code == 400
    assert answer.json()["message"].startswith("the faults document is not JSON: ")


@pytest.mark.parametrize(
    ("document", "stored"),
    [
        ({"rpc": [{"method": "X", "status": 503}]},
         {"rpc": [{"method": "X", "status": 503, "times": 1, "message": "Service unavailable", "html": False,
                   "afterCommit": False}]}),
        ({"rpc": [{"method": "X", "status": 418, "retryAfter": 2}]},
         {"rpc": [{"method": "X", "status": 418, "times": 1, "retryAfter": 2.0, "message": "Injected failure",
                   "html": False, "afterCommit": False}]}),
        ({"kernelFail": [{}]},
         {"kernelFail": [{"kernel": "*", "times": 1, "phase": "commit", "description": "Notebook Threw Exception",
                          "message": "RuntimeError: injected failure (local Kaggle fault)"}]}),
        ({"datasetNotReady": [{}]}, {"datasetNotReady": [{"dataset": "*", "polls": 3, "times": 1}]}),
    ],
    ids=["rpc-message", "rpc-other-status", "kernel-message", "dataset"],
)
def test_missing_fields_are_defaulted(document: dict[str, Any], stored: dict[str, Any]) -> None:
    assert validate_document(document) == {**EMPTY, **stored}


def test_a_bad_faults_file_refuses_the_start_naming_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "faults.json").write_text(json.dumps({"rpc": [{"method": "X", "status": "soon"}]}))
    with pytest.raises(LocalKaggleError, match=r"faults\.json: faults\.rpc\[0\]: 'status': Input should be a valid "
                                               r"integer"):
        LocalKaggle(data)


def test_a_bad_hand_edit_while_running_keeps_the_faults_in_force(server) -> None:
    server.faults.fail_rpc("ListKernels", status=503)
    path = server.store.path("faults.json")
    path.write_text(json.dumps({"rpc": [{"method": "ListKernels", "status": 503, "bogus": 1}]}))
    answer = requests.post(f"{server.base_url}/api/v1/kernels.KernelsApiService/ListKernels", json={}, headers=AUTH,
                           timeout=30)
    assert answer.status_code == 503


# -- workers always finish -------------------------------------------------------------------


def test_a_kernel_fault_without_a_message_over_http_fails_the_rerun_cleanly(api, server, tmp_path: Path) -> None:
    """The audit's crash: this fault left the submission PENDING forever."""
    server.add_competition(make_competition(tmp_path / "competition"))
    admin_client(server).set_faults({"kernelFail": [{"phase": "rerun"}]})
    api.kernels_push(str(make_kernel(tmp_path / "k")))
    assert wait_kernel(api, KERNEL).status.name == "COMPLETE"
    ref = api.competition_submit_code("submission.csv", "m", COMPETITION, KERNEL, 1, quiet=True).ref
    done = wait_submission(api, ref)
    assert (done.status.name, done.error_description) == ("ERROR", "Notebook Threw Exception")


class _Broken(Exception):
    pass


def test_a_worker_error_ends_the_commit_run_as_error_with_the_exception(api, server, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> Any:
        raise _Broken("the sources table is corrupt")

    server.add_competition(make_competition(tmp_path / "competition"))
    monkeypatch.setattr(server.kernels, "mounts", broken)
    api.kernels_push(str(make_kernel(tmp_path / "k")))
    failed = wait_kernel(api, KERNEL)
    assert (failed.status.name, failed.failure_message) == ("ERROR", "Kaggle Error: _Broken: the sources table is corrupt")


def test_a_worker_error_ends_the_submission_as_error_with_the_exception(api, server, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    server.add_competition(make_competition(tmp_path / "competition"))
    api.kernels_push(str(make_kernel(tmp_path / "k")))
    assert wait_kernel(api, KERNEL).status.name == "COMPLETE"

    def broken(*args: Any) -> Any:
        raise KeyError("message")

    monkeypatch.setattr(server.faults, "take_kernel_failure", broken)
    ref = api.competition_submit_code("submission.csv", "m", COMPETITION, KERNEL, 1, quiet=True).ref
    done = wait_submission(api, ref)
    assert (done.status.name, done.error_description) == ("ERROR", "Kaggle Error: KeyError: 'message'")
    limits = api.competition_get_submission_limits(COMPETITION)
    assert limits.num_today == 0  # Kaggle's own errors do not count against the day's allowance
