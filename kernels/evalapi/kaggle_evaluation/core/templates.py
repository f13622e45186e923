"""The two classes a competition specialises: its ``Gateway`` and its ``InferenceServer``."""

from __future__ import annotations

import abc
import os
import time
import warnings
from collections.abc import Callable, Generator
from typing import Any

from . import base_gateway, relay

_initial_import_time = time.time()


class Gateway(base_gateway.BaseGateway, abc.ABC):
    """Reads the test data, calls ``predict`` batch by batch, validates each answer, writes the submission."""

    @abc.abstractmethod
    def unpack_data_paths(self) -> None:
        """Turn ``self.data_paths`` (or the competition's defaults) into what ``generate_data_batches`` reads."""

    @abc.abstractmethod
    def generate_data_batches(self) -> Generator[tuple[tuple[Any, ...], Any], None, None]:
        """Yield ``(arguments for predict, row ids of the batch)``."""

    def competition_specific_validation(self, prediction_batch: Any, row_ids: Any, data_batch: tuple[Any, ...]) -> Any:
        return prediction_batch

    def get_all_predictions(self) -> tuple[list[Any], list[Any]]:
        all_predictions, all_row_ids = [], []
        for data_batch, row_ids in self.generate_data_batches():
            predictions = self.predict(*data_batch)
            self.validate_prediction_batch(predictions, row_ids)
            all_predictions.append(self.competition_specific_validation(predictions, row_ids, data_batch))
            all_row_ids.append(row_ids)
        return all_predictions, all_row_ids

    def predict(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self.client.send("predict", *args, **kwargs)
        except Exception as exc:
            self.handle_server_error(exc, "predict")

    def set_response_timeout_seconds(self, timeout_seconds: float) -> None:
        """The deadline for every call after the first (the first may load a model)."""
        self.timeout_seconds = timeout_seconds
        self.client.endpoint_deadline_seconds = timeout_seconds


class InferenceServer(abc.ABC):
    """What the competitor instantiates with their ``predict``: ``serve()`` in the rerun,
    ``run_local_gateway()`` anywhere else."""

    def __init__(self, *endpoint_listeners: Callable[..., Any]) -> None:
        self.server, self.port = relay.define_server(*endpoint_listeners)
        self.client = None
        self.gateway: Gateway | None = None
        self._issued_startup_time_warning = False
        self._startup_limit_seconds = relay.STARTUP_LIMIT_SECONDS

    def serve(self) -> None:
        self.server.start()
        if os.getenv("KAGGLE_IS_COMPETITION_RERUN") is not None:
            self.server.wait_for_termination()  # blocks the rest of the notebook; Kaggle ends the container

    @abc.abstractmethod
    def _get_gateway_for_test(self, data_paths: tuple[str, ...] | None, file_share_dir: str | None = None,
                              *args: Any, **kwargs: Any) -> Gateway:
        """The competition's gateway, reading ``data_paths`` (the public test) instead of the hidden data."""

    def run_local_gateway(self, data_paths: tuple[str, ...] | None = None, file_share_dir: str | None = None,
                          *args: Any, **kwargs: Any) -> None:
        """Start the server and run the competition's gateway against it in this process;
        writes ``submission.parquet`` in the working directory and raises any gateway error."""
        elapsed = time.time() - _initial_import_time
        if elapsed > self._startup_limit_seconds and not self._issued_startup_time_warning:
            warnings.warn(
                f"{int(elapsed)} seconds elapsed before server startup. This exceeds the startup time limit of "
                f"{int(self._startup_limit_seconds)} seconds that the gateway will enforce during the rerun on the "
                "hidden test set. Start the server before performing any time consuming steps.",
                category=RuntimeWarning,
            )
            self._issued_startup_time_warning = True
        self.server.start()
        try:
            self.gateway = self._get_gateway_for_test(data_paths, file_share_dir, *args, **kwargs)
            self.gateway.client.port = self.port
            self.gateway.run()
        except Exception as err:
            raise err from None
        finally:
            self.server.stop(0)
