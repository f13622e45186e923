"""The competition's metric, as data: one registry from :class:`Metric` to its score and its pre-scoring checks.

One implementation, used by the notebook's check cell (the checks), the dry run (the checks per part and
the expected score) and the local Kaggle's scorer (both): a file one of them refuses cannot pass another,
and the dry run's expected score is the local Kaggle's score of the same file. The scores match scipy's
and scikit-learn's (``tests/test_metrics.py``); numpy and pandas only, so this runs inside a kernel too.

Kaggle scores the public and the private rows apart. Where the split is known (the answers' ``Usage``
column, or ``[competition] public_ids``) every check and score runs per part; where it is not,
:func:`constant_part_chance` says how likely a random public part of the competition's size is constant.

A metric that is not a member (``python:<file>``, a name kkb does not know) has no checks and no score
here: :func:`parse_metric` returns it with ``metric = None`` and the callers say so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .metric_checks import (
    PRIVATE,
    PUBLIC,
    WHOLE,
    Check,
    CheckContext,
    Finding,
    certain_probabilities,
    constant_predictions,
    constant_truth,
    label_text,
    negative_values,
    outside_unit_interval,
    ranked_labels,
    repeated_labels,
    row_sums,
    too_many_labels,
    unknown_labels,
)
from .vocabulary import Metric


class MetricError(ValueError):
    """The file cannot be scored ("Submission Scoring Error"); the message names the metric, column and part."""


@dataclass(frozen=True)
class MetricName:
    """A ``metric`` setting read: the member (None for ``python:<file>`` and unknown names) and MAP@k's k."""

    text: str
    metric: Metric | None = None
    k: int | None = None

    @property
    def known(self) -> bool:
        return self.metric is not None

    @property
    def label(self) -> str:
        if self.metric is None:
            return self.text or "(no metric)"
        return REGISTRY[self.metric].label.replace("@k", f"@{self.k}" if self.k else "@k")


_MAP_AT = re.compile(r"^map@(\d+)$")


def parse_metric(text: str | None) -> MetricName:
    """``"spearman"`` → Spearman; ``"map@5"`` → MAP@k with k = 5; anything else is known to no rule here."""
    name = (text or "").strip()
    lowered = name.lower()
    match = _MAP_AT.match(lowered)
    if match and int(match.group(1)) > 0:
        return MetricName(name, Metric.MAP_AT_K, int(match.group(1)))
    if lowered in Metric.values() and lowered != Metric.MAP_AT_K.value:
        return MetricName(name, Metric(lowered))
    return MetricName(name)


# --- the scores: (solution, submission aligned row by row, target columns, k) -> float ----------------

Score = Callable[[pd.DataFrame, pd.DataFrame, Sequence[str], "int | None"], float]


def _numbers(frame: pd.DataFrame, targets: Sequence[str], what: str) -> np.ndarray:
    try:
        return np.asarray(frame[list(targets)].astype(float).to_numpy(), dtype=float)
    except (TypeError, ValueError) as exc:
        raise MetricError(f"non-numeric {what}: {exc}") from None


def _ranks(values: np.ndarray) -> np.ndarray:
    return np.asarray(pd.Series(values).rank(method="average").to_numpy(dtype=float), dtype=float)


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    denominator = math.sqrt(float((a * a).sum()) * float((b * b).sum()))
    return float((a * b).sum()) / denominator if denominator > 0 else math.nan


def _mean_correlation(ranked: bool) -> Score:
    def score(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: int | None) -> float:
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


def _auc(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: int | None) -> float:
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


def _logloss(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: int | None) -> float:
    truth, raw = _numbers(solution, targets, "answers"), _numbers(submission, targets, "predictions")
    if len(targets) > 1 and np.allclose(truth.sum(axis=1), 1.0):
        # One-hot answers: multi-class log loss; each row is rescaled to sum to one, then clipped (Kaggle's rule).
        raw = np.clip(raw, LOGLOSS_EPS, None)
        probs = np.clip(raw / raw.sum(axis=1, keepdims=True), LOGLOSS_EPS, 1 - LOGLOSS_EPS)
        return float(-np.mean(np.sum(truth * np.log(probs), axis=1)))
    probs = np.clip(raw, LOGLOSS_EPS, 1 - LOGLOSS_EPS)
    return float(-np.mean(truth * np.log(probs) + (1 - truth) * np.log(1 - probs)))


