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

import pandas as pd

from builder.kkb_runtime.metric_checks import PRIVATE, PUBLIC
from builder.kkb_runtime.metrics import MetricError, align, parse_metric, parts_from_usage, score_frames
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
    the runtime's own check runs first, so a file the notebook's check would refuse cannot score here. A known
    metric is :mod:`builder.kkb_runtime.metrics`' (the dry run's expected score is the same code)."""
    try:
        submission = pd.read_csv(submission_csv, dtype={id_column: str})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ScoringError(f"the submission is not a readable CSV: {exc}") from None
    answers = pd.read_csv(answers_csv, dtype={id_column: str})
    _check_like_sample(submission, answers, id_column, list(target_columns),
                       sample_csv or competition_dir / "hidden" / "sample_submission.csv", column_types)
    name = parse_metric(metric)
    if name.known:
        try:
            scores = score_frames(name, submission, answers, id_column, list(target_columns))
        except MetricError as exc:
            raise ScoringError(str(exc)) from None
        return Scores(scores.public, scores.private)
    return _score_with_file(submission, answers, metric, id_column, list(target_columns), competition_dir)


def _score_with_file(submission: pd.DataFrame, answers: pd.DataFrame, metric: str, id_column: str, targets: list[str],
                     competition_dir: Path) -> Scores:
    """A competition's own ``python:<file>`` metric, on the whole file or on each part of ``Usage``."""
    try:
        solution, aligned = align(submission, answers, id_column, targets)
    except MetricError as exc:
        raise ScoringError(str(exc)) from None
    fn = _python_metric(competition_dir / metric.split(":", 1)[1])
    parts = parts_from_usage(solution["Usage"]) if "Usage" in solution.columns else None
    if parts is not None:
        return Scores(_call(fn, solution[parts[PUBLIC]], aligned[parts[PUBLIC]]),
                      _call(fn, solution[parts[PRIVATE]], aligned[parts[PRIVATE]]))
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


Metric = Callable[[pd.DataFrame, pd.DataFrame], float]


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
