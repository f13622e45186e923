"""kkb: turn a Kaggle kernel project into a scored code-competition submission (``import kkb``).

The API (:mod:`builder.api`, re-exported here; a user never imports ``builder``): ``build``, ``dry_run``,
``push``, ``submit``, ``init``, their settings and results, ``load_spec``, and ``KkbError``. The docs site's
"Python API" page lists them.
"""

from __future__ import annotations

from builder import __version__
from builder.api import (
    BuildResult,
    BuildSettings,
    DryRunReport,
    DryRunSettings,
    InitResult,
    InitSettings,
    KernelSpec,
    KkbError,
    PushResult,
    PushSettings,
    ScenarioReport,
    SubmitResult,
    SubmitSettings,
    Waits,
    build,
    dry_run,
    init,
    load_spec,
    push,
    submit,
)

__all__ = [
    "BuildResult", "BuildSettings", "DryRunReport", "DryRunSettings", "InitResult", "InitSettings", "KernelSpec",
    "KkbError", "PushResult", "PushSettings", "ScenarioReport", "SubmitResult", "SubmitSettings", "Waits", "__version__",
    "build", "dry_run", "init", "load_spec", "push", "submit",
]
