"""``kkb dry-run --on-kaggle`` end to end: the real ``kaggle`` client against the local Kaggle, which runs
the rehearsal kernel in the dry run's sandbox like any kernel. Server-side evidence (kernels, datasets,
submissions) is read from the local Kaggle, not from kkb.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder import cli
from builder.errors import EXIT_AUTH, EXIT_KERNEL, KernelFailed, KkbError, RemoteError
from builder.local_kaggle import LocalKaggle, ServerSettings
from builder.project.layout import ON_KAGGLE_DIR
from builder.remote.history import History
from builder.remote.kaggle_api import KaggleAdapter, Submission
from builder.remote.rehearsal import RehearsalSettings, rehearsal_title, rehearse_on_kaggle
from builder.remote.session import Waits
from tests.support.demo_kaggle import demo_adapter, serve_local_kaggle
from tests.support.files import KERNELS

pytestmark = [pytest.mark.slow, pytest.mark.loopback]

USER, KEY = "kkb-demo", "local-test-key-0123456789"
KERNEL_ID = "kkb-demo/kkb-minimal-inference"
REHEARSAL_ID = "kkb-demo/kkb-minimal-inference-rehearsal"
COMPETITION = KERNELS / "minimal" / "data" / "competition"
FAST = Waits(poll_initial_s=0.05, poll_max_s=0.3, dataset_timeout_s=60, run_timeout_s=120, scoring_timeout_s=60)
# A step that fails only in the rehearsed rerun at scale: the commit run (5 rows, fast commit) never sees it.
RERUN_ONLY_FAILURE = '''
if "KAGGLE_IS_COMPETITION_RERUN" in os.environ and len(pd.read_csv(Path(os.environ["KKB_COMPETITION_DIR"]) / "test.csv")) > 5:
    raise MemoryError("the hidden-size test does not fit in memory")
'''


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    """A local Kaggle running kernels in the real sandbox, the test user signed in through the environment."""
    yield from serve_local_kaggle(tmp_path, monkeypatch, None, COMPETITION)


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    return Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))


def _settings(kernel: Path, server: LocalKaggle, **changes: object) -> RehearsalSettings:
    adapter = demo_adapter(server)
    return RehearsalSettings(**{"kernel_dir": kernel, "out_dir": kernel.parent / "build", "adapter": adapter,
                                "waits": FAST, **changes})  # type: ignore[arg-type]


def _submissions(server: LocalKaggle) -> list[Submission]:
    return KaggleAdapter.connect(server.base_url).submissions("kkb-minimal")


def _kernels(server: LocalKaggle) -> list[str]:
    return sorted(f"{path.parent.name}/{path.name}" for path in (server.store.root / "kernels").glob("*/*") if path.is_dir())


def test_a_passing_rehearsal_runs_the_rerun_at_scale_and_is_then_reused(kernel: Path, server: LocalKaggle,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    result = rehearse_on_kaggle(_settings(kernel, server, rerun_scale=3))
    assert result.action == "rehearsed" and result.ok and result.status == "complete"
    report = result.report
    assert report["verdict"]["name"] == "OK" and report["rows"] == 15 and report["scale"] == 3
    assert [step["name"] for step in report["steps"]] == ["linear", "ridge"]
    assert "KAGGLE_IS_COMPETITION_RERUN is set" in report["fast_commit"]
    assert report["peak_rss_bytes"] > 0 and report["wall_seconds"] > 0
    written = (result.out_dir / "submission.csv").read_text().splitlines()
    assert len(written) == 16 and written[-1].startswith("p0004_r2,")  # 5 public rows x3, each copy with new ids
    assert result.heading == "on Kaggle (CPU, image uncaptured)"
    # Its own private kernel, internet off, the settings dataset attached; the submission kernel never pushed.
    assert _kernels(server) == [REHEARSAL_ID]
    meta = json.loads((server.store.root / "kernels" / REHEARSAL_ID / "versions" / "1" / "version.json").read_text())
    assert meta["isPrivate"] is True and meta["enableInternet"] is False
    assert meta["competitionSources"] == ["kkb-minimal"]
    # pinned to the versions just synced, as kkb push pins the real kernel's (a dropped pin is then named)
    assert meta["datasetSources"] == ["kkb-demo/kkb-minimal-inference-code/1", "kkb-demo/kkb-minimal-inference-weights/1",
                                      f"{REHEARSAL_ID}/1"]
    assert _submissions(server) == []

    again = rehearse_on_kaggle(_settings(kernel, server, rerun_scale=3))
    assert again.action == "reused" and again.report["verdict"] == report["verdict"] and again.kernel_version == 1
    assert _latest_version(server) == 1  # nothing pushed
    rows = History.for_kernel(kernel).rows()
    assert [(row.kind, row.status, row.score) for row in rows] == [("rehearsal", "OK", "x3")]
    assert cli.main(["history", str(kernel)]) == 0
    assert re.search(r"rehearsal +v1 .* OK x3", capsys.readouterr().out)

    other_scale = rehearse_on_kaggle(_settings(kernel, server, rerun_scale=2))
    assert other_scale.action == "rehearsed" and other_scale.report["rows"] == 10 and _latest_version(server) == 2
    forced = rehearse_on_kaggle(_settings(kernel, server, rerun_scale=2, again=True))
    assert forced.action == "rehearsed" and _latest_version(server) == 3
    # The build replaced the local dry run's report: the last rehearsal on Kaggle is what projects the time now.
    with pytest.raises(KkbError, match=r"\(from the last rehearsal on Kaggle: [0-9.]+ s for 10 rows, here 500000 rows\)"):
        rehearse_on_kaggle(_settings(kernel, server, rerun_scale=100000))
    assert _latest_version(server) == 3 and _submissions(server) == []


def _latest_version(server: LocalKaggle) -> int:
    record = json.loads((server.store.root / "kernels" / REHEARSAL_ID / "kernel.json").read_text())
    return int(record["latestVersion"])


def test_a_failing_rehearsal_brings_back_the_verdict_and_its_reason(kernel: Path, server: LocalKaggle,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    predict = kernel / "predict.py"
    predict.write_text(predict.read_text().replace("def main() -> None:\n", f"def main() -> None:{_indent(RERUN_ONLY_FAILURE)}\n"))
    code = cli.main(["dry-run", str(kernel), "--on-kaggle", "--rerun-scale", "2", "--out", str(kernel.parent / "build")])
    out = capsys.readouterr()
    assert code == EXIT_KERNEL
    assert "on Kaggle (CPU, image uncaptured)" in out.out
    assert ("rerun: the notebook stopped before writing submission.csv: StepFailed in the steps cell (step 'linear'): "
            "step 'linear' failed with exit code 1") in out.out
    assert "MemoryError: the hidden-size test does not fit in memory" in out.out  # the step's stderr, as the detail
    assert "nothing was submitted" in out.err
    report = json.loads((kernel.parent / "build" / ON_KAGGLE_DIR / "report.json").read_text())
    assert report["failing_step"] == "linear" and report["verdict"]["name"] == "Submission CSV Not Found"
    assert _submissions(server) == []
    assert [row.status for row in History.for_kernel(kernel).rows()] == ["Submission CSV Not Found"]
    # Nothing changed: the same verdict again, from the history, without a new run.
    code = cli.main(["dry-run", str(kernel), "--on-kaggle", "--rerun-scale", "2", "--out", str(kernel.parent / "build")])
    out = capsys.readouterr()
    assert code == EXIT_KERNEL and "nothing changed since the rehearsal of" in out.out and "--again rehearses again" in out.out
    assert "MemoryError: the hidden-size test does not fit in memory" in out.out
    assert _latest_version(server) == 1 and _submissions(server) == []


def _indent(code: str) -> str:
    return "\n" + "\n".join(f"    {line}" if line else "" for line in code.strip("\n").splitlines())


def test_a_run_that_fails_before_the_report_shows_the_log_tail(kernel: Path, server: LocalKaggle) -> None:
    """An exception outside kkb's cells (here a template override of the install cell) leaves no verdict."""
    (kernel / "templates").mkdir()
    (kernel / "templates" / "30_install.py.j2").write_text('raise RuntimeError("the install cell broke")\n')
    with pytest.raises(KernelFailed) as caught:
        rehearse_on_kaggle(_settings(kernel, server))
    assert "ended error before kkb's verdict: it stopped in the inputs stage" in caught.value.message
    assert "RuntimeError: the install cell broke" in caught.value.message
    assert "--- end of the kernel log ---" in caught.value.message
    assert _submissions(server) == []


