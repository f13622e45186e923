"""The competition's metric in the dry run: its checks on the rerun's file, per part, and the expected score.

What the notebook's check cell runs (:mod:`builder.kkb_runtime.metrics`), here with what the kernel cannot
know: the public/private split (the answers' ``Usage`` column, or ``[competition] public_ids``), the
answers' label set, and the answers themselves, which give the expected score (the same code as the local
Kaggle's scorer, so the same number). Where the split is not known, each column a rank metric scores gets
the chance that a random public part of ``[competition] public_fraction`` of the rows is constant.

A failing check is the verdict "Submission Scoring Error" with the check's reason; the rest are warnings.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.kkb_runtime.metric_checks import PRIVATE, PUBLIC, Finding
from builder.kkb_runtime.metric_file import MetricFile, MetricFileError, load_metric, metric_file_reference, score_with_file
from builder.kkb_runtime.metrics import (
    MetricError,
    MetricName,
    Parts,
    PartScores,
    check_predictions,
    constant_part_chance,
    label_sets,
    metric_guess,
    parse_metric,
    parts_from_ids,
    rules,
    score_frames,
)
from builder.kkb_runtime.rounding import ROUNDING_RECORD, ColumnRounding, summary
from builder.kkb_runtime.submission import target_columns
from builder.project.public_ids import read_public_ids
from builder.rehearse.metric_sandbox import MetricJob, score_metric_file
from builder.rehearse.rounding_score import Scorer, rounding_effect, unrounded_file, with_metric_rounding

if TYPE_CHECKING:  # imported where used: the CLI starts without them (tests/test_dry_run_cost.py)
    import pandas as pd

# Above this chance of a constant public (or private) part, the report warns: one in a thousand submissions is
# already more than a careful user wants to spend on a file the scorer refuses.
CONSTANT_PART_WARNING = 1e-3


@dataclass(frozen=True)
class MetricReport:
    metric: str | None
    known: bool
    split: str  # "answers' Usage", "public_ids" or "unknown"
    note: str = ""  # what was not checked, and why
    failures: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    constant_chance: tuple[dict[str, Any], ...] = ()  # per rank-metric column: column, public/private rows and chances
    rounding: tuple[dict[str, Any], ...] = ()  # kkb_runtime.rounding.ColumnRounding records, as the run wrote them
    expected: dict[str, Any] | None = None  # {"public", "private", "split", "answers"} or {"error", "answers"}
    lines: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def expected_line(expected: dict[str, Any] | None, label: str) -> str | None:
    if not expected:
        return None
    if "error" in expected:
        return f"expected score: none ({expected['error']})"
    if expected["split"]:
        return f"expected score ({label}): public {expected['public']:.5f}, private {expected['private']:.5f}"
    return f"expected score ({label}): {expected['public']:.5f} (every row; the answers have no Usage split)"


@dataclass(frozen=True)
class MetricSource:
    """Where a metric file is read from (the kernel folder, or the competition folder whose competition.toml
    named it) and the keyword arguments it is called with (``metric_args``)."""

    base_dir: Path
    arguments: Mapping[str, Any] = field(default_factory=dict)


def metric_report(metric: str | None, submission: Path | None, sample: Path, id_column: str, configured_targets: list[str],
                  working_dir: Path, answers: Path | None = None, public_ids: Path | None = None,
                  public_fraction: float = 0.2, hidden_rows: int | None = None,
                  source: MetricSource | None = None) -> MetricReport:
    """The metric's findings on the rerun's ``submission`` (None: the run wrote none), with its rounding record."""
    import pandas as pd
    name = parse_metric(metric)
    if metric_file_reference(metric) is not None and answers is not None:
        return _file_report(name, submission, sample, id_column, configured_targets, working_dir, answers,
                            public_ids, source or MetricSource(working_dir))
    rounding = _rounding(working_dir)
    note = _note(name)
    if submission is None or not submission.is_file():
        return _finish(MetricReport(metric, name.known, "unknown", note, rounding=rounding), name)
    frame = _read(submission, id_column)
    sample_frame = pd.read_csv(sample, dtype={id_column: str})
    targets = [c for c in target_columns(sample_frame, id_column, configured_targets) if c in frame.columns]
    truth = pd.read_csv(answers, dtype={id_column: str}) if answers is not None else None
    parts, split = _parts(frame, id_column, truth, public_ids)
    unmatched = _public_ids_note(frame, id_column, public_ids, split, sample)
    if truth is not None:
        labels, labels_from = label_sets(truth, targets), "the answers"
    else:
        labels = {c: s for c, s in label_sets(sample_frame, targets).items() if len(s) > 1}
        labels_from = "the sample submission"
    findings = check_predictions(name, frame, targets, parts, labels, labels_from)
    failures = tuple(f"{name.label}: {f.message}" for f in findings if f.failure)
    warnings = [f"{name.label}: {f.message}" for f in findings if not f.failure]
    chances: tuple[dict[str, Any], ...] = ()
    if parts is None:
        chances = _constant_chances(name, frame, targets, public_fraction, findings, hidden_rows)
        warnings += [_chance_warning(name, chance, public_fraction) for chance in chances
                     if max(chance["public_chance"], chance["private_chance"]) > CONSTANT_PART_WARNING]
    expected = _expected(name, frame, truth, answers, id_column, targets, public_ids) if truth is not None and name.text else None
    if expected is not None and truth is not None:
        ids = read_public_ids(public_ids, id_column) if public_ids is not None else None
        expected, said = rounding_judged(expected, lambda f: score_frames(name, f, truth, id_column, targets, ids), frame,
                                         unrounded_file(working_dir), rounding, id_column, name.label)
        warnings += said
    report = MetricReport(metric, name.known, split, note, failures, tuple(warnings) + unmatched, chances, rounding, expected)
    return _finish(report, name)


def _file_report(name: MetricName, submission: Path | None, sample: Path, id_column: str, configured_targets: list[str],
                 working_dir: Path, answers: Path, public_ids: Path | None, source: MetricSource) -> MetricReport:
    """A metric file's report: no checks of kkb's (the file is its own check: a ParticipantVisibleError is the
    "Submission Scoring Error"), the expected score of each part, the metric's own failure as a warning. The file runs
    in a sandbox of its own (:mod:`builder.rehearse.metric_sandbox`), never here."""
    import pandas as pd
    rounding, note, metric = _rounding(working_dir), _note(name), name.text
    reference = metric_file_reference(metric) or MetricFile(metric)
    if submission is None or not submission.is_file():
        return _finish(MetricReport(metric, False, "unknown", note, rounding=rounding), name)
    frame = _read(submission, id_column)
    sample_frame = pd.read_csv(sample, dtype={id_column: str})
    targets = [c for c in target_columns(sample_frame, id_column, configured_targets) if c in frame.columns]
    truth = pd.read_csv(answers, dtype={id_column: str})
    _, split = _parts(frame, id_column, truth, public_ids)
    unrounded = unrounded_file(working_dir)
    outcome = score_metric_file(MetricJob(reference, source.base_dir, answers, id_column, tuple(targets), source.arguments,
                                          public_ids), submission, unrounded=unrounded if unrounded.is_file() else None,
                                rounding=rounding, label=name.label)
    said = tuple(with_metric_rounding(outcome.warnings, source.base_dir / reference.path))
    report = MetricReport(metric, False, split, note, outcome.failures, said
                          + _public_ids_note(frame, id_column, public_ids, split, sample), (), rounding, outcome.expected)
    return _finish(report, name)


def file_scores(reference: MetricFile, folder: Path, frame: pd.DataFrame, truth: pd.DataFrame, id_column: str,
                targets: list[str], arguments: Mapping[str, Any], ids: set[str] | None, unrounded: Path | None,
                rounding: tuple[dict[str, Any], ...], label: str, calling: Callable[[str], AbstractContextManager[None]],
                ) -> dict[str, Any]:
    """The metric file's expected score of ``frame`` (and rounding's effect), its failures and warnings: what
    :mod:`builder.rehearse.metric_guest` answers from inside the metric's sandbox. ``calling(what)`` records each call
    of the metric (its bound)."""
    loaded: list[Callable[..., Any]] = []  # the file loads once, however often rounding is judged

    def scorer(submitted: pd.DataFrame) -> PartScores:
        if not loaded:
            with calling("loading the metric file"):
                loaded.append(load_metric(reference, folder))
        with calling("scoring the submission"):
            return score_with_file(reference, folder, submitted, truth, id_column, targets, arguments, ids, loaded[0])

    failures: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    try:
        scores = scorer(frame)
        expected: dict[str, Any] = {"public": round(scores.public, 5), "private": round(scores.private, 5),
                                    "split": scores.split}
    except MetricError as exc:  # a ParticipantVisibleError (or a file the scorer cannot align): Kaggle's verdict
        failures, expected = (str(exc),), {"error": str(exc)}
    except MetricFileError as exc:  # the metric's own failure: never the submission's
        warnings, expected = (str(exc),), {"error": str(exc), "metric_failed": True}
    expected, said = rounding_judged(expected, scorer, frame, unrounded, rounding, id_column, label)
    return {"expected": expected, "failures": list(failures), "warnings": [*warnings, *said]}


def rounding_judged(expected: dict[str, Any], scorer: Scorer, frame: pd.DataFrame, path: Path | None,
                    rounding: tuple[dict[str, Any], ...], id_column: str, label: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``expected`` with the scores of the file before and after rounding (``path``: the predictions the run kept before
    rounding), and the warning when rounding moved the score."""
    if "error" in expected or not rounding or path is None or not path.is_file():
        return expected, ()
    try:
        effect = rounding_effect(scorer, _read(path, id_column), frame, rounding)
    except (MetricError, MetricFileError):  # the unrounded file cannot be scored (a constant column, ...): no effect
        return expected, ()
    warning = effect.warning(label)
    return {**expected, "rounding": effect.to_json()}, (warning,) if warning else ()


