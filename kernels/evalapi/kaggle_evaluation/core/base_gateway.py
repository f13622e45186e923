"""What every competition's gateway shares: error classes, batch validation, result and submission files."""

from __future__ import annotations

import enum
import json
import os
import re
import sys
import traceback
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pandas as pd

from . import relay

try:
    import polars as pl
except ImportError:  # pragma: no cover - depends on the environment
    pl = None

# Presence, not value: Kaggle's own test.
IS_RERUN = os.getenv("KAGGLE_IS_COMPETITION_RERUN") is not None
_FILE_SHARE_DIR = "/kaggle/shared/"
_FRAME_TYPES = tuple(t for t in (pd.DataFrame, pd.Series, pl and pl.DataFrame, pl and pl.Series) if t)


class GatewayRuntimeErrorType(enum.Enum):
    UNSPECIFIED = 0
    SERVER_NEVER_STARTED = 1
    SERVER_CONNECTION_FAILED = 2
    SERVER_RAISED_EXCEPTION = 3
    SERVER_MISSING_ENDPOINT = 4
    # Errors the gateway raises itself are treated as Kaggle's and do not count towards the daily limit.
    GATEWAY_RAISED_EXCEPTION = 5
    INVALID_SUBMISSION = 6
    GRPC_DEADLINE_EXCEEDED = 7


class GatewayRuntimeError(Exception):
    """A failure the gateway reports in ``result.json`` (rerun) or raises (``run_local_gateway``)."""

    def __init__(self, error_type: GatewayRuntimeErrorType, error_details: str | None = None) -> None:
        super().__init__(error_type, error_details)
        self.error_type = error_type
        self.error_details = error_details

    def __str__(self) -> str:
        return f"{self.error_type.name}: {self.error_details}" if self.error_details else self.error_type.name


class BaseGateway:
    def __init__(self, data_paths: tuple[str, ...] | None = None, file_share_dir: str = _FILE_SHARE_DIR,
                 target_column_name: str | None = None) -> None:
        # In the rerun the server runs in another container reachable as "inference_server".
        self.client = relay.Client("inference_server" if IS_RERUN else "localhost")
        self.server = None
        self.file_share_dir = file_share_dir
        self.data_paths = data_paths
        self.target_column_name = target_column_name
        self.timeout_seconds: float | None = None

    def validate_prediction_batch(self, prediction_batch: Any, row_ids: Any) -> None:
        """Every batch must answer exactly its rows: fewer rows would let a competitor hold predictions
        back until the last batch (seen in a real competition), so this runs on every call."""
        if prediction_batch is None:
            raise GatewayRuntimeError(GatewayRuntimeErrorType.INVALID_SUBMISSION, "No prediction received")
        num_received_rows = None
        for primitive_type in (int, float, str, bool, np.integer, np.floating):
            if isinstance(prediction_batch, primitive_type):
                num_received_rows = 1
        if num_received_rows is None:
            if not isinstance(prediction_batch, _FRAME_TYPES):
                raise GatewayRuntimeError(GatewayRuntimeErrorType.INVALID_SUBMISSION,
                                          f"Invalid prediction data type, received: {type(prediction_batch)}")
            num_received_rows = len(prediction_batch)
        if not isinstance(row_ids, _FRAME_TYPES):
            raise GatewayRuntimeError(GatewayRuntimeErrorType.GATEWAY_RAISED_EXCEPTION,
                                      f"Invalid row ID type {type(row_ids)}; expected Polars DataFrame or similar")
        num_expected_rows = len(row_ids)
        if num_expected_rows == 0:
            raise GatewayRuntimeError(GatewayRuntimeErrorType.GATEWAY_RAISED_EXCEPTION, "Missing row IDs for batch")
        if num_received_rows != num_expected_rows:
            raise GatewayRuntimeError(GatewayRuntimeErrorType.INVALID_SUBMISSION,
                                      f"Invalid predictions: expected {num_expected_rows} rows but received {num_received_rows}")

    def handle_server_error(self, exception: Exception, endpoint: str) -> None:
        """Turn what the relay raised into the gateway's error classes."""
        if isinstance(exception, relay.ServerNeverStarted):
            raise GatewayRuntimeError(GatewayRuntimeErrorType.SERVER_NEVER_STARTED, str(exception)) from None
        if isinstance(exception, grpc.RpcError):
            code, details = exception.code(), exception.details() or ""
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise GatewayRuntimeError(
                    GatewayRuntimeErrorType.GRPC_DEADLINE_EXCEEDED,
                    f"Timeout exceeded: {endpoint} did not answer within {relay._seconds(self.client.endpoint_deadline_seconds)} seconds",
                ) from None
            if f"No listener for {endpoint} was registered" in details:
                raise GatewayRuntimeError(GatewayRuntimeErrorType.SERVER_MISSING_ENDPOINT,
                                          f"Server did not register a listener for {endpoint}") from None
            match = re.match(r"Exception calling application: (.*)", details, re.DOTALL)
            if match:
                raise GatewayRuntimeError(GatewayRuntimeErrorType.SERVER_RAISED_EXCEPTION, match.group(1)) from None
            raise GatewayRuntimeError(GatewayRuntimeErrorType.SERVER_CONNECTION_FAILED, f"{code.name}: {details}") from None
        raise exception

    def unpack_data_paths(self) -> None:
        raise NotImplementedError

    def get_all_predictions(self) -> tuple[list[Any], list[Any]]:
        raise NotImplementedError

    def write_submission(self, predictions: list[Any], row_ids: list[Any]) -> Path:
        """``submission.parquet`` in the working directory, batches in order."""
        if predictions and isinstance(predictions[0], pd.DataFrame):
            frame = pd.concat(predictions, ignore_index=True)
        elif predictions and pl is not None and isinstance(predictions[0], pl.DataFrame):
            frame = pl.concat(predictions, how="vertical_relaxed").to_pandas()
        else:
            raise GatewayRuntimeError(GatewayRuntimeErrorType.GATEWAY_RAISED_EXCEPTION,
                                      f"Unsupported predictions type {type(predictions[0]) if predictions else None}")
        path = Path("submission.parquet")
        frame.to_parquet(path, index=False)
        return path

    def write_result(self, error: GatewayRuntimeError | None = None) -> None:
        """``result.json``: what Kaggle turns into the submission's status."""
        result: dict[str, Any] = {"Succeeded": error is None}
        if error is not None:
            result["ErrorType"] = error.error_type.value
            result["ErrorName"] = error.error_type.name
            result["ErrorDetails"] = str(error.error_details)[:8000] if error.error_details else None
        Path("result.json").write_text(json.dumps(result))

    def run(self) -> GatewayRuntimeError | None:
        error = None
        try:
            self.unpack_data_paths()
            predictions, row_ids = self.get_all_predictions()
            self.write_submission(predictions, row_ids)
        except GatewayRuntimeError as gre:
            error = gre
        except Exception:
            error = GatewayRuntimeError(GatewayRuntimeErrorType.GATEWAY_RAISED_EXCEPTION,
                                        "".join(traceback.format_exception(*sys.exc_info())))
        self.client.close()
        if self.server:
            self.server.stop(0)
        if IS_RERUN:
            self.write_result(error)
        elif error:
            # Local testing (run_local_gateway): fail where the competitor can see it.
            raise error
        return error
