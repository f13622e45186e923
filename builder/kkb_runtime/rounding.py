"""Rounding that prevents scoring errors and never causes one.

kkb rounds the float target columns (``[submission] decimals``) because float noise has failed real
scorers. Rounding also merges predictions: in Google QUEST Q&A Labeling (mean column-wise Spearman),
2 decimals made two columns constant on the public rows and the scorer failed. So for a rank metric
(``metrics.REGISTRY[...].keeps_ties``) a column keeps as many decimals as it needs for no two distinct
predictions to merge, up to 15 (differences below 1e-15 are float noise); failing that it stays unrounded.
Rounding that never merges two values keeps every part's distinct values too, whatever the split.

A relative-error metric (RMSPE, MAPE, SMAPE; RMSLE for a column below 1) rounds to significant digits, not
decimals: under RMSPE with answers near 1e-3, 6 decimals keep 3 digits and move the score (``metrics.REGISTRY[...]
.significant_below``). A column the user's post-processing discretised on purpose (``round = false`` on its
``[[postprocess]]`` stage, or ``[submission] unrounded``) or a post-processing function returned as discretised
is left as it is. Every rounded column reports its ties (rows that share their value with another row) before
and after, and the digits requested and used; the notebook prints one summary line (:func:`summary`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .config import ArgmaxStage, PostprocessStage
from .metrics import MetricName, rules

if TYPE_CHECKING:  # imported where used: importing kkb_runtime stays free of them (kkb_runtime/__init__)
    import pandas as pd

MAX_DECIMALS = 15  # below this, differences are float noise (a double holds 15-17 significant digits)
ROUNDING_RECORD = "kkb_rounding.json"  # in the working dir: the dry run's report reads it
UNROUNDED_FILE = "kkb_unrounded.csv"  # in /kaggle/temp (never an output): the dry run scores it against the rounded file
DECIMALS, SIGNIFICANT = "decimals", "significant digits"


@dataclass(frozen=True)
class ColumnRounding:
    column: str
    requested: int | None
    used: int | None  # None: left unrounded
    distinct_before: int
    distinct_after: int
    ties_before: int  # rows whose value another row holds too
    ties_after: int
    rows: int
    why: str = ""  # set when used differs from requested
    kind: str = DECIMALS  # or SIGNIFICANT (a relative-error metric)
    by: str = ""  # for an unrounded column: "round = false" (the user's) or "post-processing" (a function's own)

    @property
    def changed(self) -> bool:
        return self.used != self.requested

    def line(self) -> str:
        used = "unrounded" if self.used is None else f"{self.used} {self.kind}"
        ties = f"ties {self.ties_before} -> {self.ties_after} of {self.rows} rows"
        if not self.changed:
            return f"column '{self.column}': {used}, {ties}"
        return f"column '{self.column}': {used} (requested {self.requested}): {self.why}; {ties}"


def ties(values: pd.Series) -> int:
    counts = values.value_counts(dropna=False)
    return int(counts[counts > 1].sum())


def _rounded(values: pd.Series, decimals: int) -> pd.Series:
    out = values.round(decimals)
    out[out == 0] = 0.0  # -0.0 prints as "-0.0"
    return out


def significant(values: pd.Series, digits: int) -> pd.Series:
    """Each value to ``digits`` significant digits (0 stays 0)."""
    import numpy as np
    import pandas as pd
    array = values.to_numpy(dtype=float)
    finite = np.isfinite(array)
    plain = np.where(finite, array, 0.0)
    magnitude = np.floor(np.log10(np.abs(plain), out=np.zeros_like(plain), where=plain != 0))
    scale = 10.0 ** (digits - 1 - magnitude)
    out = pd.Series(np.where(finite, np.round(plain * scale) / scale, array), index=values.index, name=values.name)
    out[out == 0] = 0.0
    return out


def round_column(values: pd.Series, digits: int, kind: str = DECIMALS) -> pd.Series:
    return significant(values, digits) if kind == SIGNIFICANT else _rounded(values, digits)


def decimals_that_keep(values: pd.Series, requested: int) -> int | None:
    """The fewest decimals, at least ``requested``, that merge no two distinct values (beyond float noise)."""
    distinct = _rounded(values, MAX_DECIMALS).nunique(dropna=False)
    for decimals in range(requested, MAX_DECIMALS + 1):
        if _rounded(values, decimals).nunique(dropna=False) == distinct:
            return decimals
    return None


def rounding_kind(metric: MetricName, values: pd.Series) -> str:
    """Significant digits for a relative-error metric's column (below its ``significant_below``), else decimals."""
    import numpy as np
    found = rules(metric)
    if found is None or not found.significant_below or not len(values):
        return DECIMALS
    largest = float(np.nanmax(np.abs(values.to_numpy(dtype=float)))) if values.notna().any() else 0.0
    return SIGNIFICANT if largest < found.significant_below else DECIMALS