def _finish(report: MetricReport, name: MetricName) -> MetricReport:
    lines = [f"metric: {name.label} (split: {report.split})" if report.known or report.note.startswith(_OWN)
             else f"metric: {report.note}"]
    said = summary([ColumnRounding(**{k: v for k, v in r.items() if k in _RECORD_FIELDS}) for r in report.rounding])
    moved = (report.expected or {}).get("rounding", {}).get("moved")
    if said:
        lines.append(said + (f"; the expected score moved by {moved:.2g}" if moved is not None else ""))
    expected = expected_line(report.expected, name.label)
    lines += [expected] if expected else []
    return MetricReport(**{**asdict(report), "lines": tuple(lines)})


_OWN = "the competition's own metric file"
_RECORD_FIELDS = {f.name for f in fields(ColumnRounding)}


def _note(name: MetricName) -> str:
    if name.known:
        return ""
    if not name.text:
        return "no [competition] metric: no metric-specific check, rounding as requested, no expected score"
    if metric_file_reference(name.text) is not None:
        return f"{_OWN} ({name.text}): scored with the answers; its own checks are the scorer's"
    return f"kkb does not know the metric '{name.text}'{metric_guess(name.text)}: no metric-specific check, rounding as requested"


def _read(path: Path, id_column: str) -> pd.DataFrame:
    import pandas as pd
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path, dtype={id_column: str})
    if id_column in frame.columns:
        frame[id_column] = frame[id_column].astype(str)
    return frame


