"""``kkb dry-run``: the kernel run here as Kaggle's commit run and scoring rerun would run it, or ``--on-kaggle`` on
Kaggle's own machines (registered on the app by :mod:`builder.cli`)."""

from __future__ import annotations

from pathlib import Path

import typer

from builder import api
from builder.cli import limit_options
from builder.cli.options import BUILD_OUT_OPT, KERNEL_ARG, OWNER_OPT
from builder.cli.views import _DryRunProgress, _print_json, _ProgressView, _show_dry_run, _show_rehearsal
from builder.errors import KernelFailed, NotRehearsed
from builder.kkb_runtime.vocabulary import Layout, Scenario
from builder.project.kaggle_env import parse_env_options
from builder.project.paths import resolved
from builder.rehearse.card_inputs import DEFAULT_ROWS
from builder.rehearse.dryrun import DryRunReport, DryRunSettings
from builder.rehearse.on_kaggle import report_from_kaggle
from builder.rehearse.reference import ReferenceSettings, parse_step_reference, reference_failure
from builder.rehearse.report import SCENARIOS, ScenarioChoice
from builder.remote.rehearsal import RehearsalSettings, rehearse_on_kaggle
from builder.run.limits import parse_size

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
_ALL_COLUMNS_OPT = typer.Option(False, "--all-columns", help="--show-inputs: every value of a row (default: what fits in "
                                "200 characters).")

_ENV_OPT = typer.Option([], "--env", metavar="NAME=VALUE", help="A variable for the kernel's environment (besides "
                        "Kaggle's and kkb's; nothing else of this machine's); may be repeated.")


def dry_run(
    kernel_dir: Path = KERNEL_ARG,
    data: Path | None = typer.Option(None, "--data", help="Competition data to mount (default: [competition] data)."),
    scenario: str = typer.Option("both", "--scenario", callback=_scenario_choice, metavar=f"[{'|'.join(SCENARIOS)}]",
                                 help="Which run to rehearse."),
    rerun_scale: int = typer.Option(1, "--rerun-scale", help="Replicate the test N times (new ids) for the rerun."),
    hidden_rows: int | None = typer.Option(None, "--hidden-rows", help="Rows of the hidden test (default: [competition] hidden_rows)."),
    timeout: float | None = typer.Option(None, "--timeout", help="Kill each run after this many seconds."),
    legacy_layout: bool = typer.Option(False, "--legacy-layout", help="Mount inputs at input/<slug> (Kaggle's old layout)."),
    out: Path | None = BUILD_OUT_OPT,
    owner: str | None = OWNER_OPT,
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
    wait_for_slot: bool = limit_options.WAIT_FOR_SLOT,
    force: bool = limit_options.FORCE,
    replace: bool = limit_options.REPLACE,
    image_env: bool = typer.Option(False, "--image-env", help="Run the kernel in kkb env's environment: Kaggle's image's "
                                   "versions of what it imports (built once, then cached)."),
    reference: Path | None = _REFERENCE_OPT,
    reference_tolerance: float | None = _REFERENCE_TOLERANCE_OPT,
    reference_step: list[str] = _REFERENCE_STEP_OPT,
    show_inputs: int | None = _SHOW_INPUTS_OPT,
    all_columns: bool = _ALL_COLUMNS_OPT,
    env: list[str] = _ENV_OPT,
) -> None:
    """Run the kernel locally as Kaggle's commit run and scoring rerun would, and say what Kaggle would say."""
    if on_kaggle:
        local_only = (scenario not in ("both", "rerun") or data is not None or legacy_layout or keep_sandbox
                      or timeout is not None or rerun_data is not None or memory is not None or as_json
                      or answers is not None or reference is not None or bool(reference_step) or bool(env))
        _dry_run_on_kaggle(resolved(RehearsalSettings(kernel_dir=kernel_dir, out_dir=out, owner=owner, rerun_scale=rerun_scale, again=again,
                                                      yes=yes, wait_for_slot=wait_for_slot, force=force, replace=replace)), hidden_rows, local_only)
        return
    if again or yes:
        raise typer.BadParameter("--again and --yes go with --on-kaggle")
    limit_options.refuse_without("--on-kaggle", wait_for_slot=wait_for_slot, force=force, replace=replace)
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
    _print_json("dry-run", report.to_json()) if as_json else _show_dry_run(report, None, show_inputs is not None, all_columns)
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


def _dry_run_on_kaggle(settings: RehearsalSettings, hidden_rows: int | None, local_only: bool) -> None:
    if local_only:
        raise typer.BadParameter("--on-kaggle rehearses the scoring rerun with Kaggle's own inputs and limits: --scenario, "
                                 "--data, --rerun-data, --answers, --memory, --timeout, --legacy-layout, --keep-sandbox, "
                                 "--reference, --env and --json do not apply")
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
