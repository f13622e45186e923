"""Each metric's score: ``(solution, submission aligned row by row, target columns, parameter) -> float``.

The parameter is MAP@k's and NDCG@k's k, F-beta's beta (None for the rest). Several target columns are
scored one by one and averaged (Kaggle's "mean column-wise" convention) unless the metric pools them (micro
F1 and multi-label log loss over 0/1 columns, multi-class log loss over one-hot columns). The scores match
scipy's and scikit-learn's, or the competition's evaluation formula (``tests/test_metrics.py``); numpy and
pandas only, so this runs inside a kernel too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .metric_checks import label_text, ranked_labels
from .vocabulary import Metric

if TYPE_CHECKING:  # imported where used: importing kkb_runtime stays free of them (kkb_runtime/__init__)
    import numpy as np
    import pandas as pd


class MetricError(ValueError):
    """The file cannot be scored ("Submission Scoring Error"); the message names the metric, column and part."""


Score = Callable[["pd.DataFrame", "pd.DataFrame", Sequence[str], "float | None"], float]


def _numbers(frame: pd.DataFrame, targets: Sequence[str], what: str) -> np.ndarray:
    import numpy as np
    try:
        return np.asarray(frame[list(targets)].astype(float).to_numpy(), dtype=float)
    except (TypeError, ValueError) as exc:
        raise MetricError(f"non-numeric {what}: {exc}") from None


def _ranks(values: np.ndarray) -> np.ndarray:
    import numpy as np
    import pandas as pd
    return np.asarray(pd.Series(values).rank(method="average").to_numpy(dtype=float), dtype=float)


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    denominator = math.sqrt(float((a * a).sum()) * float((b * b).sum()))
    return float((a * b).sum()) / denominator if denominator > 0 else math.nan


def _mean_correlation(ranked: bool) -> Score:
    def score(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
        import numpy as np

        truth, guess = _numbers(solution, targets, "answers"), _numbers(submission, targets, "predictions")
        values = []
        for j, column in enumerate(targets):
            a, b = (_ranks(truth[:, j]), _ranks(guess[:, j])) if ranked else (truth[:, j], guess[:, j])
            value = _correlation(a, b)
            if not math.isfinite(value):
                raise MetricError(f"column '{column}': the correlation is undefined (a constant column)")
            values.append(value)
        return float(np.mean(values))

    return score


def _auc(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
    import numpy as np
    truth, scores = _numbers(solution, targets, "answers"), _numbers(submission, targets, "predictions")
    values = []
    for j, column in enumerate(targets):
        if not np.isin(truth[:, j], (0.0, 1.0)).all():
            raise MetricError(f"column '{column}': AUC needs 0/1 answers")
        positive = truth[:, j] == 1
        n_pos, n_neg = int(positive.sum()), int((~positive).sum())
        if n_pos == 0 or n_neg == 0:
            raise MetricError(f"column '{column}': AUC is undefined, the answers hold one class only")
        ranks = _ranks(scores[:, j])
        values.append((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
    return float(np.mean(values))


LOGLOSS_EPS = 1e-15


def _logloss(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
    import numpy as np
    truth, raw = _numbers(solution, targets, "answers"), _numbers(submission, targets, "predictions")
    if len(targets) > 1 and np.allclose(truth.sum(axis=1), 1.0):
        # One-hot answers: multi-class log loss; each row is rescaled to sum to one, then clipped (Kaggle's rule).
        return float(-np.mean(np.sum(truth * np.log(_distributions(raw)), axis=1)))
    probs = np.clip(raw, LOGLOSS_EPS, 1 - LOGLOSS_EPS)
    return float(-np.mean(truth * np.log(probs) + (1 - truth) * np.log(1 - probs)))


def _rmse(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
    import numpy as np
    diff = _numbers(solution, targets, "answers") - _numbers(submission, targets, "predictions")
    return float(np.sqrt(np.mean(diff**2)))


def _rmsle(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
    import numpy as np
    truth, guess = _numbers(solution, targets, "answers"), _numbers(submission, targets, "predictions")
    if (truth < 0).any() or (guess < 0).any():
        raise MetricError("RMSLE needs values >= 0")
    return float(np.sqrt(np.mean((np.log1p(guess) - np.log1p(truth)) ** 2)))


def _mae(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
    import numpy as np
    return float(np.mean(np.abs(_numbers(solution, targets, "answers") - _numbers(submission, targets, "predictions"))))


def _labels(values: pd.Series) -> np.ndarray:
    import numpy as np
    return np.asarray(values.map(label_text).to_numpy(dtype=object), dtype=object)


def _accuracy(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
    import numpy as np
    import pandas as pd
    hits = []
    for column in targets:
        truth, guess = solution[column], submission[column]
        if pd.api.types.is_numeric_dtype(truth) and pd.api.types.is_numeric_dtype(guess):
            hits.append(np.isclose(truth.astype(float), guess.astype(float)))
        else:
            hits.append(_labels(truth) == _labels(guess))
    return float(np.mean(np.concatenate(hits)))


def _qwk(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
    """scikit-learn's ``cohen_kappa_score(weights="quadratic")``: the labels sorted, weights by their position."""
    import numpy as np
    truth_all, guess_all = _numbers(solution, targets, "answers"), _numbers(submission, targets, "predictions")
    values = []
    for j, column in enumerate(targets):
        truth, guess = truth_all[:, j], guess_all[:, j]
        labels = np.unique(np.concatenate([truth, guess]))
        index = {value: i for i, value in enumerate(labels)}
        observed = np.zeros((len(labels), len(labels)))
        np.add.at(observed, ([index[v] for v in truth], [index[v] for v in guess]), 1)
        expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / observed.sum()
        weights = (np.arange(len(labels))[:, None] - np.arange(len(labels))[None, :]) ** 2
        denominator = float((weights * expected).sum())
        if denominator == 0:
            raise MetricError(f"column '{column}': quadratic weighted kappa is undefined (one label in the answers "
                              f"and the predictions)")
        values.append(1 - float((weights * observed).sum()) / denominator)
    return float(np.mean(values))


