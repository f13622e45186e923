"""Issue 15, the client side, offline: the one backoff policy, settable bounded waits, the secret scan by
content, the per-kernel lock (two processes), the dry run's report kept by a rebuild, upload state per server.

Nothing here waits in real fake: clocks and sleeps are injected, and the lock's waits are fractions of a second.
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder import cli
from builder.build import BuildSettings, build_kernel
from builder.bundle import files as bundle_files
from builder.errors import EXIT_USAGE, BundleError, KkbError, LockedError, RemoteError, SpecError
from builder.project.credentials import Secret, secret_values
from builder.project.layout import DRYRUN_DIR, REPORT_FILE
from builder.project.spec import load_spec
from builder.project.spec_renames import SpecDeprecation
from builder.remote.backoff import Backoff
from builder.remote.history import History
from builder.remote.kaggle_api import KaggleAdapter, TransientRemoteError
from builder.remote.lock import kernel_lock
from builder.remote.push import push
from builder.remote.session import ProgressEvent, PushSettings, Session, Waits, private_tmpdir, upload_state_key
from builder.remote.submit import SubmitSettings, submit
from tests.support.files import KERNELS, REPO

KEY = "0123456789abcdef0123456789abcdef"
TOKEN = "KGAT_a1b2c3d4e5f60718293a4b5c6d7e8f90"


class FakeTime:
    """A clock that moves only when something sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def minimal(tmp_path: Path) -> Path:
    return Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))


# -- the one policy ---------------------------------------------------------------------------


def test_backoff_grows_with_jitter_and_stops_at_its_try_limit() -> None:
    fake = FakeTime()
    budget = Backoff(base_seconds=1.0, factor=2.0, max_seconds=5.0, attempts=5, total_seconds=1000).start(
        fake.clock, random.Random(7))
    delays = []
    while (delay := budget.next_delay()) is not None:
        delays.append(delay)
        fake.sleep(delay)
    assert len(delays) == 4 and budget.tries == 5  # five tries: the first and four retries
    for retry, delay in enumerate(delays):
        ceiling = min(5.0, 2.0**retry)
        assert ceiling / 2 <= delay <= ceiling


def test_backoff_stops_at_its_total_time_and_never_sleeps_past_it() -> None:
    fake = FakeTime()
    budget = Backoff(base_seconds=4.0, factor=2.0, max_seconds=100, attempts=None, total_seconds=10,
                     jitter=0.0).start(fake.clock)
    while (delay := budget.next_delay()) is not None:
        fake.sleep(delay)
    assert fake.sleeps == [4.0, 6.0] and fake.now == 10.0  # 4, then only the 6 s left of the 10


