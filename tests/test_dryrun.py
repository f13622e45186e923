"""``kkb dry-run`` end to end: the real build, the rendered notebook, a real kernel in the sandbox."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from builder.cli import main
from builder.errors import DryRunError, SpecError
from builder.kkb_runtime.vocabulary import Layout, Scenario
from builder.rehearse.dryrun import DryRunReport, DryRunSettings, dry_run
from builder.rehearse.verdict import COMPUTE, CSV_NOT_FOUND, NOT_REHEARSED, OK, SCORING_ERROR, THREW, TIMEOUT
from builder.run.isolation import choose_isolation
from tests.support.files import KERNELS, REPO

KAGGLE_PATHS = choose_isolation("auto").mode != "python"

FIXTURES = REPO / "tests" / "kernels"
PUBLIC = FIXTURES / "competition" / "public"


def _tree_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _manifest_holds(bundle: Path) -> bool:
    """Every file the build recorded is still byte-for-byte what it recorded."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    return all(hashlib.sha256((bundle / entry["path"]).read_bytes()).hexdigest() == entry["sha256"].removeprefix("sha256:")
               for entry in manifest["files"])


@pytest.mark.loopback
@pytest.mark.slow
def test_the_minimal_kernel_passes_both_scenarios(tmp_path: Path) -> None:
    project = _tree_hash(KERNELS / "minimal")
    report = dry_run(DryRunSettings(kernel_dir=KERNELS / "minimal", out_dir=tmp_path / "build" / "minimal", rerun_scale=3))

    assert report.ok, [(s.scenario, s.verdict) for s in report.scenarios]
    commit, rerun = report.scenarios
    assert (commit.scenario, rerun.scenario) == ("commit", "rerun")
    assert commit.fast_commit is not None and commit.fast_commit.startswith("commit run (")
    assert commit.steps == []  # the fast path wrote the sample and skipped inference
    assert [step["name"] for step in rerun.steps] == ["linear", "ridge"]
    assert rerun.rows == 15 and len(pd.read_csv(rerun.submission)) == 15  # 5 public rows x 3
    assert rerun.hidden_rows == 200 and rerun.projection is not None
    # 15 rows are too few to tell fixed from per-row time: a second run on 4 x 15 rows measured the second size, and
    # where 15 and 60 rows took the same time within its noise, a larger one up to the hidden 200 rows
    assert {tuple(c["points"][-1])[0] for c in rerun.projection["components"]} in ({60}, {200})
    assert rerun.projection["exact"] and rerun.projected_seconds == rerun.projection["seconds"]
    assert rerun.peak_rss_bytes > 50 * 2**20 and rerun.blocked_network == []
    out = tmp_path / "build" / "minimal" / "dryrun"
    assert sorted(p.name for p in out.iterdir()) == ["commit.ipynb", "commit.log.json", "commit.submission.csv", "report.html",
                                                     "report.json", "rerun.ipynb", "rerun.log.json", "rerun.step-linear.csv",
                                                     "rerun.step-ridge.csv", "rerun.submission.csv"]
    assert "ensemble members: correlation" in (out / "report.html").read_text()
    saved = json.loads((out / "report.json").read_text())
    assert saved["ok"] is True and [s["verdict"]["name"] for s in saved["scenarios"]] == [OK, OK]
    # each run read the inputs kkb built (equal by construction here), and the report says it checked
    checked = ["code kkb-demo/kkb-minimal-inference-code", "weights kkb-demo/kkb-minimal-inference-weights"]
    assert [s["mounted"] for s in saved["scenarios"]] == [{"ok": True, "inputs": checked, "differences": []}] * 2
    # nothing the runs wrote escaped their sandboxes: the project and the bundles are as built
    assert _tree_hash(KERNELS / "minimal") == project
    assert _manifest_holds(tmp_path / "build" / "minimal" / "code")
    assert _manifest_holds(tmp_path / "build" / "minimal" / "weights")


BROKEN = [
    pytest.param("downloads-weights", "rerun", CSV_NOT_FOUND,
                 ["StepFailed in cell 5 (step 'download'): step 'download' failed with exit code 1"],
                 ["blocked network access", "resolve huggingface.co:443", "Temporary failure in name resolution"],
                 id="downloads-weights"),
    pytest.param("writes-nan", "rerun", SCORING_ERROR, ["NaN in target column 'target': 3 rows"],
                 ["the notebook also failed (Kaggle scores the file it left): SubmissionError in cell 8"], id="writes-nan"),
    pytest.param("wrong-rows", "rerun", SCORING_ERROR,
                 ["row count: expected 5 rows (as the sample submission), got 3",
                  "ids do not match the sample submission: 2 missing (e.g. 't0', 't2')"], [], id="wrong-rows"),
    pytest.param("wrong-column", "rerun", SCORING_ERROR, ["missing column(s): target; extra column(s): prediction"], [],
                 id="wrong-column"),
    pytest.param("old-input-path", "rerun", CSV_NOT_FOUND,
                 ["StepFailed in cell 5 (step 'predict')", "; it read /kaggle/input/kkb-fixture/test.csv, which does not "
                  "exist in the current input layout; Kaggle has it at /kaggle/input/competitions/kkb-fixture/test.csv"],
                 ["it read input/kkb-fixture, the old input layout", "No such file or directory"], id="old-input-path"),
    pytest.param("slow-rerun", "rerun", TIMEOUT,
                 ["even the lower end of the projection, ", "for 1000000 hidden rows (range ",
                  "passes the competition's limit of 36.0 s; basis: predict: two points ("], ["steps: predict:"],
                 id="slow-rerun"),
    pytest.param("eats-memory", "rerun", COMPUTE,
                 ["step 'predict' was ended by the memory limit (pss) at a peak of ",
                  "; the machine shape has 512 MiB of RAM (enforced here on the whole run: 512 MiB, pss)"],
                 [], id="eats-memory"),
    pytest.param("script-raises", "rerun", THREW,
                 ["StepFailed in the script (step 'predict'): step 'predict' failed with exit code 1"],
                 ["could not convert string to float: 'n/a'"], id="script-raises"),
]


