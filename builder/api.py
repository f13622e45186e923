"""kkb's Python API, imported as ``kkb``: the functions the ``kkb`` command calls, with their settings and results.

A notebook or a training script builds, rehearses, pushes and submits a kernel project without the command line::

    import kkb
    from pathlib import Path

    report = kkb.dry_run(kkb.DryRunSettings(kernel_dir=Path("kernels/mine")))
    if report.ok:
        kkb.submit(kkb.SubmitSettings(kernel_dir=Path("kernels/mine")))

Settings and results are frozen dataclasses; a problem raises :class:`KkbError` (its ``hint`` says what to do, its
``exit_code`` is the command's), a setting of the wrong type too (naming it and the type to give). The command line
(``builder.cli``) is a thin layer over these functions. Paths may be relative: each function takes them against the
current folder when it is called (``builder.project.paths``), and nothing kkb does later depends on the folder it
works in.
"""

from __future__ import annotations

from builder.build import BuildResult, BuildSettings, build_kernel
from builder.errors import KkbError
from builder.project.init import Download, InitResult, InitSettings, init_project
from builder.project.paths import resolved
from builder.project.settings_types import check_settings
from builder.project.spec import KernelSpec, load_spec
from builder.rehearse import dryrun
from builder.rehearse.dryrun import DryRunSettings
from builder.rehearse.report import DryRunReport, ScenarioReport
from builder.remote import push as remote_push
from builder.remote import submit as remote_submit
from builder.remote.push import PushResult
from builder.remote.session import PushSettings, Waits
from builder.remote.submit import SubmitResult, SubmitSettings


def build(settings: BuildSettings) -> BuildResult:
    """``kkb build``: the code and weights datasets and the rendered notebook under ``build/NAME``, offline."""
    check_settings(settings, BuildSettings)
    return build_kernel(resolved(settings))


def dry_run(settings: DryRunSettings) -> DryRunReport:
    """``kkb dry-run``: both Kaggle runs in a local sandbox, judged in Kaggle's words; writes report.json/.html."""
    check_settings(settings, DryRunSettings)
    return dryrun.dry_run(resolved(settings))


def push(settings: PushSettings) -> PushResult:
    """``kkb push``: upload the datasets whose content changed, wait until they are ready, push the kernel."""
    check_settings(settings, PushSettings)
    return remote_push.push(resolved(settings))


def submit(settings: SubmitSettings) -> SubmitResult:
    """``kkb submit``: push (or take ``settings.version``), wait for the run, submit it, wait for the score."""
    check_settings(settings, SubmitSettings)
    return remote_submit.submit(resolved(settings))


def init(settings: InitSettings, download: Download | None = None) -> InitResult:
    """``kkb init``: a kernel project from a competition's sample submission or a pulled kernel, and/or its CI.

    ``download(folder, slug)`` fetches the competition's data when ``settings.data_dir`` is unset (the command
    line passes one that downloads with your credentials); without it, ``data_dir`` is needed.
    """
    check_settings(settings, InitSettings)
    return init_project(resolved(settings), download)


__all__ = [
    "BuildResult", "BuildSettings", "DryRunReport", "DryRunSettings", "InitResult", "InitSettings", "KernelSpec",
    "KkbError", "PushResult", "PushSettings", "ScenarioReport", "SubmitResult", "SubmitSettings", "Waits", "build",
    "dry_run", "init", "load_spec", "push", "submit",
]
