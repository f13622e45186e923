"""The feature table of a table card (gbdt, sklearn, torch): the card's ``feature_function`` on the test rows
(:func:`features`), computed once per run for every card naming the same function (:func:`feature_table`,
through :mod:`kkb_runtime.features`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ...context import Context
from ...features import shared_features
from ...typed import JsonValue
from ...user_calls import ArgumentsRefused, call_with
from . import models
from .tables import TableJob, plain

if TYPE_CHECKING:  # imported where used: importing kkb_runtime stays free of them (kkb_runtime/__init__)
    import pandas as pd


class Featured(Protocol):
    """The keys of a card over the feature function's table (gbdt, sklearn, torch)."""

    @property
    def name(self) -> str: ...

    @property
    def feature_function(self) -> str | None: ...

    @property
    def feature_args(self) -> Mapping[str, JsonValue]: ...


def features(card: Featured, table: pd.DataFrame, id_column: str, context: Context) -> pd.DataFrame:
    """``feature_function`` on the test rows (the id column included; ``feature_args`` as keyword arguments, the
    context to ``ctx``), its id column dropped; without one, every column of the table but the id."""
    import pandas as pd
    reference = card.feature_function
    if not reference:
        return table.drop(columns=[id_column])
    function = models.load_factory(reference)
    try:
        result = call_with(function, reference, {"table": table.copy()}, card.feature_args, "feature_args", context)
    except ArgumentsRefused as exc:
        raise models.ModelLoadError(f"model '{card.name}': feature_args: {exc}") from None
    if not isinstance(result, pd.DataFrame):
        raise models.ModelLoadError(f"model '{card.name}': {reference} returned {type(result).__name__}, "
                                    "not a pandas DataFrame of features")
    if len(result) != len(table):
        raise models.ModelLoadError(f"model '{card.name}': {reference} returned {len(result)} rows for "
                                    f"{len(table)} test rows (one row of features per row, in the same order)")
    return result.drop(columns=[id_column], errors="ignore").reset_index(drop=True)


def feature_call(card: Featured) -> str:
    """The feature function as it is called (``pkg.f:make(window=5)``): cards share a table only with the same call."""
    arguments = ", ".join(f"{key}={value!r}" for key, value in sorted(card.feature_args.items()))
    return f"{card.feature_function}({arguments})" if arguments else str(card.feature_function)


def feature_table(card: Featured, job: TableJob, environ: Mapping[str, str],
                  context: Context) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """The card's features of the test rows, and the step's record of where they came from (None without a
    feature function: the table's own columns)."""
    if not card.feature_function:
        return features(card, job.table, job.id_column, context), None
    who = {"step": str(environ.get("KKB_STEP_NAME") or card.name), "card": card.name}
    return shared_features(feature_call(card), job.ids, who, lambda: features(card, job.table, job.id_column, context),
                           environ)


def shown_features(frame: pd.DataFrame) -> list[list[dict[str, Any]]]:
    """Each row of a feature table as a view shows it: every column's name, dtype and value, in the table's order."""
    return [[{"name": str(column), "dtype": str(frame[column].dtype), "value": plain(value)} for column, value in row.items()]
            for _, row in frame.iterrows()]


__all__ = ["Featured", "feature_call", "feature_table", "features", "shown_features"]
