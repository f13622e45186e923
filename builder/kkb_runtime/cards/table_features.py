"""The feature table of a table card's step (gbdt, sklearn, torch): the card's ``feature_function`` on the test
rows, computed once per run for every card naming the same function (:mod:`kkb_runtime.features`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..features import shared_features
from ..tables import TableJob
from . import tabular


def feature_table(job: TableJob, environ: Mapping[str, str]) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """The card's features of the test rows, and the step's record of where they came from (None without a
    feature function: the table's own columns)."""
    reference = job.card.get("feature_function")
    if not reference:
        return tabular.features(job.card, job.table, job.id_column), None
    who = {"step": str(environ.get("KKB_STEP_NAME") or job.card["name"]), "card": str(job.card["name"])}
    return shared_features(str(reference), job.ids, who,
                           lambda: tabular.features(job.card, job.table, job.id_column), environ)


__all__ = ["feature_table"]
