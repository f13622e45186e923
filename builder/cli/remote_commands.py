"""``kkb push``, ``submit``, ``status``, ``stop``, ``logs``, ``history``: what goes to Kaggle and what Kaggle says
(registered on the app by :mod:`builder.cli`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import typer

from builder import api
from builder.cli import limit_options
from builder.cli.options import BUILD_OUT_OPT, KERNEL_ARG, OWNER_OPT
from builder.cli.remote_views import show_history, show_status, show_stop
from builder.cli.views import _print_json, _ProgressView, _show_push, console, err_console
from builder.project.paths import absolute, resolved
from builder.project.spec import MAX_WAIT_SECONDS
from builder.remote.queries import QuerySettings
from builder.remote.queries import history as kernel_history
from builder.remote.queries import logs as kernel_logs
from builder.remote.queries import status as kernel_status
from builder.remote.queries import stop as kernel_stop
from builder.remote.session import PushSettings, Waits
from builder.remote.submit import SubmitSettings

_LAST_VERSION_OPT = typer.Option(None, "--version", help="Kernel version (default: the last pushed).")
_JSON_OPT = typer.Option(False, "--json", help="Print the result as JSON on stdout.")
_PUSH_JSON_OPT = typer.Option(False, "--json", help="Print the result as JSON on stdout (progress stays on stderr).")


def _wait_seconds(value: float | None) -> float | None:
    if value is not None and not 0 < value <= MAX_WAIT_SECONDS:  # also refuses nan and inf
        raise typer.BadParameter(f"{value:g} is not a number of seconds in (0, {MAX_WAIT_SECONDS}] (48 h at most)")
    return value


_WAIT_DATASET_OPT = typer.Option(None, "--wait-dataset", callback=_wait_seconds,
                                 help="Seconds to wait for a dataset version to be ready (default: [push] "
                                 "dataset_timeout_seconds, else 1800).")
_WAIT_RUN_OPT = typer.Option(None, "--wait-run", callback=_wait_seconds,
                             help="Seconds to wait for the kernel run (default: [push] run_timeout_seconds, else the "
                             "time limit plus an hour).")
_WAIT_SCORE_OPT = typer.Option(None, "--wait-score", callback=_wait_seconds,
                               help="Seconds to wait for the score (default: [push] score_timeout_seconds, else the "
                               "time limit plus an hour).")


def _waits(dataset: float | None, run: float | None = None, score: float | None = None) -> Waits:
    return Waits(dataset_timeout_s=dataset, run_timeout_s=run, scoring_timeout_s=score)


def push(
    kernel_dir: Path = KERNEL_ARG,
    out: Path | None = BUILD_OUT_OPT,
    owner: str | None = OWNER_OPT,
    message: str | None = typer.Option(None, "--message", "-m", help="Dataset version notes."),
    wait_dataset: float | None = _WAIT_DATASET_OPT,
    wait_for_slot: bool = limit_options.WAIT_FOR_SLOT,
    force: bool = limit_options.FORCE,
    replace: bool = limit_options.REPLACE,
    as_json: bool = _PUSH_JSON_OPT,
) -> None:
    """Build, upload only what changed, and push a kernel version (internet off) to Kaggle."""
    with _ProgressView() as view:
        result = api.push(PushSettings(kernel_dir=kernel_dir, out_dir=out, owner=owner, message=message,
                                          waits=_waits(wait_dataset), progress=view, wait_for_slot=wait_for_slot,
                                          force=force, replace=replace))
    if as_json:
        _print_json("push", dataclasses.asdict(result))
        return
    _show_push(result)


def submit(
    kernel_dir: Path = KERNEL_ARG,
    version: int | None = typer.Option(None, "--version", help="Submit this kernel version instead of pushing."),
    message: str | None = typer.Option(None, "--message", "-m", help="Submission description."),
    out: Path | None = BUILD_OUT_OPT,
    owner: str | None = OWNER_OPT,
    resubmit: bool = typer.Option(False, "--resubmit", help="Submit again even if this version was submitted."),
    wait_dataset: float | None = _WAIT_DATASET_OPT,
    wait_run: float | None = _WAIT_RUN_OPT,
    wait_score: float | None = _WAIT_SCORE_OPT,
    wait_for_slot: bool = limit_options.WAIT_FOR_SLOT,
    force: bool = limit_options.FORCE,
    replace: bool = limit_options.REPLACE,
    as_json: bool = _PUSH_JSON_OPT,
) -> None:
    """Push (unless --version), wait for the kernel run, submit it, and print the public score."""
    settings = SubmitSettings(kernel_dir=kernel_dir, out_dir=out, owner=owner, message=message, version=version,
                              resubmit=resubmit, waits=_waits(wait_dataset, wait_run, wait_score),
                              wait_for_slot=wait_for_slot, force=force, replace=replace)
    with _ProgressView() as view:
        result = api.submit(SubmitSettings(**{**settings.__dict__, "progress": view}))
    if as_json:
        _print_json("submit", dataclasses.asdict(result))
        return
    if result.push is not None:
        _show_push(result.push)
    console.print(f"submission #{result.submission_ref}: {result.kernel_id} v{result.kernel_version} → {result.competition}",
                  highlight=False)
    console.print(f"[bold green]public score {result.public_score}[/bold green]", highlight=False)


def status(
    kernel_dir: Path = KERNEL_ARG,
    version: int | None = _LAST_VERSION_OPT,
    owner: str | None = OWNER_OPT,
    as_json: bool = _JSON_OPT,
) -> None:
    """The last push, its kernel run, the last submission, and Kaggle's limits: submissions left, GPU quota, sessions."""
    show_status(kernel_status(resolved(QuerySettings(kernel_dir=kernel_dir, version=version, owner=owner))), as_json)


def stop(
    kernel_dir: Path = KERNEL_ARG,
    version: int | None = typer.Option(None, "--version", help="Stop only if this version runs (default: any)."),
    owner: str | None = OWNER_OPT,
    as_json: bool = _JSON_OPT,
) -> None:
    """Stop the kernel's run on Kaggle: Kaggle's API does it only by deleting the kernel (every version goes)."""
    show_stop(kernel_stop(resolved(QuerySettings(kernel_dir=kernel_dir, version=version, owner=owner))), as_json)


def logs(
    kernel_dir: Path = KERNEL_ARG,
    version: int | None = _LAST_VERSION_OPT,
    owner: str | None = OWNER_OPT,
) -> None:
    """Print the log of a kernel run on Kaggle."""
    result = kernel_logs(resolved(QuerySettings(kernel_dir=kernel_dir, version=version, owner=owner)))
    err_console.print(f"[dim]log of {result.kernel_id} v{result.kernel_version}[/dim]", highlight=False)
    for entry in result.entries:
        style = "red" if entry.get("stream_name") == "stderr" else None
        console.print(str(entry.get("data", "")), end="", style=style, markup=False, highlight=False)


def history(kernel_dir: Path = KERNEL_ARG,
            as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON on stdout.")) -> None:
    """A table of every push, run (its session, how it ended, what it billed) and submission of the project."""
    show_history(kernel_history(absolute(kernel_dir)), str(kernel_dir), as_json)