def _parts(frame: pd.DataFrame, id_column: str, truth: pd.DataFrame | None, public_ids: Path | None) -> tuple[Parts | None, str]:
    ids = frame[id_column].astype(str) if id_column in frame.columns else None
    if ids is None:
        return None, "unknown"
    if truth is not None and "Usage" in truth.columns and id_column in truth.columns:
        usage = ids.map(dict(zip(truth[id_column].astype(str), truth["Usage"].astype(str).str.lower(), strict=False)))
        public, private = (usage == PUBLIC).to_numpy(), (usage == PRIVATE).to_numpy()
        if public.any() and private.any():
            return {PUBLIC: public, PRIVATE: private}, "the answers' Usage"
    if public_ids is not None:
        parts = parts_from_ids(ids, read_public_ids(public_ids, id_column))
        if parts is not None:
            return parts, "[competition] public_ids"
    return None, "unknown"


def _public_ids_note(frame: pd.DataFrame, id_column: str, public_ids: Path | None, split: str,
                     sample: Path) -> tuple[str, ...]:
    """``[competition] public_ids`` that do not split this rerun's test (a stand-in lacks them): said, never refused."""
    if public_ids is None or split != "unknown" or id_column not in frame.columns:
        return ()
    ids = read_public_ids(public_ids, id_column)
    found = len(ids & set(frame[id_column].astype(str)))
    return (f"[competition] public_ids: {found} of {len(ids)} public ids are ids of this rerun's test ({sample.parent}), "
            "which is not Kaggle's hidden test: the split is unknown here, and the ids stay as they are (the build "
            "checked them against the public test)",)