def _rmse(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: int | None) -> float:
    diff = _numbers(solution, targets, "answers") - _numbers(submission, targets, "predictions")
    return float(np.sqrt(np.mean(diff**2)))


def _rmsle(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: int | None) -> float:
    truth, guess = _numbers(solution, targets, "answers"), _numbers(submission, targets, "predictions")
    if (truth < 0).any() or (guess < 0).any():
        raise MetricError("RMSLE needs values >= 0")
    return float(np.sqrt(np.mean((np.log1p(guess) - np.log1p(truth)) ** 2)))


def _mae(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: int | None) -> float:
    return float(np.mean(np.abs(_numbers(solution, targets, "answers") - _numbers(submission, targets, "predictions"))))


def _labels(values: pd.Series) -> np.ndarray:
    return np.asarray(values.map(label_text).to_numpy(dtype=object), dtype=object)


def _accuracy(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: int | None) -> float:
    hits = []
    for column in targets:
        truth, guess = solution[column], submission[column]
        if pd.api.types.is_numeric_dtype(truth) and pd.api.types.is_numeric_dtype(guess):
            hits.append(np.isclose(truth.astype(float), guess.astype(float)))
        else:
            hits.append(_labels(truth) == _labels(guess))
    return float(np.mean(np.concatenate(hits)))


def _macro_f1(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: int | None) -> float:
    """scikit-learn's ``f1_score(average="macro")``: over the labels of the answers and the predictions."""
    values = []
    for column in targets:
        truth, guess = _labels(solution[column]), _labels(submission[column])
        per_label = []
        for label in sorted(set(truth) | set(guess)):
            tp = int(((truth == label) & (guess == label)).sum())
            wrong = int(((truth != label) & (guess == label)).sum()) + int(((truth == label) & (guess != label)).sum())
            per_label.append(2 * tp / (2 * tp + wrong) if tp or wrong else 0.0)
        values.append(float(np.mean(per_label)))
    return float(np.mean(values))


def _qwk(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: int | None) -> float:
    """scikit-learn's ``cohen_kappa_score(weights="quadratic")``: the labels sorted, weights by their position."""
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


def average_precision_at_k(actual: Sequence[str], predicted: Sequence[str], k: int | None) -> float:
    """Kaggle's ``apk``: a repeated label scores once; divided by min(len(actual), k)."""
    predicted = list(predicted)[:k] if k else list(predicted)
    hits, total = 0, 0.0
    for i, label in enumerate(predicted):
        if label in actual and label not in predicted[:i]:
            hits += 1
            total += hits / (i + 1)
    if not actual:
        return 0.0
    return total / (min(len(actual), k) if k else len(actual))


def _map_at_k(solution: pd.DataFrame, submission: pd.DataFrame, targets: Sequence[str], k: int | None) -> float:
    values = []
    for column in targets:
        actual, predicted = solution[column].map(ranked_labels), submission[column].map(ranked_labels)
        values.append(np.mean([average_precision_at_k(a, p, k) for a, p in zip(actual, predicted, strict=True)]))
    return float(np.mean(values))


# --- the registry ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class MetricRules:
    """A metric's score, its checks of the predictions and of the answers, and what rounding must keep."""

    label: str
    score: Score
    checks: tuple[Check, ...] = ()
    truth_checks: tuple[Check, ...] = ()
    keeps_ties: bool = False  # a rank metric: rounding must never merge two distinct predictions
    higher_is_better: bool = True
    label_checks: bool = False  # a classification metric: the answers' (or the sample's) label set
    checked: str = "no check beyond the format"  # the checks in words (kkb submit's hint says what passed)


_UNDEFINED = "is undefined for a constant column (Kaggle's scorer fails)"
_SCORES_HALF = "scores 0.5 for a constant column (Kaggle scores it; the column ranks nothing)"

_CONSTANT = "no constant column per part"
_LABELS = "labels within the answers' (or the sample's) label set, as a warning"

