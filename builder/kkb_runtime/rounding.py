"""Rounding that prevents scoring errors and never causes one.

kkb rounds the float target columns (``[submission] decimals``) because float noise has failed real
scorers. Rounding also merges predictions: in Google QUEST Q&A Labeling (mean column-wise Spearman),
2 decimals made two columns constant on the public rows and the scorer failed. So for a rank metric
(``metrics.REGISTRY[...].keeps_ties``) a column keeps as many decimals as it needs for no two distinct
predictions to merge, up to 15 (differences below 1e-15 are float noise); failing that it stays unrounded.
Rounding that never merges two values keeps every part's distinct values too, whatever the split.

A column the user's post-processing discretised on purpose (``round = false`` on its ``[[postprocess]]``
stage, or ``[submission] unrounded``) is left as it is. Every rounded column reports its ties (rows that
share their value with another row) before and after, and the decimals requested and used.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from .metrics import MetricName, rules

MAX_DECIMALS = 15  # below this, differences are float noise (a double holds 15-17 significant digits)
ROUNDING_RECORD = "kkb_rounding.json"  # in the working dir: the dry run's report reads it


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

    @property
    def changed(self) -> bool:
        return self.used != self.requested

    def line(self) -> str:
        used = "unrounded" if self.used is None else f"{self.used} decimals"
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


def decimals_that_keep(values: pd.Series, requested: int) -> int | None:
    """The fewest decimals, at least ``requested``, that merge no two distinct values (beyond float noise)."""
    distinct = _rounded(values, MAX_DECIMALS).nunique(dropna=False)
    for decimals in range(requested, MAX_DECIMALS + 1):
        if _rounded(values, decimals).nunique(dropna=False) == distinct:
            return decimals
    return None


def round_safely(frame: pd.DataFrame, targets: Sequence[str], decimals: int | None, metric: MetricName,
                 float_columns: Collection[str], unrounded: Collection[str] = ()) -> tuple[pd.DataFrame, list[ColumnRounding]]:
    """``frame`` with each of ``float_columns`` (the targets the sample holds as floats) rounded; one record each."""
    if decimals is None:
        return frame, []
    found = rules(metric)
    keep_ties = found is not None and found.keeps_ties
    out, records = frame.copy(), []
    for column in targets:
        if column not in float_columns or column not in out.columns or not pd.api.types.is_float_dtype(out[column]):
            continue
        values = out[column]
        used: int | None = decimals
        why = ""
        if column in unrounded:
            used, why = None, "round = false (its values are the post-processing's on purpose)"
        elif keep_ties:
            kept = decimals_that_keep(values, decimals)
            if kept != decimals:
                merged = _rounded(values, decimals).nunique(dropna=False)
                distinct = _rounded(values, MAX_DECIMALS).nunique(dropna=False)
                used = kept
                why = (f"{decimals} decimals would merge its {distinct} distinct values into {merged}, and "
                       f"{metric.label} ranks them (a column constant on a part fails the scorer)")
        if used is not None:
            out[column] = _rounded(values, used)
        records.append(ColumnRounding(column, decimals, used, int(values.nunique(dropna=False)),
                                      int(out[column].nunique(dropna=False)), ties(values), ties(out[column]),
                                      len(values), why))
    return out, records


def unrounded_columns(postprocess: Sequence[Mapping[str, Any]], unrounded: Sequence[str], targets: Sequence[str]) -> set[str]:
    """``[submission] unrounded`` plus what each ``round = false`` stage writes (its ``into``, its ``columns``;
    a function stage without ``columns``: every target)."""
    columns = set(unrounded)
    for stage in postprocess:
        if stage["round"]:
            continue
        if stage.get("kind") == "argmax":
            columns.add(str(stage["into"]))
        elif isinstance(stage.get("columns"), list) and stage["columns"]:
            columns.update(str(c) for c in stage["columns"])
        else:
            columns.update(targets)
    return columns


def record_rounding(records: Sequence[ColumnRounding], working: Path) -> Path:
    path = working / ROUNDING_RECORD
    path.write_text(json.dumps([asdict(record) for record in records], indent=1))
    return path


__all__ = ["MAX_DECIMALS", "ROUNDING_RECORD", "ColumnRounding", "decimals_that_keep", "record_rounding", "round_safely",
           "ties", "unrounded_columns"]
