"""The competitor's predict for kkb-evalapi: one batch of the test in, one target per row out."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from evalapi_model.model import LinearModel

_model: LinearModel | None = None


def _load() -> LinearModel:
    # Loaded in the first predict call, not at import: serve() must be reached within the startup limit,
    # and the first call has no deadline.
    global _model
    if _model is None:
        _model = LinearModel.load(Path(os.environ["KKB_WEIGHTS_DIR"]) / "weights" / "linear.json")
    return _model


def predict(test: pd.DataFrame) -> pd.DataFrame:
    # No rounding here: kkb rounds what predict returns to [submission] decimals.
    return pd.DataFrame({"row_id": test["row_id"], "target": _load().predict(test)})