def test_over_an_hour_needs_yes_before_anything_is_pushed(kernel: Path, server: LocalKaggle, tmp_path: Path) -> None:
    dryrun = kernel.parent / "build" / "dryrun"
    dryrun.mkdir(parents=True)
    scenario = {"scenario": "rerun", "ok": True, "rows": 5, "wall_seconds": 100.0,
                "steps": [{"name": "linear", "seconds": 90.0}]}
    (dryrun / "report.json").write_text(json.dumps({"scenarios": [scenario]}))
    with pytest.raises(KkbError) as caught:
        rehearse_on_kaggle(_settings(kernel, server, rerun_scale=50))
    assert caught.value.message == ("the rehearsal is projected to take 75 min on CPU (from the local dry run: 100.0 s "
                                    "for 5 rows, here 250 rows): more than an hour of your Kaggle quota")
    assert caught.value.hint == "pass --yes to spend it, or lower --rerun-scale"
    assert _kernels(server) == []


def test_usage_errors_of_the_flags(kernel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["dry-run", str(kernel), "--on-kaggle", "--scenario", "commit"]) == 64
    assert "--on-kaggle rehearses the scoring rerun" in capsys.readouterr().err
    assert cli.main(["dry-run", str(kernel), "--again"]) == 64
    assert "--again and --yes go with --on-kaggle" in capsys.readouterr().err
    assert cli.main(["dry-run", str(kernel), "--force", "--replace"]) == 64
    assert "--force and --replace go with --on-kaggle: only a kernel pushed to run meets Kaggle's limits" in \
        " ".join(capsys.readouterr().err.split())
    assert cli.main(["wheels", str(kernel), "--wait-for-slot"]) == 64
    assert "--wait-for-slot goes with --on-kaggle" in " ".join(capsys.readouterr().err.split())


