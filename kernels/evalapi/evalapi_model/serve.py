"""The competitor's predict for kkb-evalapi: one date of the test in, one target per row out.

The gateway serves the test one ``date_id`` at a time, in order, and the model reads each symbol's ``x1`` at the
previous date (``x1_lag``): state carried from one call to the next, as real time-series solutions carry lags and
rolling windows. The first date has no previous one (its lag is 0).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from evalapi_model.model import LinearModel

_model: LinearModel | None = None
_last_x1: dict[int, float] = {}  # each symbol's x1 at the previous date


def _load() -> LinearModel:
    # Loaded in the first predict call, not at import: serve() must be reached within the startup limit,
    # and the first call has no deadline.
    global _model
    if _model is None:
        _model = LinearModel.load(Path(os.environ["KKB_WEIGHTS_DIR"]) / "weights" / "linear.json")
    return _model


def with_lags(test: pd.DataFrame, last_x1: dict[int, float]) -> pd.DataFrame:
    """``test`` (one date) with ``x1_lag`` from ``last_x1``, which then holds this date's x1 per symbol."""
    frame = test.assign(x1_lag=test["symbol_id"].map(last_x1).fillna(0.0).astype(float))
    last_x1.update(zip(test["symbol_id"].tolist(), test["x1"].astype(float).tolist(), strict=True))
    return frame


def predict(test: pd.DataFrame) -> pd.DataFrame:
    # No rounding here: kkb rounds what predict returns to [submission] decimals.
    frame = with_lags(test, _last_x1)
    return pd.DataFrame({"row_id": test["row_id"], "target": _load().predict(frame)})
