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

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

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
    each_unit_interval,
    label_text,
    negative_values,
    outside_unit_interval,
    repeated_labels,
    row_sums,
    too_many_labels,
    unknown_labels,
    zero_truth,
)
from .metric_scores import SCORES, MetricError, Score, average_precision_at_k
from .vocabulary import Metric

if TYPE_CHECKING:  # imported where used: importing kkb_runtime stays free of them (kkb_runtime/__init__)
    import numpy as np
    import pandas as pd


@dataclass(frozen=True)
class MetricName:
    """A ``metric`` setting read: the member (None for a metric file and unknown names) and its parameter
    (MAP@k's and NDCG@k's k, F-beta's beta)."""

    text: str
    metric: Metric | None = None
    param: float | None = None

    @property
    def known(self) -> bool:
        return self.metric is not None

    @property
    def k(self) -> int | None:
        return int(self.param) if self.param is not None and self.metric in _AT_K else None

    @property
    def label(self) -> str:
        if self.metric is None:
            return self.text or "(no metric)"
        shown = f"@{self.param:g}" if self.param is not None else ""
        return REGISTRY[self.metric].label.replace("@k", shown or "@k").replace("@beta", shown or "@beta")


_AT_K = (Metric.MAP_AT_K, Metric.NDCG_AT_K)
_WITH_PARAMETER = re.compile(r"^(map|ndcg|fbeta)@(\d+(?:\.\d+)?)$")

# Names Kaggle's pages and scikit-learn use for a member: accepted as the member.
ALIASES: dict[str, Metric] = {
    "roc_auc": Metric.AUC, "rocauc": Metric.AUC, "roc-auc": Metric.AUC, "log_loss": Metric.LOGLOSS,
    "binary_logloss": Metric.LOGLOSS, "multi_logloss": Metric.LOGLOSS, "f1_macro": Metric.MACRO_F1,
    "f1_micro": Metric.MICRO_F1, "f1_binary": Metric.F1, "quadratic_weighted_kappa": Metric.QWK,
    "cohen_kappa_quadratic": Metric.QWK, "r2_score": Metric.R2, "matthews_corrcoef": Metric.MCC,
    "weighted_log_loss": Metric.WEIGHTED_LOGLOSS, "multilabel_log_loss": Metric.MULTILABEL_LOGLOSS,
}


def parse_metric(text: str | None) -> MetricName:
    """``"spearman"`` → Spearman; ``"map@5"`` → MAP@k with k = 5; ``"fbeta@2"`` → F-beta with beta = 2;
    ``"roc_auc"`` → AUC (an alias); anything else is known to no rule here."""
    name = (text or "").strip()
    lowered = name.lower()
    match = _WITH_PARAMETER.match(lowered)
    if match:
        kind, value = match.group(1), float(match.group(2))
        metric = {"map": Metric.MAP_AT_K, "ndcg": Metric.NDCG_AT_K, "fbeta": Metric.FBETA}[kind]
        if value > 0 and (kind == "fbeta" or value.is_integer()):
            return MetricName(name, metric, value)
        return MetricName(name)
    if lowered in ALIASES:
        return MetricName(name, ALIASES[lowered])
    if lowered in Metric.values() and Metric(lowered) not in (*_AT_K, Metric.FBETA):
        return MetricName(name, Metric(lowered))
    return MetricName(name)


def metric_names(aliases: bool = True) -> list[str]:
    """Every name kkb knows, as a user writes it (``map@5``, ``fbeta@2``), and its aliases: the did-you-mean list."""
    shown = {Metric.MAP_AT_K: "map@5", Metric.NDCG_AT_K: "ndcg@5", Metric.FBETA: "fbeta@2"}
    return [shown.get(member, member.value) for member in Metric] + (list(ALIASES) if aliases else [])


def metric_guess(text: str) -> str:
    """`` (did you mean 'spearman'?)`` for a typo of a real name (an alias included), else nothing."""
    close = difflib.get_close_matches(text.strip().lower(), metric_names(), n=1, cutoff=0.7)
    return f" (did you mean '{close[0]}'?)" if close else ""


def unknown_metric(text: str) -> str:
    """The message for a name kkb does not know, with a did-you-mean among real names only."""
    return f"unknown metric '{text}'{metric_guess(text)}"


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
    # A relative-error metric: columns whose largest |value| is below this round to significant digits, not
    # decimals (6 decimals of 1e-3 keep 3 digits). inf: every column; 1.0: RMSLE, whose log1p is relative
    # above 1 and absolute near 0 (there 6 decimals of 1e-4 keep 2 digits).
    significant_below: float = 0.0
    labels_out: bool = False  # the predictions are labels (integers, text): never fractional


_UNDEFINED = "is undefined for a constant column (Kaggle's scorer fails)"
_SCORES_HALF = "scores 0.5 for a constant column (Kaggle scores it; the column ranks nothing)"

_CONSTANT = "no constant column per part"
_LABELS = "labels within the answers' (or the sample's) label set, as a warning"
_PROBABILITIES = "probabilities in [0, 1]; exact 0/1 and rows not summing to 1 as warnings"
_RANKED = "no label twice in a row; more than k labels as a warning"
_NO_ZERO = "no answer of 0 (the metric divides by the answers)"
_LOGLOSS_CHECKS = (outside_unit_interval, certain_probabilities, row_sums)


