"""The local Kaggle: a loopback server that speaks Kaggle's API to the real ``kaggle`` client.

Like moto or LocalStack: datasets (versioned, resumable uploads), kernels (queued, run in the dry
run's sandbox, outputs and logs), code competitions (scoring rerun, metric, daily limit) and fault
injection, all kept under one data directory. See :class:`LocalKaggle`.

It is a server: it never imports ``builder.remote`` (kkb's client side), so that the two stay
independent and each can be checked against the other.
"""

from __future__ import annotations

from builder.local_kaggle.competition import CompetitionConfig, load_competition
from builder.local_kaggle.faults import Faults
from builder.local_kaggle.runner import InstantRunner, KernelRunner, RunRequest, RunResult, SandboxRunner
from builder.local_kaggle.server import LocalKaggle
from builder.local_kaggle.settings import ServerSettings
from builder.local_kaggle.shim import shim_dir
from builder.rehearse.verdict import Judgement

__all__ = ["CompetitionConfig", "Faults", "InstantRunner", "Judgement", "KernelRunner", "LocalKaggle", "RunRequest",
           "RunResult", "SandboxRunner", "ServerSettings", "load_competition", "shim_dir"]
