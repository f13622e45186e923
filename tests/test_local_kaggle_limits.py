"""The local Kaggle's limits, as the real client meets them: the daily submission limit on the server's clock, the
weekly GPU quota that runs down with run time, the GPU session cap and its refusal texts, a second session for a
push to a running kernel, pins that are dropped, throttled answers as HTML pages and a 5xx after the call committed.

Kernels run in ``GatedRunner``s: they stay RUNNING (and billing) until the test lets them finish, and the clock is
moved instead of waited for.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import requests

from builder.cli import main
from builder.errors import EXIT_OK, EXIT_USER, LimitReached, LocalKaggleError
from builder.local_kaggle import LocalKaggle, ServerSettings
from builder.local_kaggle.accounts import CAP_TEXTS
from builder.remote.backoff import Backoff
from builder.remote.kaggle_api import KaggleAdapter
from tests.support.local_kaggle import (
    COMPETITION,
    INSTANT_DATASETS,
    USER,
    SlugGates,
    admin_client,
    connect_as,
    make_competition,
    make_dataset,
    make_kernel,
    start_server,
    wait_for,
    wait_kernel,
)

pytestmark = pytest.mark.loopback
GPU = "NvidiaTeslaT4"
WEDNESDAY = datetime(2026, 12, 2, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def gates() -> Iterator[SlugGates]:
    runner = SlugGates()
    yield runner
    runner.open_all()


@pytest.fixture
def server(tmp_path: Path, gates: SlugGates) -> Iterator[LocalKaggle]:
    with start_server(tmp_path / "kaggle", runner=gates, settings=ServerSettings(dataset_ready_seconds=0.0, workers=4)) as srv:
        srv.add_competition(make_competition(tmp_path / "competition", limit=1))
        yield srv
        gates.open_all()  # before the server stops: its workers finish their runs


@pytest.fixture
def client(server: LocalKaggle, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The real ``KaggleApi`` signed in as alice against ``server``."""
    return connect_as(monkeypatch, server.base_url)


def _push_gpu(api: Any, folder: Path, title: str, gates: SlugGates | None = None, **kwargs: Any) -> Any:
    """A GPU kernel pushed with the real client; with ``gates``, it stays RUNNING until its gate opens."""
    make_kernel(folder, title=title, **kwargs)
    meta = json.loads((folder / "kernel-metadata.json").read_text())
    meta["machine_shape"] = GPU
    (folder / "kernel-metadata.json").write_text(json.dumps(meta))
    if gates is not None:
        gates.gates.setdefault(meta["id"].split("/")[1], threading.Event())
    return api.kernels_push(str(folder))


def test_the_daily_limit_counts_the_teams_submissions_of_the_servers_utc_day(server: LocalKaggle, client: Any,
                                                                               tmp_path: Path) -> None:
    api = client
    server.clock.set(datetime(2026, 12, 1, 23, 50, tzinfo=timezone.utc))
    api.kernels_push(str(make_kernel(tmp_path / "k")))
    wait_kernel(api, f"{USER}/parity-kernel")
    assert api.competition_get_submission_limits(COMPETITION).num_allowed_now == 1
    api.competition_submit_code("submission.csv", "first", COMPETITION, f"{USER}/parity-kernel", 1, quiet=True)
    limits = api.competition_get_submission_limits(COMPETITION)
    assert (limits.num_today, limits.num_allowed_now) == (1, 0)
    with pytest.raises(requests.HTTPError, match="daily Submission allowance"):
        api.competition_submit_code("submission.csv", "second", COMPETITION, f"{USER}/parity-kernel", 1, quiet=True)
    server.clock.advance(11 * 60)  # 00:01 UTC: a new day for the team
    assert api.competition_get_submission_limits(COMPETITION).num_allowed_now == 1
    assert admin_client(server).clock()["now"] == "2026-12-02T00:01:00Z"