def test_without_credentials_nothing_is_pushed(kernel: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with LocalKaggle(tmp_path / "kaggle", port=0) as local:
        local.add_competition(COMPETITION)
        monkeypatch.setenv("KKB_KAGGLE_API", local.base_url)
        code = cli.main(["dry-run", str(kernel), "--on-kaggle", "--out", str(tmp_path / "build")])
        err = capsys.readouterr().err
        assert code == EXIT_AUTH
        assert "error: no Kaggle credentials found" in err and "hint: set KAGGLE_USERNAME and KAGGLE_KEY" in err
        assert not (local.store.root / "kernels").exists() or not list((local.store.root / "kernels").glob("*/*"))


def test_an_unknown_competition_is_refused_before_any_upload(kernel: Path, server: LocalKaggle) -> None:
    toml = kernel / "kernel.toml"
    toml.write_text(toml.read_text().replace('slug = "kkb-minimal"', 'slug = "kkb-minimall"'))
    with pytest.raises(KkbError) as caught:
        rehearse_on_kaggle(_settings(kernel, server))
    assert "competition.slug 'kkb-minimall'" in caught.value.message
    assert "join the competition and accept its rules" in str(caught.value.hint)
    assert _kernels(server) == []


def test_the_rehearsal_title_stays_within_kaggles_limit() -> None:
    assert rehearsal_title("KKB Minimal Inference") == "KKB Minimal Inference Rehearsal"
    long = rehearsal_title("A" * 48)
    assert len(long) == 50 and long.endswith(" Rehearsal")


def test_a_machine_shape_kaggle_refuses_is_named_with_the_fix(kernel: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    toml = kernel / "kernel.toml"
    toml.write_text(toml.read_text().replace('accelerator = "none"', 'accelerator = "gpu"'))
    settings = ServerSettings(dataset_ready_seconds=0.0, machine_shapes=("NvidiaTeslaP100",))
    with LocalKaggle(tmp_path / "kaggle", port=0, settings=settings) as local:
        local.add_user(USER, KEY)
        local.add_competition(COMPETITION)
        monkeypatch.setenv("KAGGLE_USERNAME", USER)
        monkeypatch.setenv("KAGGLE_KEY", KEY)
        with pytest.raises(RemoteError) as caught:
            rehearse_on_kaggle(_settings(kernel, local))
        assert caught.value.message == ("Kaggle refused the kernel push: Machine shape NvidiaTeslaT4 is not available "
                                        "to this account")
        assert str(caught.value.hint).startswith("choose another [kernel] accelerator in kernel.toml")
        assert _kernels(local) == [] and _submissions(local) == []


def test_an_evaluation_api_kernel_is_rehearsed_locally_only(tmp_path: Path) -> None:
    kernel = Path(shutil.copytree(KERNELS / "evalapi", tmp_path / "evalapi", ignore=shutil.ignore_patterns(".kkb", "build")))
    with pytest.raises(KkbError) as caught:
        rehearse_on_kaggle(RehearsalSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    assert caught.value.message == (f"{kernel / 'kernel.toml'}: submission.kind = \"evaluation-api\": --on-kaggle "
                                    "rehearses kernels that write a submission file")
    assert caught.value.hint == f"rehearse it locally: kkb dry-run {kernel}"


def test_a_rehearsal_interrupted_while_waiting_is_adopted_not_pushed_again(kernel: Path, server: LocalKaggle) -> None:
    impatient = Waits(poll_initial_s=0.01, poll_max_s=0.01, dataset_timeout_s=60, run_timeout_s=1e-6)
    with pytest.raises(RemoteError, match="timed out after"):
        rehearse_on_kaggle(_settings(kernel, server, waits=impatient))
    result = rehearse_on_kaggle(_settings(kernel, server))
    assert result.action == "rehearsed" and result.ok and result.kernel_version == 1
    assert _latest_version(server) == 1  # the first run's version, waited for and downloaded
