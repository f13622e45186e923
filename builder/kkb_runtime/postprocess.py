"""Post-processing: what turns the combined model outputs into the columns the sample submission holds.

The steps write *prediction columns* (``[submission] prediction_columns``, by default the sample's
target columns) and combine averages them; the ``[[postprocess]]`` stages then run in order on the
combined frame (id column included):

* ``argmax``: the index of the largest of ``columns`` (default: every prediction column), mapped
  through ``labels`` (default 0, 1, 2, ...), into the column ``into``; ``columns`` are dropped.
  Cassava-style: five class probabilities become one integer ``label``.
* ``threshold``: ``columns`` become 1 where the value is at least ``value``, else 0 (integers).
* ``clip``: ``columns`` clipped to ``[min, max]``.
* ``function``: ``module:function`` from the code dataset, called with a copy of the frame; it must
  return a DataFrame.

Rounding, the cast to the sample's column types and the check come after, in the notebook's next
cells. :func:`output_columns` is the same chain on column names only, which is how the build checks
a model's width against the sample before anything runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

KINDS = ("argmax", "threshold", "clip", "function")


class PostprocessError(ValueError):
    """A post-processing stage cannot run on the frame it was given."""


def apply(frame: pd.DataFrame, stages: Sequence[Mapping[str, Any]], id_column: str,
          prediction_columns: Sequence[str]) -> pd.DataFrame:
    """Run every stage in order; returns a new frame."""
    out = frame.copy()
    for index, stage in enumerate(stages):
        out = _apply_one(out, stage, id_column, list(prediction_columns), f"postprocess[{index}] ({stage['kind']})")
    return out


def _apply_one(frame: pd.DataFrame, stage: Mapping[str, Any], id_column: str, predictions: list[str],
               where: str) -> pd.DataFrame:
    kind = str(stage["kind"])
    if kind == "function":
        return _call_user(frame, str(stage["function"]), where)
    columns = list(stage.get("columns") or (predictions if kind == "argmax" else
                                            [c for c in frame.columns if c != id_column]))
    if id_column in columns:
        raise PostprocessError(f"{where}: columns names the id column '{id_column}': its values are ids, not "
                               "predictions (list prediction columns only)")
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise PostprocessError(f"{where}: the frame has no column(s) {', '.join(missing)} "
                               f"(it has: {', '.join(map(str, frame.columns))})")
    if kind == "argmax":
        return argmax(frame, columns, str(stage.get("into") or "label"), stage.get("labels"))
    if kind == "threshold":
        out = frame.copy()
        for column in columns:
            out[column] = (frame[column].astype(float) >= float(stage.get("value", 0.5))).astype(np.int64)
        return out
    if kind == "clip":
        out = frame.copy()
        out[columns] = frame[columns].astype(float).clip(lower=stage.get("min"), upper=stage.get("max"))
        return out
    raise PostprocessError(f"{where}: unknown kind '{kind}' (use {', '.join(KINDS)})")


def argmax(frame: pd.DataFrame, columns: Sequence[str], into: str, labels: Sequence[Any] | None = None) -> pd.DataFrame:
    """The label of the largest of ``columns`` per row (ties: the first), in the column ``into``."""
    labels = list(labels) if labels else list(range(len(columns)))
    if len(labels) != len(columns):
        raise PostprocessError(f"argmax: {len(labels)} labels for {len(columns)} columns")
    values = frame[list(columns)].to_numpy(dtype=float)
    if np.isnan(values).any():
        raise PostprocessError(f"argmax: NaN in the columns {', '.join(columns)}: a model produced no number")
    picked = np.asarray(labels, dtype=object)[values.argmax(axis=1)] if len(values) else np.asarray([], dtype=object)
    out = frame.drop(columns=list(columns))
    series = pd.Series(list(picked), index=out.index)
    if all(isinstance(label, (int, np.integer)) and not isinstance(label, bool) for label in labels):
        series = series.astype(np.int64)
    out[into] = series
    return out


def load_function(reference: str) -> Any:
    module, _, name = reference.partition(":")
    try:
        function = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise PostprocessError(f"post-processing function '{reference}': cannot import {name} from '{module}' ({exc})") from None
    if not callable(function):
        raise PostprocessError(f"post-processing function '{reference}' is not callable")
    return function


def _call_user(frame: pd.DataFrame, reference: str, where: str) -> pd.DataFrame:
    result = load_function(reference)(frame.copy())
    if not isinstance(result, pd.DataFrame):
        raise PostprocessError(f"{where}: {reference} returned {type(result).__name__}, not a pandas DataFrame")
    return result


def output_columns(stages: Sequence[Mapping[str, Any]], prediction_columns: Sequence[str]) -> list[str] | None:
    """The target columns after the stages, from the prediction columns; None after a user function (unknowable)."""
    columns = list(prediction_columns)
    for stage in stages:
        kind = str(stage["kind"])
        if kind == "function":
            return None
        if kind == "argmax":
            used = list(stage.get("columns") or prediction_columns)
            into = str(stage.get("into") or "label")
            columns = [column for column in columns if column not in used]
            if into not in columns:
                columns.append(into)
    return columns


__all__ = ["KINDS", "PostprocessError", "apply", "argmax", "load_function", "output_columns"]