def test_backoff_takes_retry_after_but_caps_it() -> None:
    budget = Backoff(max_seconds=3.0, total_seconds=100).start(FakeTime().clock)
    assert budget.next_delay(retry_after=0.0) == 0.0
    assert budget.next_delay(retry_after=60.0) == 3.0


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"attempts": 0}, "Backoff.attempts must be at least 1, not 0"),
    ({"total_seconds": float("inf")}, "Backoff.total_seconds must be a finite number of seconds, not inf"),
    ({"total_seconds": -1.0}, "Backoff.total_seconds must be a finite number of seconds, not -1.0"),
    ({"jitter": 2.0}, "Backoff.jitter must be in [0, 1], not 2.0"),
])
def test_an_unbounded_backoff_cannot_be_made(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        Backoff(**kwargs)
    assert str(caught.value) == message


def _session(tmp_path: Path, waits: Waits, events: list[ProgressEvent], fake: FakeTime) -> Session:
    adapter = KaggleAdapter(api=object(), sleep=fake.sleep, clock=fake.clock)
    settings = PushSettings(kernel_dir=tmp_path, waits=waits, progress=events.append)
    return Session(settings=settings, adapter=adapter, history=History.for_kernel(tmp_path), clock=fake.clock,
                   rng=random.Random(1))


def test_a_wait_shows_its_bound_and_times_out_there(tmp_path: Path) -> None:
    fake, events = FakeTime(), list[ProgressEvent]()
    session = _session(tmp_path, Waits(poll_initial_s=1.0, poll_max_s=4.0), events, fake)
    with pytest.raises(RemoteError) as caught:
        session.wait("run", "kernel run x", lambda: ("running", False), 20.0, hint="later")
    assert caught.value.message == "timed out after 20s waiting for kernel run x (last status: running)"
    assert fake.now == 20.0 and max(fake.sleeps) <= 4.0
    assert {event.limit for event in events} == {20.0} and events[-1].elapsed == 20.0


def test_the_rounds_of_a_create_call_stop_at_their_count(tmp_path: Path) -> None:
    fake, events = FakeTime(), list[ProgressEvent]()
    session = _session(tmp_path, Waits(poll_initial_s=0.5, rounds=3, rounds_total_s=600), events, fake)
    rounds = session.rounds()
    error = TransientRemoteError("HTTP 500")
    session.retry_round(rounds, "pushing k", error)
    session.retry_round(rounds, "pushing k", error)
    with pytest.raises(TransientRemoteError):
        session.retry_round(rounds, "pushing k", error)
    assert len(fake.sleeps) == 2 and [e.stage for e in events] == ["retry", "retry"]


def test_the_progress_line_shows_elapsed_over_the_bound() -> None:
    event = ProgressEvent("run", "kernel run x: running", waiting=True, elapsed=12.2, limit=1800.0)
    assert cli.waiting_line(event) == "kernel run x: running [dim](12s / 1800s)[/dim]"


# -- waits: kernel.toml and the command line --------------------------------------------------


def _with_push_table(kernel: Path, table: str) -> None:
    (kernel / "kernel.toml").write_text((kernel / "kernel.toml").read_text() + f"\n[push]\n{table}\n")


def test_waits_come_from_the_command_line_then_kernel_toml_then_defaults(minimal: Path) -> None:
    _with_push_table(minimal, "dataset_timeout_seconds = 60\nrun_timeout_seconds = 7200\nscore_timeout_seconds = 900.5")
    spec = load_spec(minimal)
    waits = Waits(run_timeout_s=30).with_spec(spec)
    assert (waits.dataset_s, waits.run_timeout_s, waits.scoring_timeout_s) == (60, 30, 900.5)
    assert Waits().dataset_s == 1800.0
    assert Waits().with_spec(load_spec(KERNELS / "minimal")).run_timeout_s is None  # the time limit decides


@pytest.mark.parametrize(("table", "message"), [
    ("run_timeout_seconds = 0", "push.run_timeout_seconds: Input should be greater than 0"),
    ("score_timeout_seconds = -5", "push.score_timeout_seconds: Input should be greater than 0"),
    ("dataset_timeout_seconds = 172801", "push.dataset_timeout_seconds: Input should be less than or equal to 172800"),
    ("score_timeout_seconds = inf", "push.score_timeout_seconds: Input should be less than or equal to 172800"),
    ('run_timeout_seconds = "1h"', "push.run_timeout_seconds: Input should be a valid number"),
    ("run_timeout_seconds = true", "push.run_timeout_seconds: Input should be a valid number"),
    ("run_timeout = 60", "push.run_timeout: unknown key"),
    ("run_timeout_s = 60\nrun_timeout_seconds = 60", "push: [push] sets both run_timeout_s and run_timeout_seconds: keep "
     "run_timeout_seconds (run_timeout_s is its old spelling)"),
])
def test_bad_waits_in_kernel_toml(minimal: Path, table: str, message: str) -> None:
    _with_push_table(minimal, table)
    with pytest.raises(SpecError) as caught:
        load_spec(minimal)
    assert caught.value.message == f"{minimal / 'kernel.toml'}: {message}"
    expected_hint = ("did you mean 'push.run_timeout_seconds'?" if "unknown key" in message else
                     "a wait is a number of seconds, more than 0 and at most 172800 (48 h), e.g. 3600")
    assert caught.value.hint == expected_hint


def test_the_old_spellings_of_the_waits_are_read_with_a_warning_naming_the_new_key(minimal: Path) -> None:
    _with_push_table(minimal, "dataset_timeout_s = 60\nscore_timeout_s = 900.5")
    with pytest.warns(SpecDeprecation) as caught:
        spec = load_spec(minimal)
    assert (spec.push.dataset_timeout_seconds, spec.push.score_timeout_seconds) == (60, 900.5)
    assert [str(warning.message) for warning in caught] == [
        "kernel.toml: [push] dataset_timeout_s is deprecated: write dataset_timeout_seconds = 60 (the same value, in seconds)",
        "kernel.toml: [push] score_timeout_s is deprecated: write score_timeout_seconds = 900.5 (the same value, in seconds)"]


@pytest.mark.parametrize(("args", "message"), [
    (["push", "--wait-dataset", "0"], "Invalid value for '--wait-dataset': 0 is not a number of seconds in (0, 172800]"),
    (["submit", "--wait-run", "-1"], "Invalid value for '--wait-run': -1 is not a number of seconds in (0, 172800]"),
    (["submit", "--wait-score", "1e9"], "Invalid value for '--wait-score': 1e+09 is not a number of seconds in (0, "),
    (["submit", "--wait-score", "nan"], "Invalid value for '--wait-score': nan is not a number of seconds in (0, "),
    (["push", "--wait-run", "10"], "No such option: --wait-run"),  # push does not wait for a run
])
def test_bad_waits_on_the_command_line(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*args, str(KERNELS / "minimal")]) == EXIT_USAGE
    assert message in capsys.readouterr().err


