"""Scoring a submission CSV against the hidden answers with the competition's metric.

The submission must name exactly the answers' ids (any order) and hold numbers where the metric needs
them; anything else is Kaggle's "Submission Scoring Error". When ``answers.csv`` has a ``Usage``
column (``Public``/``Private``, Kaggle's solution-file convention) the public score uses the Public
rows and the private score the Private rows; otherwise both use every row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.kkb_runtime.metric_file import metric_file_reference
from builder.kkb_runtime.metrics import MetricError, parse_metric, score_frames, scores_floats
from builder.kkb_runtime.submission import check_submission
from builder.rehearse.metric_sandbox import MetricJob, score_metric_file

if TYPE_CHECKING:  # imported where used: the CLI starts without them (tests/test_dry_run_cost.py)
    import pandas as pd


class ScoringError(Exception):
    """The submission cannot be scored ("Submission Scoring Error"); the message says why, for the log."""


@dataclass(frozen=True)
class Scores:
    public: float
    private: float


def score_submission(submission_csv: Path, answers_csv: Path, metric: str, id_column: str,
                     target_columns: Sequence[str], competition_dir: Path, sample_csv: Path | None = None,
                     column_types: Mapping[str, str] | None = None,
                     metric_args: Mapping[str, Any] | None = None) -> Scores:
    """``sample_csv`` (default: the hidden test's sample submission, when there is one) sets each column's type:
    the runtime's own check runs first, so a file the notebook's check would refuse cannot score here. A known
    metric is :mod:`builder.kkb_runtime.metrics`', a metric file :mod:`builder.kkb_runtime.metric_file`'s, run in a
    sandbox of its own (:mod:`builder.rehearse.metric_sandbox`: the dry run's expected score is the same code)."""
    import pandas as pd
    try:
        submission = pd.read_csv(submission_csv, dtype={id_column: str})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ScoringError(f"the submission is not a readable CSV: {exc}") from None
    answers = pd.read_csv(answers_csv, dtype={id_column: str})
    name, reference = parse_metric(metric), metric_file_reference(metric)
    _check_like_sample(submission, answers, id_column, list(target_columns),
                       sample_csv or competition_dir / "hidden" / "sample_submission.csv", column_types, scores_floats(name))
    if reference is not None:  # the competition's own file: in a sandbox of its own, never in the server's process
        outcome = score_metric_file(MetricJob(reference, competition_dir, answers_csv, id_column, tuple(target_columns),
                                              metric_args or {}), submission_csv)
        if outcome.failures or "error" in outcome.expected:  # the submission's, or the broken metric's: no score
            raise ScoringError("; ".join(outcome.failures) or str(outcome.expected["error"]))
        return Scores(float(outcome.expected["public"]), float(outcome.expected["private"]))
    try:
        scores = score_frames(name, submission, answers, id_column, list(target_columns))
    except MetricError as exc:
        raise ScoringError(str(exc)) from None
    return Scores(scores.public, scores.private)


def _check_like_sample(submission: pd.DataFrame, answers: pd.DataFrame, id_column: str, targets: list[str],
                       sample_csv: Path, column_types: Mapping[str, str] | None = None,
                       float_targets: bool | None = None) -> None:
    """The notebook's check (columns, ids, duplicates, NaN/inf, integer columns), against the sample's types.

    Without a sample file the answers stand in for it (the id column and the targets only, numbers as
    floats: 0/1 answers do not make probabilities wrong). Row order is not checked: the scorer joins on ids.
    """
    import pandas as pd
    if sample_csv.is_file():
        sample = pd.read_csv(sample_csv, dtype={id_column: str})
    else:
        sample = answers[[id_column, *[c for c in targets if c in answers.columns]]]
        sample = sample.astype({c: float for c in sample.columns if c != id_column and pd.api.types.is_numeric_dtype(sample[c])})
    problems = check_submission(submission, sample, id_column, targets, check_order=False, column_types=column_types,
                                float_targets=float_targets)
    if problems:
        raise ScoringError("; ".join(problems))
