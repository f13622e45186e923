"""Kernels on the local Kaggle: push, queue, run (fake runner at the seam), status, output, log."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from builder.local_kaggle import ServerSettings
from tests.support.local_kaggle import (
    COMPETITION,
    OTHER,
    OTHER_KEY,
    USER,
    FakeRunner,
    GatedRunner,
    connect_as,
    kernel_status,
    make_competition,
    make_dataset,
    make_kernel,
    start_server,
    wait_for,
    wait_kernel,
)

pytestmark = pytest.mark.loopback  # every test talks to a local Kaggle over HTTP

KERNEL = f"{USER}/parity-kernel"


@pytest.fixture
def competition(kaggle_server, tmp_path: Path) -> Path:
    folder = make_competition(tmp_path / "competition")
    kaggle_server.add_competition(folder)
    return folder


def test_push_runs_and_serves_output_and_log(api, kaggle_server, fake_runner, competition, tmp_path: Path) -> None:
    pushed = api.kernels_push(str(make_kernel(tmp_path / "k")))
    assert (pushed.error, pushed.version_number) == ("", 1)
    assert pushed.url == f"{kaggle_server.base_url}/code/{KERNEL}"

    status = wait_kernel(api, KERNEL)
    assert (status.status.name, status.failure_message) == ("COMPLETE", "")
    request = fake_runner.calls[0]
    assert request.rerun is False
    assert [(m.target, m.source.name) for m in request.mounts] == [(f"competitions/{COMPETITION}", "public")]

    files, _ = api.kernels_output(KERNEL, str(tmp_path / "out"))
    assert sorted(Path(f).name for f in files) == ["parity-kernel.log", "submission.csv"]
    assert (tmp_path / "out" / "submission.csv").read_text().splitlines() == ["id,label", "1,1", "2,0", "3,1"]
    log = json.loads((tmp_path / "out" / "parity-kernel.log").read_text())
    assert log[0]["stream_name"] == "stdout" and "rows: 3 rerun: False" in log[0]["data"]


def test_status_moves_from_queued_to_running_to_complete(tmp_path: Path, monkeypatch) -> None:
    gated = GatedRunner()
    with start_server(tmp_path / "data", runner=gated) as srv:
        srv.add_competition(make_competition(tmp_path / "competition"))
        api = connect_as(monkeypatch, srv.base_url)
        api.kernels_push(str(make_kernel(tmp_path / "a", title="First Kernel")))
        api.kernels_push(str(make_kernel(tmp_path / "b", title="Second Kernel")))
        gated.started.wait(10)
        assert kernel_status(api, f"{USER}/first-kernel") == "RUNNING"
        assert kernel_status(api, f"{USER}/second-kernel") == "QUEUED"  # one worker: it waits its turn
        gated.gate.set()
        assert wait_kernel(api, f"{USER}/second-kernel").status.name == "COMPLETE"


def test_logs_follow_streams_until_the_run_ends(tmp_path: Path, monkeypatch) -> None:
    gated = GatedRunner()
    with start_server(tmp_path / "data", runner=gated) as srv:
        srv.add_competition(make_competition(tmp_path / "competition"))
        api = connect_as(monkeypatch, srv.base_url)
        api.kernels_push(str(make_kernel(tmp_path / "k")))
        events: list[dict] = []
        follower = threading.Thread(target=lambda: events.extend(api.kernels_logs_stream(KERNEL)))
        follower.start()
        gated.started.wait(10)
        assert events == []  # held open while the kernel runs
        gated.gate.set()
        follower.join(20)
        assert [e["stream_name"] for e in events] == ["stdout"] and "rows: 3" in events[0]["data"]
        # Once the run is over the stored log is served as one JSON document.
        assert [e["stream_name"] for e in api.kernels_logs_stream(KERNEL)] == ["stdout"]


def test_versions_are_numbered_and_queryable(api, competition, tmp_path: Path) -> None:
    folder = make_kernel(tmp_path / "k")
    assert api.kernels_push(str(folder)).version_number == 1
    wait_kernel(api, KERNEL)
    (folder / "kernel.ipynb").write_text(json.dumps(json.loads((folder / "kernel.ipynb").read_text())))
    assert api.kernels_push(str(folder)).version_number == 2
    wait_kernel(api, KERNEL)
    assert api.kernels_status(f"{KERNEL}/1").status.name == "COMPLETE"
    pulled = api.kernels_pull(KERNEL, str(tmp_path / "pulled"), metadata=True)
    meta = json.loads((Path(pulled) / "kernel-metadata.json").read_text())
    assert meta["id"] == KERNEL and meta["competition_sources"] == [COMPETITION]


def test_a_new_kernels_slug_comes_from_its_title(api, competition, tmp_path: Path) -> None:
    pushed = api.kernels_push(str(make_kernel(tmp_path / "k", title="Bar Baz Kernel", kernel_id=f"{USER}/foo-kernel")))
    assert pushed.error == ""
    assert pushed.url.endswith(f"/code/{USER}/bar-baz-kernel")
    assert wait_kernel(api, f"{USER}/bar-baz-kernel").status.name == "COMPLETE"
    with pytest.raises(ValueError, match="Permission 'kernels.get' was denied"):
        api.kernels_status(f"{USER}/foo-kernel")


def test_invalid_sources_are_reported_and_not_attached(api, fake_runner, competition, tmp_path: Path) -> None:
    folder = make_kernel(tmp_path / "k", datasets=[f"{USER}/no-such-data", f"{OTHER}/private-data"],
                         competitions=[COMPETITION, "no-such-competition"])
    pushed = api.kernels_push(str(folder))
    assert pushed.error == ""
    assert pushed.invalid_dataset_sources == [f"{USER}/no-such-data", f"{OTHER}/private-data"]
    assert pushed.invalid_competition_sources == ["no-such-competition"]
    wait_kernel(api, KERNEL)
    assert [m.target for m in fake_runner.calls[0].mounts] == [f"competitions/{COMPETITION}"]


def test_a_dataset_version_that_is_not_ready_is_not_mounted(tmp_path: Path, monkeypatch) -> None:
    fake = FakeRunner()
    settings = ServerSettings(dataset_ready_seconds=3600)  # never ready during this test
    with start_server(tmp_path / "data", runner=fake, settings=settings) as srv:
        srv.add_competition(make_competition(tmp_path / "competition"))
        api = connect_as(monkeypatch, srv.base_url)
        api.dataset_create_new(str(make_dataset(tmp_path / "ds")), quiet=True)
        pushed = api.kernels_push(str(make_kernel(tmp_path / "k", datasets=[f"{USER}/tiny-numbers"])))
        assert pushed.invalid_dataset_sources == [f"{USER}/tiny-numbers"]  # no READY version yet


def test_the_kernel_mounts_the_newest_ready_dataset_version(api, fake_runner, competition, tmp_path: Path) -> None:
    api.dataset_create_new(str(make_dataset(tmp_path / "ds")), quiet=True)
    assert api.dataset_status(f"{USER}/tiny-numbers") == "ready"
    code = ("import os\nroot = os.environ['KKB_KAGGLE_ROOT']\n"
            "print(open(os.path.join(root, 'input/datasets/alice/tiny-numbers/numbers.csv')).read())\n")
    api.kernels_push(str(make_kernel(tmp_path / "k", code=code, datasets=[f"{USER}/tiny-numbers"])))
    assert wait_kernel(api, KERNEL).status.name == "COMPLETE"
    assert [m.target for m in fake_runner.calls[0].mounts] == [f"datasets/{USER}/tiny-numbers", f"competitions/{COMPETITION}"]
    assert json.loads(api.kernels_logs(KERNEL))[0]["data"] == "n\n1\n2\n3\n\n"


def test_a_failing_kernel_ends_in_error_with_its_traceback(api, competition, tmp_path: Path) -> None:
    api.kernels_push(str(make_kernel(tmp_path / "k", code="raise ValueError('bad input shape')")))
    status = wait_kernel(api, KERNEL)
    assert status.status.name == "ERROR"
    assert status.failure_message == "ValueError: bad input shape"
    assert "Traceback" in api.kernels_logs(KERNEL)


def test_push_errors_come_back_in_the_body(api, kaggle_server, competition, tmp_path: Path, monkeypatch) -> None:
    api.kernels_push(str(make_kernel(tmp_path / "k")))
    bob = connect_as(monkeypatch, kaggle_server.base_url, OTHER, OTHER_KEY)
    stolen = bob.kernels_push(str(make_kernel(tmp_path / "bob", kernel_id=KERNEL)))
    assert stolen.error == "Notebook not found"
    with pytest.raises(ValueError, match="Permission 'kernels.get' was denied"):
        bob.kernels_status(KERNEL)  # private kernel of another user


def test_quick_save_makes_a_version_without_a_run(api, fake_runner, competition, tmp_path: Path) -> None:
    pushed = api.kernels_push(str(make_kernel(tmp_path / "k")), no_run=True)
    assert pushed.version_number == 1
    assert kernel_status(api, KERNEL) == "NEW_SCRIPT"
    assert fake_runner.calls == []


def test_script_kernels_run_too(api, competition, tmp_path: Path) -> None:
    folder = make_kernel(tmp_path / "k")
    meta = json.loads((folder / "kernel-metadata.json").read_text())
    (folder / "kernel-metadata.json").write_text(json.dumps({**meta, "kernel_type": "script", "code_file": "run.py"}))
    (folder / "run.py").write_text("open('out.txt', 'w').write('script ran')\n")
    api.kernels_push(str(folder))
    assert wait_kernel(api, KERNEL).status.name == "COMPLETE"
    files, _ = api.kernels_output(KERNEL, str(tmp_path / "out"))
    assert (tmp_path / "out" / "out.txt").read_text() == "script ran"


def test_a_run_interrupted_by_a_crash_is_run_again_after_restart(tmp_path: Path, monkeypatch) -> None:
    data = tmp_path / "data"
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # the simulated crash kills a thread
    crashing = FakeRunner(crash=True)
    with start_server(data, runner=crashing) as first:
        first.add_competition(make_competition(tmp_path / "competition"))
        api = connect_as(monkeypatch, first.base_url)
        api.kernels_push(str(make_kernel(tmp_path / "k")))
        wait_for(lambda: crashing.calls)
        wait_for(lambda: first.wait_idle(0.1))
        assert kernel_status(api, KERNEL) == "RUNNING"  # left behind by the crash
    again = FakeRunner()
    with start_server(data, runner=again, users=False) as second:
        api = connect_as(monkeypatch, second.base_url)
        assert wait_kernel(api, KERNEL).status.name == "COMPLETE"
        assert len(again.calls) == 1
