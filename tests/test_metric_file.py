"""The competition's own metric file in Kaggle's format: score(solution, submission, row_id_column_name, **kwargs)
with metric_args, Usage dropped, ParticipantVisibleError as the Submission Scoring Error, any other exception
named as the metric's own failure, the kaggle_metric_utilities stand-in; the dry run's expected score equal to the
local Kaggle's score of the same file; the build checks of the file and of public_ids; the answers checked before
the rerun."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from builder import cli
from builder.build import BuildSettings, build_kernel
from builder.errors import DryRunError, SpecError
from builder.kkb_runtime import kaggle_metric_utilities as kmu
from builder.kkb_runtime.metric_file import MetricFile, MetricFileError, metric_file_reference, score_with_file
from builder.kkb_runtime.metrics import MetricError, parse_metric, score_frames, scores_floats
from builder.kkb_runtime.submission import check_submission
from builder.kkb_runtime.vocabulary import Scenario
from builder.local_kaggle.competition import load_competition
from builder.local_kaggle.scoring import ScoringError, score_submission
from builder.project.init import init_from_competition
from builder.rehearse.dryrun import DryRunSettings, dry_run
from tests.support.files import KERNELS

RMSPE = '''
import numpy as np
import pandas as pd

import kaggle_metric_utilities


class ParticipantVisibleError(Exception):
    pass


def score(solution: pd.DataFrame, submission: pd.DataFrame, row_id_column_name: str, epsilon: float = 0.0) -> float:
    """Root mean squared percentage error; epsilon is added to each answer's magnitude."""
    if "Usage" in solution.columns:
        raise AssertionError("Kaggle drops Usage from the solution")
    del solution[row_id_column_name]
    del submission[row_id_column_name]
    if MODE == "participant":
        raise ParticipantVisibleError("Submission values must be finite and positive")
    if MODE == "keyerror":
        return float(solution["no such column"].sum())
    y, p = solution["target"].to_numpy(), submission["target"].to_numpy()
    return float(kaggle_metric_utilities.safe_call_score(lambda s, t: np.sqrt(np.mean(((s - t) / (np.abs(s) + epsilon)) ** 2)), y, p))
