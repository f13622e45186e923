"""push / submit end to end: the real ``kaggle`` client over loopback HTTP against the local Kaggle.

No mock of the client: every call below goes through ``KaggleApi`` → kagglesdk → requests → the
local Kaggle's HTTP server, which runs kernels in the sandbox and scores submissions. Server-side
evidence (blobs received, versions stored) is read from the local Kaggle, not from kkb.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder import cli
from builder.errors import EXIT_AUTH, AuthError, KernelFailed, RemoteError
from builder.kkb_runtime.vocabulary import Scenario
from builder.local_kaggle import InstantRunner, LocalKaggle
from builder.remote.push import PushResult, push
from builder.remote.queries import QuerySettings, logs
from builder.remote.session import PushSettings
from builder.remote.submit import SubmitSettings, submit
from tests.support.demo_kaggle import DEMO_KEY, LOOPBACK_WAITS, demo_adapter, serve_local_kaggle
from tests.support.files import KERNELS, REPO

pytestmark = [pytest.mark.slow, pytest.mark.loopback]

KERNEL_ID = "kkb-demo/kkb-minimal-inference"
WEIGHTS = "kkb-demo/kkb-minimal-inference-weights"
CODE = "kkb-demo/kkb-minimal-inference-code"


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    """A local Kaggle whose kernel runs succeed at once: for tests about pushing."""
    yield from serve_local_kaggle(tmp_path, monkeypatch, InstantRunner())


@pytest.fixture
def sandbox_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    """A local Kaggle that runs kernels in the real sandbox and scores them."""
    yield from serve_local_kaggle(tmp_path, monkeypatch, None)


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    return Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))


def _push(kernel: Path, server: LocalKaggle) -> PushResult:
    return push(PushSettings(kernel_dir=kernel, out_dir=kernel.parent / "build", adapter=demo_adapter(server), waits=LOOPBACK_WAITS))


def _received(server: LocalKaggle) -> dict[str, int]:
    """What the server received: blob name → bytes, over every upload ever started."""
    blobs = {}
    for meta_path in sorted((server.store.root / "blobs").glob("*/blob.json")):
        meta = json.loads(meta_path.read_text())
        blobs[f"{meta['name']}#{meta_path.parent.name[:6]}"] = (meta_path.parent / "data").stat().st_size
    return blobs


def _versions(server: LocalKaggle, ref: str) -> int | None:
    return demo_adapter(server).dataset_version(ref)


def test_first_push_then_a_noop_push_uploads_zero_bytes(kernel: Path, server: LocalKaggle) -> None:
    first = _push(kernel, server)
    assert first.weights is not None
    assert (first.weights.action, first.code.action, first.kernel_action) == ("created", "created", "pushed")
    received = _received(server)
    assert sum(received.values()) == first.uploaded_bytes > 0
    assert any(name.startswith("weights.tar#") for name in received)  # the subfolder went up as a tar (dir_mode)
    adapter = demo_adapter(server)
    assert adapter.kernel_version(KERNEL_ID) == 1
    # The notebook reads its inputs from these: the tar came back as a folder on the server.
    assert adapter.dataset_file(WEIGHTS, "weights/linear.json") == (kernel / "weights" / "linear.json").read_bytes()

    again = _push(kernel, server)
    assert _received(server) == received and again.uploaded_bytes == 0
    assert again.weights is not None
    assert (again.weights.action, again.code.action, again.kernel_action) == ("unchanged",) * 3
    assert (_versions(server, WEIGHTS), _versions(server, CODE), adapter.kernel_version(KERNEL_ID)) == (1, 1, 1)


def test_code_only_change_does_not_upload_weights(kernel: Path, server: LocalKaggle) -> None:
    _push(kernel, server)
    before = _received(server)
    (kernel / "predict.py").write_text((kernel / "predict.py").read_text() + "\n# tuned\n")
    result = _push(kernel, server)
    new = {name: size for name, size in _received(server).items() if name not in before}
    assert new and not any(name.startswith("weights") for name in new)
    assert result.weights is not None
    assert result.weights.action == "unchanged" and result.weights.uploaded_bytes == 0
    assert (result.code.action, result.code.version, result.kernel_version) == ("versioned", 2, 2)
    assert (_versions(server, WEIGHTS), _versions(server, CODE)) == (1, 2)


@pytest.mark.parametrize(
    "inject",
    [
        pytest.param(lambda f: f.fail_rpc("CreateDataset", status=429, times=2, retry_after=0), id="429-create"),
        pytest.param(lambda f: f.fail_rpc("CreateDataset", status=500, times=1), id="500-create"),
        pytest.param(lambda f: f.fail_rpc("GetDatasetStatus", status=503, times=3), id="503-status"),
        pytest.param(lambda f: f.fail_rpc("StartBlobUpload", status=500, times=1), id="500-start-upload"),
        pytest.param(lambda f: f.fail_rpc("SaveKernel", status=502, times=1), id="502-save-kernel"),
        pytest.param(lambda f: f.stall_dataset("*", polls=4), id="dataset-not-ready"),
        pytest.param(lambda f: f.break_upload(times=1, fraction=0.5), id="upload-broken-halfway"),
    ],
)
def test_push_recovers_from_injected_faults(kernel: Path, server: LocalKaggle, inject) -> None:  # type: ignore[no-untyped-def]
    inject(server.faults)
    result = _push(kernel, server)
    assert server.faults.snapshot() == {"rpc": [], "datasetNotReady": [], "uploadBreak": [], "kernelFail": [], "staleMount": []}
    # Exactly one version of everything, and the content arrived whole.
    assert result.weights is not None
    assert (result.weights.version, result.code.version, result.kernel_version) == (1, 1, 1)
    adapter = demo_adapter(server)
    assert (_versions(server, WEIGHTS), _versions(server, CODE), adapter.kernel_version(KERNEL_ID)) == (1, 1, 1)
    manifest = json.loads(adapter.dataset_file(WEIGHTS, "manifest.json") or b"{}")
    assert manifest["content_hash"] == result.weights.content_hash
    assert adapter.dataset_file(WEIGHTS, "weights/ridge.json") == (kernel / "weights" / "ridge.json").read_bytes()


def test_kernel_failure_is_shown_with_its_log(kernel: Path, sandbox_server: LocalKaggle) -> None:
    sandbox_server.faults.fail_kernel(KERNEL_ID, phase=Scenario.COMMIT, message="RuntimeError: the weights are corrupt")
    with pytest.raises(KernelFailed) as caught:
        submit(SubmitSettings(kernel_dir=kernel, out_dir=kernel.parent / "build", adapter=demo_adapter(sandbox_server), waits=LOOPBACK_WAITS))
    text = str(caught.value)
    assert f"kernel run {KERNEL_ID} v1 ended in ERROR" in text and "RuntimeError: the weights are corrupt" in text
    assert caught.value.exit_code == 2 and f"kkb logs {kernel} --version 1" in (caught.value.hint or "")
    assert demo_adapter(sandbox_server).submissions("kkb-minimal") == []  # nothing was submitted
    log = logs(QuerySettings(kernel_dir=kernel, adapter=demo_adapter(sandbox_server)))
    text = "".join(entry["data"] for entry in log.entries)
    assert log.kernel_version == 1 and "Traceback (most recent call last)" in text and "the weights are corrupt" in text


def test_a_real_exception_in_the_kernel_is_shown_from_the_kaggle_log(kernel: Path, sandbox_server: LocalKaggle) -> None:
    spec = (kernel / "kernel.toml").read_text().replace("[fast_commit]\nenabled = true", "[fast_commit]\nenabled = false")
    (kernel / "kernel.toml").write_text(spec)
    (kernel / "predict.py").write_text('raise ValueError("kkb-e2e: the weights are corrupt")\n')
    with pytest.raises(KernelFailed) as caught:
        submit(SubmitSettings(kernel_dir=kernel, out_dir=kernel.parent / "build", adapter=demo_adapter(sandbox_server), waits=LOOPBACK_WAITS))
    assert "ended in ERROR" in caught.value.message
    assert 'ValueError: kkb-e2e: the weights are corrupt' in caught.value.message


def test_submission_error_names_kaggles_description(kernel: Path, sandbox_server: LocalKaggle) -> None:
    sandbox_server.faults.fail_kernel(KERNEL_ID, phase=Scenario.RERUN, description="Submission CSV Not Found")
    with pytest.raises(KernelFailed) as caught:
        submit(SubmitSettings(kernel_dir=kernel, out_dir=kernel.parent / "build", adapter=demo_adapter(sandbox_server), waits=LOOPBACK_WAITS))
    assert "submission #1" in caught.value.message and "Submission CSV Not Found" in caught.value.message
    assert "kkb dry-run" in (caught.value.hint or "") and "[competition] submission_file" in (caught.value.hint or "")


def test_bad_credentials(kernel: Path, server: LocalKaggle, monkeypatch: pytest.MonkeyPatch,
                         capsys: pytest.CaptureFixture[str]) -> None:
    wrong = "not-the-key-9876543210"
    monkeypatch.setenv("KAGGLE_KEY", wrong)
    with pytest.raises(AuthError):
        _push(kernel, server)
    assert cli.main(["push", str(kernel), "--out", str(kernel.parent / "build")]) == EXIT_AUTH
    out, err = capsys.readouterr()
    assert "HTTP 401" in err and "KAGGLE_USERNAME" in err
    assert wrong not in out + err and DEMO_KEY not in out + err


def test_demo_script_end_to_end_with_the_minimal_kernel(tmp_path: Path) -> None:
    """`make demo` runs this script on kernels/reference (torch, ~40 s); the minimal kernel takes the same path."""
    history_file = KERNELS / "minimal" / ".kkb" / "history.jsonl"
    before = history_file.read_bytes() if history_file.exists() else None
    done = subprocess.run([sys.executable, "-m", "builder.demo", "--kernel", str(KERNELS / "minimal")],
                          capture_output=True, text=True, cwd=REPO, env=dict(os.environ), timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "demo: local Kaggle at http://127.0.0.1:" in done.stdout
    assert "public score" in done.stdout and "demo: public score 0." in done.stdout
    assert "submission #1: kkb-demo/kkb-minimal-inference v1 → kkb-minimal" in done.stdout
    assert "uploaded 0 bytes" not in done.stdout  # a first push uploads both datasets
    history_table = done.stdout.split("public score", 1)[1]
    assert "push" in history_table and "#1" in history_table and "complete" in history_table
    # The demo works on a scratch copy: the repository's project keeps no demo history.
    assert (history_file.read_bytes() if history_file.exists() else None) == before


def test_access_token_only(kernel: Path, server: LocalKaggle, monkeypatch: pytest.MonkeyPatch) -> None:
    token = server.add_user("kkb-demo", DEMO_KEY)
    monkeypatch.delenv("KAGGLE_USERNAME")
    monkeypatch.delenv("KAGGLE_KEY")
    monkeypatch.setenv("KAGGLE_API_TOKEN", token)
    result = _push(kernel, server)
    assert result.kernel_version == 1 and demo_adapter(server).username == "kkb-demo"
    monkeypatch.setenv("KAGGLE_API_TOKEN", "not-a-valid-token")
    with pytest.raises(AuthError, match="no Kaggle credentials found"):  # the client drops a token Kaggle rejects
        demo_adapter(server)


def test_upload_state_stays_in_the_projects_private_folder(kernel: Path, server: LocalKaggle) -> None:
    server.faults.break_upload(times=1, fraction=0.5)
    _push(kernel, server)
    private = kernel / ".kkb" / "tmp"
    assert private.is_dir() and private.stat().st_mode & 0o077 == 0
    assert any(private.glob(f"127.0.0.1-{server.port}/.kaggle-uploads-*"))
    assert not any(Path(tempfile.gettempdir()).glob(".kaggle-uploads-*"))


def test_unknown_competition_uploads_nothing(kernel: Path, server: LocalKaggle) -> None:
    spec = (kernel / "kernel.toml").read_text().replace('slug = "kkb-minimal"', 'slug = "kkb-minimall"')
    (kernel / "kernel.toml").write_text(spec)
    with pytest.raises(RemoteError) as caught:
        _push(kernel, server)
    assert caught.value.message.startswith(f"{kernel / 'kernel.toml'}: competition.slug 'kkb-minimall': ")
    assert "kaggle.com/competitions/<slug>" in (caught.value.hint or "")
    assert _received(server) == {}  # refused before any dataset went up