REGISTRY: dict[Metric, MetricRules] = {
    Metric.SPEARMAN: MetricRules("spearman", _mean_correlation(ranked=True), (constant_predictions(True, _UNDEFINED),),
                                 (constant_truth("is undefined"),), keeps_ties=True, checked=_CONSTANT),
    Metric.PEARSON: MetricRules("pearson", _mean_correlation(ranked=False), (constant_predictions(True, _UNDEFINED),),
                                (constant_truth("is undefined"),), keeps_ties=True, checked=_CONSTANT),
    Metric.AUC: MetricRules("auc", _auc, (constant_predictions(False, _SCORES_HALF),),
                            (constant_truth("is undefined", "the answers hold one class only"),), keeps_ties=True,
                            checked="constant columns per part, as a warning (AUC scores them 0.5)"),
    Metric.LOGLOSS: MetricRules("logloss", _logloss, (outside_unit_interval, certain_probabilities, row_sums),
                                higher_is_better=False,
                                checked="probabilities in [0, 1]; exact 0/1 and rows not summing to 1 as warnings"),
    Metric.RMSE: MetricRules("rmse", _rmse, higher_is_better=False),
    Metric.RMSLE: MetricRules("rmsle", _rmsle, (negative_values,), higher_is_better=False, checked="no negative value"),
    Metric.MAE: MetricRules("mae", _mae, higher_is_better=False),
    Metric.ACCURACY: MetricRules("accuracy", _accuracy, (unknown_labels,), label_checks=True, checked=_LABELS),
    Metric.MACRO_F1: MetricRules("macro_f1", _macro_f1, (unknown_labels,), label_checks=True, checked=_LABELS),
    Metric.MAP_AT_K: MetricRules("map@k", _map_at_k, (repeated_labels, too_many_labels),
                                 checked="no label twice in a row; more than k labels as a warning"),
    Metric.QWK: MetricRules("qwk", _qwk, (unknown_labels,), label_checks=True, checked=_LABELS),
}


def rules(name: MetricName) -> MetricRules | None:
    return REGISTRY[name.metric] if name.metric is not None else None


# --- parts ---------------------------------------------------------------------------------------------

Parts = Mapping[str, np.ndarray]  # part name -> a boolean mask over the rows


def parts_from_usage(usage: pd.Series) -> Parts | None:
    """Kaggle's solution-file convention: ``Usage`` is ``Public`` or ``Private`` (``Ignored`` rows score in neither)."""
    lowered = usage.astype(str).str.strip().str.lower()
    public, private = (lowered == PUBLIC).to_numpy(), (lowered == PRIVATE).to_numpy()
    return {PUBLIC: public, PRIVATE: private} if public.any() and private.any() else None


def parts_from_ids(ids: pd.Series, public_ids: set[str]) -> Parts | None:
    public = ids.astype(str).isin(public_ids).to_numpy()
    return {PUBLIC: public, PRIVATE: ~public} if public.any() and (~public).any() else None


def label_sets(frame: pd.DataFrame, targets: Sequence[str]) -> dict[str, frozenset[str]]:
    return {column: frozenset(frame[column].map(label_text)) for column in targets if column in frame.columns}


def check_predictions(name: MetricName, frame: pd.DataFrame, targets: Sequence[str], parts: Parts | None = None,
                      labels: Mapping[str, frozenset[str]] | None = None, labels_from: str = "the answers") -> list[Finding]:
    """Every finding of the metric's checks on ``frame``, per part where ``parts`` is given. A finding on the
    whole file is said once, not once per part."""
    found = rules(name)
    if found is None:
        return []
    context = CheckContext(name.label, name.k, labels if found.label_checks else None, labels_from)
    return _per_part(found.checks, frame.reset_index(drop=True), targets, parts, context)


def check_answers(name: MetricName, solution: pd.DataFrame, targets: Sequence[str], parts: Parts | None = None) -> list[Finding]:
    found = rules(name)
    if found is None:
        return []
    return _per_part(found.truth_checks, solution.reset_index(drop=True), targets, parts, CheckContext(name.label, name.k))


def _per_part(checks: Sequence[Check], frame: pd.DataFrame, targets: Sequence[str], parts: Parts | None,
              context: CheckContext) -> list[Finding]:
    whole = [finding for check in checks for finding in check(frame, targets, WHOLE, context)]
    if not parts:
        return whole
    said = {(finding.column, finding.rule) for finding in whole}
    per_part = [finding for part, mask in parts.items() for check in checks
                for finding in check(frame[mask], targets, part, context) if (finding.column, finding.rule) not in said]
    return whole + per_part


def failures(findings: Sequence[Finding]) -> list[Finding]:
    return [finding for finding in findings if finding.failure]