def _constant_chances(name: MetricName, frame: pd.DataFrame, targets: list[str], fraction: float,
                      findings: list[Finding], hidden_rows: int | None) -> tuple[dict[str, Any], ...]:
    """Per column a rank metric scores: the chance of a constant public / private part of the hidden test's size
    (else the run's), from the column's value counts. A part of one row says nothing (the test is too small)."""
    found = rules(name)
    rows = hidden_rows or len(frame)
    public_rows = round(fraction * rows)
    if found is None or not found.keeps_ties or not len(frame) or public_rows < 2 or rows - public_rows < 2:
        return ()
    constant = {f.column for f in findings if f.rule == "constant"}
    out = []
    for column in targets:
        if column in constant:
            continue
        out.append({"column": column, "public_rows": public_rows, "private_rows": rows - public_rows,
                    "public_chance": constant_part_chance(frame[column], public_rows),
                    "private_chance": constant_part_chance(frame[column], rows - public_rows)})
    return tuple(out)


def _chance_warning(name: MetricName, chance: dict[str, Any], fraction: float) -> str:
    rows = chance["public_rows"] + chance["private_rows"]
    return (f"{name.label}: column '{chance['column']}': a random public part of {chance['public_rows']} rows "
            f"({fraction:g} of {rows} test rows, [competition] public_fraction) is constant with a chance of "
            f"{chance['public_chance']:.2%}, the private part with {chance['private_chance']:.2%}: the scorer would fail "
            f"(set [competition] public_ids to check the real split)")


def _expected(name: MetricName, frame: pd.DataFrame, truth: pd.DataFrame, answers: Path | None, id_column: str,
              targets: list[str], public_ids: Path | None) -> dict[str, Any]:
    where = str(answers)
    if not name.known:
        return {"error": f"kkb cannot compute the metric '{name.text}'", "answers": where}
    try:
        scores = score_frames(name, frame, truth, id_column, targets,
                              read_public_ids(public_ids, id_column) if public_ids is not None else None)
    except MetricError as exc:
        return {"error": str(exc), "answers": where}
    return {"public": round(scores.public, 5), "private": round(scores.private, 5), "split": scores.split, "answers": where}


def _rounding(working_dir: Path) -> tuple[dict[str, Any], ...]:
    path = working_dir / ROUNDING_RECORD
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    return tuple(record for record in records if isinstance(record, dict)) if isinstance(records, list) else ()


__all__ = ["CONSTANT_PART_WARNING", "MetricReport", "MetricSource", "expected_line", "metric_report", "read_public_ids"]
