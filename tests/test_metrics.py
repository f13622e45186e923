"""The competition's metric (builder.kkb_runtime.metrics): the registry, the scores against scipy and
scikit-learn, each metric's checks with their exact messages, the parts, rounding that never merges what a
rank metric ranks, and the hints that say what a dry run could not check."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from builder.errors import SpecError
from builder.kkb_runtime import metrics
from builder.kkb_runtime.metric_checks import PRIVATE, PUBLIC
from builder.kkb_runtime.metrics import REGISTRY, MetricError, parse_metric, score_frames
from builder.kkb_runtime.rounding import decimals_that_keep, round_safely, ties, unrounded_columns
from builder.kkb_runtime.vocabulary import Metric
from builder.local_kaggle.scoring import ScoringError, score_submission
from builder.project.spec import parse_spec
from builder.rehearse.metric_report import metric_report
from builder.remote.hints import dry_run_hint
from tests.support.cards import kernel_stages


def test_the_registry_covers_every_metric() -> None:
    assert set(REGISTRY) == set(Metric), "builder.kkb_runtime.metrics.REGISTRY misses a Metric member"


@pytest.mark.parametrize(("text", "metric", "k"), [
    ("spearman", Metric.SPEARMAN, None), ("AUC", Metric.AUC, None), (" logloss ", Metric.LOGLOSS, None),
    ("map@5", Metric.MAP_AT_K, 5), ("MAP@12", Metric.MAP_AT_K, 12), ("map@k", None, None), ("map@0", None, None),
    ("python:metric.py", None, None), ("spearmann", None, None), (None, None, None),
])
def test_parse_metric(text: str | None, metric: Metric | None, k: int | None) -> None:
    name = parse_metric(text)
    assert (name.metric, name.k) == (metric, k)


def frames(truth: Mapping[str, object], guess: Mapping[str, object]) -> tuple[pd.DataFrame, pd.DataFrame]:
    n = len(next(iter(truth.values())))  # type: ignore[arg-type]
    ids = [str(i) for i in range(n)]
    return pd.DataFrame({"id": ids, **truth}), pd.DataFrame({"id": ids, **guess})


def score(metric: str, truth: Mapping[str, object], guess: Mapping[str, object]) -> float:
    answers, submission = frames(truth, guess)
    targets = [c for c in answers.columns if c != "id"]
    return score_frames(parse_metric(metric), submission, answers, "id", targets).public


# --- the scores against the reference implementations ----------------------------------------------------

SEEDS = [0, 1, 2]


@pytest.mark.parametrize("seed", SEEDS)
def test_correlations_and_auc_match_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 5, 60).astype(float)  # ties on both sides, as QUEST's answers
    guess = np.round(truth + rng.normal(0, 1.5, 60), 1)
    assert score("spearman", {"a": truth}, {"a": guess}) == pytest.approx(stats.spearmanr(truth, guess).statistic)
    assert score("pearson", {"a": truth}, {"a": guess}) == pytest.approx(stats.pearsonr(truth, guess).statistic)
    labels = (truth > 2).astype(float)
    u = stats.mannwhitneyu(guess[labels == 1], guess[labels == 0]).statistic
    assert score("auc", {"a": labels}, {"a": guess}) == pytest.approx(u / ((labels == 1).sum() * (labels == 0).sum()))


def test_mean_column_wise_spearman_averages_columns() -> None:
    truth = {"a": [1.0, 2, 3, 4], "b": [4.0, 3, 2, 1]}
    guess = {"a": [1.0, 2, 4, 3], "b": [1.0, 2, 3, 4]}
    expected = (stats.spearmanr(truth["a"], guess["a"]).statistic + stats.spearmanr(truth["b"], guess["b"]).statistic) / 2
    assert score("spearman", truth, guess) == pytest.approx(expected)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_other_metrics_match_scikit_learn(seed: int) -> None:
    skm = pytest.importorskip("sklearn.metrics")  # kkb does not depend on scikit-learn; CI may lack it
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, 80).astype(float)
    probs = np.clip(rng.random(80), 0.01, 0.99)
    assert score("logloss", {"y": labels}, {"y": probs}) == pytest.approx(skm.log_loss(labels, probs))
    assert score("auc", {"y": labels}, {"y": probs}) == pytest.approx(skm.roc_auc_score(labels, probs))
    classes = rng.integers(0, 4, 80)
    weights = rng.random((80, 4)) + 0.05
    onehot = {f"c{j}": (classes == j).astype(float) for j in range(4)}
    normalised = weights / weights.sum(axis=1, keepdims=True)
    assert score("logloss", onehot, {f"c{j}": weights[:, j] for j in range(4)}) == pytest.approx(
        skm.log_loss(classes, normalised, labels=[0, 1, 2, 3]))
    truth, guess = rng.random(80) * 10, rng.random(80) * 10
    assert score("rmse", {"y": truth}, {"y": guess}) == pytest.approx(math.sqrt(skm.mean_squared_error(truth, guess)))
    assert score("rmsle", {"y": truth}, {"y": guess}) == pytest.approx(math.sqrt(skm.mean_squared_log_error(truth, guess)))
    assert score("mae", {"y": truth}, {"y": guess}) == pytest.approx(skm.mean_absolute_error(truth, guess))
    predicted = np.where(rng.random(80) < 0.6, classes, rng.integers(0, 5, 80))
    assert score("accuracy", {"y": classes}, {"y": predicted}) == pytest.approx(skm.accuracy_score(classes, predicted))
    assert score("macro_f1", {"y": classes}, {"y": predicted}) == pytest.approx(skm.f1_score(classes, predicted, average="macro"))
    assert score("qwk", {"y": classes}, {"y": predicted}) == pytest.approx(
        skm.cohen_kappa_score(classes, predicted, weights="quadratic"))


def test_map_at_k_is_kaggles_apk() -> None:
    truth = {"p": ["a", "b c", "d", "e"]}
    guess = {"p": ["a x y", "c x b", "x y z", "x e"]}
    # row 1: 1; row 2: (1/1 + 2/3) / 2; row 3: 0; row 4: 1/2
    assert score("map@3", truth, guess) == pytest.approx((1 + (1 + 2 / 3) / 2 + 0 + 0.5) / 4)
    assert score("map@1", truth, guess) == pytest.approx((1 + 1 + 0 + 0) / 4)  # row 2's top label c is right
    assert metrics.average_precision_at_k(["a"], ["a", "a"], 2) == 1.0  # a repeat scores once


# --- the checks, with their exact messages ---------------------------------------------------------------

CHECKS = [
    pytest.param("spearman", {"a": [0.5, 0.5, 0.5], "b": [0.1, 0.2, 0.3]}, [
        (True, "column 'a': constant predictions (0.5 in all 3 rows): spearman is undefined for a constant column "
               "(Kaggle's scorer fails)")], id="spearman-constant"),
    pytest.param("pearson", {"a": [1, 1]}, [
        (True, "column 'a': constant predictions (1 in all 2 rows): pearson is undefined for a constant column "
               "(Kaggle's scorer fails)")], id="pearson-constant"),
    pytest.param("auc", {"a": [0.3, 0.3]}, [
        (False, "column 'a': constant predictions (0.3 in all 2 rows): auc scores 0.5 for a constant column (Kaggle "
                "scores it; the column ranks nothing)")], id="auc-constant-is-a-warning"),
    pytest.param("logloss", {"p": [0.2, 1.5, -0.1]}, [
        (True, "column 'p': 2 of 3 rows outside [0, 1] (e.g. 1.5, -0.1): logloss scores probabilities")], id="logloss-range"),
    pytest.param("logloss", {"p": [0.0, 0.4, 1.0]}, [
        (False, "column 'p': 2 of 3 rows are exactly 0 or 1: logloss clips them to 1e-15 and each wrong one costs about "
                "34.5 (clip them, e.g. [[postprocess]] kind = \"clip\")")], id="logloss-certain"),
    pytest.param("logloss", {"a": [0.5, 0.2, 0.7], "b": [0.5, 0.8, 0.1]}, [
        (False, "columns 'a', 'b': 1 of 3 rows do not sum to 1 over 2 columns (e.g. row 2: 0.8): logloss rescales each "
                "row to sum to 1")], id="logloss-row-sums"),
    pytest.param("logloss", {"a": [2.0, -1.0], "b": [1.5, 3.0]}, [
        (True, "column 'a': 1 of 2 rows negative (e.g. -1.0): logloss scores probabilities")],
        id="multiclass-logloss-weights-above-1-are-rescaled"),
    pytest.param("rmsle", {"y": [1.0, -2.0, -0.5, 3.0]}, [
        (True, "column 'y': 2 of 4 rows negative (e.g. -2.0, -0.5): rmsle takes the log of 1 + value and needs values >= 0")],
        id="rmsle-negative"),
    pytest.param("rmse", {"y": [-1.0, -1.0]}, [], id="rmse-checks-nothing"),
    pytest.param("mae", {"y": [5.0, 5.0]}, [], id="mae-checks-nothing"),
    pytest.param("map@2", {"p": ["a b", "c c", "d e f"]}, [
        (True, "column 'p': 1 of 3 rows repeat a label (e.g. row 1: 'c c'): map@2 expects each label once per row"),
        (False, "column 'p': 1 of 3 rows hold more than 2 labels: map@2 reads the first 2 only")], id="map-at-k"),
    pytest.param("accuracy", {"y": [0, 1, 7]}, [
        (False, "column 'y': 1 of 3 rows hold labels the answers never hold (e.g. '7'; known: '0', '1', '2')")],
        id="accuracy-labels"),
    pytest.param("macro_f1", {"y": ["cat", "dog"]}, [
        (False, "column 'y': 2 of 2 rows hold labels the answers never hold (e.g. 'cat', 'dog'; known: '0', '1', '2')")],
        id="macro-f1-labels"),
    pytest.param("qwk", {"y": [0.0, 2.0]}, [], id="qwk-1.0-is-the-label-1"),
    pytest.param("python:metric.py", {"y": [1, 1]}, [], id="unknown-metric-no-check"),
]


@pytest.mark.parametrize(("metric", "columns", "expected"), CHECKS)
def test_each_metrics_checks(metric: str, columns: dict[str, list[object]], expected: list[tuple[bool, str]]) -> None:
    frame = pd.DataFrame(columns)
    labels = {column: frozenset({"0", "1", "2"}) for column in columns}
    found = metrics.check_predictions(parse_metric(metric), frame, list(columns), labels=labels)
    assert [(f.failure, f.message) for f in found] == expected


def test_checks_per_part_name_the_part_and_say_a_whole_file_finding_once() -> None:
    frame = pd.DataFrame({"a": [0.5, 0.5, 0.1, 0.9], "b": [0.2, 0.2, 0.2, 0.2]})
    parts = {PUBLIC: np.array([True, True, False, False]), PRIVATE: np.array([False, False, True, True])}
    found = metrics.check_predictions(parse_metric("spearman"), frame, ["a", "b"], parts)
    assert [f.message.split(":")[0] for f in found] == ["column 'b'", "column 'a' on the public part"]
    assert (found[1].rows, found[1].total, found[1].part) == (2, 2, PUBLIC)


# --- the scorer: metric, column, part; constant answers told from constant predictions ---------------------

SCORER_ERRORS = [
    pytest.param({"a": [1.0, 2, 3, 4]}, {"a": [0.5, 0.5, 0.1, 0.9]},
                 "spearman: column 'a' on the public part: constant predictions (0.5 in all 2 rows): spearman is undefined "
                 "for a constant column (Kaggle's scorer fails)", id="predictions-public"),
    pytest.param({"a": [1.0, 1.0, 3, 4]}, {"a": [0.1, 0.2, 0.3, 0.4]},
                 "spearman: column 'a' on the public part: the answers are constant (1.0 in all 2 rows): spearman is "
                 "undefined whatever the predictions (the competition's data, not the submission)", id="answers-public"),
    pytest.param({"a": [1.0, 2, 3, 4]}, {"a": [0.1, 0.2, 0.7, 0.7]},
                 "spearman: column 'a' on the private part: constant predictions (0.7 in all 2 rows): spearman is "
                 "undefined for a constant column (Kaggle's scorer fails)", id="predictions-private"),
]


@pytest.mark.parametrize(("truth", "guess", "message"), SCORER_ERRORS)
def test_the_local_scorer_names_metric_column_and_part(tmp_path: Path, truth: dict, guess: dict, message: str) -> None:
    answers, submission = frames(truth, guess)
    answers["Usage"] = ["Public", "Public", "Private", "Private"]
    answers.to_csv(tmp_path / "answers.csv", index=False)
    submission.to_csv(tmp_path / "submission.csv", index=False)
    with pytest.raises(ScoringError) as raised:
        score_submission(tmp_path / "submission.csv", tmp_path / "answers.csv", "spearman", "id", ["a"], tmp_path)
    assert str(raised.value) == message


def test_constant_part_chance_is_the_hypergeometric_chance() -> None:
    values = pd.Series([0.0] * 90 + [1.0] * 10)
    # all 5 rows drawn from the 90 zeros (the 10 ones cannot fill 5 alone... they can: C(10, 5) too)
    expected = stats.hypergeom(100, 90, 5).pmf(5) + stats.hypergeom(100, 10, 5).pmf(5)
    assert metrics.constant_part_chance(values, 5) == pytest.approx(expected)
    assert metrics.constant_part_chance(pd.Series(range(100)), 5) == 0.0
    assert metrics.constant_part_chance(values, 0) == 0.0
    # a part larger than the run (the hidden test's size): rows drawn with the values' proportions
    assert metrics.constant_part_chance(values, 200) == pytest.approx(0.9**200 + 0.1**200)


# --- rounding that never merges what a rank metric ranks ------------------------------------------------

def generated_columns(seed: int) -> pd.DataFrame:
    """QUEST-like predictions: a few discretised columns (an OptimizedRounder's levels), close floats, noise."""
    rng = np.random.default_rng(seed)
    n = 200
    return pd.DataFrame({
        "levels": rng.choice([0.3333333, 0.3333334, 0.6666667, 1.0], n),
        "close": 0.5 + rng.integers(0, 3, n) * 1e-4,
        "nearly_constant": np.where(np.arange(n) == 7, 0.90004, 0.9),
        "smooth": rng.random(n),
    })


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("decimals", [0, 1, 2, 4, 6])
def test_rounding_for_a_rank_metric_merges_no_two_predictions(seed: int, decimals: int) -> None:
    frame = generated_columns(seed)
    targets = list(frame.columns)
    rounded, records = round_safely(frame, targets, decimals, parse_metric("spearman"), targets)
    parts = np.arange(len(frame)) % 5 == 0  # any split: a public part of every fifth row
    for column in targets:
        for mask in (parts, ~parts, np.ones(len(frame), bool)):
            assert rounded[column][mask].nunique() == frame[column][mask].nunique(), (column, decimals)
    for record in records:
        assert record.used is None or record.used >= decimals
        assert record.distinct_after == record.distinct_before
        if record.used == decimals:
            assert not record.changed and record.why == ""


def test_rounding_keeps_the_decimals_it_needs_and_says_why() -> None:
    frame = pd.DataFrame({"q": [0.5, 0.5004, 0.5, 0.5004], "r": [0.12, 0.34, 0.56, 0.78]})
    rounded, records = round_safely(frame, ["q", "r"], 1, parse_metric("spearman"), ["q", "r"])
    assert rounded["q"].tolist() == [0.5, 0.5004, 0.5, 0.5004]
    assert [record.line() for record in records] == [
        "column 'q': 4 decimals (requested 1): 1 decimals would merge its 2 distinct values into 1, and spearman ranks "
        "them (a column constant on a part fails the scorer); ties 4 -> 4 of 4 rows",
        "column 'r': 1 decimals, ties 0 -> 0 of 4 rows",
    ]
    assert rounded["r"].tolist() == [0.1, 0.3, 0.6, 0.8]


def test_rounding_for_other_metrics_and_round_false_columns() -> None:
    frame = pd.DataFrame({"q": [0.5, 0.5004], "r": [0.123456, 0.5]})
    rounded, _ = round_safely(frame, ["q", "r"], 1, parse_metric("rmse"), ["q", "r"])
    assert rounded["q"].tolist() == [0.5, 0.5]  # RMSE does not rank: as requested
    rounded, records = round_safely(frame, ["q", "r"], 1, parse_metric("spearman"), ["q", "r"], unrounded={"r"})
    assert rounded["r"].tolist() == [0.123456, 0.5] and records[1].used is None
    assert records[1].why == "round = false (its values are the post-processing's on purpose)"
    assert decimals_that_keep(pd.Series([0.1, 0.1 + 1e-17]), 2) == 2  # float noise is no distinct value
    assert ties(pd.Series([1, 1, 2, 3, 3, 3])) == 5


def test_unrounded_columns_from_postprocess_stages() -> None:
    stages = kernel_stages({"kind": "argmax", "into": "label", "round": False}, {"kind": "clip", "columns": ["x"], "min": 0},
                           {"kind": "function", "function": "m:f", "columns": ["q1", "q2"], "round": False})
    assert unrounded_columns(stages, ["z"], ["label", "x", "q1", "q2", "z"]) == {"label", "q1", "q2", "z"}
    assert unrounded_columns(kernel_stages({"kind": "function", "function": "m:f", "round": False}), [], ["a", "b"]) == {"a", "b"}


# --- the dry run's metric report and the hints -------------------------------------------------------------

def test_the_expected_score_is_the_local_scorers(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    answers, submission = frames({"a": rng.integers(0, 4, 40).astype(float)}, {"a": rng.random(40).round(3)})
    answers["Usage"] = ["Public"] * 10 + ["Private"] * 30
    answers.to_csv(tmp_path / "answers.csv", index=False)
    submission.to_csv(tmp_path / "submission.csv", index=False)
    submission.assign(a=0.0).to_csv(tmp_path / "sample.csv", index=False)
    report = metric_report("spearman", tmp_path / "submission.csv", tmp_path / "sample.csv", "id", ["a"], tmp_path,
                           answers=tmp_path / "answers.csv")
    scored = score_submission(tmp_path / "submission.csv", tmp_path / "answers.csv", "spearman", "id", ["a"], tmp_path,
                              sample_csv=tmp_path / "sample.csv")
    assert report.expected is not None and report.split == "the answers' Usage"
    assert (f"{report.expected['public']:.5f}", f"{report.expected['private']:.5f}") == (f"{scored.public:.5f}",
                                                                                          f"{scored.private:.5f}")
    assert report.lines[-1] == f"expected score (spearman): public {scored.public:.5f}, private {scored.private:.5f}"


def test_without_the_split_the_report_warns_of_a_likely_constant_public_part(tmp_path: Path) -> None:
    frame = pd.DataFrame({"id": [str(i) for i in range(20)], "a": [0.5] * 19 + [0.6], "b": np.linspace(0, 1, 20)})
    frame.to_csv(tmp_path / "submission.csv", index=False)
    frame.assign(a=0.0, b=0.0).to_csv(tmp_path / "sample.csv", index=False)
    report = metric_report("spearman", tmp_path / "submission.csv", tmp_path / "sample.csv", "id", [], tmp_path)
    assert report.failures == () and report.split == "unknown"
    assert report.warnings == ("spearman: column 'a': a random public part of 4 rows (0.2 of 20 test rows, [competition] "
                               "public_fraction) is constant with a chance of 80.00%, the private part with 20.00%: the scorer "
                               "would fail (set [competition] public_ids to check the real split)",)
    unknown = metric_report("spearmann", tmp_path / "submission.csv", tmp_path / "sample.csv", "id", [], tmp_path)
    assert unknown.note == ("kkb does not know the metric 'spearmann' (did you mean 'spearman'?): no metric-specific "
                            "check, rounding as requested")


def test_the_scoring_error_hint_says_what_the_dry_run_cannot_check() -> None:
    given = dry_run_hint("Submission Scoring Error: spearman: column 'a' on the public part: constant", "k", "spearman")
    assert given.startswith("the server names the reason above; kkb dry-run k checks")
    silent = dry_run_hint("Submission Scoring Error", "k", "spearman")
    assert silent.startswith("Kaggle gives no reason. kkb dry-run k checks the CSV against sample_submission.csv")
    assert "the spearman checks (no constant column per part)" in silent
    assert silent.endswith("it cannot check the hidden test's own values (the dry run scores the rerun on the data it "
                           "was given) nor the public/private split unless [competition] public_ids names it (else only "
                           "the chance of a constant public part is estimated)")
    assert "no metric check ([competition] metric is not set)" in dry_run_hint("Submission Scoring Error", "k")


def test_unknown_metrics_raise_no_metric_error() -> None:
    with pytest.raises(MetricError, match="kkb has no implementation of the metric 'python:m.py'"):
        score_frames(parse_metric("python:m.py"), *frames({"a": [1]}, {"a": [1]})[::-1], "id", ["a"])


# --- kernel.toml: the metric, the split, round = false -------------------------------------------------------

SPEC = {"kernel": {"title": "KKB Minimal Inference", "owner": "someone"},
        "steps": [{"name": "a", "run": "python predict.py --out {out}"}]}


def test_kernel_toml_takes_the_metric_the_split_and_round_false() -> None:
    spec = parse_spec({**SPEC, "competition": {"slug": "quest", "metric": "spearman", "public_ids": "public_ids.txt"},
                       "submission": {"unrounded": ["q3"]},
                       "postprocess": [{"kind": "function", "function": "rounder:apply", "columns": ["q1"], "round": False}]})
    assert (spec.competition.metric, spec.competition.public_ids, spec.competition.public_fraction) == (
        "spearman", "public_ids.txt", 0.2)
    assert spec.submission.unrounded == ["q3"] and spec.postprocess[0].round is False


@pytest.mark.parametrize(("competition", "message"), [
    ({"slug": "quest", "public_fraction": 1.5}, "kernel.toml: competition.public_fraction: Input should be less than 1"),
    ({"slug": "quest", "public_ids": "/abs/ids.txt"}, "kernel.toml: competition.public_ids: "),
])
def test_kernel_toml_refuses_a_bad_split(competition: dict, message: str) -> None:
    with pytest.raises(SpecError) as raised:
        parse_spec({**SPEC, "competition": competition})
    assert raised.value.message.startswith(message), raised.value.message