def constant_part_chance(values: pd.Series, part_rows: int) -> float:
    """The chance that a random part of ``part_rows`` rows holds one value. Drawn from ``values`` themselves
    (without replacement: the sum over the distinct values of C(count, m) / C(n, m)) when the part is no larger;
    for a part larger than the run (the hidden test's size), each row drawn with the values' proportions
    (the sum of p ** m), which errs on the safe side."""
    n, m = len(values), part_rows
    if m <= 0 or n == 0:
        return 0.0
    counts = values.value_counts(dropna=False).to_numpy()
    if m > n:
        return min(float(sum((count / n) ** m for count in counts)), 1.0)
    log_total = math.lgamma(n + 1) - math.lgamma(m + 1) - math.lgamma(n - m + 1)
    chance = 0.0
    for count in counts:
        if count >= m:
            chance += math.exp(math.lgamma(count + 1) - math.lgamma(m + 1) - math.lgamma(count - m + 1) - log_total)
    return min(chance, 1.0)


# --- scoring a file against the answers ---------------------------------------------------------------

@dataclass(frozen=True)
class PartScores:
    """The score of each part; ``split`` tells whether the public and private rows were told apart."""

    public: float
    private: float
    split: bool


def align(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str,
          targets: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The answers, and the submission's rows in the answers' order (the scorer joins on ids)."""
    missing = [c for c in (id_column, *targets) if c not in submission.columns]
    if missing:
        raise MetricError(f"the submission lacks columns {missing}")
    if len(submission) != len(answers):
        raise MetricError(f"the submission has {len(submission)} rows, expected {len(answers)}")
    sub_ids = submission[id_column].astype(str)
    if sub_ids.duplicated().any():
        raise MetricError(f"duplicate ids in the submission, e.g. {sub_ids[sub_ids.duplicated()].iloc[0]!r}")
    ans_ids = answers[id_column].astype(str)
    unknown = set(sub_ids) - set(ans_ids)
    if unknown:
        raise MetricError(f"the submission has ids that are not in the test set, e.g. {sorted(unknown)[0]!r}")
    aligned = submission.assign(_key=sub_ids).set_index("_key").loc[ans_ids.tolist()].reset_index(drop=True)
    if aligned[list(targets)].isna().any().any():
        raise MetricError("the submission has empty values")
    return answers.reset_index(drop=True), aligned


def score_frames(name: MetricName, submission: pd.DataFrame, answers: pd.DataFrame, id_column: str,
                 targets: Sequence[str], public_ids: set[str] | None = None) -> PartScores:
    """The metric on each part: the checks of the predictions and of the answers first (a failure raises
    :class:`MetricError` naming the metric, the column and the part), then the score."""
    found = rules(name)
    if found is None:
        raise MetricError(f"kkb has no implementation of the metric {name.text!r}")
    solution, aligned = align(submission, answers, id_column, targets)
    parts = parts_from_usage(solution["Usage"]) if "Usage" in solution.columns else None
    if parts is None and public_ids:
        parts = parts_from_ids(solution[id_column], public_ids)
    problems = failures(check_predictions(name, aligned, targets, parts)) + failures(check_answers(name, solution, targets, parts))
    if problems:
        raise MetricError(f"{name.label}: " + "; ".join(finding.message for finding in problems))
    if parts is None:
        value = _score_part(found, name, solution, aligned, targets, WHOLE)
        return PartScores(value, value, split=False)
    public, private = (_score_part(found, name, solution[parts[part]], aligned[parts[part]], targets, part)
                       for part in (PUBLIC, PRIVATE))
    return PartScores(public, private, split=True)


def _score_part(found: MetricRules, name: MetricName, solution: pd.DataFrame, submission: pd.DataFrame,
                targets: Sequence[str], part: str) -> float:
    on = "" if part == WHOLE else f" on the {part} part"
    try:
        value = float(found.score(solution.reset_index(drop=True), submission.reset_index(drop=True), targets, name.k))
    except MetricError as exc:
        raise MetricError(f"{name.label}{on}: {exc}") from None
    if not math.isfinite(value):
        raise MetricError(f"{name.label}{on}: the metric is {value}")
    return value


__all__ = [
    "REGISTRY", "Finding", "MetricError", "MetricName", "MetricRules", "PartScores", "align", "average_precision_at_k",
    "check_answers", "check_predictions", "constant_part_chance", "failures", "label_sets", "parse_metric",
    "parts_from_ids", "parts_from_usage", "rules", "score_frames",
]