def round_safely(frame: pd.DataFrame, targets: Sequence[str], decimals: int | None, metric: MetricName,
                 float_columns: Collection[str], unrounded: Collection[str] = (),
                 discretised: Collection[str] = ()) -> tuple[pd.DataFrame, list[ColumnRounding]]:
    """``frame`` with each of ``float_columns`` (the targets the sample holds as floats) rounded; one record each.
    ``unrounded``: the user's ``round = false`` columns; ``discretised``: a post-processing function's own."""
    import pandas as pd
    if decimals is None:
        return frame, []
    found = rules(metric)
    keep_ties = found is not None and found.keeps_ties
    out, records = frame.copy(), []
    for column in targets:
        if column not in float_columns or column not in out.columns or not pd.api.types.is_float_dtype(out[column]):
            continue
        values = out[column]
        used, why, by, kind = _column_rule(values, column, decimals, metric, keep_ties, unrounded, discretised)
        if used is not None:
            out[column] = round_column(values, used, kind)
        records.append(ColumnRounding(column, decimals, used, int(values.nunique(dropna=False)),
                                      int(out[column].nunique(dropna=False)), ties(values), ties(out[column]),
                                      len(values), why, kind, by))
    return out, records


def _column_rule(values: pd.Series, column: str, decimals: int, metric: MetricName, keep_ties: bool,
                 unrounded: Collection[str], discretised: Collection[str]) -> tuple[int | None, str, str, str]:
    """(digits used or None, why it differs from ``decimals``, who left it unrounded, the rounding kind)."""
    if column in unrounded:
        return None, "round = false (its values are the post-processing's on purpose)", "round = false", DECIMALS
    if column in discretised:
        return None, "the post-processing function returned it as discretised", "post-processing", DECIMALS
    kind = rounding_kind(metric, values)
    if kind == SIGNIFICANT:
        return decimals, f"{metric.label} scores relative errors", "", kind
    if keep_ties:
        kept = decimals_that_keep(values, decimals)
        if kept != decimals:
            merged = _rounded(values, decimals).nunique(dropna=False)
            distinct = _rounded(values, MAX_DECIMALS).nunique(dropna=False)
            return kept, (f"{decimals} decimals would merge its {distinct} distinct values into {merged}, and "
                          f"{metric.label} ranks them (a column constant on a part fails the scorer)"), "", kind
    return decimals, "", "", kind


def summary(records: Sequence[ColumnRounding]) -> str | None:
    """One line for every rounded column: ``rounding: 16 columns to 6 decimals, 14 left as the post-processing
    wrote them`` (per-column detail: the record)."""
    if not records:
        return None
    groups: dict[str, int] = {}
    for record in records:
        if record.used is None:
            key = "left as the post-processing wrote them" if record.by == "post-processing" else "left unrounded (round = false)"
        elif record.used != record.requested:
            key = "kept more decimals than requested (no two predictions merged)"
        else:
            key = f"to {record.used} {record.kind}"
        groups[key] = groups.get(key, 0) + 1
    parts = [f"{count} column{'s' if count > 1 else ''} {key}" for key, count in groups.items()]
    tied = sum(1 for record in records if record.ties_after > record.ties_before)
    return "rounding: " + ", ".join(parts) + (f"; ties grew in {tied} column{'s' if tied > 1 else ''}" if tied else "")


def unrounded_columns(postprocess: Sequence[PostprocessStage], unrounded: Sequence[str], targets: Sequence[str]) -> set[str]:
    """``[submission] unrounded`` plus what each ``round = false`` stage writes (its ``into``, its ``columns``;
    a function stage without ``columns``: every target)."""
    columns = set(unrounded)
    for stage in postprocess:
        if stage.round:
            continue
        if isinstance(stage, ArgmaxStage):
            columns.add(stage.into)
        elif stage.columns:
            columns.update(stage.columns)
        else:
            columns.update(targets)
    return columns


def record_rounding(records: Sequence[ColumnRounding], working: Path) -> Path:
    path = working / ROUNDING_RECORD
    path.write_text(json.dumps([asdict(record) for record in records], indent=1))
    return path


def keep_unrounded(frame: pd.DataFrame, temp: Path) -> Path | None:
    """The predictions before rounding, in ``/kaggle/temp`` (scratch, never an output): the dry run scores them
    against the rounded file. None where there is no such folder (a test's working dir) or it is not writable."""
    if not temp.is_dir():
        return None
    try:
        path = temp / UNROUNDED_FILE
        frame.to_csv(path, index=False)
    except OSError:
        return None
    return path


__all__ = ["DECIMALS", "MAX_DECIMALS", "ROUNDING_RECORD", "SIGNIFICANT", "UNROUNDED_FILE", "ColumnRounding",
           "decimals_that_keep", "keep_unrounded", "record_rounding", "round_column", "round_safely", "rounding_kind",
           "significant", "summary", "ties", "unrounded_columns"]
