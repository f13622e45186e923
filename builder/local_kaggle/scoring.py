"""Scoring a submission CSV against the hidden answers with the competition's metric.

The submission must name exactly the answers' ids (any order) and hold numbers where the metric needs
them; anything else is Kaggle's "Submission Scoring Error". When ``answers.csv`` has a ``Usage``
column (``Public``/``Private``, Kaggle's solution-file convention) the public score uses the Public
rows and the private score the Private rows; otherwise both use every row.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from builder.kkb_runtime.submission import check_submission


class ScoringError(Exception):
    """The submission cannot be scored ("Submission Scoring Error"); the message says why, for the log."""


@dataclass(frozen=True)
class Scores:
    public: float
    private: float


def score_submission(submission_csv: Path, answers_csv: Path, metric: str, id_column: str,
                     target_columns: Sequence[str], competition_dir: Path, sample_csv: Path | None = None,
                     column_types: Mapping[str, str] | None = None) -> Scores:
    """``sample_csv`` (default: the hidden test's sample submission, when there is one) sets each column's type:
    the runtime's own check runs first, so a file the notebook's check would refuse cannot score here."""
    try:
        submission = pd.read_csv(submission_csv, dtype={id_column: str})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ScoringError(f"the submission is not a readable CSV: {exc}") from None
    answers = pd.read_csv(answers_csv, dtype={id_column: str})
    _check_like_sample(submission, answers, id_column, list(target_columns),
                       sample_csv or competition_dir / "hidden" / "sample_submission.csv", column_types)
    solution, aligned = _align(submission, answers, id_column, list(target_columns))
    fn = _metric(metric, competition_dir, list(target_columns))
    if "Usage" in solution.columns:
        public = solution["Usage"].astype(str).str.lower() == "public"
        private = solution["Usage"].astype(str).str.lower() == "private"
        if public.any() and private.any():
            return Scores(_call(fn, solution[public], aligned[public]), _call(fn, solution[private], aligned[private]))
    value = _call(fn, solution, aligned)
    return Scores(value, value)


def _check_like_sample(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str, targets: list[str],
                       sample_csv: Path, column_types: Mapping[str, str] | None = None) -> None:
    """The notebook's check (columns, ids, duplicates, NaN/inf, integer columns), against the sample's types.

    Without a sample file the answers stand in for it (the id column and the targets only, numbers as
    floats: 0/1 answers do not make probabilities wrong). Row order is not checked: the scorer joins on ids.
    """
    if sample_csv.is_file():
        sample = pd.read_csv(sample_csv, dtype={id_column: str})
    else:
        sample = answers[[id_column, *[c for c in targets if c in answers.columns]]]
        sample = sample.astype({c: float for c in sample.columns if c != id_column and pd.api.types.is_numeric_dtype(sample[c])})
    problems = check_submission(submission, sample, id_column, targets, check_order=False, column_types=column_types)
    if problems:
        raise ScoringError("; ".join(problems))


def _align(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str,
           targets: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    missing = [c for c in (id_column, *targets) if c not in submission.columns]
    if missing:
        raise ScoringError(f"the submission lacks columns {missing}")
    if len(submission) != len(answers):
        raise ScoringError(f"the submission has {len(submission)} rows, expected {len(answers)}")
    sub_ids = submission[id_column].astype(str)
    if sub_ids.duplicated().any():
        raise ScoringError(f"duplicate ids in the submission, e.g. {sub_ids[sub_ids.duplicated()].iloc[0]!r}")
    ans_ids = answers[id_column].astype(str)
    unknown = set(sub_ids) - set(ans_ids)
    if unknown:
        raise ScoringError(f"the submission has ids that are not in the test set, e.g. {sorted(unknown)[0]!r}")
    aligned = submission.assign(_key=sub_ids).set_index("_key").loc[ans_ids.tolist()].reset_index(drop=True)
    if aligned[targets].isna().any().any():
        raise ScoringError("the submission has empty values")
    return answers.reset_index(drop=True), aligned


Metric = Callable[[pd.DataFrame, pd.DataFrame], float]


def _metric(name: str, competition_dir: Path, targets: list[str]) -> Metric:
    if name.startswith("python:"):
        return _python_metric(competition_dir / name.split(":", 1)[1])
    builtin: dict[str, Callable[[pd.DataFrame, pd.DataFrame, list[str]], float]] = {
        "accuracy": _accuracy, "auc": _auc, "logloss": _logloss, "rmse": _rmse, "spearman": _spearman,
    }
    fn = builtin[name]
    return lambda solution, submission: fn(solution, submission, targets)


def _call(fn: Metric, solution: pd.DataFrame, submission: pd.DataFrame) -> float:
    try:
        value = float(fn(solution.reset_index(drop=True), submission.reset_index(drop=True)))
    except ScoringError:
        raise
    except Exception as exc:  # a metric choking on the values is the submission's format problem
        raise ScoringError(f"the metric failed: {type(exc).__name__}: {exc}") from None
    if not math.isfinite(value):
        raise ScoringError(f"the metric returned {value}")
    return value


def _numbers(frame: pd.DataFrame, targets: list[str]) -> np.ndarray:
    try:
        return frame[targets].astype(float).to_numpy()
    except (TypeError, ValueError) as exc:
        raise ScoringError(f"non-numeric predictions: {exc}") from None


def _accuracy(solution: pd.DataFrame, submission: pd.DataFrame, targets: list[str]) -> float:
    hits = []
    for column in targets:
        truth, guess = solution[column], submission[column]
        if pd.api.types.is_numeric_dtype(truth) and pd.api.types.is_numeric_dtype(guess):
            hits.append(np.isclose(truth.astype(float), guess.astype(float)))
        else:
            hits.append(truth.astype(str).str.strip().to_numpy() == guess.astype(str).str.strip().to_numpy())
    return float(np.mean(np.concatenate(hits)))


def _auc(solution: pd.DataFrame, submission: pd.DataFrame, targets: list[str]) -> float:
    truth, scores = _numbers(solution, targets), _numbers(submission, targets)
    values = []
    for j in range(len(targets)):
        positive = truth[:, j] == 1
        n_pos, n_neg = int(positive.sum()), int((~positive).sum())
        if n_pos == 0 or n_neg == 0:
            raise ScoringError(f"AUC is undefined: the answers of {targets[j]!r} hold one class only")
        ranks = _ranks(scores[:, j])
        values.append((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
    return float(np.mean(values))


def _logloss(solution: pd.DataFrame, submission: pd.DataFrame, targets: list[str]) -> float:
    truth, raw = _numbers(solution, targets), _numbers(submission, targets)
    if len(targets) > 1 and np.allclose(truth.sum(axis=1), 1.0):
        # One-hot answers: multi-class log loss; each row is rescaled to sum to one, then clipped (Kaggle's rule).
        raw = np.clip(raw, 1e-15, None)
        probs = np.clip(raw / raw.sum(axis=1, keepdims=True), 1e-15, 1 - 1e-15)
        return float(-np.mean(np.sum(truth * np.log(probs), axis=1)))
    probs = np.clip(raw, 1e-15, 1 - 1e-15)
    return float(-np.mean(truth * np.log(probs) + (1 - truth) * np.log(1 - probs)))


def _rmse(solution: pd.DataFrame, submission: pd.DataFrame, targets: list[str]) -> float:
    return float(np.sqrt(np.mean((_numbers(solution, targets) - _numbers(submission, targets)) ** 2)))


def _spearman(solution: pd.DataFrame, submission: pd.DataFrame, targets: list[str]) -> float:
    truth, guess = _numbers(solution, targets), _numbers(submission, targets)
    values = [_pearson(_ranks(truth[:, j]), _ranks(guess[:, j])) for j in range(len(targets))]
    if any(not np.isfinite(v) for v in values):
        raise ScoringError("Spearman correlation is undefined for constant predictions")
    return float(np.mean(values))


def _ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks, ties shared (scipy's ``rankdata``, without scipy: core kkb does not install it)."""
    return pd.Series(values).rank(method="average").to_numpy(dtype=float)


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson's r; nan when either side is constant (Spearman's rho is this over the ranks)."""
    a, b = a - a.mean(), b - b.mean()
    denominator = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / denominator) if denominator > 0 else float("nan")


def _python_metric(path: Path) -> Metric:
    """``score(solution_df, submission_df) -> float`` from a competition's metric file."""
    spec = importlib.util.spec_from_file_location(f"kkb_local_metric_{abs(hash(str(path)))}", path)
    if spec is None or spec.loader is None:
        raise ScoringError(f"cannot load the metric file {path.name}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the host's metric is broken: still a scoring error for this submission
        raise ScoringError(f"the metric file {path.name} failed to load: {exc}") from None
    fn = getattr(module, "score", None)
    if not callable(fn):
        raise ScoringError(f"the metric file {path.name} defines no score(solution, submission)")
    return fn
