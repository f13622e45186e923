"""What kkb does between a tabular card's feature function and its model, and between the model and the
step's columns, said in words: the build prints these lines (``kkb build``'s notes), so no reorder or
mapping is silent.

* features: a booster that recorded its feature names gets exactly those columns, in its order; the
  lines say when that reordered the feature function's columns or left some out;
* classes: a classifier's ``predict_proba`` columns go to the step's columns by exact label
  (:func:`builder.kkb_runtime.cards.tabular.class_order`); the lines say when that reordered them, when
  integer classes 0..k-1 fill the columns in order, and which class a binary model's one column is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .cards.tabular import class_order

SHOWN = 8


def _names(values: Sequence[str]) -> str:
    shown = ", ".join(values[:SHOWN])
    return shown + (f", … ({len(values)} in all)" if len(values) > SHOWN else "")


def feature_notes(card: str, given: Sequence[str], trained: Sequence[str] | None) -> list[str]:
    """The feature function's columns against the model's recorded training columns."""
    if not trained:
        return []
    notes = []
    kept = [column for column in given if column in trained]
    if kept != list(trained) and set(kept) == set(trained):
        moved = [column for column, expected in zip(kept, trained, strict=True) if column != expected]
        notes.append(f"models.{card}: features reordered to the model's training order ({_names(list(trained))}); "
                     f"the feature function returns them as {_names(kept)} ({len(moved)} column(s) moved)")
    extra = [column for column in given if column not in trained]
    if extra:
        notes.append(f"models.{card}: {len(extra)} feature column(s) the model was not trained on are left out: "
                     f"{_names(extra)}")
    return notes


def class_notes(card: str, classes: Any, columns: Sequence[str], width: int) -> list[str]:
    """How ``predict_proba``'s ``width`` columns (labelled ``classes``, or None) become the step's ``columns``."""
    labels = [str(label) for label in classes] if classes is not None else None
    if len(columns) == 1 and width == 2:
        positive = f"'{labels[1]}'" if labels else "the second"
        return [f"models.{card}: a binary classifier: its positive class {positive} (of predict_proba's two) is column "
                f"{columns[0]}"]
    order = class_order(classes, columns, {"name": card})
    if labels is None:
        return [f"models.{card}: the model names no classes: predict_proba's columns fill {_names(list(columns))} in order"]
    if labels == list(columns):
        return []
    if set(labels) == set(columns):
        return [f"models.{card}: predict_proba's classes ({_names(labels)}) matched by label to the columns "
                f"({_names(list(columns))})"]
    pairs = [f"{column} = class {labels[index]}" for column, index in zip(columns, order, strict=True)]
    return [f"models.{card}: integer classes 0..{len(labels) - 1} fill the columns in order: {_names(pairs)}"]


__all__ = ["class_notes", "feature_notes"]
