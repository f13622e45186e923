"""The kkb-evalapi competition's gateway: the test arrives one date at a time (``date_id``, in order),
``predict(test_batch)`` answers each with one ``target`` per row, and the answers become
``submission.parquet`` (``row_id``, ``target``). An answer that names its rows must name the batch's own."""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kaggle_evaluation.core import base_gateway, templates
from kaggle_evaluation.core.base_gateway import GatewayRuntimeError, GatewayRuntimeErrorType

# This competition's rules: every call after the first must answer within 5 minutes.
RESPONSE_TIMEOUT_SECONDS = float(os.environ.get("KKB_EVALAPI_RESPONSE_TIMEOUT_SECONDS", 5 * 60))


class KkbEvalapiGateway(templates.Gateway):
    def __init__(self, data_paths: tuple[str, ...] | None = None) -> None:
        super().__init__(data_paths, target_column_name="target")
        self.set_response_timeout_seconds(RESPONSE_TIMEOUT_SECONDS)
        self.row_id_column_name = "row_id"
        self.test_path: Path | None = None

    def unpack_data_paths(self) -> None:
        if not self.data_paths:
            # The rerun: the (hidden) test that sits next to this package in the competition data.
            self.test_path = Path(__file__).parent.parent / "test.csv"
        else:
            (self.test_path,) = (Path(path) for path in self.data_paths)

    def generate_data_batches(self) -> Generator[tuple[tuple[Any, ...], Any], None, None]:
        test = pd.read_csv(self.test_path)
        for _, batch in test.groupby("date_id", sort=False):
            batch = batch.reset_index(drop=True)
            yield (batch,), batch["row_id"]

    def competition_specific_validation(self, prediction_batch: Any, row_ids: Any, data_batch: tuple[Any, ...]) -> pd.DataFrame:
        if isinstance(prediction_batch, pd.DataFrame):
            if "target" not in prediction_batch.columns:
                raise GatewayRuntimeError(GatewayRuntimeErrorType.INVALID_SUBMISSION,
                                          f"Predictions must have a 'target' column, got {list(prediction_batch.columns)}")
            if "row_id" in prediction_batch.columns and prediction_batch["row_id"].tolist() != row_ids.tolist():
                raise GatewayRuntimeError(GatewayRuntimeErrorType.INVALID_SUBMISSION, "Invalid values for row_id")
            values = prediction_batch["target"].to_numpy()
        elif isinstance(prediction_batch, pd.Series):
            values = prediction_batch.to_numpy()
        elif hasattr(prediction_batch, "to_pandas"):  # polars
            frame = prediction_batch.to_pandas()
            values = (frame["target"] if isinstance(frame, pd.DataFrame) else frame).to_numpy()
        else:
            values = np.repeat(prediction_batch, len(row_ids))
        return pd.DataFrame({"row_id": row_ids.to_numpy(), "target": values})


if __name__ == "__main__":
    if base_gateway.IS_RERUN:
        gateway = KkbEvalapiGateway()
        # Not an error on Kaggle: the result is in result.json either way.
        gateway.run()
    else:
        print("Skipping run for now")
