"""The fault table of each fault × push, submit, status, against the local Kaggle with the real client.

Every row names a fault, the command, and the outcome: success, or the exit code and the message. Faults
come from the local Kaggle's own injection (``LocalKaggle.faults``) where it has one; a 500 answered to
the upload PUT itself and a server that dies in the middle of an upload are made here by wrapping the
server's blob store (the local Kaggle has no fault kind for them). Retries are tiny (``FAST_RETRY``):
nothing here waits long, and nothing asserts on time.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from builder import cli
from builder.errors import EXIT_REMOTE, KkbError
from builder.kkb_runtime.vocabulary import Scenario
from builder.local_kaggle import InstantRunner, LocalKaggle, ServerSettings
from builder.local_kaggle.blobs import PutResult
from builder.local_kaggle.runner import RunRequest, RunResult
from builder.remote.backoff import Backoff
from builder.remote.kaggle_api import KaggleAdapter
from builder.remote.push import push
from builder.remote.queries import QuerySettings, status
from builder.remote.session import PushSettings, Waits
from builder.remote.submit import SubmitSettings, submit
from tests.support.files import KERNELS

pytestmark = [pytest.mark.slow, pytest.mark.loopback]

USER, KEY = "kkb-demo", "local-test-key-0123456789"
KERNEL_ID = "kkb-demo/kkb-minimal-inference"
WEIGHTS = "kkb-demo/kkb-minimal-inference-weights"
CODE = "kkb-demo/kkb-minimal-inference-code"
FAST_RETRY = Backoff(attempts=3, base_seconds=0.01, max_seconds=0.05, total_seconds=30)
FAST_WAITS = Waits(poll_initial_s=0.02, poll_max_s=0.1, run_timeout_s=60, scoring_timeout_s=60, rounds=3,
                   rounds_total_s=30)
NO_FAULTS: dict[str, list[object]] = {"rpc": [], "datasetNotReady": [], "uploadBreak": [], "kernelFail": [], "staleMount": []}


class SampleRunner(InstantRunner):
    """Every run succeeds at once and leaves the competition's sample submission: a real score, no notebook."""

    def run(self, request: RunRequest) -> RunResult:
        result = super().run(request)
        for mount in request.mounts:
            sample = Path(mount.source) / "sample_submission.csv"
            if sample.is_file():
                shutil.copyfile(sample, result.working_dir / "submission.csv")
        return result


def _start(data_dir: Path) -> LocalKaggle:
    local = LocalKaggle(data_dir, port=0, settings=ServerSettings(dataset_ready_seconds=0.0),
                        runner=SampleRunner()).start()
    local.add_user(USER, KEY)
    local.add_competition(KERNELS / "minimal" / "data" / "competition")
    return local


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    local = _start(tmp_path / "kaggle")
    monkeypatch.setenv("KAGGLE_USERNAME", USER)
    monkeypatch.setenv("KAGGLE_KEY", KEY)
    monkeypatch.setenv("KKB_KAGGLE_API", local.base_url)
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    """kernels/minimal, with a dataset wait of 2 s in kernel.toml (which every push must keep to)."""
    copy = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))
    (copy / "kernel.toml").write_text((copy / "kernel.toml").read_text() + "\n[push]\ndataset_timeout_s = 2\n")
    return copy


def _adapter(base_url: str) -> KaggleAdapter:
    return KaggleAdapter.connect(base_url, retry=FAST_RETRY)


# -- faults the local Kaggle cannot inject: the upload PUT itself --------------------------------


def _wrap_uploads(server: LocalKaggle, answer: Callable[[str], int | None]) -> list[int]:
    """Answer each upload PUT with ``answer(file name)`` (None: the real store) after reading its body."""
    real = server.blobs.put
    answered: list[int] = []

    def put(token: str, headers: Callable[[str], str | None], body: Any) -> PutResult:
        meta = server.store.path("blobs", token, "blob.json")
        status = answer(json.loads(meta.read_text())["name"] if meta.is_file() else "")
        if status is None:
            result = real(token, headers, body)
        else:
            real("0" * 32, headers, body)  # an unknown token: the store reads the body and keeps nothing
            result = PutResult(status, {})
        answered.append(result.status)
        return result

    server.blobs.put = put  # type: ignore[method-assign]
    return answered