def average_precision_at_k(actual: Sequence[str], predicted: Sequence[str], k: float | None) -> float:
    """Kaggle's ``apk``: a repeated label scores once; divided by min(len(actual), k)."""
    predicted = list(predicted)[:int(k)] if k else list(predicted)
    hits, total = 0, 0.0
    for i, label in enumerate(predicted):
        if label in actual and label not in predicted[:i]:
            hits += 1
            total += hits / (i + 1)
    if not actual:
        return 0.0
    return total / (min(len(actual), int(k)) if k else len(actual))


def _map_at_k(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
    import numpy as np
    values = []
    for column in targets:
        actual, predicted = solution[column].map(ranked_labels), submission[column].map(ranked_labels)
        values.append(np.mean([average_precision_at_k(a, p, k) for a, p in zip(actual, predicted, strict=True)]))
    return float(np.mean(values))




def _ndcg_at_k(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
    """NDCG@k with binary relevance: each true label (space-separated) is relevant once, the ideal ranking puts
    min(len(truth), k) of them first (Airbnb's and most Kaggle ranking pages)."""
    import numpy as np
    values = []
    for column in targets:
        actual, predicted = solution[column].map(ranked_labels), submission[column].map(ranked_labels)
        values.append(np.mean([_ndcg_row(set(a), p, int(k or len(p) or 1)) for a, p in zip(actual, predicted, strict=True)]))
    return float(np.mean(values))


def _ndcg_row(actual: set[str], predicted: list[str], k: int) -> float:
    if not actual:
        return 0.0
    gain = sum(1 / math.log2(i + 2) for i, label in enumerate(predicted[:k]) if label in actual and label not in predicted[:i])
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(actual), k)))
    return gain / ideal


