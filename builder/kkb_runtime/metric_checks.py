"""The pre-scoring checks of each metric: what makes Kaggle's scorer refuse a file its format check passes.

Each check looks at one column (or one row set) of one *part* of the submission (Kaggle scores the
public and the private rows apart, so a column constant on the public rows alone fails) and returns
:class:`Finding` s. A finding names the column, the rule and the count of rows; ``failure`` findings are
"Submission Scoring Error" (the scorer refuses, or the metric is undefined), the others are warnings
(the file scores, but probably not as meant). Which checks a metric runs is :data:`metrics.REGISTRY`'s.

numpy and pandas only: the notebook's check cell runs these inside the kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: importing kkb_runtime stays free of them (kkb_runtime/__init__)
    import pandas as pd

WHOLE = "whole"  # the part name when the split is not known: every row
PUBLIC = "public"
PRIVATE = "private"


@dataclass(frozen=True)
class Finding:
    """One check's result on one column (or one row set) of one part."""

    column: str
    rule: str  # the check's name: "constant", "range", "negative", "row sums", "labels", "duplicates", ...
    rows: int  # the rows that break the rule
    total: int  # the rows of the part
    part: str
    text: str  # what is wrong and why it matters, after "column 'x' on the public part: "
    failure: bool = True

    @property
    def message(self) -> str:
        on = "" if self.part == WHOLE else f" on the {self.part} part"
        name = f"columns {self.column}" if self.rule == "row sums" else f"column '{self.column}'"
        return f"{name}{on}: {self.text}"


@dataclass(frozen=True)
class CheckContext:
    """What a check knows besides the values: the metric's label (for messages), its k, the known labels."""

    label: str
    k: int | None = None
    labels: Mapping[str, frozenset[str]] | None = None  # column -> the answers' labels (or the sample's), as text
    labels_from: str = ""  # "the answers" / "the sample submission"


Check = Callable[["pd.DataFrame", Sequence[str], str, CheckContext], list[Finding]]


def _examples(values: Sequence[object], limit: int = 3) -> str:
    shown = ", ".join(_show(value) for value in list(values)[:limit])
    return shown + (", ..." if len(values) > limit else "")


def _show(value: object) -> str:
    import numpy as np
    if isinstance(value, (float, np.floating)):
        return repr(float(value)) if math.isfinite(float(value)) else str(float(value))
    if isinstance(value, np.integer):
        return str(int(value))
    return repr(value)


def _numbers(values: pd.Series) -> pd.Series:
    import pandas as pd
    return pd.to_numeric(values, errors="coerce").astype(float)


def constant_predictions(failure: bool, why: str) -> Check:
    """A column with one value on a part: Spearman and Pearson are undefined there (Kaggle's scorer errors);
    AUC is 0.5 (it scores, uselessly: a warning)."""

    def check(frame: pd.DataFrame, targets: Sequence[str], part: str, context: CheckContext) -> list[Finding]:
        found = []
        for column in targets:
            values = frame[column]
            if len(values) and values.nunique(dropna=False) == 1:
                text = f"constant predictions ({_show(values.iloc[0])} in all {len(values)} rows): {context.label} {why}"
                found.append(Finding(column, "constant", len(values), len(values), part, text, failure))
        return found

    return check


def _unit_interval(each: bool) -> Check:
    """Probabilities: never negative; above 1 only where several columns are rescaled per row (multi-class
    log loss divides each row by its sum, so there a column may hold any non-negative weight). ``each``: every
    column is a probability of its own (multi-label log loss), however many columns."""

    def check(frame: pd.DataFrame, targets: Sequence[str], part: str, context: CheckContext) -> list[Finding]:
        whole = each or len(targets) == 1
        found = []
        for column in targets:
            values = _numbers(frame[column])
            bad = values[(values < 0) | (values > 1)] if whole else values[values < 0]
            if len(bad):
                what = "scores each column as a probability" if each else "scores probabilities"
                text = (f"{len(bad)} of {len(values)} rows {'outside [0, 1]' if whole else 'negative'} (e.g. "
                        f"{_examples(bad.tolist())}): {context.label} {what}")
                found.append(Finding(column, "range", len(bad), len(values), part, text))
        return found

    return check


outside_unit_interval = _unit_interval(each=False)
each_unit_interval = _unit_interval(each=True)


def negative_values(frame: pd.DataFrame, targets: Sequence[str], part: str, context: CheckContext) -> list[Finding]:
    found = []
    for column in targets:
        values = _numbers(frame[column])
        bad = values[values < 0]
        if len(bad):
            text = (f"{len(bad)} of {len(values)} rows negative (e.g. {_examples(bad.tolist())}): "
                    f"{context.label} takes the log of 1 + value and needs values >= 0")
            found.append(Finding(column, "negative", len(bad), len(values), part, text))
    return found


def certain_probabilities(frame: pd.DataFrame, targets: Sequence[str], part: str, context: CheckContext) -> list[Finding]:
    """Exact 0 or 1: log loss clips them to 1e-15, and each one that is wrong costs about 34.5."""
    found = []
    for column in targets:
        values = _numbers(frame[column])
        bad = values[(values == 0) | (values == 1)]
        if len(bad):
            text = (f"{len(bad)} of {len(values)} rows are exactly 0 or 1: {context.label} clips them to 1e-15 "
                    f"and each wrong one costs about 34.5 (clip them, e.g. [[postprocess]] kind = \"clip\")")
            found.append(Finding(column, "certain", len(bad), len(values), part, text, failure=False))
    return found


