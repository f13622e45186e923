"""The adapter push/submit/status/logs talk to: one class, its operations grouped per Kaggle service."""

from __future__ import annotations

from typing import Any

from builder.remote.kaggle_api.account import AccountCalls
from builder.remote.kaggle_api.client import connect, resolve_base_url
from builder.remote.kaggle_api.competitions import CompetitionCalls
from builder.remote.kaggle_api.datasets import DatasetCalls
from builder.remote.kaggle_api.kernels import KernelCalls
from builder.remote.kaggle_api.models import ModelCalls


class KaggleAdapter(DatasetCalls, ModelCalls, KernelCalls, CompetitionCalls, AccountCalls):
    """The operations push/submit/status/logs need, in kkb's terms.

    Built with :meth:`connect`; tests may build one around a stub ``api`` (the seam twine uses). Its fields
    and the call wrapper are :class:`~builder.remote.kaggle_api.calls.KaggleCalls`'; each base adds the
    operations of one Kaggle service.
    """

    @classmethod
    def connect(cls, base_url: str | None = None, **kwargs: Any) -> KaggleAdapter:
        endpoint = resolve_base_url(base_url)
        return cls(api=connect(endpoint), endpoint=endpoint, **kwargs)
