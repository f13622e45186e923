"""The dry run's metric inputs: checked before anything runs, then the rerun's metric report.

Before the rerun: ``[competition] public_ids`` readable (the build checked them against the public test; a rerun's
stand-in that lacks them is a note of the metric report, never a refusal), and the answers (``--answers``, or
a local competition's ``answers.csv``): the file, its id column, the target columns, its ids equal to the
rerun test's. Each mismatch is exit 1 naming what differs, not an internal error (or a submission blamed)
after the whole rerun. After the rerun: :func:`~builder.rehearse.metric_report.metric_report` with the
metric of ``kernel.toml``, else the competition folder's ``competition.toml``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.errors import DryRunError
from builder.kkb_runtime.metrics import parse_metric, scores_floats
from builder.kkb_runtime.submission import target_columns
from builder.project.metric_setting import resolve_metric
from builder.project.public_ids import check_public_ids
from builder.project.spec import SPEC_FILE, KernelSpec
from builder.rehearse.metric_report import MetricReport, MetricSource, metric_report
from builder.rehearse.step_rounding import step_rounding_warnings

if TYPE_CHECKING:  # imported where used: the CLI starts without them (tests/test_dry_run_cost.py)
    import pandas as pd


def check_before_rerun(spec: KernelSpec, kernel_dir: Path, rerun_data: Path, answers: Path | None) -> None:
    """public_ids readable, and the answers against the rerun's test (its sample submission's ids)."""
    id_column = spec.submission.id_column
    if spec.competition.public_ids:
        check_public_ids(kernel_dir / spec.competition.public_ids, f"{kernel_dir / SPEC_FILE}: competition.public_ids",
                         id_column, None)
    if answers is None:  # the sample is read (and pandas imported) only to check the answers against it
        return
    import pandas as pd

    sample = pd.read_csv(rerun_data / spec.competition.sample_submission, dtype={id_column: str})
    test_ids = sample[id_column].astype(str) if id_column in sample.columns else None
    if test_ids is not None:
        check_answers_file(answers, id_column, target_columns(sample, id_column, list(spec.submission.target_columns)),
                           test_ids, rerun_data)


def check_answers_file(answers: Path, id_column: str, targets: list[str], test_ids: pd.Series, rerun_data: Path) -> None:
    import pandas as pd
    hint = (f"the answers must hold '{id_column}' and the target columns for exactly the ids of the rerun's test "
            f"({rerun_data}); pass the competition's solution file with --answers")
    if not answers.is_file():
        raise DryRunError(f"--answers: {answers} does not exist", hint=hint)
    try:
        frame = pd.read_csv(answers, dtype={id_column: str})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DryRunError(f"--answers: {answers} is not a readable CSV: {exc}", hint=hint) from None
    missing = [column for column in (id_column, *targets) if column not in frame.columns]
    if missing:
        raise DryRunError(f"--answers: {answers} lacks the columns {', '.join(repr(c) for c in missing)} (it has "
                          f"{', '.join(map(str, frame.columns[:8]))})", hint=hint)
    ids, test = set(frame[id_column].astype(str)), set(test_ids)
    if ids != test:
        lacking, extra = sorted(test - ids), sorted(ids - test)
        said = []
        if lacking:
            said.append(f"{len(lacking)} test ids have no answer (e.g. {', '.join(repr(i) for i in lacking[:3])})")
        if extra:
            said.append(f"{len(extra)} answer ids are not in the test (e.g. {', '.join(repr(i) for i in extra[:3])})")
        raise DryRunError(f"--answers: {answers} does not answer the rerun's test ({len(test)} ids): "
                          + "; ".join(said), hint=hint)


def float_targets(spec: KernelSpec, kernel_dir: Path | str) -> bool | None:
    """The metric's word on fractional values where the sample holds integers (None: the sample decides)."""
    metric = resolve_metric(spec.competition.metric, spec.competition.metric_args, Path(kernel_dir),
                            spec.competition.data_dir(Path(kernel_dir)))
    return scores_floats(parse_metric(metric.text))


def rerun_metric_report(spec: KernelSpec, kernel_dir: Path, submission: Path, sample: Path, working: Path,
                        answers: Path | None, hidden_rows: int | None) -> MetricReport:
    """The metric's checks on the rerun's file and, with answers, the expected score."""
    public_ids = kernel_dir / spec.competition.public_ids if spec.competition.public_ids else None
    metric = resolve_metric(spec.competition.metric, spec.competition.metric_args, kernel_dir,
                            spec.competition.data_dir(kernel_dir))
    return metric_report(metric.text, submission, sample, spec.submission.id_column,
                         list(spec.submission.target_columns), working, answers, public_ids,
                         spec.competition.public_fraction, hidden_rows or spec.competition.hidden_rows,
                         MetricSource(metric.base_dir, metric.arguments))


def step_rounding(spec: KernelSpec, kernel_dir: Path, steps: Sequence[Mapping[str, Any]], working: Path,
                  sample: Path) -> list[str]:
    """A step's own rounding that costs a relative-error metric's score (:mod:`builder.rehearse.step_rounding`), on the
    target columns the sample holds as floats."""
    import pandas as pd
    metric = resolve_metric(spec.competition.metric, spec.competition.metric_args, kernel_dir,
                            spec.competition.data_dir(kernel_dir))
    header = pd.read_csv(sample, nrows=50)
    columns = [c for c in spec.submission.target_columns if c in header.columns and pd.api.types.is_float_dtype(header[c])]
    return step_rounding_warnings(parse_metric(metric.text), steps, working, columns, spec.submission.decimals)


__all__ = ["check_answers_file", "check_before_rerun", "float_targets", "rerun_metric_report", "step_rounding"]
