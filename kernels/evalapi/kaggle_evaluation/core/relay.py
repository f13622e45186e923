"""The gRPC relay between a competition's gateway (client) and the competitor's inference server.

Like Kaggle's: one unary ``Send`` method carries an endpoint name plus arguments; the server looks up
the listener registered under that name (the function's ``__name__``) and returns its answer. The first
call waits up to ``STARTUP_LIMIT_SECONDS`` for the server to come up and has no deadline (it may load a
model); later calls get ``endpoint_deadline_seconds``, which the gateway sets.
"""

from __future__ import annotations

import base64
import io
import json
import os
import socket
import time
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
import numpy as np
import pandas as pd

try:  # polars is optional, as in the Kaggle image: only pandas is required here
    import polars as pl
except ImportError:  # pragma: no cover - depends on the environment
    pl = None

_SERVICE = "kaggle_evaluation_client.KaggleEvaluationService"
_METHOD = f"/{_SERVICE}/Send"
# Kaggle: 50051, then 60053-60062 when it is taken. kkb: one fixed port from the environment when two
# processes on one machine (the dry run's notebook and gateway) must meet.
_DEFAULT_PORTS = (50051, *range(60053, 60063))
DEFAULT_DEADLINE_SECONDS = 60 * 60
STARTUP_LIMIT_SECONDS = float(os.environ.get("KKB_EVALAPI_STARTUP_LIMIT_SECONDS", 15 * 60))
_RETRY_SLEEP_SECONDS = 1.0
_CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    # Two servers must never share a port silently (gRPC sets SO_REUSEPORT by default).
    ("grpc.so_reuseport", 0),
]
_CLIENT_OPTIONS = [
    *_CHANNEL_OPTIONS,
    # A proxy from the environment must not see loopback traffic.
    ("grpc.enable_http_proxy", 0),
    # Retry a refused connection every second, not with gRPC's growing backoff (up to 2 minutes),
    # so a server that comes up is reached at the next retry.
    ("grpc.initial_reconnect_backoff_ms", 500),
    ("grpc.min_reconnect_backoff_ms", 500),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


class ServerNeverStarted(RuntimeError):
    """The first call found no server within ``STARTUP_LIMIT_SECONDS``."""


def server_ports() -> tuple[int, ...]:
    fixed = os.environ.get("KKB_EVALAPI_PORT")
    return (int(fixed),) if fixed else _DEFAULT_PORTS


# --- values on the wire -------------------------------------------------------------------------

def _tag(kind: str, **fields: Any) -> dict[str, Any]:
    return {"__kaggle_evaluation__": kind, **fields}


def _parquet(frame: pd.DataFrame) -> str:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _from_parquet(text: str) -> pd.DataFrame:
    return pd.read_parquet(io.BytesIO(base64.b64decode(text)))


def _encode(value: Any) -> Any:
    """A JSON-ready tree; anything Kaggle's relay would refuse raises TypeError."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if isinstance(value, bytes):
        return _tag("bytes", data=base64.b64encode(value).decode("ascii"))
    if isinstance(value, list):
        return [_encode(item) for item in value]
    if isinstance(value, tuple):
        return _tag("tuple", items=[_encode(item) for item in value])
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise TypeError("KaggleEvaluation only supports dicts with str keys")
        return _tag("dict", items={key: _encode(item) for key, item in value.items()})
    if isinstance(value, pd.DataFrame):
        return _tag("pandas.DataFrame", parquet=_parquet(value))
    if isinstance(value, pd.Series):
        return _tag("pandas.Series", name=_encode(value.name), parquet=_parquet(value.to_frame("__value__")))
    if pl is not None and isinstance(value, pl.DataFrame):
        return _tag("polars.DataFrame", parquet=_parquet(value.to_pandas()))
    if pl is not None and isinstance(value, pl.Series):
        return _tag("polars.Series", name=value.name, parquet=_parquet(value.to_frame("__value__").to_pandas()))
    raise TypeError(f"Type {type(value)} not supported for KaggleEvaluation.")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(item) for item in value]
    if not isinstance(value, dict):
        return value
    kind = value["__kaggle_evaluation__"]
    if kind == "bytes":
        return base64.b64decode(value["data"])
    if kind == "tuple":
        return tuple(_decode(item) for item in value["items"])
    if kind == "dict":
        return {key: _decode(item) for key, item in value["items"].items()}
    if kind == "pandas.DataFrame":
        return _from_parquet(value["parquet"])
    if kind == "pandas.Series":
        return _from_parquet(value["parquet"])["__value__"].rename(_decode(value["name"]))
    if kind.startswith("polars.") and pl is None:
        raise TypeError(f"received a {kind} but polars is not installed")
    if kind == "polars.DataFrame":
        return pl.from_pandas(_from_parquet(value["parquet"]))
    if kind == "polars.Series":
        return pl.from_pandas(_from_parquet(value["parquet"])["__value__"]).rename(value["name"])
    raise TypeError(f"unknown value kind on the wire: {kind}")


def _dumps(value: Any) -> bytes:
    return json.dumps(_encode(value)).encode("utf-8")


def _loads(payload: bytes) -> Any:
    return _decode(json.loads(payload.decode("utf-8")))


# --- the client (the gateway's side) -------------------------------------------------------------

class Client:
    def __init__(self, channel_address: str = "localhost", port: int | None = None) -> None:
        self.channel_address = channel_address
        self.port = port if port is not None else server_ports()[0]
        self.endpoint_deadline_seconds: float = DEFAULT_DEADLINE_SECONDS
        self._made_first_connection = False
        self._channel: grpc.Channel | None = None

    def _call(self) -> Callable[..., bytes]:
        if self._channel is None:
            self._channel = grpc.insecure_channel(f"{self.channel_address}:{self.port}", options=_CLIENT_OPTIONS)
        return self._channel.unary_unary(_METHOD)

    def _send_with_deadline(self, request: bytes) -> bytes:
        """The first call waits for the server (no deadline); later ones get the endpoint deadline."""
        if self._made_first_connection:
            return self._call()(request, wait_for_ready=False, timeout=self.endpoint_deadline_seconds)
        first_call_time = time.time()
        while time.time() - first_call_time < STARTUP_LIMIT_SECONDS:
            try:
                response = self._call()(request, wait_for_ready=False)
                self._made_first_connection = True
                return response
            except grpc.RpcError as err:
                if err.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
            # Kaggle checks here that the inference container still exists (its hostname resolves).
            socket.gethostbyname(self.channel_address)
            time.sleep(_RETRY_SLEEP_SECONDS)
        raise ServerNeverStarted(f"Failed to connect to server after waiting {_seconds(STARTUP_LIMIT_SECONDS)} seconds")

    def send(self, name: str, *args: Any, **kwargs: Any) -> Any:
        request = _dumps({"name": name, "args": list(args), "kwargs": kwargs})
        return _loads(self._send_with_deadline(request))

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


# --- the server (the competitor's side) ----------------------------------------------------------

def define_server(*endpoint_listeners: Callable[..., Any]) -> tuple[grpc.Server, int]:
    """A gRPC server answering each registered listener by its ``__name__``, bound to the first free port."""
    if not endpoint_listeners:
        raise ValueError("Must pass at least one endpoint listener, e.g. `predict`")
    for func in endpoint_listeners:
        if not callable(func):
            raise ValueError("Endpoint listeners passed to the server must be functions")
        if func.__name__ == "<lambda>":
            raise ValueError("Functions passed as endpoint listeners must be named")
    listeners = {func.__name__: func for func in endpoint_listeners}

    def send(request: bytes, context: grpc.ServicerContext) -> bytes:
        # Everything, serialising the answer included, happens inside the handler, so any failure
        # reaches the gateway as "Exception calling application: ...".
        message = _loads(request)
        if message["name"] not in listeners:
            raise NotImplementedError(f"No listener for {message['name']} was registered.")
        return _dumps(listeners[message["name"]](*message["args"], **message["kwargs"]))

    handler = grpc.method_handlers_generic_handler(_SERVICE, {"Send": grpc.unary_unary_rpc_method_handler(send)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1), options=_CHANNEL_OPTIONS)
    server.add_generic_rpc_handlers((handler,))
    return server, _bind(server)


def _bind(server: grpc.Server) -> int:
    tried = server_ports()
    for port in tried:
        try:
            if server.add_insecure_port(f"[::]:{port}"):
                return port
        except RuntimeError:  # grpcio raises where older versions returned 0
            continue
    raise RuntimeError(f"no free port for the inference server among {', '.join(map(str, tried))}")