# --- relative errors and R² ------------------------------------------------------------------------------

def _rmspe(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
    import numpy as np
    truth, guess = _numbers(solution, targets, "answers"), _numbers(submission, targets, "predictions")
    if (truth == 0).any():
        raise MetricError("RMSPE divides by the answers and some are 0")
    return float(np.sqrt(np.mean(((truth - guess) / truth) ** 2)))


def _mape(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
    """scikit-learn's ``mean_absolute_percentage_error``: a fraction (0.1 is 10 %), not a percentage."""
    import numpy as np
    truth, guess = _numbers(solution, targets, "answers"), _numbers(submission, targets, "predictions")
    if (truth == 0).any():
        raise MetricError("MAPE divides by the answers and some are 0")
    return float(np.mean(np.abs(truth - guess) / np.abs(truth)))


def _smape(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
    """In percent, 0 where answer and prediction are both 0 (Web Traffic Time Series Forecasting's rule)."""
    import numpy as np
    truth, guess = _numbers(solution, targets, "answers"), _numbers(submission, targets, "predictions")
    denominator = np.abs(truth) + np.abs(guess)
    ratio = np.divide(2 * np.abs(guess - truth), denominator, out=np.zeros_like(denominator), where=denominator != 0)
    return float(100 * np.mean(ratio))


def _r2(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
    """scikit-learn's ``r2_score`` (``multioutput="uniform_average"``)."""
    import numpy as np
    truth, guess = _numbers(solution, targets, "answers"), _numbers(submission, targets, "predictions")
    values = []
    for j, column in enumerate(targets):
        total = float(((truth[:, j] - truth[:, j].mean()) ** 2).sum())
        if total == 0:
            raise MetricError(f"column '{column}': R² is undefined (the answers are constant)")
        values.append(1 - float(((truth[:, j] - guess[:, j]) ** 2).sum()) / total)
    return float(np.mean(values))


# --- F-beta, MCC ---------------------------------------------------------------------------------------------

def _f_beta(tp: int, fp: int, fn: int, beta: float) -> float:
    """scikit-learn's F-beta with ``zero_division=0``."""
    b2 = beta * beta
    denominator = (1 + b2) * tp + b2 * fn + fp
    return (1 + b2) * tp / denominator if denominator else 0.0


def _counts(truth: np.ndarray, guess: np.ndarray, label: str) -> tuple[int, int, int]:
    hit, said = truth == label, guess == label
    return int((hit & said).sum()), int((~hit & said).sum()), int((hit & ~said).sum())


def _binary_f(beta: float) -> Score:
    """The F-beta of the positive label 1 (scikit-learn's ``average="binary"``), per column, averaged."""

    def score(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
        import numpy as np

        b = float(k) if k is not None else beta
        return float(np.mean([_f_beta(*_counts(_labels(solution[c]), _labels(submission[c]), "1"), b) for c in targets]))

    return score


def _macro_f1(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
    """scikit-learn's ``f1_score(average="macro")``: over the labels of the answers and the predictions."""
    import numpy as np
    values = []
    for column in targets:
        truth, guess = _labels(solution[column]), _labels(submission[column])
        values.append(float(np.mean([_f_beta(*_counts(truth, guess, label), 1.0) for label in sorted(set(truth) | set(guess))])))
    return float(np.mean(values))


def _micro_f1(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
    """scikit-learn's ``f1_score(average="micro")``: over several 0/1 columns (a multi-label indicator) the
    positives of every column pooled; over one label column every label pooled (which is the accuracy)."""
    import numpy as np
    truth = np.concatenate([_labels(solution[c]) for c in targets])
    guess = np.concatenate([_labels(submission[c]) for c in targets])
    if len(targets) > 1 and set(truth) | set(guess) <= {"0", "1"}:
        return _f_beta(*_counts(truth, guess, "1"), 1.0)
    values = []
    for column in targets:
        t, g = _labels(solution[column]), _labels(submission[column])
        hits = int((t == g).sum())
        values.append(_f_beta(hits, len(t) - hits, len(t) - hits, 1.0))
    return float(np.mean(values))


def _mcc(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
    """scikit-learn's ``matthews_corrcoef`` (the multi-class form; 0 where it is undefined), per column."""
    import numpy as np
    values = []
    for column in targets:
        truth, guess = _labels(solution[column]), _labels(submission[column])
        labels = sorted(set(truth) | set(guess))
        t = np.array([(truth == label).sum() for label in labels], dtype=float)
        p = np.array([(guess == label).sum() for label in labels], dtype=float)
        correct, n = float((truth == guess).sum()), float(len(truth))
        denominator = math.sqrt((n * n - float(p @ p)) * (n * n - float(t @ t)))
        values.append((correct * n - float(p @ t)) / denominator if denominator else 0.0)
    return float(np.mean(values))


# --- log losses --------------------------------------------------------------------------------------------

def _distributions(raw: np.ndarray) -> np.ndarray:
    """Each row rescaled to sum to one, then clipped (Kaggle's multi-class log loss rule)."""
    import numpy as np
    raw = np.clip(raw, LOGLOSS_EPS, None)
    return np.asarray(np.clip(raw / raw.sum(axis=1, keepdims=True), LOGLOSS_EPS, 1 - LOGLOSS_EPS), dtype=float)


def _weighted_logloss(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
    """The class-balanced multi-class log loss (PLAsTiCC, Rainforest): each class's mean log loss over its own
    rows, averaged over the classes present, so a rare class weighs as much as a common one."""
    import numpy as np
    truth, probs = _numbers(solution, targets, "answers"), _distributions(_numbers(submission, targets, "predictions"))
    if len(targets) < 2 or not np.allclose(truth.sum(axis=1), 1.0):
        raise MetricError("weighted log loss needs one-hot answers over two or more class columns")
    counts = truth.sum(axis=0)
    present = counts > 0
    per_class = -(truth * np.log(probs)).sum(axis=0)[present] / counts[present]
    return float(per_class.mean())


def _multilabel_logloss(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: float | None) -> float:
    """The binary log loss of each 0/1 column, averaged over the columns (Mechanisms of Action, Toxic Comment)."""
    import numpy as np
    truth, raw = _numbers(solution, targets, "answers"), _numbers(submission, targets, "predictions")
    probs = np.clip(raw, LOGLOSS_EPS, 1 - LOGLOSS_EPS)
    return float(np.mean(-np.mean(truth * np.log(probs) + (1 - truth) * np.log(1 - probs), axis=0)))


SCORES: dict[Metric, Score] = {
    Metric.SPEARMAN: _mean_correlation(ranked=True), Metric.PEARSON: _mean_correlation(ranked=False),
    Metric.AUC: _auc, Metric.LOGLOSS: _logloss, Metric.WEIGHTED_LOGLOSS: _weighted_logloss,
    Metric.MULTILABEL_LOGLOSS: _multilabel_logloss, Metric.RMSE: _rmse, Metric.RMSLE: _rmsle, Metric.MAE: _mae,
    Metric.RMSPE: _rmspe, Metric.MAPE: _mape, Metric.SMAPE: _smape, Metric.R2: _r2, Metric.ACCURACY: _accuracy,
    Metric.F1: _binary_f(1.0), Metric.FBETA: _binary_f(1.0), Metric.MICRO_F1: _micro_f1, Metric.MACRO_F1: _macro_f1,
    Metric.MCC: _mcc, Metric.QWK: _qwk, Metric.MAP_AT_K: _map_at_k, Metric.NDCG_AT_K: _ndcg_at_k,
}

__all__ = ["LOGLOSS_EPS", "SCORES", "MetricError", "Score", "average_precision_at_k"]