# -- secrets by content -----------------------------------------------------------------------


def _credentials(monkeypatch: pytest.MonkeyPatch, home: Path, kind: str) -> str:
    """Set up one kind of credential; returns its secret value."""
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(home / ".kaggle"))
    (home / ".kaggle").mkdir(parents=True, exist_ok=True)
    if kind == "env-key":
        monkeypatch.setenv("KAGGLE_USERNAME", "alice")
        monkeypatch.setenv("KAGGLE_KEY", KEY)
        return KEY
    if kind == "kaggle.json":
        (home / ".kaggle" / "kaggle.json").write_text(json.dumps({"username": "alice", "key": KEY}))
        return KEY
    if kind == "token-env":
        monkeypatch.setenv("KAGGLE_API_TOKEN", TOKEN)
        return TOKEN
    if kind == "token-file":
        (home / "token.txt").write_text(TOKEN + "\n")
        monkeypatch.setenv("KAGGLE_API_TOKEN", str(home / "token.txt"))
        return TOKEN
    if kind == "access_token":
        (home / ".kaggle" / "access_token").write_text(TOKEN)
        return TOKEN
    if kind == "oauth":
        (home / ".kaggle" / "credentials.json").write_text(json.dumps({"refresh_token": TOKEN, "access_token": ""}))
        return TOKEN
    raise AssertionError(kind)


WHAT = {
    "env-key": "the Kaggle API key (KAGGLE_KEY)",
    "kaggle.json": "the Kaggle API key of {home}/.kaggle/kaggle.json",
    "token-env": "the Kaggle access token (KAGGLE_API_TOKEN)",
    "token-file": "the Kaggle access token (KAGGLE_API_TOKEN)",
    "access_token": "the Kaggle access token of {home}/.kaggle/access_token",
    "oauth": "the Kaggle OAuth refresh token of ~/.kaggle/credentials.json",
}


