"""The local Kaggle: a loopback server that speaks Kaggle's API to the real ``kaggle`` client.

Like moto or LocalStack: datasets (versioned, resumable uploads), kernels (queued, run in the dry
run's sandbox, outputs and logs), code competitions (scoring rerun, metric, daily limit) and fault
injection, all kept under one data directory. See :class:`LocalKaggle`.

Names are imported lazily, so that ``kkb``'s CLI (which mounts ``local_kaggle.cli``) starts fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from builder.local_kaggle.competition import CompetitionConfig, load_competition
    from builder.local_kaggle.faults import Faults
    from builder.local_kaggle.runner import (InstantRunner, Judgement, KernelRunner, MountSpec, RunRequest, RunResult,
                                             SandboxRunner)
    from builder.local_kaggle.server import LocalKaggle
    from builder.local_kaggle.settings import ServerSettings
    from builder.local_kaggle.shim import shim_dir

_EXPORTS = {
    "CompetitionConfig": "competition", "load_competition": "competition", "Faults": "faults",
    "InstantRunner": "runner", "Judgement": "runner", "KernelRunner": "runner", "MountSpec": "runner", "RunRequest": "runner",
    "RunResult": "runner", "SandboxRunner": "runner", "LocalKaggle": "server", "ServerSettings": "settings",
    "shim_dir": "shim",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)


def __dir__() -> list[str]:
    return __all__
