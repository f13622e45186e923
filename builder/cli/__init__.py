"""The ``kkb`` command: parse, build a settings object, call one library function, show the result.

This is the only module that prints for people and exits. Every command runs inside
:func:`main`'s error boundary, which maps :class:`~builder.errors.KkbError` to its exit code
(table in ``builder/errors.py``). kkb's own tracebacks only with ``--debug`` (``--verbose``).
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import typer

from builder import __version__, api
from builder.build import BuildSettings
from builder.cli.image import image as image_command
from builder.cli.remote_views import show_history, show_status, show_stop
from builder.cli.views import (
    _DryRunProgress,
    _escape,
    _print_json,
    _ProgressView,
    _readable_help,
    _show_card_settings,
    _show_dry_run,
    _show_error,
    _show_init,
    _show_push,
    _show_rehearsal,
    _show_wheels,
    _state,
    console,
    err_console,
    waiting_line,
    without_kkb_frames,
)
from builder.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, EXIT_USER, KernelFailed, KkbError, NotRehearsed
from builder.kkb_runtime.vocabulary import Layout, Scenario
from builder.local_kaggle.cli import app as local_kaggle_app
from builder.project.ci import CiProvider
from builder.project.init import InitSettings
from builder.project.kaggle_env import parse_env_options
from builder.project.paths import absolute, resolved
from builder.project.spec import MAX_WAIT_SECONDS
from builder.project.spec_renames import SpecDeprecation
from builder.rehearse.card_inputs import DEFAULT_ROWS
from builder.rehearse.dryrun import DryRunReport, DryRunSettings
from builder.rehearse.on_kaggle import report_from_kaggle
from builder.rehearse.reference import ReferenceSettings, parse_step_reference, reference_failure
from builder.rehearse.report import SCENARIOS, ScenarioChoice
from builder.remote.competition_files import fetch_competition_data
from builder.remote.outputs import CompareSettings, compare_submissions
from builder.remote.queries import QuerySettings
from builder.remote.queries import history as kernel_history
from builder.remote.queries import logs as kernel_logs
from builder.remote.queries import status as kernel_status
from builder.remote.queries import stop as kernel_stop
from builder.remote.rehearsal import RehearsalSettings, rehearse_on_kaggle
from builder.remote.session import PushSettings, Waits
from builder.remote.submit import SubmitSettings
from builder.remote.wheels import WheelsSettings, build_wheels
from builder.run.image_env import build_image_env
from builder.run.limits import parse_size

app = typer.Typer(
    name="kkb",
    help="kkb: turn a Kaggle kernel project into a scored code-competition submission.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Help texts are plain text: "[install]" and "[competition]" are kernel.toml sections, not markup.
    rich_markup_mode=None,
)



def _print_version(value: bool) -> None:
    if value:
        console.print(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--debug", "--verbose", "-v",
                                 help="Show kkb's own tracebacks on errors and failed runs' whole notebook traceback."),
    show_version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                      help="Print kkb's version and exit."),
) -> None:
    _state["verbose"] = verbose


@app.command()
def version() -> None:
    """Print kkb's version."""
    console.print(__version__)


