"""The one door to Kaggle: the real ``kaggle`` client, in process, behind a narrow adapter.

This package is the only code in ``builder/`` that imports ``kaggle``/``kagglesdk`` (an import-linter
contract), and it does so lazily (inside functions): the client's ``__init__`` authenticates at import
time, printing help to stdout when no credentials exist and making an HTTP call when ``KAGGLE_API_TOKEN``
is set. Its modules:

* ``client``: the client imported quietly, kkb's ``KaggleApi`` subclass, :func:`connect`;
* ``translate``: foreign errors into :mod:`builder.errors`, secrets scrubbed, the client's output logged;
* ``calls``: one call to Kaggle with kkb's retries (:class:`~builder.remote.backoff.Backoff`);
* ``datasets``, ``models``, ``kernels``, ``competitions``: the operations of one Kaggle service each;
  ``account``: the accelerator quota, the user's kernels, deleting one (the only stop Kaggle's API offers);
* ``staging``: folders whose sub-folders are archives at stable paths, so a killed upload resumes;
* ``adapter``: :class:`KaggleAdapter`, all of them together.

The rest of kkb imports from here, never from the modules: what is listed below is the door.
"""

from __future__ import annotations

from builder.errors import AuthError
from builder.remote.kaggle_api.account import KernelInfo, Quota, QuotaLine
from builder.remote.kaggle_api.adapter import KaggleAdapter
from builder.remote.kaggle_api.client import PROD_ENDPOINT, connect, resolve_base_url
from builder.remote.kaggle_api.client import _api_class as _api_class  # tests reach the client's class
from builder.remote.kaggle_api.competitions import Submission, SubmissionLimits
from builder.remote.kaggle_api.datasets import DatasetPushed
from builder.remote.kaggle_api.kernels import KernelPushed, KernelStatus, parse_log
from builder.remote.kaggle_api.staging import remove_dead_stages
from builder.remote.kaggle_api.translate import (
    CREDENTIALS_HINT,
    ENV_BASE_URL,
    HIDDEN,
    NotFoundError,
    TransientRemoteError,
    UnreachableError,
    client_output,
    is_transient,
    request_never_sent,
    retry_reason,
    scrub,
    translate_error,
    unreachable,
)

__all__ = [
    "CREDENTIALS_HINT", "ENV_BASE_URL", "HIDDEN", "PROD_ENDPOINT", "AuthError", "DatasetPushed", "KaggleAdapter",
    "KernelInfo", "KernelPushed", "KernelStatus", "NotFoundError", "Quota", "QuotaLine", "Submission",
    "SubmissionLimits", "TransientRemoteError", "UnreachableError",
    "client_output", "connect", "is_transient", "parse_log", "remove_dead_stages", "request_never_sent", "resolve_base_url", "retry_reason", "scrub",
    "translate_error", "unreachable",
]
