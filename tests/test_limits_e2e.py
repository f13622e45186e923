"""kkb push / submit / status / history / stop against Kaggle's limits, as the local Kaggle behaves them.

The real client over loopback; kernels run their real notebook in a ``FakeRunner`` (one plain python process), the
ones a gate holds stay RUNNING and bill until the test opens it; the server's clock is moved, never waited for.
What reached the server is read from the server: the bytes of its blobs, its kernels' versions, its sessions.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from builder.errors import EXIT_REMOTE, EXIT_USAGE, InputsDiffer, LimitReached
from builder.local_kaggle import LocalKaggle
from builder.rehearse.on_kaggle import report_from_kaggle
from builder.remote.image import ImageSettings, capture_image
from builder.remote.push import push
from builder.remote.queries import QuerySettings, history, stop
from builder.remote.rehearsal import RehearsalSettings, rehearse_on_kaggle
from builder.remote.session import PushSettings
from builder.remote.submit import SubmitSettings, submit
from tests.support.demo_kaggle import DEMO_USER, LOOPBACK_WAITS, demo_adapter, serve_local_kaggle
from tests.support.files import KERNELS
from tests.support.local_kaggle import SlugGates, make_kernel, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.loopback]

GPU = "NvidiaTeslaT4"
WEDNESDAY = datetime(2026, 12, 2, 12, 0, tzinfo=timezone.utc)  # mid-week: the quota's week does not turn meanwhile
KERNEL_ID = "kkb-demo/kkb-minimal-inference"
REHEARSAL_ID = "kkb-demo/kkb-minimal-inference-rehearsal"
SLUG = "kkb-minimal-inference"
WEIGHTS = "kkb-demo/kkb-minimal-inference-weights"


@pytest.fixture
def gates() -> SlugGates:
    return SlugGates()


@pytest.fixture
def server(tmp_path: Path, gates: SlugGates, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    """A local Kaggle on Wednesday noon (UTC) whose competition allows one submission a day, and whose list answers
    hold one item each: kkb finds the account's kernels only by following every page."""
    competition = Path(shutil.copytree(KERNELS / "minimal" / "data" / "competition", tmp_path / "competition"))
    toml = competition / "competition.toml"
    toml.write_text(toml.read_text().replace("daily_submission_limit = 5", "daily_submission_limit = 1"))
    serving = serve_local_kaggle(tmp_path, monkeypatch, gates, competition=competition, workers=4, max_page_size=1)
    local = next(serving)
    local.clock.set(WEDNESDAY)
    yield local
    gates.open_all()  # the held runs end before the server stops
    next(serving, None)


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    """kernels/minimal in a folder whose path has a space."""
    return Path(shutil.copytree(KERNELS / "minimal", tmp_path / "my kernels" / "minimal",
                                ignore=shutil.ignore_patterns(".kkb", "build")))


def _gpu(kernel: Path, gates: SlugGates) -> Path:
    """The kernel on a T4 x2; its runs succeed at once (what they would compute is not the question here)."""
    gates.instant.add(SLUG)
    toml = kernel / "kernel.toml"
    toml.write_text(toml.read_text().replace('accelerator = "none"', 'accelerator = "gpu"'))
    return kernel