def upload_answers(status: int, times: int, only: str | None = None) -> Callable[[LocalKaggle], None]:
    def inject(server: LocalKaggle) -> None:
        left = [times]

        def answer(name: str) -> int | None:
            if left[0] <= 0 or (only is not None and name != only):
                return None
            left[0] -= 1
            return status

        _wrap_uploads(server, answer)
    return inject


def server_dies_mid_upload(server: LocalKaggle) -> None:
    def answer(name: str) -> int:
        server.stop()  # from the request's own thread: the listening socket closes, this answer still goes out
        return 503  # the transfer was cut: the client probes where to resume, and finds no server
    _wrap_uploads(server, answer)


def rpc(method: str, status: int, times: int) -> Callable[[LocalKaggle], None]:
    return lambda server: server.faults.fail_rpc(method, status=status, times=times)


def kernel_fails(server: LocalKaggle) -> None:
    server.faults.fail_kernel(KERNEL_ID, phase=Scenario.COMMIT, message="RuntimeError: injected")


# -- the table ----------------------------------------------------------------------------------

OK = None


@dataclass(frozen=True)
class Row:
    command: str                                # push | submit | status
    fault: Callable[[LocalKaggle], None]
    outcome: tuple[int, str] | None             # (exit code, message as a regex with {url}) or OK
    pushed_first: bool = False                  # the fault hits a project pushed once already


ROWS = {
    "push/upload-500-twice": Row("push", upload_answers(500, 2), OK),
    "push/upload-500-always": Row("push", upload_answers(500, 10_000), (
        3, r"Kaggle answered HTTP 500 to the upload of [\w.-]+, gave up after 3 tries in \d+s")),
    "push/upload-403": Row("push", upload_answers(403, 10_000), (3, r"Kaggle answered HTTP 403 to the upload of [\w.-]+")),
    "push/server-dies-mid-upload": Row("push", server_dies_mid_upload, (
        3, r"cannot reach Kaggle at {url} while (uploading [\w.-]+|reading the dataset status \S+): "
           r"connection refused, gave up after 3 tries in \d+s")),
    "push/create-dataset-500-always": Row("push", rpc("CreateDataset", 500, 10_000), (
        3, r"Kaggle answered HTTP 500 while creating the dataset \S+: Internal server error")),
    "push/save-kernel-503-once": Row("push", rpc("SaveKernel", 503, 1), OK),
    "push/dataset-never-ready": Row("push", lambda server: server.faults.stall_dataset("*", polls=10_000), (
        3, rf"timed out after 2s waiting for dataset {WEIGHTS} \(last status: blobs_received\)")),
    "submit/create-submission-500-once": Row("submit", rpc("CreateCodeSubmission", 500, 1), OK, pushed_first=True),
    "submit/get-submission-502-always": Row("submit", rpc("GetSubmission", 502, 10_000), (
        3, r"Kaggle answered HTTP 502 while reading the submission #1: Bad gateway"), pushed_first=True),
    "submit/kernel-run-fails": Row("submit", kernel_fails, (2, rf"kernel run {KERNEL_ID} v1 ended in ERROR: .*")),
    "status/kernel-status-500-once": Row("status", rpc("GetKernelSessionStatus", 500, 1), OK, pushed_first=True),
    "status/kernel-status-500-always": Row("status", rpc("GetKernelSessionStatus", 500, 10_000), (
        3, rf"Kaggle answered HTTP 500 while reading the kernel status {KERNEL_ID} v1: Internal server error"),
        pushed_first=True),
}


def _run(command: str, kernel: Path, base_url: str) -> Any:
    adapter, out_dir = _adapter(base_url), kernel.parent / "build"
    if command == "push":
        return push(PushSettings(kernel_dir=kernel, out_dir=out_dir, adapter=adapter, waits=FAST_WAITS))
    if command == "submit":
        return submit(SubmitSettings(kernel_dir=kernel, out_dir=out_dir, adapter=adapter, waits=FAST_WAITS))
    return status(QuerySettings(kernel_dir=kernel, adapter=adapter))