@pytest.mark.loopback
@pytest.mark.slow
@pytest.mark.parametrize(("kernel", "scenario", "verdict", "reason_has", "detail_has"), BROKEN)
def test_each_broken_kernel_gets_its_verdict_and_reason(tmp_path: Path, kernel: str, scenario: str, verdict: str,
                                                        reason_has: list[str], detail_has: list[str]) -> None:
    report = dry_run(DryRunSettings(kernel_dir=FIXTURES / kernel, data_dir=PUBLIC, scenario=scenario,  # type: ignore[arg-type]
                                    out_dir=tmp_path / "build" / kernel,
                                    memory_bytes=512 * 2**20 if kernel == "eats-memory" else None))
    (result,) = report.scenarios
    assert not report.ok and result.scenario == scenario
    assert result.verdict.name == verdict, result.verdict
    for text in reason_has:
        assert text in result.verdict.reason, result.verdict.reason
    for text in detail_has:
        assert text in (result.verdict.detail or ""), result.verdict.detail
    assert result.notebook.is_file()  # the evidence survives a failure


def test_a_kernel_writing_another_file_than_the_competition_s_is_refused_before_it_runs(tmp_path: Path) -> None:
    """Kaggle would answer Submission CSV Not Found; taking preds.csv as the competition's name would be a false OK."""
    with pytest.raises(SpecError) as caught:
        dry_run(DryRunSettings(kernel_dir=FIXTURES / "preds-csv", data_dir=PUBLIC, out_dir=tmp_path / "build"))
    assert caught.value.message == (
        f"{FIXTURES / 'preds-csv' / 'kernel.toml'}: [submission] file = 'preds.csv', but Kaggle scores [competition] "
        "submission_file = 'submission.csv': the kernel writes the competition's file; remove [submission] file, and set "
        "[competition] submission_file = 'preds.csv' only if the competition names that file")
    assert not (tmp_path / "build").exists()  # nothing half-done


@pytest.mark.slow
@pytest.mark.loopback
def test_a_commit_without_the_fast_commit_guard_is_accepted_with_a_warning(tmp_path: Path) -> None:
    """Kaggle accepts such a commit: the report warns about the GPU quota it spends, it is no verdict."""
    report = dry_run(DryRunSettings(kernel_dir=FIXTURES / "no-fast-commit-guard", data_dir=PUBLIC, scenario=Scenario.COMMIT,
                                    out_dir=tmp_path / "build"))
    (commit,) = report.scenarios
    assert report.ok and commit.verdict.name == OK
    assert commit.warnings[0].startswith("the commit run did not take the fast-commit path although kernel.toml enables it "
                                         "(the public sample has 5 rows < rows_below = 11): it ran predict")
    assert "the notebook printed no fast-commit decision" in commit.warnings[0]
    assert commit.warnings[0].endswith("Kaggle accepts the commit, but every save spends the full inference time and GPU quota")


@pytest.mark.slow
@pytest.mark.loopback
@pytest.mark.skipif(not KAGGLE_PATHS, reason="no namespaces here: the sandbox has no real /kaggle paths")
def test_correct_code_with_absolute_kaggle_paths_passes_commit_and_rerun_on_a_stand_in(tmp_path: Path) -> None:
    """Absolute /kaggle paths, a cache in /kaggle/working, shuffled rows, CPU only; the rerun on another test."""
    stand_in = tmp_path / "hidden"
    stand_in.mkdir()
    (stand_in / "sample_submission.csv").write_text("id,target\n" + "".join(f"h{i},0\n" for i in range(7)))
    (stand_in / "test.csv").write_text("id,x\n" + "".join(f"h{i},{i}\n" for i in range(7)))
    report = dry_run(DryRunSettings(kernel_dir=FIXTURES / "absolute-paths", data_dir=PUBLIC, rerun_data_dir=stand_in,
                                    out_dir=tmp_path / "build"))

    commit, rerun = report.scenarios
    assert report.ok, [(s.scenario, s.verdict) for s in report.scenarios]
    assert (commit.rows, commit.data, rerun.rows, rerun.data) == (5, PUBLIC, 7, stand_in)
    assert rerun.isolation in ("bwrap", "namespace") and "real /kaggle paths" in rerun.isolation_note
    assert pd.read_csv(rerun.submission)["id"].tolist() == [f"h{i}" for i in range(7)]
    assert not Path("/kaggle/working/cache/features.csv").exists()  # nothing landed on the host's own /kaggle
    html = (report.out_dir / "report.html").read_text()
    assert "submission.csv matches the sample submission" in html and "<svg " in html