'''


def metric_source(mode: str = "good") -> str:
    return f"MODE = {mode!r}\n" + RMSPE


def frames(n: int = 20, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    truth = rng.random(n) + 0.5
    ids = [f"r{i}" for i in range(n)]
    answers = pd.DataFrame({"id": ids, "target": truth, "Usage": ["Public"] * (n // 4) + ["Private"] * (n - n // 4)})
    submission = pd.DataFrame({"id": ids[::-1], "target": (truth * (1 + rng.normal(0, 0.1, n)))[::-1]})
    return answers, submission


@pytest.mark.parametrize(("text", "expected"), [
    ("metric.py", MetricFile("metric.py")), ("sub/metric.py:rmspe", MetricFile("sub/metric.py", "rmspe")),
    ("pkg.metric:score", MetricFile("pkg/metric.py")), ("python:m.py", MetricFile("m.py")), ("rmspe", None), ("map@5", None),
])
def test_metric_file_references(text: str, expected: MetricFile | None) -> None:
    assert metric_file_reference(text) == expected


def test_a_kaggle_format_file_scores_each_part_with_its_arguments(tmp_path: Path) -> None:
    (tmp_path / "metric.py").write_text(metric_source())
    answers, submission = frames()
    plain = score_with_file(MetricFile("metric.py"), tmp_path, submission, answers, "id", ["target"])
    builtin = score_frames(parse_metric("rmspe"), submission, answers, "id", ["target"])
    assert plain.split and (plain.public, plain.private) == pytest.approx((builtin.public, builtin.private))
    shifted = score_with_file(MetricFile("metric.py"), tmp_path, submission, answers, "id", ["target"], {"epsilon": 0.5})
    assert shifted.public < plain.public
    assert "kaggle_metric_utilities" not in __import__("sys").modules  # the stand-in is there while the file loads only


def test_participant_visible_error_is_the_scoring_error_and_other_errors_are_the_metrics(tmp_path: Path) -> None:
    answers, submission = frames()
    (tmp_path / "metric.py").write_text(metric_source("participant"))
    with pytest.raises(MetricError) as scored:
        score_with_file(MetricFile("metric.py"), tmp_path, submission, answers, "id", ["target"])
    assert str(scored.value) == "metric.py on the public part: Submission values must be finite and positive"
    (tmp_path / "metric.py").write_text(metric_source("keyerror"))
    with pytest.raises(MetricFileError) as failed:
        score_with_file(MetricFile("metric.py"), tmp_path, submission, answers, "id", ["target"])
    assert str(failed.value) == ("the metric metric.py failed (line 22: KeyError: 'no such column'); the competition's "
                                 "metric, not the submission")


def test_the_stand_in_behaves_as_kaggles_utilities() -> None:
    numbers = pd.DataFrame({"a": [0.1, 0.2]})
    assert kmu.treat_as_participant_error("shapes differ", numbers)
    assert not kmu.treat_as_participant_error("row 3 differs", numbers)
    assert not kmu.treat_as_participant_error("shapes differ", pd.DataFrame({"a": ["x"]}))

    def broken(solution: pd.DataFrame, submission: pd.DataFrame) -> float:
        raise ValueError("shapes differ")

    with pytest.raises(kmu.ParticipantVisibleError, match="shapes differ"):
        kmu.safe_call_score(broken, numbers, numbers)
    with pytest.raises(kmu.ParticipantVisibleError, match="do not add to one"):
        kmu.verify_valid_probabilities(pd.DataFrame({"a": [0.5], "b": [0.2]}), "submission")
    # a detected anomaly counts from its start (Kaggle's loop stops short of row 0, and so does the stand-in)
    adjusted = kmu.adjust_predictions(np.array([0.9, 0.9, 0.1, 0.9]), np.array([0, 1, 1, 0]), threshold=0.5)
    assert adjusted.tolist() == [False, True, True, False]


def test_the_local_scorer_runs_the_file_from_competition_toml(tmp_path: Path) -> None:
    answers, submission = frames()
    (tmp_path / "metric.py").write_text(metric_source("keyerror"))
    answers.to_csv(tmp_path / "answers.csv", index=False)
    submission.to_csv(tmp_path / "submission.csv", index=False)
    submission.assign(target=0.0).to_csv(tmp_path / "sample.csv", index=False)
    with pytest.raises(ScoringError, match=r"the metric metric.py failed \(line 22: KeyError"):
        score_submission(tmp_path / "submission.csv", tmp_path / "answers.csv", "metric.py", "id", ["target"], tmp_path,
                         sample_csv=tmp_path / "sample.csv")


# --- end to end: the minimal example with the file ------------------------------------------------------------

def minimal_with_metric(tmp_path: Path, mode: str = "good", args: str = "{ epsilon = 0.5 }") -> Path:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal"))
    competition = kernel / "data" / "competition"
    (competition / "metric.py").write_text(metric_source(mode))
    answers = pd.read_csv(competition / "answers.csv", dtype={"id": str})
    answers["Usage"] = np.where(np.arange(len(answers)) % 3 == 0, "Public", "Private")
    answers.to_csv(competition / "answers.csv", index=False)
    toml = (competition / "competition.toml").read_text().replace('metric = "rmse"', f'metric = "metric.py"\nmetric_args = {args}')
    (competition / "competition.toml").write_text(toml)
    spec = (kernel / "kernel.toml").read_text().replace(
        'hidden_rows = 200', f'hidden_rows = 200\nmetric = "data/competition/metric.py"\nmetric_args = {args}')
    (kernel / "kernel.toml").write_text(spec)
    return kernel


@pytest.mark.slow
def test_the_expected_score_is_the_local_kaggles_score_of_the_same_file(tmp_path: Path) -> None:
    kernel = minimal_with_metric(tmp_path)
    competition = kernel / "data" / "competition"
    report = dry_run(DryRunSettings(kernel_dir=kernel, scenario=Scenario.RERUN, rerun_data_dir=competition / "hidden",
                                    out_dir=tmp_path / "build"))
    (rerun,) = report.scenarios
    assert rerun.verdict.name == "OK", rerun.verdict
    assert rerun.metric is not None
    expected = rerun.metric["expected"]
    config = load_competition(competition)
    assert (config.metric, config.metric_args) == ("metric.py", {"epsilon": 0.5})
    assert rerun.submission is not None
    scored = score_submission(rerun.submission, competition / "answers.csv", config.metric, config.id_column,
                              config.target_columns, competition, metric_args=config.metric_args)
    assert expected["split"] is True
    assert (expected["public"], expected["private"]) == (round(scored.public, 5), round(scored.private, 5))
    assert rerun.metric["lines"][0] == "metric: data/competition/metric.py (split: the answers' Usage)"


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "code", "said"), [
    ("participant", 2, "Submission values must be finite and positive"),
    ("keyerror", 0, "the metric metric.py failed (line 22: KeyError: 'no such column'); the competition's metric, not "
                    "the submission"),
])
def test_the_files_errors_in_the_dry_run(tmp_path: Path, mode: str, code: int, said: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    kernel = minimal_with_metric(tmp_path, mode)
    hidden = kernel / "data" / "competition" / "hidden"
    exit_code = cli.main(["dry-run", str(kernel), "--scenario", "rerun", "--rerun-data", str(hidden),
                          "--out", str(tmp_path / "build")])
    out = capsys.readouterr().out
    assert exit_code == code, out
    assert said in " ".join(out.split())
    verdict = json.loads((tmp_path / "build" / "dryrun" / "report.json").read_text())["scenarios"][0]["verdict"]
    if mode == "participant":
        assert verdict["reason"] == "metric.py on the public part: Submission values must be finite and positive"


# --- build checks -----------------------------------------------------------------------------------------------

def _build(kernel: Path, tmp_path: Path) -> None:
    build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "out"))


@pytest.mark.parametrize(("change", "message"), [
    (('metric = "data/competition/metric.py"', 'metric = "nope.py"'), "competition.metric: the metric file "),
    (('metric = "data/competition/metric.py"', 'metric = "data/competition/metric.py:rmspe"'),
     "competition.metric: metric.py defines no function rmspe()"),
    (("epsilon = 0.5", "epsilom = 0.5"), "competition.metric_args: score() in metric.py takes no argument 'epsilom'"),
    (('metric = "data/competition/metric.py"', 'metric = "rmspe"'),
     "competition.metric_args: set, but the metric 'rmspe' is kkb's own and takes no arguments"),
])
def test_the_build_refuses_a_wrong_metric_file(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    kernel = minimal_with_metric(tmp_path)
    (kernel / "kernel.toml").write_text((kernel / "kernel.toml").read_text().replace(*change))
    with pytest.raises(SpecError) as raised:
        _build(kernel, tmp_path)
    assert message in raised.value.message


def test_build_refuses_an_unknown_metric_name_with_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal"))
    spec = (kernel / "kernel.toml").read_text().replace("hidden_rows = 200", 'hidden_rows = 200\nmetric = "spearmen"')
    (kernel / "kernel.toml").write_text(spec)
    assert cli.main(["build", str(kernel), "--out", str(tmp_path / "out")]) == 1
    assert "did you mean 'spearman'?" in capsys.readouterr().err.replace("\n", " ")


def with_public_ids(tmp_path: Path, text: str | None) -> Path:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal"))
    spec = (kernel / "kernel.toml").read_text().replace("hidden_rows = 200", 'hidden_rows = 200\npublic_ids = "public.txt"')
    (kernel / "kernel.toml").write_text(spec)
    if text is not None:
        (kernel / "public.txt").write_text(text)
    return kernel


@pytest.mark.parametrize(("text", "message"), [
    (None, "public.txt does not exist"),
    ("x,y\nh0000,1\n", "has 2 columns (x, y) and none is the id column 'id'"),
    ("0\n1\n2\n", "3 of 3 ids in "),
    ("", "holds no id"),
])
def test_build_refuses_a_missing_or_foreign_public_ids_file(tmp_path: Path, text: str | None, message: str) -> None:
    kernel = with_public_ids(tmp_path, text)
    with pytest.raises(SpecError) as raised:
        _build(kernel, tmp_path)
    assert raised.value.message.startswith(f"{kernel / 'kernel.toml'}: competition.public_ids: ")
    assert message in raised.value.message


def test_public_ids_are_checked_against_the_public_test_only(tmp_path: Path) -> None:
    """Valid on the public test: built, and a hidden stand-in that lacks them is a note of the dry run, never a refusal;
    an id the public test lacks is refused naming it."""
    public = KERNELS / "minimal" / "data" / "competition" / "public" / "sample_submission.csv"
    ids = list(pd.read_csv(public, dtype=str)["id"])
    kernel = with_public_ids(tmp_path, "\n".join(ids[:2] + ["h0007"]) + "\n")
    with pytest.raises(SpecError) as raised:
        _build(kernel, tmp_path)
    assert raised.value.message == (f"{kernel / 'kernel.toml'}: competition.public_ids: 1 of 3 ids in {kernel / 'public.txt'} "
                                    f"are not ids of the public test ({kernel / 'data/competition/public/sample_submission.csv'})"
                                    " (e.g. 'h0007')")
    (kernel / "public.txt").write_text("id,other\n" + "\n".join(f"{i},x" for i in ids) + "\n")  # every public id
    report = dry_run(DryRunSettings(kernel_dir=kernel, scenario=Scenario.RERUN, out_dir=tmp_path / "build",
                                    rerun_data_dir=kernel / "data" / "competition" / "hidden"))
    (rerun,) = report.scenarios
    assert rerun.ok, rerun.verdict
    assert rerun.metric is not None and rerun.metric["split"] == "unknown"
    assert any(warning.startswith(f"[competition] public_ids: 0 of {len(ids)} public ids are ids of this rerun's test")
               for warning in rerun.metric["warnings"]), rerun.metric["warnings"]


# --- answers checked before the rerun ------------------------------------------------------------------------------

@pytest.mark.parametrize(("answers", "message"), [
    (None, "does not exist"),
    ("id,other\nh0000,1\n", "lacks the columns 'target'"),
    ("id,target\nzzz,1\n", "does not answer the rerun's test (200 ids): 200 test ids have no answer (e.g. 'h0000', "
                           "'h0001', 'h0002'); 1 answer ids are not in the test (e.g. 'zzz')"),
])
def test_answers_are_checked_before_the_rerun(tmp_path: Path, answers: str | None, message: str) -> None:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal"))
    path = tmp_path / "answers.csv"
    if answers is not None:
        path.write_text(answers)
    with pytest.raises(DryRunError) as raised:
        dry_run(DryRunSettings(kernel_dir=kernel, scenario=Scenario.RERUN, out_dir=tmp_path / "build", answers=path,
                               rerun_data_dir=kernel / "data" / "competition" / "hidden"))
    assert message in raised.value.message
    assert not (tmp_path / "build" / "dryrun").exists()  # nothing ran


# --- format rules that ask the metric ---------------------------------------------------------------------------

def integer_zero_sample_kernel(tmp_path: Path, metric: str) -> Path:
    """The minimal kernel under ``metric`` with Bike Sharing's sample: integer 0s; its predictions are fractional."""
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal"))
    for part in ("public", "hidden"):
        sample = kernel / "data" / "competition" / part / "sample_submission.csv"
        sample.write_text(sample.read_text().replace(",0.0\n", ",0\n"))
    spec = (kernel / "kernel.toml").read_text().replace("hidden_rows = 200", f'hidden_rows = 200\nmetric = "{metric}"')
    (kernel / "kernel.toml").write_text(spec + '\n[[postprocess]]\nkind = "clip"\nmin = 0\n')
    return kernel


@pytest.mark.slow
@pytest.mark.parametrize(("metric", "verdict"), [("rmsle", "OK"), ("accuracy", "Submission CSV Not Found")])
def test_fractional_predictions_over_an_integer_zero_sample_follow_the_metric(tmp_path: Path, metric: str,
                                                                              verdict: str) -> None:
    kernel = integer_zero_sample_kernel(tmp_path, metric)
    report = dry_run(DryRunSettings(kernel_dir=kernel, scenario=Scenario.RERUN, out_dir=tmp_path / "build",
                                    rerun_data_dir=kernel / "data" / "competition" / "hidden"))
    (rerun,) = report.scenarios
    assert rerun.verdict.name == verdict, rerun.verdict
    if metric == "accuracy":
        assert "float values in column 'target', where the sample submission holds integers" in rerun.verdict.reason


def test_the_format_rule_asks_the_metric() -> None:
    sample = pd.DataFrame({"id": ["a", "b"], "y": [0, 0]})
    frame = pd.DataFrame({"id": ["a", "b"], "y": [0.25, 3.5]})
    assert check_submission(frame, sample, "id", ["y"], float_targets=scores_floats(parse_metric("rmsle"))) == []
    assert check_submission(frame, sample, "id", ["y"], float_targets=scores_floats(parse_metric("qwk")))[0].startswith(
        "float values in column 'y', where the sample submission holds integers")
    assert check_submission(frame, sample, "id", ["y"])[0].startswith("fractional values in column 'y'")  # no metric


# --- kkb init --competition ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("layout", "expected"), [
    ({"data/c/metric.py": metric_source()}, 'metric = "data/c/metric.py"  # the competition\'s own metric file'),
    ({"data/competition.toml": 'metric = "rmsle"\n'}, 'metric = "rmsle"  # from '),
    ({"data/competition.toml": 'metric = "m.py"\n', "data/m.py": metric_source()}, 'metric = "data/m.py"  # from '),
    ({}, '# metric = "rmse"  # the competition\'s metric'),
])
def test_init_picks_the_competitions_metric(tmp_path: Path, layout: dict[str, str], expected: str) -> None:
    kernel = tmp_path / "new"
    data = Path(shutil.copytree(KERNELS / "minimal" / "data" / "competition" / "public", kernel / "data" / "c"))
    for name, text in layout.items():
        (kernel / name).write_text(text)
    init_from_competition(kernel, "kkb-minimal", data, owner="someone")
    assert expected in (kernel / "kernel.toml").read_text()