ROW_SUM_TOLERANCE = 1e-3  # 6-decimal rounding of a few dozen classes moves a row's sum by far less


def row_sums(frame: pd.DataFrame, targets: Sequence[str], part: str, context: CheckContext) -> list[Finding]:
    """Multi-class log loss: each row is a distribution. Kaggle's scorer rescales rows that do not sum to 1,
    so the file scores (a warning). Only a file whose rows mostly sum to 1 is read as distributions: several
    independent binary columns (multi-label log loss) sum to anything."""
    if len(targets) < 2 or not len(frame):
        return []
    sums = frame[list(targets)].apply(_numbers).sum(axis=1)
    off = sums[(sums - 1).abs() > ROW_SUM_TOLERANCE]
    if not len(off) or len(off) * 2 > len(sums):
        return []
    columns = ", ".join(f"'{c}'" for c in targets[:3]) + (", ..." if len(targets) > 3 else "")
    text = (f"{len(off)} of {len(sums)} rows do not sum to 1 over {len(targets)} columns (e.g. row "
            f"{int(off.index[0])}: {float(off.iloc[0]):.6g}): {context.label} rescales each row to sum to 1")
    return [Finding(columns, "row sums", len(off), len(sums), part, text, failure=False)]


def unknown_labels(frame: pd.DataFrame, targets: Sequence[str], part: str, context: CheckContext) -> list[Finding]:
    """Labels the answers (or the sample) never hold: they score as wrong (a warning, Kaggle scores them)."""
    found = []
    for column in targets:
        known = (context.labels or {}).get(column)
        if not known:
            continue
        text_values = frame[column].map(label_text)
        bad = text_values[~text_values.isin(known)]
        if len(bad):
            text = (f"{len(bad)} of {len(text_values)} rows hold labels {context.labels_from} never hold "
                    f"(e.g. {_examples(bad.unique().tolist())}; known: {_examples(sorted(known), 6)})")
            found.append(Finding(column, "labels", len(bad), len(text_values), part, text, failure=False))
    return found


def label_text(value: object) -> str:
    """A label as text, so that 1, 1.0 and "1" are one label (CSV files hold all three)."""
    import numpy as np
    if isinstance(value, (bool, np.bool_)):
        return str(int(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)) and math.isfinite(float(value)) and float(value).is_integer():
        return str(int(value))
    return str(value).strip()


def ranked_labels(value: object) -> list[str]:
    """A MAP@k prediction cell: space-separated labels, best first."""
    return [] if value is None or (isinstance(value, float) and math.isnan(value)) else str(value).split()


def repeated_labels(frame: pd.DataFrame, targets: Sequence[str], part: str, context: CheckContext) -> list[Finding]:
    found = []
    for column in targets:
        cells = frame[column].map(ranked_labels)
        repeats = cells[cells.map(lambda labels: len(labels) != len(set(labels)))]
        if len(repeats):
            first = " ".join(repeats.iloc[0])
            text = (f"{len(repeats)} of {len(cells)} rows repeat a label (e.g. row {int(repeats.index[0])}: {first!r}): "
                    f"{context.label} expects each label once per row")
            found.append(Finding(column, "duplicates", len(repeats), len(cells), part, text))
    return found


def too_many_labels(frame: pd.DataFrame, targets: Sequence[str], part: str, context: CheckContext) -> list[Finding]:
    if context.k is None:
        return []
    found = []
    for column in targets:
        cells = frame[column].map(ranked_labels)
        long = cells[cells.map(len) > context.k]
        if len(long):
            text = (f"{len(long)} of {len(cells)} rows hold more than {context.k} labels: {context.label} reads the "
                    f"first {context.k} only")
            found.append(Finding(column, "length", len(long), len(cells), part, text, failure=False))
    return found


# --- checks of the answers (the scorer's side: the truth of a part can make the metric undefined) ---------

def constant_truth(why: str, what: str = "the answers are constant") -> Check:
    def check(frame: pd.DataFrame, targets: Sequence[str], part: str, context: CheckContext) -> list[Finding]:
        found = []
        for column in targets:
            values = frame[column]
            if len(values) and values.nunique(dropna=False) == 1:
                text = (f"{what} ({_show(values.iloc[0])} in all {len(values)} rows): {context.label} "
                        f"{why} whatever the predictions (the competition's data, not the submission)")
                found.append(Finding(column, "constant answers", len(values), len(values), part, text))
        return found

    return check


def zero_truth(frame: pd.DataFrame, targets: Sequence[str], part: str, context: CheckContext) -> list[Finding]:
    """RMSPE and MAPE divide by the answers: a 0 makes the score infinite (Kaggle's scorer fails or drops it)."""
    found = []
    for column in targets:
        values = _numbers(frame[column])
        zeros = values[values == 0]
        if len(zeros):
            text = (f"{len(zeros)} of {len(values)} answers are 0: {context.label} divides by the answers and is "
                    f"undefined there (the competition's data, not the submission)")
            found.append(Finding(column, "zero answers", len(zeros), len(values), part, text))
    return found


__all__ = [
    "PRIVATE", "PUBLIC", "WHOLE", "Check", "CheckContext", "Finding", "certain_probabilities", "constant_predictions",
    "constant_truth", "each_unit_interval", "label_text", "negative_values", "outside_unit_interval", "ranked_labels", "repeated_labels",
    "row_sums", "too_many_labels", "unknown_labels", "zero_truth",
]