@pytest.mark.slow
@pytest.mark.loopback
def test_a_package_the_image_has_and_this_machine_lacks_is_not_rehearsed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    if importlib.util.find_spec("catboost") is not None:
        pytest.skip("catboost is installed here: the step is rehearsed")
    code = main(["dry-run", str(FIXTURES / "needs-catboost"), "--data", str(PUBLIC), "--scenario", "rerun",
                 "--out", str(tmp_path / "build"), "--json"])
    report = json.loads((tmp_path / "build" / "dryrun" / "report.json").read_text())
    assert code == 5 and json.loads(capsys.readouterr().out) == report  # --json: the report, and nothing else, on stdout
    assert report["scenarios"][0]["verdict"]["name"] == NOT_REHEARSED
    assert report["scenarios"][0]["verdict"]["reason"].startswith(
        "not rehearsed: Kaggle's image has catboost 1.2.10 (2026-06-17); step 'predict' imports 'catboost', "
        "which is not installed here; install it here to rehearse")


@pytest.mark.loopback
def test_the_fast_commit_fixture_passes_its_rerun(tmp_path: Path) -> None:
    """The guard-less kernel is a commit problem only: its rerun is fine (the verdict above is not noise)."""
    report = dry_run(DryRunSettings(kernel_dir=FIXTURES / "no-fast-commit-guard", data_dir=PUBLIC, scenario=Scenario.RERUN,
                                    out_dir=tmp_path / "build"))
    assert report.ok, report.scenarios[0].verdict


def test_settings_and_missing_data_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(DryRunError, match="unknown scenario"):
        DryRunSettings(kernel_dir=tmp_path, scenario="nightly")  # type: ignore[arg-type]
    with pytest.raises(DryRunError, match="at least 1"):
        DryRunSettings(kernel_dir=tmp_path, rerun_scale=0)
    with pytest.raises(DryRunError, match="no competition data to mount") as error:
        dry_run(DryRunSettings(kernel_dir=FIXTURES / "writes-nan", out_dir=tmp_path / "build"))
    assert error.value.hint == "pass --data DIR or set [competition] data in kernel.toml"
    with pytest.raises(DryRunError, match="has no sample submission"):
        dry_run(DryRunSettings(kernel_dir=FIXTURES / "writes-nan", data_dir=tmp_path, out_dir=tmp_path / "build"))


# --- the command --------------------------------------------------------------------------------------


def test_cli_maps_options_to_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[DryRunSettings] = []

    def fake(settings: DryRunSettings) -> DryRunReport:
        seen.append(settings)
        return DryRunReport(kernel_name="k", kernel_id="o/k", kernel_type="notebook", out_dir=tmp_path,
                            report_path=tmp_path / "report.json", scenarios=())

    monkeypatch.setattr("builder.api.dryrun.dry_run", fake)  # the CLI calls the API, the API the library function
    monkeypatch.chdir(tmp_path)  # paths are taken against the folder the command starts in, at the door
    code = main(["dry-run", "kernels/x", "--data", "d", "--scenario", "rerun", "--rerun-scale", "4", "--hidden-rows",
                 "1000", "--timeout", "60", "--legacy-layout", "--out", "o", "--owner", "me", "--keep-sandbox",
                 "--rerun-data", "h", "--memory", "16G", "--json"])
    assert code == 0
    assert [dataclasses.replace(settings, progress=None) for settings in seen] == [
        DryRunSettings(kernel_dir=tmp_path / "kernels/x", data_dir=tmp_path / "d", scenario=Scenario.RERUN, rerun_scale=4,
                       hidden_rows=1000, timeout_seconds=60.0, layout=Layout.LEGACY, out_dir=tmp_path / "o", owner="me",
                       keep_sandbox=True, rerun_data_dir=tmp_path / "h", memory_bytes=16 * 2**30)]


@pytest.mark.loopback
@pytest.mark.slow
def test_cli_exits_2_and_says_why_when_a_scenario_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["dry-run", str(FIXTURES / "wrong-column"), "--data", str(PUBLIC), "--scenario", "both",
                 "--out", str(tmp_path / "build")])
    out, err = capsys.readouterr()
    assert code == 2
    assert "Submission Scoring Error" in out and "missing column(s): target; extra column(s): prediction" in out
    assert "commit: submission.csv matches the sample submission" in out  # the fast commit is fine
    assert "error: dry run: rerun would fail on Kaggle" in err