@app.command()
def build(
    kernel_dir: Path = typer.Argument(..., help="The kernel project folder (holds kernel.toml)."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Output folder (default: build/<name>)."),
    owner: str | None = typer.Option(None, "--owner", help="Kaggle username (default: [kernel] owner, then credentials)."),
) -> None:
    """Build the code and weights datasets and the rendered notebook, offline."""
    result = api.build(BuildSettings(kernel_dir=kernel_dir, out_dir=out, owner=owner))
    console.print(f"[green]built[/green] {result.kernel_id} → {result.out_dir}")
    console.print(f"  code     {result.code_dataset}  {result.code_hash}")
    console.print(f"  weights  {result.weights_dataset or result.weights_model}  {result.weights_hash}")
    console.print(f"  notebook {result.notebook_path}")
    for note in result.model_notes:
        console.print(f"  note     {note}", markup=False, highlight=False)  # file names may hold [brackets]
    _show_card_settings(result.card_settings)


@app.command()
def init(
    kernel_dir: Path = typer.Argument(..., help="The new kernel project folder, e.g. kernels/NAME."),
    competition: str | None = typer.Option(None, "--competition", help="The competition's slug (its URL name)."),
    data: Path | None = typer.Option(None, "--data", help="The competition's public data (default: download it "
                                     "with your credentials into NAME/data/SLUG)."),
    source: Path | None = typer.Option(None, "--from", help="A folder written by `kaggle kernels pull OWNER/SLUG -p DIR "
                                       "-m` (kernel-metadata.json and its notebook or script)."),
    owner: str | None = typer.Option(None, "--owner", help="Kaggle username (default: the metadata's, then credentials)."),
    ci: CiProvider | None = typer.Option(None, "--ci", help="Also write a CI workflow (github: .github/workflows/kkb.yml "
                                         "at the repository root): build and dry-run on every push, submit on a tag v*. "
                                         "Alone, it adds the workflow to an existing project."),
    repo_root: Path | None = typer.Option(None, "--repo-root", help="--ci: the repository's root, where .github/ goes "
                                          "(default: the git repository holding the kernel folder; outside one, "
                                          "kkb init refuses and writes nothing)."),
) -> None:
    """Start a kernel project: from a competition's sample submission, or from an existing Kaggle kernel folder; --ci adds a CI workflow."""
    if source is None and competition is None and ci is None:
        raise typer.BadParameter("pass --competition SLUG, or --from DIR (a `kaggle kernels pull -m` folder), or --ci github")
    if repo_root is not None and ci is None:
        raise typer.BadParameter("--repo-root says where --ci writes its workflow: pass --ci github as well")

    def download(folder: Path, slug: str) -> Path:
        console.print(f"downloading the data of {_escape(slug)} …")
        return fetch_competition_data(folder, slug)

    result = api.init(InitSettings(kernel_dir=kernel_dir, competition=competition, data_dir=data, source_dir=source,
                                owner=owner, ci=ci, repo_root=repo_root), download=download)
    _show_init(result)


# -- push / submit / status / logs / history ------------------------------------------


_KERNEL_ARG = typer.Argument(..., help="The kernel project folder (holds kernel.toml).")
_OWNER_OPT = typer.Option(None, "--owner", help="Kaggle username (default: [kernel] owner, then credentials).")


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


_WAIT_SLOT_OPT = typer.Option(False, "--wait-for-slot", help="When a limit of Kaggle's stops the run (a GPU session slot, "
                               "this kernel's version still running, no submission left today), wait for it instead.")
_FORCE_OPT = typer.Option(False, "--force", help="Push even when Kaggle's limits say the run cannot end in a submission "
                          "(it bills; Kaggle may refuse or queue it).")
_REPLACE_OPT = typer.Option(False, "--replace", help="Stop this kernel's version still running on Kaggle first (its "
                            "API can only delete the kernel: every version goes).")


def _waits(dataset: float | None, run: float | None = None, score: float | None = None) -> Waits:
    return Waits(dataset_timeout_s=dataset, run_timeout_s=run, scoring_timeout_s=score)


@app.command()
def push(
    kernel_dir: Path = _KERNEL_ARG,
    out: Path | None = typer.Option(None, "--out", "-o", help="Build folder (default: build/<name>)."),
    owner: str | None = _OWNER_OPT,
    message: str | None = typer.Option(None, "--message", "-m", help="Dataset version notes."),
    wait_dataset: float | None = _WAIT_DATASET_OPT,
    wait_for_slot: bool = _WAIT_SLOT_OPT,
    force: bool = _FORCE_OPT,
    replace: bool = _REPLACE_OPT,
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout (progress stays on stderr)."),
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


@app.command()
def submit(
    kernel_dir: Path = _KERNEL_ARG,
    version: int | None = typer.Option(None, "--version", help="Submit this kernel version instead of pushing."),
    message: str | None = typer.Option(None, "--message", "-m", help="Submission description."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Build folder (default: build/<name>)."),
    owner: str | None = _OWNER_OPT,
    resubmit: bool = typer.Option(False, "--resubmit", help="Submit again even if this version was submitted."),
    wait_dataset: float | None = _WAIT_DATASET_OPT,
    wait_run: float | None = _WAIT_RUN_OPT,
    wait_score: float | None = _WAIT_SCORE_OPT,
    wait_for_slot: bool = _WAIT_SLOT_OPT,
    force: bool = _FORCE_OPT,
    replace: bool = _REPLACE_OPT,
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout (progress stays on stderr)."),
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


@app.command()
def status(
    kernel_dir: Path = _KERNEL_ARG,
    version: int | None = typer.Option(None, "--version", help="Kernel version (default: the last pushed)."),
    owner: str | None = _OWNER_OPT,
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout."),
) -> None:
    """The last push, its kernel run, the last submission, and Kaggle's limits: submissions left, GPU quota, sessions."""
    show_status(kernel_status(resolved(QuerySettings(kernel_dir=kernel_dir, version=version, owner=owner))), as_json)


@app.command()
def stop(
    kernel_dir: Path = _KERNEL_ARG,
    version: int | None = typer.Option(None, "--version", help="Stop only if this version runs (default: any)."),
    owner: str | None = _OWNER_OPT,
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout."),
) -> None:
    """Stop the kernel's run on Kaggle: Kaggle's API does it only by deleting the kernel (every version goes)."""
    show_stop(kernel_stop(resolved(QuerySettings(kernel_dir=kernel_dir, version=version, owner=owner))), as_json)


@app.command()
def logs(
    kernel_dir: Path = _KERNEL_ARG,
    version: int | None = typer.Option(None, "--version", help="Kernel version (default: the last pushed)."),
    owner: str | None = _OWNER_OPT,
) -> None:
    """Print the log of a kernel run on Kaggle."""
    result = kernel_logs(resolved(QuerySettings(kernel_dir=kernel_dir, version=version, owner=owner)))
    err_console.print(f"[dim]log of {result.kernel_id} v{result.kernel_version}[/dim]", highlight=False)
    for entry in result.entries:
        style = "red" if entry.get("stream_name") == "stderr" else None
        console.print(str(entry.get("data", "")), end="", style=style, markup=False, highlight=False)


@app.command()
def history(kernel_dir: Path = _KERNEL_ARG,
            as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON on stdout.")) -> None:
    """A table of every push, run (its session, how it ended, what it billed) and submission of the project."""
    show_history(kernel_history(absolute(kernel_dir)), str(kernel_dir), as_json)


_SCENARIO_CHOICES: dict[str, ScenarioChoice] = {**{member.value: member for member in Scenario}, "both": "both"}


def _scenario_choice(value: str) -> str:
    if value not in SCENARIOS:
        raise typer.BadParameter(f"'{value}' is not one of {', '.join(repr(name) for name in SCENARIOS)}")
    return value


_REFERENCE_OPT = typer.Option(None, "--reference", help="The original notebook's submission on the same data: the rerun's "
                              "(--scenario commit: the commit's) file must equal it (else exit 2).")
_REFERENCE_TOLERANCE_OPT = typer.Option(None, "--reference-tolerance", help="Largest difference allowed per value (default: "
                                        "what rounding to [submission] decimals explains, else 1e-6).")
_REFERENCE_STEP_OPT = typer.Option([], "--reference-step", help="NAME=FILE: compare one step's output (its own columns) "
                                   "with FILE; may be repeated.")
_SHOW_INPUTS_OPT = typer.Option(None, "--show-inputs", metavar="[N]", help=f"Print what each card feeds its model for the first N test rows (default "
                                f"{DEFAULT_ROWS}; report.json always carries them).")

_ENV_OPT = typer.Option([], "--env", metavar="NAME=VALUE", help="A variable for the kernel's environment (besides "
                        "Kaggle's and kkb's; nothing else of this machine's); may be repeated.")


@app.command("dry-run")
def dry_run(
    kernel_dir: Path = _KERNEL_ARG,
    data: Path | None = typer.Option(None, "--data", help="Competition data to mount (default: [competition] data)."),
    scenario: str = typer.Option("both", "--scenario", callback=_scenario_choice, metavar=f"[{'|'.join(SCENARIOS)}]",
                                 help="Which run to rehearse."),
    rerun_scale: int = typer.Option(1, "--rerun-scale", help="Replicate the test N times (new ids) for the rerun."),
    hidden_rows: int | None = typer.Option(None, "--hidden-rows", help="Rows of the hidden test (default: [competition] hidden_rows)."),
    timeout: float | None = typer.Option(None, "--timeout", help="Kill each run after this many seconds."),
    legacy_layout: bool = typer.Option(False, "--legacy-layout", help="Mount inputs at input/<slug> (Kaggle's old layout)."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Build folder (default: build/<name>)."),
    owner: str | None = _OWNER_OPT,
    keep_sandbox: bool = typer.Option(False, "--keep-sandbox", help="Leave each sandbox on disk for inspection."),
    rerun_data: Path | None = typer.Option(None, "--rerun-data", help="Data for the rerun (a hidden stand-in); "
                                              "the commit keeps --data."),
    memory: str | None = typer.Option(None, "--memory", help="RAM limit, e.g. 16G (default: the machine shape's)."),
    answers: Path | None = typer.Option(None, "--answers", help="The rerun data's answers (id, targets, optional Usage "
                                        "Public/Private): the expected score per part."),
    as_json: bool = typer.Option(False, "--json", help="Print report.json (with its schema) on stdout (for CI scripts), "
                                 "nothing else."),
    on_kaggle: bool = typer.Option(False, "--on-kaggle", help="Rehearse the scoring rerun on Kaggle's own machines: a "
                                   "private rehearsal kernel, never submitted."),
    again: bool = typer.Option(False, "--again", help="--on-kaggle: rehearse even if nothing changed since the last one."),
    yes: bool = typer.Option(False, "--yes", help="--on-kaggle: spend more than an hour of Kaggle quota."),
    image_env: bool = typer.Option(False, "--image-env", help="Run the kernel in kkb env's environment: Kaggle's image's "
                                   "versions of what it imports (built once, then cached)."),
    reference: Path | None = _REFERENCE_OPT,
    reference_tolerance: float | None = _REFERENCE_TOLERANCE_OPT,
    reference_step: list[str] = _REFERENCE_STEP_OPT,
    show_inputs: int | None = _SHOW_INPUTS_OPT,
    env: list[str] = _ENV_OPT,
) -> None:
    """Run the kernel locally as Kaggle's commit run and scoring rerun would, and say what Kaggle would say."""
    if on_kaggle:
        local_only = (scenario not in ("both", "rerun") or data is not None or legacy_layout or keep_sandbox
                      or timeout is not None or rerun_data is not None or memory is not None or as_json
                      or answers is not None or reference is not None or bool(reference_step) or bool(env))
        if local_only:
            raise typer.BadParameter("--on-kaggle rehearses the scoring rerun with Kaggle's own inputs and limits: --scenario, "
                                     "--data, --rerun-data, --answers, --memory, --timeout, --legacy-layout, --keep-sandbox, "
                                     "--reference, --env and --json do not apply")
        _dry_run_on_kaggle(resolved(RehearsalSettings(kernel_dir=kernel_dir, out_dir=out, owner=owner, rerun_scale=rerun_scale,
                                                      again=again, yes=yes)), hidden_rows)
        return
    if again or yes:
        raise typer.BadParameter("--again and --yes go with --on-kaggle")
    memory_bytes = parse_size(memory) if memory else None
    references = ReferenceSettings(reference, reference_tolerance, tuple(parse_step_reference(text) for text in reference_step))
    with _DryRunProgress(enabled=not as_json) as progress:
        report = api.dry_run(DryRunSettings(kernel_dir=kernel_dir, data_dir=data, scenario=_SCENARIO_CHOICES[scenario],
                                            rerun_scale=rerun_scale, hidden_rows=hidden_rows, timeout_seconds=timeout,
                                            layout=Layout.LEGACY if legacy_layout else Layout.CURRENT, out_dir=out, owner=owner,
                                            keep_sandbox=keep_sandbox, rerun_data_dir=rerun_data, memory_bytes=memory_bytes,
                                            image_env=image_env, progress=progress, answers=answers, reference=references,
                                            show_inputs=DEFAULT_ROWS if show_inputs is None else show_inputs,
                                            env=parse_env_options(env)))
    if as_json:
        _print_json("dry-run", report.to_json())
    else:
        _show_dry_run(report, show_inputs=show_inputs is not None)
    _raise_unless_ok(report)


def _raise_unless_ok(report: DryRunReport) -> None:
    """A dry run's exit: a failing scenario (2), one not rehearsed here (5), an output unlike the reference (2)."""
    failed = [s.scenario for s in report.scenarios if not s.ok and s.rehearsed]
    if failed:
        raise KernelFailed(f"dry run: {', '.join(failed)} would fail on Kaggle",
                           hint=f"read the executed notebooks and {report.report_path}")
    unrehearsed = [s.scenario for s in report.scenarios if not s.rehearsed]
    if unrehearsed:
        raise NotRehearsed(f"dry run: {', '.join(unrehearsed)} not rehearsed here",
                           hint=f"see the reasons above and {report.report_path}")
    if report.reference is not None and report.differs_from_reference:
        raise KernelFailed(reference_failure(report.reference),
                           hint=f"the table above and report.html compare each column; {report.report_path}")


def _dry_run_on_kaggle(settings: RehearsalSettings, hidden_rows: int | None) -> None:
    with _ProgressView() as view:
        result = rehearse_on_kaggle(RehearsalSettings(**{**settings.__dict__, "progress": view}))
    report = report_from_kaggle(result.report, result.spec, kernel_name=Path(settings.kernel_dir).resolve().name,
                                kernel_id=result.plan.kernel_id, out_dir=result.out_dir, hidden_rows=hidden_rows,
                                kernel_dir=Path(settings.kernel_dir))
    _show_rehearsal(result)
    _show_dry_run(report, heading=result.heading)
    if not report.ok:
        raise KernelFailed(f"rehearsal on Kaggle: the rerun would fail ({report.scenarios[0].verdict.name})",
                           hint=f"read {result.out_dir} (the kernel's report.json and log); nothing was submitted")


@app.command()
def compare(
    left: Path = typer.Argument(..., help="A submission CSV (e.g. build/NAME/dryrun/rerun.submission.csv)."),
    right: Path | None = typer.Argument(None, help="The other one (default with --kernel: the output of the last scored "
                                        "version in kkb history)."),
    kernel: Path | None = typer.Option(None, "--kernel", help="The kernel project: its id column, decimals and sample "
                                       "submission, and its history's last scored output."),
    tolerance: float | None = typer.Option(None, "--tolerance", help="Largest difference allowed per value (default: what "
                                           "rounding to [submission] decimals explains, else 1e-6)."),
    id_column: str | None = typer.Option(None, "--id", help="The id column (default: [submission] id_column, else the "
                                         "first column)."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON on stdout."),
) -> None:
    """Compare two submissions column by column (rows matched by id); exit 2 when they differ beyond the tolerance."""
    if right is None and kernel is None:
        raise typer.BadParameter("name two files, or --kernel DIR to compare with the last scored version's output")
    comparison = compare_submissions(resolved(CompareSettings(left=left, right=right, kernel_dir=kernel, tolerance=tolerance,
                                                              id_column=id_column)))
    if as_json:
        _print_json("compare", comparison.to_json())
    else:
        for line in comparison.lines():
            console.print(_escape(line), highlight=False, soft_wrap=True)
    if not comparison.ok:
        raise KernelFailed(f"{comparison.left} differs from {comparison.right}: {'; '.join(comparison.failures()[:3])}",
                           hint="the table compares each column; pass --tolerance to allow more")


# `kkb local-kaggle serve|add-competition|add-user`.
app.add_typer(local_kaggle_app, name="local-kaggle")


@app.command()
def wheels(
    kernel_dir: Path = _KERNEL_ARG,
    on_kaggle: bool = typer.Option(False, "--on-kaggle", help="Build every wheel in Kaggle's image with a helper kernel "
                                   "(needs [install] on_kaggle = true)."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Build folder (default: build/<name>)."),
    owner: str | None = _OWNER_OPT,
    force: bool = typer.Option(False, "--force", help="Resolve and build again even if nothing changed."),
    no_check: bool = typer.Option(False, "--no-check", help="Skip the offline install check."),
    index_url: str | None = typer.Option(None, "--index-url", help="Package index for the local build."),
    find_links: list[str] = typer.Option([], "--find-links", help="Extra wheel folder or URL for the local build."),
    no_wait: bool = typer.Option(False, "--no-wait", help="--on-kaggle: push the helper kernel and return."),
) -> None:
    """Build the offline wheelhouse of [install] requirements (cached by content)."""
    index_args = (*(("--index-url", index_url) if index_url else ()), *(a for link in find_links for a in ("--find-links", link)))
    with _ProgressView() as view:
        result = build_wheels(resolved(WheelsSettings(kernel_dir=kernel_dir, out_dir=out, owner=owner, on_kaggle=on_kaggle,
                                                      force=force, check=not no_check, index_args=tuple(index_args),
                                                      wait=not no_wait, progress=view)))
    _show_wheels(result)


@app.command("env")
def env(
    kernel_dir: Path = _KERNEL_ARG,
    find_links: Path | None = typer.Option(None, "--find-links", help="Install the image's versions from this folder of "
                                           "wheels, offline (default: PyPI)."),
) -> None:
    """Build (once, then cached) an environment with Kaggle's image's versions of what the kernel imports."""
    for line in build_image_env(absolute(kernel_dir), find_links=absolute(find_links) if find_links else None).lines():
        console.print(_escape(line), highlight=False, soft_wrap=True)


# `kkb image`: its own module (builder/cli/image.py).
app.command("image")(image_command)


@app.command()
def demo(
    kernel: Path | None = typer.Option(None, "--kernel", help="Kernel project (default: kernels/reference in a "
                                       "checkout, else the pandas-only example kkb ships)."),
    port: int = typer.Option(0, "--port", help="Loopback port for the local Kaggle (0: any free one)."),
    keep: bool = typer.Option(False, "--keep", help="Keep the scratch folder (server data, build, history)."),
) -> None:
    """A kernel to a public score against a local Kaggle, end to end (what make demo runs)."""
    # builder.demo is a program beside this one (the layers keep them apart): run it as one.
    argv = [sys.executable, "-m", "builder.demo", "--port", str(port), *(["--kernel", str(kernel)] if kernel else []),
            *(["--keep"] if keep else [])]
    code = subprocess.run(argv, check=False).returncode
    if code != EXIT_OK:
        raise typer.Exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` and return the exit code (the one error boundary)."""
    args = optional_values(list(sys.argv[1:] if argv is None else argv))
    try:
        with warnings.catch_warnings():  # kernel.toml's old spellings: one "warning:" line each
            warnings.showwarning = _show_warning
            warnings.simplefilter("default", SpecDeprecation)
            # Without standalone mode typer *returns* the code of an Exit, Ctrl-C's 130 included.
            code = app(args=args, prog_name="kkb", standalone_mode=False)
    except KkbError as exc:
        _show_error(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        err_console.print("[red]interrupted[/red]")
        return EXIT_INTERRUPTED
    except SystemExit as exc:  # click's own exits (--help, --version) arrive here
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USER
    except Exception as exc:  # click usage errors and anything unexpected
        return _unexpected(exc)
    if isinstance(code, int) and not isinstance(code, bool) and code != EXIT_OK:
        if code == EXIT_INTERRUPTED:
            err_console.print("[red]interrupted[/red]")
        return code
    return EXIT_OK


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: TextIO | None = None,
                  line: str | None = None) -> None:
    if issubclass(category, SpecDeprecation):
        err_console.print(f"[yellow]warning:[/yellow] {_escape(str(message))}", highlight=False)
    else:
        err_console.print(warnings.formatwarning(message, category, filename, lineno, line), markup=False, highlight=False)


OPTIONAL_VALUES = {"--show-inputs": str(DEFAULT_ROWS)}  # an option whose value may be left out: its default then


def optional_values(args: list[str]) -> list[str]:
    """``--show-inputs`` alone means ``--show-inputs 3``: click has no option with an optional value."""
    out: list[str] = []
    for index, arg in enumerate(args):
        out.append(arg)
        following = args[index + 1] if index + 1 < len(args) else None
        if arg in OPTIONAL_VALUES and (following is None or not following.lstrip("-").isdigit()):  # -1: given, refused
            out.append(OPTIONAL_VALUES[arg])
    return out


def _unexpected(exc: Exception) -> int:
    # typer vendors its own click, so its usage errors are matched by shape, not by class.
    if type(exc).__name__ == "Abort":
        err_console.print("[red]interrupted[/red]")
        return EXIT_INTERRUPTED
    show, exit_code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
    if callable(show) and isinstance(exit_code, int):
        show()
        # click says 2 for a usage error, which is kkb's "the kernel failed": scripts must tell them apart.
        return EXIT_USAGE if exit_code == 2 else exit_code
    if _state["verbose"]:
        err_console.print_exception()
    err_console.print(f"[bold red]internal error:[/bold red] {type(exc).__name__}: {_escape(str(exc))}")
    err_console.print("run again with --debug for the traceback, and report it")
    return EXIT_USER


_readable_help(app)


def entrypoint() -> None:
    sys.exit(main())


__all__ = ["app", "entrypoint", "main", "waiting_line", "without_kkb_frames"]