def _settings(kernel: Path, server: LocalKaggle, events: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
    """What the library is given: the build folder `kkb push .` uses from inside the kernel folder, fast waits."""
    progress = (lambda event: events.append(event.message)) if events is not None else None
    return {"kernel_dir": kernel, "out_dir": kernel / "build" / kernel.name, "adapter": demo_adapter(server),
            "waits": LOOPBACK_WAITS, "progress": progress, **kwargs}


def _kkb(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed ``kkb`` command, from inside the kernel folder, as people call it."""
    kkb = Path(sys.executable).with_name("kkb")
    return subprocess.run([str(kkb), *args], cwd=cwd, env=dict(os.environ), capture_output=True, text=True, timeout=180)


def _received(server: LocalKaggle) -> int:
    """Every byte every upload brought to the server."""
    return sum(path.stat().st_size for path in (server.store.root / "blobs").glob("*/data"))


def _versions(server: LocalKaggle, slug: str = SLUG) -> list[str]:
    folder = server.store.root / "kernels" / DEMO_USER / slug / "versions"
    return sorted(path.name for path in folder.iterdir()) if folder.is_dir() else []


def _edit(kernel: Path) -> None:
    (kernel / "predict.py").write_text((kernel / "predict.py").read_text() + "\n# tuned\n")


def test_submit_stops_before_uploading_when_no_submission_is_left_and_waits_for_the_reset(
        kernel: Path, server: LocalKaggle, gates: SlugGates) -> None:
    gates.instant.add(SLUG)  # its runs leave the sample submission at once: what is scored is not the question
    first = submit(SubmitSettings(**_settings(kernel, server)))  # 1 left today: it submits
    assert (first.status, first.kernel_version) == ("complete", 1)
    _edit(kernel)
    before = _received(server)
    refused = _kkb("submit", ".", cwd=kernel)
    told = " ".join(refused.stderr.split())
    assert refused.returncode == EXIT_REMOTE, refused.stderr
    assert "kkb-minimal: no submission left today for your team (1 made today); the daily limit resets at 00:00 UTC" \
        in told and "--wait-for-slot pushes now and submits after the reset" in told
    assert (_received(server), _versions(server)) == (before, ["1"])  # not one byte, no new version

    events: list[str] = []
    done: dict[str, Any] = {}
    waiting = threading.Thread(target=lambda: done.update(result=submit(SubmitSettings(
        **_settings(kernel, server, events, wait_for_slot=True)))))
    waiting.start()
    wait_for(lambda: any(e.startswith("a submission slot (the daily limit resets at 00:00 UTC") for e in events), 60)
    assert _versions(server) == ["1", "2"]  # pushed and run at once; only the submission waited
    server.clock.set(datetime(2026, 12, 3, 0, 0, 30, tzinfo=timezone.utc))
    waiting.join(60)
    assert (done["result"].kernel_version, done["result"].status) == (2, "complete")
    assert "pushing now, submitting once the limit resets (--wait-for-slot)" in " ".join(events)


def _gpu_sessions(server: LocalKaggle, gates: SlugGates, tmp_path: Path, names: tuple[str, ...] = ("One", "Two")) -> None:
    """Other GPU kernels of the account, running (and billing) until their gates open: one session each."""
    api = demo_adapter(server).api
    for name in names:
        folder = make_kernel(tmp_path / name, title=f"Gpu Kernel {name}", owner=DEMO_USER, competitions=["kkb-minimal"])
        meta = json.loads((folder / "kernel-metadata.json").read_text())
        (folder / "kernel-metadata.json").write_text(json.dumps({**meta, "machine_shape": GPU}))
        gates.gates[f"gpu-kernel-{name.lower()}"] = threading.Event()
        api.kernels_push(str(folder))
    wait_for(lambda: len([s for s in server.accounts.live(DEMO_USER) if s["started"]]) == len(names))


def test_a_gpu_push_at_the_session_cap_is_refused_naming_the_sessions_and_waits_for_a_slot(
        kernel: Path, server: LocalKaggle, gates: SlugGates, tmp_path: Path) -> None:
    _gpu(kernel, gates)
    _gpu_sessions(server, gates, tmp_path)

    refused = _kkb("push", ".", cwd=kernel)
    told = " ".join(refused.stderr.split())
    assert refused.returncode == EXIT_REMOTE, refused.stderr
    assert "your account runs 2 GPU sessions, the most Kaggle allows at once (2): kkb-demo/gpu-kernel-" in told
    assert all(f"kkb-demo/gpu-kernel-{name} v1 (running, GPU NvidiaTeslaT4)" in told for name in ("one", "two"))
    assert (_received(server), _versions(server)) == (0, [])

    shown = _kkb("status", ".", "--json", cwd=kernel)
    limits = json.loads(shown.stdout)["limits"]
    assert limits["submissions"] == {"used_today": 0, "left_today": 1, "total": 0, "limited_by_total": False,
                                     "resets_at": limits["submissions"]["resets_at"]}
    assert limits["submissions"]["resets_at"].endswith("T00:00:00Z")
    assert (limits["gpu_quota"]["total_hours"], limits["session_cap"]) == (30.0, 2)
    assert 29.9 < limits["gpu_quota"]["left_hours"] <= 30.0
    assert sorted((s["kernel"], s["status"], s["accelerator"]) for s in limits["sessions"]) == \
        [("kkb-demo/gpu-kernel-one", "running", "GPU"), ("kkb-demo/gpu-kernel-two", "running", "GPU")]

    asked = _count_calls(server, "kernels.KernelsApiService/ListKernels")
    waiting = subprocess.Popen([str(Path(sys.executable).with_name("kkb")), "push", ".", "--wait-for-slot"], cwd=kernel,
                               env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: asked[0] >= 4, 120)  # it listed the kernels twice (two pages each) and is waiting
    assert _versions(server) == []
    gates.gates["gpu-kernel-one"].set()  # one session ends: a slot
    _, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, err
    assert _versions(server) == ["1"]


def test_a_push_kaggle_itself_refuses_at_the_cap_waits_for_a_slot_and_goes_through(
        kernel: Path, server: LocalKaggle, gates: SlugGates, tmp_path: Path) -> None:
    """Kaggle's cap is one session here, kkb counts on two: the push is refused by Kaggle itself (a session kkb
    could not tell apart), and with --wait-for-slot it is pushed again once a slot is free."""
    _gpu(kernel, gates)
    server.accounts.configure(DEMO_USER, gpu_sessions=1)
    _gpu_sessions(server, gates, tmp_path, ("One",))
    events: list[str] = []
    waits = replace(LOOPBACK_WAITS, rounds=40, rounds_total_s=60)
    done: dict[str, Any] = {}
    pushing = threading.Thread(target=lambda: done.update(result=push(PushSettings(
        **_settings(kernel, server, events, wait_for_slot=True, waits=waits)))))
    pushing.start()
    wait_for(lambda: any("at their cap): pushing again in" in e for e in events), 60)
    gates.gates["gpu-kernel-one"].set()
    pushing.join(60)
    assert (done["result"].kernel_action, _versions(server)) == ("pushed", ["1"])


def _count_calls(server: LocalKaggle, method: str) -> list[int]:
    """How often ``method`` was answered (the count, in a list the handler wrapper updates)."""
    count = [0]
    handler = server.routes[method]

    def counted(call: Any) -> Any:
        count[0] += 1
        return handler(call)

    server.routes[method] = counted
    return count


def test_too_little_gpu_quota_stops_naming_hours_left_and_needed(kernel: Path, server: LocalKaggle,
                                                                 gates: SlugGates) -> None:
    _gpu(kernel, gates)
    server.accounts.configure(DEMO_USER, gpu_quota_hours=1, gpu_used_hours=0.5)
    with pytest.raises(LimitReached) as refused:
        push(PushSettings(**_settings(kernel, server)))
    assert refused.value.message == ("GPU quota: 0.5 h left this week (0.5 h of 1.0 h used), the run needs 9.0 h (the "
                                     "competition's time limit: no dry run projects it)")
    assert "refreshes Sat 05 Dec 00:00 UTC" in (refused.value.hint or "") and _received(server) == 0
    report = kernel / "build" / kernel.name / "dryrun" / "report.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps({"scenarios": [{"scenario": "rerun", "ok": True, "projected_seconds": 600.0}]}))
    events: list[str] = []
    assert push(PushSettings(**_settings(kernel, server, events))).kernel_version == 1
    assert "the run needs 0.2 h (the last dry run's projection of the rerun, 10 min)" in " ".join(events)


def test_a_push_while_a_version_runs_is_refused_and_replace_leaves_only_the_new_version_billing(
        kernel: Path, server: LocalKaggle, gates: SlugGates) -> None:
    _gpu(kernel, gates)
    gates.gates[SLUG] = threading.Event()
    push(PushSettings(**_settings(kernel, server)))
    wait_for(lambda: [s for s in server.accounts.live(DEMO_USER) if s["started"]])
    _edit(kernel)
    before = _received(server)
    with pytest.raises(LimitReached) as refused:
        push(PushSettings(**_settings(kernel, server)))
    assert refused.value.message.startswith(f"{KERNEL_ID} v1 (running, GPU NvidiaTeslaT4) is still on Kaggle: a new "
                                            "version of kkb-demo/kkb-minimal-inference would start a second session")
    assert "--replace stops it first" in (refused.value.hint or "") and _received(server) == before

    server.clock.advance(3600)
    events: list[str] = []
    replaced = push(PushSettings(**_settings(kernel, server, events, replace=True)))
    assert replaced.kernel_version == 1 and "deleting the kernel on Kaggle" in " ".join(events)
    wait_for(lambda: [s for s in server.accounts.live(DEMO_USER) if s["started"]])
    server.clock.advance(1800)
    billed = [(s["end"], round(s["billed_seconds"] / 60)) for s in server.accounts.sessions(DEMO_USER)]
    assert billed == [("deleted", 60), (None, 30)]  # the old one stopped billing when it was stopped

    stopped = stop(QuerySettings(kernel_dir=kernel, adapter=demo_adapter(server)))
    assert [run.version for run in stopped.stopped] == [1] and server.accounts.live(DEMO_USER) == []
    runs = [(row.kernel_version, row.status, row.session) for row in history(kernel) if row.kind == "run"]
    assert runs == [(1, "replaced", "GPU NvidiaTeslaT4"), (1, "cancelled by kkb", "GPU NvidiaTeslaT4")]


def test_submit_stops_when_kaggle_mounted_an_older_version_of_the_weights(kernel: Path, server: LocalKaggle,
                                                                          gates: SlugGates) -> None:
    gates.instant.add(SLUG)  # v1 only makes the weights' version 1; the runs after it execute the notebook
    push(PushSettings(**_settings(kernel, server)))
    server.wait_idle(30)
    gates.instant.discard(SLUG)
    weights = kernel / "weights" / "linear.json"
    weights.write_text(weights.read_text().replace("1", "2", 1))
    server.faults.stale_mount(WEIGHTS)  # Kaggle's latest complete version lags: the pin /2 is dropped for v1
    with pytest.raises(InputsDiffer) as refused:
        submit(SubmitSettings(**_settings(kernel, server)))
    assert (f"{KERNEL_ID} v2 ran on other inputs than kkb pushed: the weights Kaggle mounted are version 1, kkb pushed "
            f"version 2 ({WEIGHTS}; the pin {WEIGHTS}/2 was dropped). Nothing was submitted") == refused.value.message
    assert not (server.store.root / "submissions").exists()
    events: list[str] = []
    again = submit(SubmitSettings(**_settings(kernel, server, events)))  # a new version of the same content
    assert (again.kernel_version, again.status, again.push.uploaded_bytes if again.push else -1) == (3, "complete", 0)
    assert "kkb-demo/kkb-minimal-inference v3 read what kkb pushed (code v1, weights v2)" in events


def test_a_throttled_html_429_is_retried_and_a_503_after_the_push_committed_is_reconciled(
        kernel: Path, server: LocalKaggle, gates: SlugGates) -> None:
    gates.instant.add(SLUG)
    server.faults.fail_rpc("SaveKernel", status=429, html=True, retry_after=0)
    server.faults.fail_rpc("SaveKernel", status=503, html=True, after_commit=True)
    events: list[str] = []
    pushed = push(PushSettings(**_settings(kernel, server, events)))
    assert (pushed.kernel_action, pushed.kernel_version, _versions(server)) == ("adopted", 1, ["1"])
    told = " ".join(events)
    assert "pushing the kernel: Kaggle is throttling (HTTP 429, an HTML page), retrying in" in told
    assert "Kaggle is throttling: it answered HTTP 503 with an HTML page" in told
    assert f"but Kaggle had created {KERNEL_ID} v1: kept it (nothing pushed twice)" in told


def test_a_rehearsal_and_an_image_capture_at_the_session_cap_are_refused_before_any_upload(
        kernel: Path, server: LocalKaggle, gates: SlugGates, tmp_path: Path) -> None:
    """The kernels kkb pushes besides the submission kernel meet the same limits, in the same words."""
    _gpu(kernel, gates)
    _gpu_sessions(server, gates, tmp_path)
    refused = _kkb("dry-run", ".", "--on-kaggle", cwd=kernel)
    told = " ".join(refused.stderr.split())
    assert refused.returncode == EXIT_REMOTE, refused.stderr
    assert "your account runs 2 GPU sessions, the most Kaggle allows at once (2): kkb-demo/gpu-kernel-" in told
    assert "--wait-for-slot waits until one ends, then pushes; --force pushes anyway" in told
    assert (_received(server), _versions(server, f"{SLUG}-rehearsal")) == (0, [])

    with pytest.raises(LimitReached) as capture:
        capture_image(ImageSettings(adapter=demo_adapter(server), waits=LOOPBACK_WAITS))
    assert capture.value.message.startswith("your account runs 2 GPU sessions, the most Kaggle allows at once (2)")
    assert _versions(server, "kkb-image-capture") == []
    usage = _kkb("image", "--force", cwd=kernel)
    assert usage.returncode == EXIT_USAGE and "--force goes with --on-kaggle" in " ".join(usage.stderr.split())


def test_a_rehearsal_whose_weights_pin_was_dropped_says_so_and_one_that_read_them_records_it(
        kernel: Path, server: LocalKaggle) -> None:
    settings = RehearsalSettings(kernel_dir=kernel, out_dir=kernel / "build" / kernel.name, adapter=demo_adapter(server),
                                 waits=LOOPBACK_WAITS)
    first = rehearse_on_kaggle(settings)
    code = f"{DEMO_USER}/{SLUG}-code"
    assert first.ok and first.report["mounted"] == {
        "ok": True, "inputs": [f"code {code} v1", f"weights {WEIGHTS} v1"], "differences": []}
    shown = report_from_kaggle(first.report, first.spec, kernel_name="minimal", kernel_id=KERNEL_ID, out_dir=first.out_dir)
    assert shown.scenarios[0].mounted == first.report["mounted"]

    weights = kernel / "weights" / "linear.json"
    weights.write_text(weights.read_text().replace("1", "2", 1))
    server.faults.stale_mount(WEIGHTS)  # the pin /2 is dropped for Kaggle's older complete version
    with pytest.raises(InputsDiffer) as refused:
        rehearse_on_kaggle(settings)
    assert refused.value.message == (
        f"{REHEARSAL_ID} v2 ran on other inputs than kkb pushed: the weights Kaggle mounted are version 1, kkb pushed "
        f"version 2 ({WEIGHTS}; the pin {WEIGHTS}/2 was dropped). Nothing was submitted")
    pushed = json.loads((server.store.root / "kernels" / REHEARSAL_ID / "versions" / "2" / "version.json").read_text())
    assert f"{WEIGHTS}/2" in json.dumps(pushed)  # the rehearsal kernel pinned what was just synced
    kept = [row for row in history(kernel) if row.kind == "rehearsal"]
    assert len(kept) == 2  # the rehearsal itself is kept, its inputs named