def test_gpu_time_bills_the_weekly_quota_and_a_deleted_kernel_stops_billing(server: LocalKaggle, client: Any,
                                                                             gates: SlugGates, tmp_path: Path) -> None:
    api = client
    server.clock.set(WEDNESDAY)  # mid-week: the quota's week (from Saturday 00:00 UTC) does not turn meanwhile
    server.accounts.configure(USER, gpu_quota_hours=30, gpu_used_hours=2)
    _push_gpu(api, tmp_path / "a", "Gpu Kernel One", gates)
    _push_gpu(api, tmp_path / "a", "Gpu Kernel One", gates)  # a push to a running kernel: a second session
    wait_for(lambda: len([s for s in server.accounts.live(USER) if s["started"]]) == 2)
    server.clock.advance(1800)
    quota = api.quota_view()
    assert quota.gpu_quota.time_used.total_seconds() == pytest.approx(3 * 3600, abs=30)  # 2 h before + 2 x 30 min
    assert quota.gpu_quota.total_time_allowed == timedelta(hours=30)
    assert quota.quota_refresh_time.weekday() == 5  # Saturday 00:00 UTC
    KaggleAdapter.connect(server.base_url).delete_kernel(f"{USER}/gpu-kernel-one")
    server.clock.advance(3600)  # deleted: neither session bills any more
    assert api.quota_view().gpu_quota.time_used.total_seconds() == pytest.approx(3 * 3600, abs=30)
    assert [(s["version"], s["end"], s["billed_seconds"]) for s in server.accounts.sessions(USER)] == \
        [(1, "deleted", pytest.approx(1800, abs=30)), (2, "deleted", pytest.approx(1800, abs=30))]
    gates.open_all()  # the runs finish after their kernel went: nothing of them comes back
    server.wait_idle(30)
    assert not (server.store.root / "kernels" / USER / "gpu-kernel-one").exists()


@pytest.mark.parametrize("answer", ["session count", "too many assignments", "412"])
def test_a_third_gpu_session_is_refused_with_one_of_kaggles_answers(server: LocalKaggle, client: Any,
                                                                   gates: SlugGates, tmp_path: Path, answer: str) -> None:
    server.clock.set(WEDNESDAY)
    server.accounts.configure(USER, cap_answer=answer)
    api = client
    for name in ("One", "Two"):
        _push_gpu(api, tmp_path / name, f"Gpu Kernel {name}", gates)
    adapter = KaggleAdapter.connect(server.base_url, retry=Backoff(attempts=1))
    make_kernel(tmp_path / "cpu", title="Cpu Kernel")
    assert adapter.push_kernel(tmp_path / "cpu").version == 1  # the cap is of GPU sessions only
    with pytest.raises(LimitReached, match=r"at their cap") as refused:
        adapter.push_kernel(_gpu(make_kernel(tmp_path / "three", title="Gpu Kernel Three")))
    assert CAP_TEXTS[answer].format(cap=2) in refused.value.message and "--wait-for-slot" in (refused.value.hint or "")
    assert not (server.store.root / "kernels" / USER / "gpu-kernel-three").exists()


def test_no_quota_left_refuses_a_gpu_push(server: LocalKaggle, client: Any, tmp_path: Path) -> None:
    server.clock.set(WEDNESDAY)
    server.accounts.configure(USER, gpu_quota_hours=1, gpu_used_hours=1)
    make_kernel(tmp_path / "k", title="Gpu Kernel Four")
    with pytest.raises(LimitReached, match=r"no accelerator quota left \(1\.0 of 1\.0 hours used this week\)"):
        KaggleAdapter.connect(server.base_url).push_kernel(_gpu(tmp_path / "k"))
    with pytest.raises(LocalKaggleError, match="gpu_sessions"):
        server.accounts.configure(USER, gpu_sesions=3)


def _gpu(folder: Path) -> Path:
    meta = json.loads((folder / "kernel-metadata.json").read_text())
    (folder / "kernel-metadata.json").write_text(json.dumps({**meta, "machine_shape": GPU}))
    return folder


@pytest.mark.parametrize(("honour", "stale", "mounted"), [(False, False, 3), (True, False, 1), (False, True, 2),
                                                          (True, True, 1)],
                         ids=["pin-dropped", "pin-honoured", "dropped-and-stale", "honoured-not-stale"])