@pytest.mark.parametrize("row", list(ROWS.values()), ids=list(ROWS))
def test_fault_table(row: Row, server: LocalKaggle, kernel: Path) -> None:
    url = server.base_url
    if row.pushed_first:
        _run("push", kernel, url)
    row.fault(server)
    if row.outcome is OK:
        result = _run(row.command, kernel, url)
        assert server.faults.snapshot() == NO_FAULTS  # the fault fired, and was got over
        if row.command == "push":
            assert (result.weights.version, result.code.version, result.kernel_version) == (1, 1, 1)
        if row.command == "submit":
            assert result.status == "complete" and result.public_score
        if row.command == "status":
            assert result.run_status == "complete"
        return
    code, pattern = row.outcome
    with pytest.raises(KkbError) as caught:
        _run(row.command, kernel, url)
    assert caught.value.exit_code == code
    assert re.fullmatch(pattern.format(url=re.escape(url)), caught.value.message), caught.value.message
    assert "join the competition" not in (caught.value.hint or "") and "metadata" not in (caught.value.hint or "")
    assert KEY not in str(caught.value)


def test_an_upload_that_failed_is_resumed_after_a_restart_on_another_port(tmp_path: Path, kernel: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The client keys its upload state by file path and keeps the upload URL in it: kkb keeps it per server."""
    monkeypatch.setenv("KAGGLE_USERNAME", USER)
    monkeypatch.setenv("KAGGLE_KEY", KEY)
    first = _start(tmp_path / "kaggle")
    first_port = first.port
    try:
        # predict.py is a file at a stable path (rebuilds hard-link it: same size and mtime), the kind of
        # upload the client resumes from its state; the archives of folders are made afresh each time.
        upload_answers(500, 10_000, only="predict.py")(first)
        with pytest.raises(KkbError, match="to the upload of predict.py"):
            _run("push", kernel, first.base_url)
    finally:
        first.stop()
    left = [path for path in (kernel / ".kkb" / "tmp").rglob(".kaggle-uploads-*/*predict.py.json")]
    assert left and f":{first_port}/" in left[0].read_text()  # the dead server's upload URL
    second = _start(tmp_path / "kaggle")  # the same data, another port
    try:
        result = _run("push", kernel, second.base_url)
        assert (result.weights.action, result.code.action, result.kernel_version) == ("unchanged", "created", 1)
        assert {path.name for path in (kernel / ".kkb" / "tmp").iterdir()} == {f"127.0.0.1-{first_port}",
                                                                               f"127.0.0.1-{second.port}"}
    finally:
        second.stop()


# -- no server at all, through the command line: exit 3, "cannot reach", never "join the competition" -----


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(("command", "doing"), [
    ("push", "listing submissions kkb-minimal"),
    ("submit", "listing submissions kkb-minimal"),
    ("status", f"reading the kernel {KERNEL_ID}"),
])
def test_no_server_at_all(command: str, doing: str, kernel: Path, monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    monkeypatch.setenv("KAGGLE_USERNAME", USER)
    monkeypatch.setenv("KAGGLE_KEY", KEY)
    monkeypatch.setenv("KKB_KAGGLE_API", url)
    connect = KaggleAdapter.connect.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(KaggleAdapter, "connect",
                        classmethod(lambda cls, base_url=None, **kw: connect(cls, base_url, retry=FAST_RETRY)))
    assert cli.main([command, str(kernel), "--out", str(kernel.parent / "build")] if command != "status"
                    else [command, str(kernel)]) == EXIT_REMOTE
    err = " ".join(capsys.readouterr().err.split())
    assert re.search(rf"error: cannot reach Kaggle at {re.escape(url)} while {doing}: connection refused, "
                     r"gave up after 3 tries in \d+s", err), err
    assert "join the competition" not in err and "competition.slug" not in err and KEY not in err
