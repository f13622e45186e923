"""The feature table of a table card (gbdt, sklearn, torch): the card's ``feature_function`` on the test rows
(:func:`features`), computed once per run for every card naming the same function (:func:`feature_table`,
through :mod:`kkb_runtime.features`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import pandas as pd

from ...features import shared_features
from . import models
from .tables import TableJob


class Featured(Protocol):
    """The keys of a card over the feature function's table (gbdt, sklearn, torch)."""

    @property
    def name(self) -> str: ...

    @property
    def feature_function(self) -> str | None: ...


def features(card: Featured, table: pd.DataFrame, id_column: str) -> pd.DataFrame:
    """``feature_function`` on the test rows (the id column included), its id column dropped; without one, every
    column of the table but the id."""
    reference = card.feature_function
    if not reference:
        return table.drop(columns=[id_column])
    result = models.load_factory(reference)(table.copy())
    if not isinstance(result, pd.DataFrame):
        raise models.ModelLoadError(f"model '{card.name}': {reference} returned {type(result).__name__}, "
                                    "not a pandas DataFrame of features")
    if len(result) != len(table):
        raise models.ModelLoadError(f"model '{card.name}': {reference} returned {len(result)} rows for "
                                    f"{len(table)} test rows (one row of features per row, in the same order)")
    return result.drop(columns=[id_column], errors="ignore").reset_index(drop=True)


def feature_table(card: Featured, job: TableJob, environ: Mapping[str, str]) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """The card's features of the test rows, and the step's record of where they came from (None without a
    feature function: the table's own columns)."""
    reference = card.feature_function
    if not reference:
        return features(card, job.table, job.id_column), None
    who = {"step": str(environ.get("KKB_STEP_NAME") or card.name), "card": card.name}
    return shared_features(reference, job.ids, who, lambda: features(card, job.table, job.id_column), environ)


__all__ = ["Featured", "feature_table", "features"]