def test_a_dataset_pin_is_dropped_unless_the_server_honours_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              honour: bool, stale: bool, mounted: int) -> None:
    settings = ServerSettings(dataset_ready_seconds=0.0, honour_pins=honour)
    with start_server(tmp_path / "kaggle", settings=settings) as server:
        server.add_competition(make_competition(tmp_path / "competition"))
        api = connect_as(monkeypatch, server.base_url)
        folder = make_dataset(tmp_path / "d")
        api.dataset_create_new(str(folder), quiet=True)
        for n in (2, 3):
            (folder / "numbers.csv").write_text(f"n\n{n}\n")
            api.dataset_create_version(str(folder), f"v{n}", quiet=True)
        if stale:
            server.faults.stale_mount(f"{USER}/tiny-numbers")
        api.kernels_push(str(make_kernel(tmp_path / "k", datasets=[f"{USER}/tiny-numbers/1"])))
        meta = json.loads((server.store.root / "kernels" / USER / "parity-kernel" / "versions" / "1" / "version.json")
                          .read_text())
        assert meta["mounts"]["datasets"] == [{"ref": f"{USER}/tiny-numbers/1", "owner": USER, "slug": "tiny-numbers",
                                               "version": mounted, "pinned": 1}]


def test_throttled_answers_are_html_pages_and_an_after_commit_fault_does_the_call(kaggle_server: LocalKaggle,
                                                                                 api: Any, tmp_path: Path) -> None:
    kaggle_server.faults.fail_rpc("ListKernels", status=429, html=True, retry_after=7)
    answer = requests.post(f"{kaggle_server.base_url}/api/v1/kernels.KernelsApiService/ListKernels", json={},
                           auth=(USER, "alice-key-0123"), timeout=10)
    assert (answer.status_code, answer.headers["Retry-After"]) == (429, "7")
    assert answer.headers["Content-Type"].startswith("text/html") and answer.text.startswith("<!DOCTYPE html>")
    kaggle_server.faults.fail_rpc("SaveKernel", status=503, after_commit=True)
    with pytest.raises(requests.HTTPError, match="Service unavailable"):
        api.kernels_push(str(make_kernel(tmp_path / "k")))
    assert api.kernels_status(f"{USER}/parity-kernel").status.name in ("QUEUED", "RUNNING", "COMPLETE")  # it was made


def test_the_clock_and_the_accounts_are_set_from_the_command_line(kaggle_server: LocalKaggle,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    data = str(kaggle_server.store.root)
    assert main(["local-kaggle", "clock", "--url", kaggle_server.base_url, "-d", data, "--set", "2026-12-05T23:59:00Z"]) \
        == EXIT_OK
    assert json.loads(capsys.readouterr().out) == {"now": "2026-12-05T23:59:00Z"}
    assert admin_client(kaggle_server).clock(advance=120) == {"now": "2026-12-06T00:01:00Z"}
    with pytest.raises(LocalKaggleError, match="is not an ISO 8601 time"):
        admin_client(kaggle_server).clock(now="tomorrow")
    assert main(["local-kaggle", "add-user", "carol", "--key", "carol-key-0123", "-d", data, "--gpu-quota-hours", "1.5",
                 "--gpu-sessions", "1", "--cap-answer", "412"]) == EXIT_OK
    assert kaggle_server.account("carol").model_dump() == {
        "gpu_quota_hours": 1.5, "tpu_quota_hours": 20.0, "gpu_used_hours": 0.0, "tpu_used_hours": 0.0,
        "gpu_sessions": 1, "cap_answer": "412"}
    capsys.readouterr()
    assert main(["local-kaggle", "add-user", "carol", "-d", data, "--cap-answer", "busy"]) == EXIT_USER
    assert "error: account carol: cap_answer: Input should be 'session count', 'too many assignments' or '412'" in \
        " ".join(capsys.readouterr().err.split())
    assert kaggle_server.users.authenticate("Basic Y2Fyb2w6Y2Fyb2wta2V5LTAxMjM=") == "carol"  # its key kept
    assert INSTANT_DATASETS.honour_pins is False
