"""The built-in metrics beyond the correlations: relative errors, R², the F family, MCC, the weighted and
multi-label log losses and NDCG@k, each against scikit-learn or the competition's formula; their pre-scoring
checks with the exact messages; the names and aliases."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from builder.kkb_runtime import metrics
from builder.kkb_runtime.metrics import MetricError, parse_metric, score_frames, unknown_metric
from builder.kkb_runtime.vocabulary import Metric

skm = pytest.importorskip("sklearn.metrics")  # kkb does not depend on scikit-learn; CI may lack it

SEEDS = [0, 1, 2]


def score(metric: str, truth: dict[str, object], guess: dict[str, object]) -> float:
    n = len(next(iter(truth.values())))  # type: ignore[arg-type]
    ids = [str(i) for i in range(n)]
    answers, submission = pd.DataFrame({"id": ids, **truth}), pd.DataFrame({"id": ids, **guess})
    return score_frames(parse_metric(metric), submission, answers, "id", list(truth)).public


@pytest.mark.parametrize("seed", SEEDS)
def test_relative_errors_and_r2(seed: int) -> None:
    rng = np.random.default_rng(seed)
    truth = rng.random(90) * 2e-3 + 1e-4  # Optiver's realised volatility: around 1e-3
    guess = truth * (1 + rng.normal(0, 0.2, 90))
    assert score("rmspe", {"y": truth}, {"y": guess}) == pytest.approx(math.sqrt(np.mean(((truth - guess) / truth) ** 2)))
    assert score("mape", {"y": truth}, {"y": guess}) == pytest.approx(skm.mean_absolute_percentage_error(truth, guess))
    expected_smape = 100 * np.mean(2 * np.abs(guess - truth) / (np.abs(truth) + np.abs(guess)))
    assert score("smape", {"y": truth}, {"y": guess}) == pytest.approx(expected_smape)
    other = rng.random(90)
    g2 = other + rng.normal(0, 0.1, 90)
    assert score("r2", {"a": truth, "b": other}, {"a": guess, "b": g2}) == pytest.approx(
        skm.r2_score(np.c_[truth, other], np.c_[guess, g2]))


def test_smape_is_zero_where_both_are_zero() -> None:
    assert score("smape", {"y": [0.0, 2.0]}, {"y": [0.0, 2.0]}) == 0.0
    assert score("smape", {"y": [0.0, 1.0]}, {"y": [1.0, 1.0]}) == pytest.approx(100.0)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_f_family_and_mcc_match_scikit_learn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    binary, guessed = rng.integers(0, 2, 70), rng.integers(0, 2, 70)
    assert score("f1", {"y": binary}, {"y": guessed}) == pytest.approx(skm.f1_score(binary, guessed))
    assert score("fbeta@2", {"y": binary}, {"y": guessed}) == pytest.approx(skm.fbeta_score(binary, guessed, beta=2))
    assert score("fbeta@0.5", {"y": binary}, {"y": guessed}) == pytest.approx(skm.fbeta_score(binary, guessed, beta=0.5))
    classes = rng.integers(0, 4, 70)
    predicted = np.where(rng.random(70) < 0.5, classes, rng.integers(0, 5, 70))
    for name, average in (("micro_f1", "micro"), ("macro_f1", "macro")):
        assert score(name, {"y": classes}, {"y": predicted}) == pytest.approx(skm.f1_score(classes, predicted, average=average))
    assert score("mcc", {"y": classes}, {"y": predicted}) == pytest.approx(skm.matthews_corrcoef(classes, predicted))
    assert score("mcc", {"y": binary}, {"y": guessed}) == pytest.approx(skm.matthews_corrcoef(binary, guessed))
    truth_ml, guess_ml = rng.integers(0, 2, (70, 3)), rng.integers(0, 2, (70, 3))
    columns = ["a", "b", "c"]
    assert score("micro_f1", dict(zip(columns, truth_ml.T, strict=True)), dict(zip(columns, guess_ml.T, strict=True))) == (
        pytest.approx(skm.f1_score(truth_ml, guess_ml, average="micro")))


def test_labels_as_text_score_as_labels() -> None:
    truth, guess = ["cat", "dog", "dog", "cat"], ["cat", "cat", "dog", "dog"]
    assert score("macro_f1", {"y": truth}, {"y": guess}) == pytest.approx(skm.f1_score(truth, guess, average="macro"))
    assert score("mcc", {"y": truth}, {"y": guess}) == pytest.approx(skm.matthews_corrcoef(truth, guess))


@pytest.mark.parametrize("seed", SEEDS)
def test_weighted_and_multilabel_log_loss(seed: int) -> None:
    rng = np.random.default_rng(seed)
    classes = rng.choice(4, 80, p=[0.6, 0.25, 0.1, 0.05])
    weights = rng.random((80, 4)) + 0.05
    probs = weights / weights.sum(axis=1, keepdims=True)
    counts = np.bincount(classes, minlength=4)
    sample_weight = 1 / counts[classes]  # each class weighs as much as another
    onehot = {f"c{j}": (classes == j).astype(float) for j in range(4)}
    assert score("weighted_logloss", onehot, {f"c{j}": weights[:, j] for j in range(4)}) == pytest.approx(
        skm.log_loss(classes, probs, labels=[0, 1, 2, 3], sample_weight=sample_weight))
    truth = rng.integers(0, 2, (80, 3)).astype(float)
    guess = np.clip(rng.random((80, 3)), 0.02, 0.98)
    columns = ["a", "b", "c"]
    expected = np.mean([skm.log_loss(truth[:, j], guess[:, j], labels=[0, 1]) for j in range(3)])
    assert score("multilabel_logloss", dict(zip(columns, truth.T, strict=True)),
                 dict(zip(columns, guess.T, strict=True))) == pytest.approx(expected)


def test_ndcg_at_k_matches_scikit_learn() -> None:
    universe = ["a", "b", "c", "d", "e", "f"]
    truth = ["a", "c", "f", "b"]
    guess = ["b a c d e", "c a b d e", "a b c d e", "d e a c f"]
    relevance = np.array([[label == t for label in universe] for t in truth], dtype=float)
    scores = np.array([[len(universe) - g.split().index(label) if label in g.split() else 0 for label in universe]
                       for g in guess], dtype=float)
    for k in (1, 3, 5):
        assert score(f"ndcg@{k}", {"p": truth}, {"p": guess}) == pytest.approx(skm.ndcg_score(relevance, scores, k=k))


CHECKS = [
    pytest.param("multilabel_logloss", {"a": [0.2, 1.5], "b": [0.5, 0.5]}, [
        (True, "column 'a': 1 of 2 rows outside [0, 1] (e.g. 1.5): multilabel_logloss scores each column as a probability")],
        id="multilabel-range"),
    pytest.param("ndcg@2", {"p": ["a a", "b c d"]}, [
        (True, "column 'p': 1 of 2 rows repeat a label (e.g. row 0: 'a a'): ndcg@2 expects each label once per row"),
        (False, "column 'p': 1 of 2 rows hold more than 2 labels: ndcg@2 reads the first 2 only")], id="ndcg"),
    pytest.param("f1", {"y": [0, 1, 3]}, [
        (False, "column 'y': 1 of 3 rows hold labels the answers never hold (e.g. '3'; known: '0', '1', '2')")],
        id="f1-labels"),
    pytest.param("rmspe", {"y": [-1.0, 0.0]}, [], id="rmspe-predictions-of-any-sign"),
]


@pytest.mark.parametrize(("metric", "columns", "expected"), CHECKS)
def test_each_metrics_checks(metric: str, columns: dict[str, list[object]], expected: list[tuple[bool, str]]) -> None:
    labels = {column: frozenset({"0", "1", "2"}) for column in columns}
    found = metrics.check_predictions(parse_metric(metric), pd.DataFrame(columns), list(columns), labels=labels)
    assert [(f.failure, f.message) for f in found] == expected


@pytest.mark.parametrize("metric", ["rmspe", "mape"])
def test_zero_answers_make_relative_errors_undefined(metric: str) -> None:
    with pytest.raises(MetricError) as raised:
        score(metric, {"y": [0.0, 2.0]}, {"y": [1.0, 2.0]})
    assert str(raised.value) == (f"{metric}: column 'y': 1 of 2 answers are 0: {metric} divides by the answers and is "
                                 f"undefined there (the competition's data, not the submission)")


@pytest.mark.parametrize(("text", "metric", "param"), [
    ("roc_auc", Metric.AUC, None), ("log_loss", Metric.LOGLOSS, None), ("F1_Macro", Metric.MACRO_F1, None),
    ("fbeta@2", Metric.FBETA, 2.0), ("fbeta@0.5", Metric.FBETA, 0.5), ("ndcg@5", Metric.NDCG_AT_K, 5.0),
    ("ndcg@0", None, None), ("ndcg@1.5", None, None), ("fbeta@beta", None, None), ("rmspe", Metric.RMSPE, None),
])
def test_names_and_aliases(text: str, metric: Metric | None, param: float | None) -> None:
    assert (parse_metric(text).metric, parse_metric(text).param) == (metric, param)


def test_labels_show_the_parameter() -> None:
    assert [parse_metric(t).label for t in ("fbeta@0.5", "ndcg@10", "map@5", "roc_auc")] == [
        "fbeta@0.5", "ndcg@10", "map@5", "auc"]


@pytest.mark.parametrize(("text", "message"), [
    ("spearmen", "unknown metric 'spearmen' (did you mean 'spearman'?)"),
    ("map@0", "unknown metric 'map@0' (did you mean 'map@5'?)"),
    ("roc_aux", "unknown metric 'roc_aux' (did you mean 'roc_auc'?)"),
    ("banana", "unknown metric 'banana'"),
])
def test_unknown_names_suggest_only_real_names(text: str, message: str) -> None:
    assert unknown_metric(text) == message