@pytest.mark.parametrize("kind", list(WHAT))
@pytest.mark.parametrize(("where", "dataset", "fix"), [
    ("notes/debug.txt", "code dataset", "remove the value from the file, or leave the file out with [code] exclude"),
    ("weights/linear.json", "weights dataset",
     "remove the value from the file, or leave the file out with [weights] exclude"),
])
def test_a_file_holding_the_key_in_use_is_refused(minimal: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str], kind: str, where: str,
                                                   dataset: str, fix: str) -> None:
    home = tmp_path / "home"
    value = _credentials(monkeypatch, home, kind)
    target = minimal / where
    target.parent.mkdir(parents=True, exist_ok=True)
    original = target.read_text() if target.exists() else ""
    target.write_text(original + f"\n# left from debugging: {value}\n")
    if where.startswith("notes/"):
        spec = (minimal / "kernel.toml").read_text().replace('include = ["', 'include = ["notes/*", "', 1)
        (minimal / "kernel.toml").write_text(spec)
    out = tmp_path / "out"
    assert cli.main(["build", str(minimal), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    message = f"{where}: holds {WHAT[kind].format(home=home)}; refusing to put it in the {dataset}"
    assert f"error: {message}" in " ".join(err.split())
    assert fix in " ".join(err.split())
    assert value not in err and not out.exists()  # nothing built, the value never shown


def test_the_basic_authorization_header_is_found_too(minimal: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _credentials(monkeypatch, tmp_path / "home", "env-key")
    header = base64.b64encode(f"alice:{KEY}".encode()).decode()
    (minimal / "predict.py").write_text((minimal / "predict.py").read_text() + f"\n# Authorization: Basic {header}\n")
    with pytest.raises(BundleError) as caught:
        build_kernel(BuildSettings(kernel_dir=minimal, out_dir=tmp_path / "out"))
    assert caught.value.message == ("predict.py: holds the Kaggle API key (KAGGLE_KEY), as an HTTP Basic "
                                    "authorization; refusing to put it in the code dataset")
    assert header not in str(caught.value) and KEY not in str(caught.value)


def test_a_value_split_across_two_read_chunks_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bundle_files, "CHUNK", 16)
    folder = tmp_path / "stage"
    folder.mkdir()
    (folder / "blob.bin").write_bytes(os.urandom(13) + KEY.encode() + os.urandom(40))
    with pytest.raises(BundleError) as caught:  # 32 bytes over 16-byte chunks: it spans three reads
        bundle_files.refuse_secret_values(folder, "code dataset", [Secret("the key", KEY)], "fix it")
    assert caught.value.message == "blob.bin: holds the key; refusing to put it in the code dataset"


def test_without_credentials_nothing_is_scanned_and_short_values_are_ignored(
        minimal: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert secret_values() == ()
    monkeypatch.setenv("KAGGLE_KEY", "abc")  # too short to tell from chance
    assert secret_values() == ()
    (minimal / "predict.py").write_text((minimal / "predict.py").read_text() + "\n# abc\n")
    build_kernel(BuildSettings(kernel_dir=minimal, out_dir=tmp_path / "out"))


def test_a_secret_is_never_shown_by_its_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAGGLE_KEY", KEY)
    assert KEY not in repr(secret_values())


def test_a_malformed_kaggle_json_is_skipped_by_the_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / ".kaggle").mkdir(parents=True)
    (home / ".kaggle" / "kaggle.json").write_text("{not json")
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(home / ".kaggle"))
    assert secret_values() == ()


# -- the dry run's report survives a rebuild ---------------------------------------------------


def test_a_rebuild_keeps_the_dry_run_report(minimal: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    build_kernel(BuildSettings(kernel_dir=minimal, out_dir=out))
    report = out / DRYRUN_DIR / REPORT_FILE
    report.parent.mkdir()
    report.write_text('{"verdict": "OK"}')
    (minimal / "predict.py").write_text((minimal / "predict.py").read_text() + "\n# changed\n")
    build_kernel(BuildSettings(kernel_dir=minimal, out_dir=out))
    assert report.read_text() == '{"verdict": "OK"}'


# -- the lock -----------------------------------------------------------------------------------

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from builder.remote.lock import kernel_lock
    with kernel_lock(Path(sys.argv[1]), "push"):
        print("locked", flush=True)
        sys.stdin.readline()  # hold it until the test says so
""")


def test_a_second_command_waits_then_names_the_holder(minimal: Path) -> None:
    kernel = minimal
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(kernel)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        sleeps: list[float] = []

        def sleep(seconds: float) -> None:
            sleeps.append(seconds)
            time.sleep(seconds)

        with pytest.raises(LockedError) as caught:
            with kernel_lock(kernel, "submit", wait_s=0.2, sleep=sleep):
                pass
        message = caught.value.message
        assert message.startswith(f"{kernel}: kkb push (pid {holder.pid}, since 20")
        assert message.endswith("Z) is running on this kernel project; kkb submit waited 0.2s for it")
        assert caught.value.exit_code == 1 and sleeps  # it did wait before giving up
        # push and submit take the lock before anything else (no build, no network: no adapter is needed)
        commands: tuple[tuple[Callable[[Any], object], type[PushSettings]], ...] = ((push, PushSettings), (submit, SubmitSettings))
        for run, settings in commands:
            with pytest.raises(LockedError, match=rf"kkb push \(pid {holder.pid}, since .*kkb {run.__name__} waited"):
                run(settings(kernel_dir=kernel, out_dir=kernel.parent / "build", lock_wait_s=0.1))
        assert not (kernel.parent / "build").exists()
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(20)
    with kernel_lock(kernel, "submit", wait_s=0):  # released when the holder exited
        record = json.loads((kernel / ".kkb" / "lock").read_text())
        assert (record["pid"], record["command"]) == (os.getpid(), "submit")


def test_a_lock_in_an_unwritable_place_says_where(tmp_path: Path) -> None:
    kernel = tmp_path / "k"
    kernel.mkdir()
    (kernel / ".kkb").write_text("a file where the folder should be")
    with pytest.raises(KkbError) as caught:
        with kernel_lock(kernel, "push"):
            pass
    assert caught.value.message.startswith(f"{kernel / '.kkb' / 'lock'}: cannot open the lock file: ")


# -- upload state per server --------------------------------------------------------------------


@pytest.mark.parametrize(("endpoint", "key"), [
    (None, "kaggle.com"),
    ("http://127.0.0.1:41234", "127.0.0.1-41234"),
    ("http://[::1]:8765", "__1-8765"),
    ("https://example.org/kaggle", "example.org-https_kaggle"),
])
def test_upload_state_folder_per_server(tmp_path: Path, endpoint: str | None, key: str) -> None:
    assert upload_state_key(endpoint) == key
    with private_tmpdir(tmp_path, endpoint) as path:
        assert path == tmp_path / ".kkb" / "tmp" / key and path.stat().st_mode & 0o077 == 0


def test_the_command_shows_an_old_spelling_as_one_warning_line(minimal: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    _with_push_table(minimal, "run_timeout_s = 60")
    assert cli.main(["build", str(minimal), "--out", str(tmp_path / "out")]) == 0
    assert ("warning: kernel.toml: [push] run_timeout_s is deprecated: write run_timeout_seconds = 60 (the same value, "
            "in seconds)") in " ".join(capsys.readouterr().err.split())