def _label_metric(label: str) -> MetricRules:
    return MetricRules(label, SCORES[Metric(label)], (unknown_labels,), label_checks=True, checked=_LABELS, labels_out=True)


def _error_metric(label: str, checks: tuple[Check, ...] = (), truth_checks: tuple[Check, ...] = (),
                  checked: str = MetricRules.checked, significant_below: float = 0.0) -> MetricRules:
    return MetricRules(label, SCORES[Metric(label)], checks, truth_checks, higher_is_better=False, checked=checked,
                       significant_below=significant_below)


REGISTRY: dict[Metric, MetricRules] = {
    Metric.SPEARMAN: MetricRules("spearman", SCORES[Metric.SPEARMAN], (constant_predictions(True, _UNDEFINED),),
                                 (constant_truth("is undefined"),), keeps_ties=True, checked=_CONSTANT),
    Metric.PEARSON: MetricRules("pearson", SCORES[Metric.PEARSON], (constant_predictions(True, _UNDEFINED),),
                                (constant_truth("is undefined"),), keeps_ties=True, checked=_CONSTANT),
    Metric.AUC: MetricRules("auc", SCORES[Metric.AUC], (constant_predictions(False, _SCORES_HALF),),
                            (constant_truth("is undefined", "the answers hold one class only"),), keeps_ties=True,
                            checked="constant columns per part, as a warning (AUC scores them 0.5)"),
    Metric.LOGLOSS: _error_metric("logloss", checks=_LOGLOSS_CHECKS, checked=_PROBABILITIES),
    Metric.WEIGHTED_LOGLOSS: _error_metric("weighted_logloss", checks=_LOGLOSS_CHECKS, checked=_PROBABILITIES),
    Metric.MULTILABEL_LOGLOSS: _error_metric("multilabel_logloss", checks=(each_unit_interval, certain_probabilities),
                                             checked="each column a probability in [0, 1]; exact 0/1 as a warning"),
    Metric.RMSE: _error_metric("rmse"),
    Metric.RMSLE: _error_metric("rmsle", checks=(negative_values,), checked="no negative value", significant_below=1.0),
    Metric.MAE: _error_metric("mae"),
    Metric.RMSPE: _error_metric("rmspe", truth_checks=(zero_truth,), checked=_NO_ZERO, significant_below=math.inf),
    Metric.MAPE: _error_metric("mape", truth_checks=(zero_truth,), checked=_NO_ZERO, significant_below=math.inf),
    Metric.SMAPE: _error_metric("smape", significant_below=math.inf),
    Metric.R2: MetricRules("r2", SCORES[Metric.R2], truth_checks=(constant_truth("is undefined"),), checked=_CONSTANT),
    Metric.ACCURACY: _label_metric("accuracy"),
    Metric.F1: _label_metric("f1"),
    Metric.FBETA: MetricRules("fbeta@beta", SCORES[Metric.FBETA], (unknown_labels,), label_checks=True, checked=_LABELS,
                              labels_out=True),
    Metric.MICRO_F1: _label_metric("micro_f1"),
    Metric.MACRO_F1: _label_metric("macro_f1"),
    Metric.MCC: _label_metric("mcc"),
    Metric.QWK: _label_metric("qwk"),
    Metric.MAP_AT_K: MetricRules("map@k", SCORES[Metric.MAP_AT_K], (repeated_labels, too_many_labels), checked=_RANKED,
                                 labels_out=True),
    Metric.NDCG_AT_K: MetricRules("ndcg@k", SCORES[Metric.NDCG_AT_K], (repeated_labels, too_many_labels),
                                  checked=_RANKED, labels_out=True),
}


def rules(name: MetricName) -> MetricRules | None:
    return REGISTRY[name.metric] if name.metric is not None else None


def scores_floats(name: MetricName) -> bool | None:
    """Whether the metric scores floats (a regression or probability metric: True) or labels (False); None where
    kkb does not know the metric (no metric, a metric file): then the sample submission's types decide."""
    found = rules(name)
    return None if found is None else not found.labels_out


# --- parts ---------------------------------------------------------------------------------------------

Parts = Mapping[str, "np.ndarray"]  # part name -> a boolean mask over the rows


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
        value = float(found.score(solution.reset_index(drop=True), submission.reset_index(drop=True), targets, name.param))
    except MetricError as exc:
        raise MetricError(f"{name.label}{on}: {exc}") from None
    if not math.isfinite(value):
        raise MetricError(f"{name.label}{on}: the metric is {value}")
    return value


__all__ = [
    "ALIASES", "REGISTRY", "Finding", "MetricError", "MetricName", "MetricRules", "PartScores", "align",
    "average_precision_at_k", "metric_guess", "metric_names", "scores_floats", "unknown_metric",
    "check_answers", "check_predictions", "constant_part_chance", "failures", "label_sets", "parse_metric",
    "parts_from_ids", "parts_from_usage", "rules", "score_frames",
]
