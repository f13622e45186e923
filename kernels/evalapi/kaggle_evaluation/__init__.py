"""kkb's stand-in for the ``kaggle_evaluation`` package that evaluation-API competitions ship in their data.

Same shape and behaviour as Kaggle's (``core/{relay,base_gateway,templates}.py`` plus a gateway and an
inference server per competition, over a real gRPC relay), small enough to read. Differences, all for
running on one machine: the port can be fixed by ``KKB_EVALAPI_PORT`` (Kaggle: 50051, then 60053-60062),
and the startup limit and response deadline can be shortened by ``KKB_EVALAPI_STARTUP_LIMIT_SECONDS``
and ``KKB_EVALAPI_RESPONSE_TIMEOUT_SECONDS`` so tests run in seconds. Values travel as JSON with
DataFrames as parquet where Kaggle uses protobuf; the set of accepted types is the same idea.
"""

__version__ = "0.1.0-kkb"
