"""builder.remote.push against a stub at the adapter seam (fast; the wire is covered in test_push_e2e.py).

``FakeKaggle`` (tests/support/fake_kaggle.py) keeps datasets, kernel versions, runs and submissions in
memory and exposes the same methods as :class:`builder.remote.kaggle_api.KaggleAdapter`. It lets each test
script server behaviour that is awkward over HTTP: a call that succeeds on the server but fails on the way
back, a push interrupted between Kaggle acting and kkb recording it.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from builder.errors import KernelFailed, RemoteError
from builder.remote.hints import dry_run_hint, exception_tail
from builder.remote.history import DATASET_INTENT, KERNEL_INTENT, PUSH, SUBMISSION, History
from builder.remote.kaggle_api import KernelPushed
from builder.remote.push import push
from builder.remote.queries import QuerySettings, history, logs, status
from builder.remote.session import ProgressEvent, PushSettings, Waits
from builder.remote.submit import SubmitSettings, submit
from tests.support.fake_kaggle import FAKE_WAITS, FakeKaggle
from tests.support.files import KERNELS


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    return Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))


def _field(record: dict[str, Any] | None, key: str) -> Any:
    """``key`` of a history record that must be there."""
    assert record is not None
    return record[key]


def _push(kernel: Path, fake: FakeKaggle, events: list[ProgressEvent] | None = None):
    return push(PushSettings(kernel_dir=kernel, out_dir=kernel.parent / "build", adapter=fake, waits=FAKE_WAITS,  # type: ignore[arg-type]
                             progress=events.append if events is not None else None))


def test_first_push_creates_both_datasets_and_a_kernel_version(kernel: Path) -> None:
    fake = FakeKaggle()
    events: list[ProgressEvent] = []
    result = _push(kernel, fake, events)
    assert fake.calls == ["create kkb-demo/kkb-minimal-inference-weights", "create kkb-demo/kkb-minimal-inference-code",
                          "kernel kkb-demo/kkb-minimal-inference"]
    assert (result.weights.action, result.code.action, result.kernel_action) == ("created", "created", "pushed")
    assert (result.kernel_version, result.weights.version, result.code.version) == (1, 1, 1)
    assert result.uploaded_bytes == fake.uploaded_bytes > 0
    assert _field(History.for_kernel(kernel).last(PUSH), "kernel_version") == 1
    assert any(e.stage == "build" for e in events) and any(e.stage == "kernel" for e in events)


def test_second_push_uploads_nothing_and_keeps_the_kernel_version(kernel: Path) -> None:
    fake = FakeKaggle()
    _push(kernel, fake)
    fake.calls.clear()
    result = _push(kernel, fake)
    assert fake.calls == [] and result.uploaded_bytes == 0
    assert (result.weights.action, result.code.action, result.kernel_action) == ("unchanged",) * 3
    assert result.kernel_version == 1


def test_code_change_versions_code_only(kernel: Path) -> None:
    fake = FakeKaggle()
    first = _push(kernel, fake)
    fake.calls.clear()
    (kernel / "predict.py").write_text((kernel / "predict.py").read_text() + "\n# a code change\n")
    result = _push(kernel, fake)
    assert fake.calls == ["version kkb-demo/kkb-minimal-inference-code", "kernel kkb-demo/kkb-minimal-inference"]
    assert result.weights.action == "unchanged" and result.weights.uploaded_bytes == 0
    assert result.code.action == "versioned" and result.code.version == 2 and result.kernel_version == 2
    assert result.uploaded_bytes == result.code.uploaded_bytes > 0
    assert result.weights.content_hash == first.weights.content_hash != "" and result.code.content_hash != first.code.content_hash


def test_waits_for_a_new_version_to_be_ready(kernel: Path) -> None:
    fake = FakeKaggle(not_ready_polls=3)
    events: list[ProgressEvent] = []
    _push(kernel, fake, events)
    waiting = [e.message for e in events if e.waiting]
    assert any("blobs_received" in message for message in waiting) and len(fake.slept) >= 3


def test_dataset_never_ready_times_out_with_a_hint(kernel: Path) -> None:
    fake = FakeKaggle(not_ready_polls=10_000)
    vars(fake)["sleep"] = time.sleep  # real time must pass for a timeout
    waits = Waits(poll_initial_s=0.01, poll_max_s=0.01, dataset_timeout_s=0.05)
    with pytest.raises(RemoteError, match=r"timed out after 0.05s waiting for dataset kkb-demo/kkb-minimal-inference-weights"):
        push(PushSettings(kernel_dir=kernel, out_dir=kernel.parent / "build", adapter=fake, waits=waits))  # type: ignore[arg-type]


def test_dataset_created_despite_an_error_answer_is_not_created_twice(kernel: Path) -> None:
    fake = FakeKaggle(fail_after_acting={"dataset"})
    result = _push(kernel, fake)
    assert len(fake.datasets["kkb-demo/kkb-minimal-inference-weights"]) == 1
    assert result.weights.action == "adopted" and result.weights.version == 1  # found on Kaggle, not re-uploaded


def test_kernel_pushed_despite_an_error_answer_is_adopted(kernel: Path) -> None:
    fake = FakeKaggle(fail_after_acting={"kernel"})
    result = _push(kernel, fake)
    assert len(fake.kernels["kkb-demo/kkb-minimal-inference"]) == 1
    assert (result.kernel_action, result.kernel_version) == ("adopted", 1)


def test_interrupted_push_is_continued_without_a_duplicate_kernel_version(kernel: Path) -> None:
    fake = FakeKaggle()
    _push(kernel, fake)
    (kernel / "predict.py").write_text((kernel / "predict.py").read_text() + "\n# change\n")
    history = History.for_kernel(kernel)
    # Simulate a crash right after Kaggle created kernel v2: the intent is recorded, the push is not.
    original = fake.push_kernel

    def crash(folder: Path, **kwargs: Any) -> KernelPushed:
        original(folder, **kwargs)
        raise KeyboardInterrupt

    fake.push_kernel = crash  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        _push(kernel, fake)
    assert history.last(KERNEL_INTENT) is not None and _field(history.last(PUSH), "kernel_version") == 1
    fake.push_kernel = original  # type: ignore[method-assign]
    fake.calls.clear()
    result = _push(kernel, fake)
    assert fake.calls == [] and (result.kernel_action, result.kernel_version) == ("adopted", 2)
    assert len(fake.kernels["kkb-demo/kkb-minimal-inference"]) == 2


def test_interrupted_dataset_upload_is_adopted_when_kaggle_cannot_show_the_manifest(kernel: Path) -> None:
    fake = FakeKaggle()
    fake.dataset_file = lambda ref, name: None  # type: ignore[method-assign]
    _push(kernel, fake)
    (kernel / "predict.py").write_text("# new code\n")
    original = fake.version_dataset

    def crash(folder: Path, notes: str) -> None:
        original(folder, notes)
        raise KeyboardInterrupt

    fake.version_dataset = crash  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        _push(kernel, fake)
    assert _field(History.for_kernel(kernel).last(DATASET_INTENT), "version_before") == 1
    fake.version_dataset = original  # type: ignore[method-assign]
    fake.calls.clear()
    result = _push(kernel, fake)
    assert result.code.action == "adopted" and result.code.version == 2
    assert fake.calls == ["kernel kkb-demo/kkb-minimal-inference"]


# -- submit ------------------------------------------------------------------------------------------


def _submit(kernel: Path, fake: FakeKaggle, **kwargs: Any):
    return submit(SubmitSettings(kernel_dir=kernel, out_dir=kernel.parent / "build", adapter=fake, waits=FAKE_WAITS,  # type: ignore[arg-type]
                                 **kwargs))


def test_submit_pushes_waits_submits_and_returns_the_score(kernel: Path) -> None:
    fake = FakeKaggle()
    result = _submit(kernel, fake)
    assert (result.public_score, result.submission_ref, result.kernel_version) == ("0.875", 1, 1)
    assert fake.calls[-1] == "submit kkb-demo/kkb-minimal-inference v1"
    rows = history(kernel)
    assert [r.kind for r in rows] == ["push", "run", "submission"] and rows[2].score == "0.875"
    assert rows[2].code_hash == rows[0].code_hash != ""
    assert (rows[1].status, rows[1].session, rows[1].billed_seconds) == ("complete", "CPU", None)  # a CPU run bills no quota


def test_submitting_the_same_version_again_reuses_the_submission(kernel: Path) -> None:
    fake = FakeKaggle()
    _submit(kernel, fake)
    again = _submit(kernel, fake)
    assert again.submission_ref == 1 and len(fake.submissions_made) == 1
    third = _submit(kernel, fake, resubmit=True)
    assert third.submission_ref == 2


def test_submission_made_despite_a_dropped_answer_is_adopted(kernel: Path) -> None:
    fake = FakeKaggle(fail_after_acting={"submit"})
    result = _submit(kernel, fake)
    assert result.submission_ref == 1 and len(fake.submissions_made) == 1
    assert _field(History.for_kernel(kernel).last(SUBMISSION), "ref") == 1


def test_kernel_failure_shows_the_exception_from_the_log(kernel: Path) -> None:
    fake = FakeKaggle(run_status="error", run_log=[
        {"stream_name": "stdout", "time": 1.0, "data": "loading\n"},
        {"stream_name": "stderr", "time": 2.0, "data": "Traceback (most recent call last):\n  File \"x.py\", line 3\n"},
        {"stream_name": "stderr", "time": 2.1, "data": "ValueError: bad weights\n"},
    ])
    with pytest.raises(KernelFailed) as caught:
        _submit(kernel, fake)
    text = str(caught.value)
    assert "ended in ERROR: Notebook failed" in text and "ValueError: bad weights" in text and "loading" not in text
    assert caught.value.exit_code == 2 and "kkb logs" in (caught.value.hint or "")
    assert not fake.submissions_made


def test_submission_error_names_kaggles_description_and_the_dry_run_check(kernel: Path) -> None:
    fake = FakeKaggle(score=("error", "", "Submission CSV Not Found"))
    with pytest.raises(KernelFailed) as caught:
        _submit(kernel, fake)
    assert "failed: Submission CSV Not Found" in caught.value.message
    assert "writes [competition] submission_file" in (caught.value.hint or "") and "kkb dry-run" in (caught.value.hint or "")


def test_submit_a_given_version_does_not_push(kernel: Path) -> None:
    fake = FakeKaggle()
    fake.kernels["kkb-demo/kkb-minimal-inference"] = [{}, {}, {}]
    result = _submit(kernel, fake, version=3)
    assert fake.calls == ["submit kkb-demo/kkb-minimal-inference v3"] and result.push is None


# -- status, logs, helpers -----------------------------------------------------------------------------


def test_status_and_logs_use_the_last_push(kernel: Path) -> None:
    fake = FakeKaggle(run_log=[{"stream_name": "stdout", "time": 0.5, "data": "hello\n"}])
    _submit(kernel, fake)
    result = status(QuerySettings(kernel_dir=kernel, adapter=fake))  # type: ignore[arg-type]
    assert (result.kernel_id, result.kernel_version, result.run_status) == ("kkb-demo/kkb-minimal-inference", 1, "complete")
    assert result.submission is not None and result.submission.public_score == "0.875"
    log = logs(QuerySettings(kernel_dir=kernel, adapter=fake))  # type: ignore[arg-type]
    assert log.kernel_version == 1 and log.entries[0]["data"] == "hello\n"


def test_exception_tail_and_dry_run_hints() -> None:
    entries = [{"data": "a\nTraceback (most recent call last):\n  old\nKeyError: 1\n"},
               {"data": "more\nTraceback (most recent call last):\n  File 'y'\nRuntimeError: last\n"}]
    assert exception_tail(entries) == "Traceback (most recent call last):\n  File 'y'\nRuntimeError: last"
    assert exception_tail([{"data": "no traceback\n"}]) == "no traceback"
    assert "time_limit_hours" in dry_run_hint("Notebook Timeout", "kernels/x")
    assert "sample_submission.csv" in dry_run_hint("Submission Scoring Error", "kernels/x")
    assert "--resubmit" in dry_run_hint("Kaggle Error", "kernels/x")
    assert "kkb dry-run kernels/x" in dry_run_hint("something new", "kernels/x")


# -- the CLI commands (stubbed at the same seam) --------------------------------------------------------


@pytest.fixture
def cli_fake(monkeypatch: pytest.MonkeyPatch) -> FakeKaggle:
    from builder.cli import views
    from builder.remote import kaggle_api

    fake = FakeKaggle()
    monkeypatch.setattr(kaggle_api.KaggleAdapter, "connect", classmethod(lambda cls, base_url=None, **kw: fake))
    monkeypatch.setenv("COLUMNS", "160")
    monkeypatch.setattr(views.console, "_width", None)  # a width rich took from COLUMNS at import would win
    return fake


def test_cli_push_submit_history_status_logs(kernel: Path, cli_fake: FakeKaggle, capsys: pytest.CaptureFixture[str]) -> None:
    from builder import cli

    out_dir = str(kernel.parent / "build")
    assert cli.main(["push", str(kernel), "--out", out_dir]) == 0
    out = capsys.readouterr().out
    assert "pushed kkb-demo/kkb-minimal-inference v1" in out and "created" in out
    assert cli.main(["push", str(kernel), "--out", out_dir]) == 0
    assert "uploaded 0 bytes" in capsys.readouterr().out
    assert cli.main(["submit", str(kernel), "--out", out_dir]) == 0
    assert "public score 0.875" in capsys.readouterr().out
    assert cli.main(["history", str(kernel)]) == 0
    table = capsys.readouterr().out
    assert "submission" in table and "#1" in table and "0.875" in table
    assert cli.main(["status", str(kernel)]) == 0
    assert "run complete" in capsys.readouterr().out
    cli_fake.run_log = [{"stream_name": "stdout", "time": 0.1, "data": "hello from the kernel\n"}]
    assert cli.main(["logs", str(kernel)]) == 0
    assert "hello from the kernel" in capsys.readouterr().out


def test_cli_submission_error_exit_code_and_hint(kernel: Path, cli_fake: FakeKaggle,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from builder import cli

    cli_fake.score = ("error", "", "Notebook Timeout")
    assert cli.main(["submit", str(kernel), "--out", str(kernel.parent / "build")]) == 2
    err = capsys.readouterr().err
    assert "Notebook Timeout" in err and "hint:" in err and "time_limit_hours" in err
