"""How the dry run runs each ``[submission] kind``'s scenario (:data:`REHEARSALS`): the scenario's sandbox, the kernel
run in it as Kaggle runs it, a second size for the time fit, the evaluation-API gateway beside the kernel; each run
judged by :func:`builder.rehearse.scenario_report.scenario_report`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from builder.bundle.model_weights import DRY_RUN_VERSION, model_source
from builder.errors import DryRunError
from builder.kkb_runtime.cards.views import ROWS_VARIABLE
from builder.kkb_runtime.timing import HIDDEN_ROWS_VARIABLE, PROBE_VARIABLE
from builder.kkb_runtime.vocabulary import SubmissionKind
from builder.project.spec import KernelSpec
from builder.rehearse.device_factor import rehearsal_report
from builder.rehearse.dryrun_settings import ScenarioRun
from builder.rehearse.evalapi import missing_gateway_package
from builder.rehearse.evalapi_scenario import gateway_verdict
from builder.rehearse.evalapi_scenario import run_scenario as run_evaluation_api
from builder.rehearse.projection import PROBE_BATCHES, RunTimes, fit_factor, hidden_per_row, times_itself
from builder.rehearse.report import ScenarioReport
from builder.rehearse.scenario_report import rows_of, scenario_report
from builder.rehearse.verdict import NOT_REHEARSED, Judgement, machine_shape
from builder.rehearse.wheelhouse import dry_run_mounts
from builder.run.execute import ExecutionResult
from builder.run.forms import execute_kernel
from builder.run.gateway import evaluation_section, sandbox_env
from builder.run.image_env import build_image_env
from builder.run.limits import WORKING_LIMIT_BYTES
from builder.run.sandbox import Mount, SandboxSpec
from builder.run.stand_ins import input_mounts, replicated_test

LARGER_GROWTH = 10  # a larger size for the time fit: at most this many times the largest so far
LARGER_RUNS = 2  # and at most this many of them


def _csv_scenario(run: ScenarioRun) -> ScenarioReport:
    """One dry-run scenario of a kernel that writes a submission file: the notebook runs as Kaggle runs it.
    ``run.source`` is the data before ``--rerun-scale``: the time projection may run a second size from it."""
    build = run.build
    run.say(f"running the {build.spec.kernel.type}")
    result = execute_kernel(build.notebook_path, build.spec.kernel.type, scenario_sandbox(run, run.data),
                            run.work / "kaggle", progress=run.say)
    run.say(f"finished in {result.wall_seconds:.1f} s ({result.isolation} sandbox)")
    rows = rows_of(run.data, build.spec)
    return scenario_report(run, result, fit_runs=_fit_runs(run, rows, result), rows=rows)


def _fit_runs(run: ScenarioRun, rows: int, result: ExecutionResult) -> tuple[RunTimes, ...]:
    """The runs the time projection fits: this one (``rows``), plus a second size to tell fixed from per-row time:
    ``source`` (the data before ``--rerun-scale``) replicated further when the test is too small to tell them apart,
    else, after ``--rerun-scale``, the public test itself (a smaller, cheaper run); then larger sizes where those two
    cannot show the per-row time (:func:`_larger_sizes`)."""
    settings, build, source, work, spec = run.settings, run.build, run.source, run.work, run.spec
    runs = [RunTimes(rows, result.wall_seconds, tuple(result.steps))]
    hidden = run.hidden_rows
    factor = fit_factor(rows)
    if not run.projected or not hidden or not settings.fit or hidden <= rows or not result.ok:
        return tuple(runs)
    if not REHEARSALS[spec.submission.kind].fits_second_size or (result.steps and all(map(times_itself, result.steps))):
        return tuple(runs)  # image card steps time themselves, as do declared fits; the gateway drives evaluation-API kernels
    if factor > 1:  # too few rows to tell fixed from per-row time: the test replicated further
        try:
            scaled = replicated_test(spec, source, work / "fit-data", factor * settings.rerun_scale, run.kernel_dir)
        except DryRunError as error:
            run.say(f"no second size for the time fit ({error.message}); the projection's basis is the measured run only")
            return tuple(runs)
        second_data, second_rows, how = scaled.path, scaled.rows, f"{factor}x"
    elif settings.rerun_scale > 1:  # two sizes at hand: the replicated test and the public one
        second_data, second_rows, how = source, rows_of(source, spec), "the public test, before --rerun-scale"
    else:
        return tuple(runs)
    if second_rows == rows:
        return tuple(runs)
    run.say(f"a second run on {second_rows} rows ({how}) to separate fixed from per-row time")
    second = execute_kernel(build.notebook_path, build.spec.kernel.type, scenario_sandbox(run, second_data), work / "kaggle-fit")
    if not second.ok:
        run.say(f"the second run failed ({second.ename}); projecting proportionally")
        return tuple(runs)
    runs.append(RunTimes(second_rows, second.wall_seconds, tuple(second.steps)))
    return tuple(_larger_sizes(run, runs, hidden))


def _larger_sizes(run: ScenarioRun, runs: list[RunTimes], hidden: int) -> list[RunTimes]:
    """``runs`` and, where their sizes' times differ by no more than their noise, larger replicated tests (up to
    :data:`LARGER_GROWTH` times the largest, at most :data:`LARGER_RUNS` of them): the per-row time the noise hides
    would otherwise be extrapolated to the hidden size at its upper bound. Each stays under the hidden size and, at
    that bound, costs no more than the first run took."""
    source_rows = 0  # the public test's rows, read once a larger run is wanted
    for index in range(LARGER_RUNS):
        small, large = min(runs, key=lambda r: r.rows), max(runs, key=lambda r: r.rows)
        bound = hidden_per_row(small, large)
        source_rows = source_rows or (rows_of(run.source, run.spec) if bound is not None else 0)
        if bound is None or not source_rows:
            break
        target = min(hidden, large.rows * LARGER_GROWTH, large.rows + int(runs[0].wall_seconds / max(bound, 1e-9)))
        factor = target // source_rows
        if factor * source_rows < 2 * large.rows:
            break
        try:
            scaled = replicated_test(run.spec, run.source, run.work / f"fit-data-{index + 2}", factor, run.kernel_dir)
        except DryRunError as error:
            run.say(f"no larger size for the time fit ({error.message})")
            break
        run.say(f"a run on {scaled.rows} rows: {small.rows} and {large.rows} rows are too few to show the per-row time")
        larger = execute_kernel(run.build.notebook_path, run.build.spec.kernel.type, scenario_sandbox(run, scaled.path),
                                run.work / f"kaggle-fit-{index + 2}")
        if not larger.ok:
            run.say(f"the run on {scaled.rows} rows failed ({larger.ename}); the projection fits the sizes before it")
            break
        runs.append(RunTimes(scaled.rows, larger.wall_seconds, tuple(larger.steps)))
    return runs


def scenario_sandbox(run: ScenarioRun, data: Path) -> SandboxSpec:
    """The scenario's sandbox over ``data``: the build's datasets (or Model), the wheelhouse, the inputs' stand-ins,
    the competition; ``--image-env``'s interpreter, the machine shape's memory, the kernel's timeout, ``--env``."""
    scenario, settings, build = run.scenario, run.settings, run.build
    mounts = [Mount(build.code_dir, f"datasets/{build.code_dataset}")]
    if build.weights_dataset:
        mounts.append(Mount(build.weights_dir, f"datasets/{build.weights_dataset}"))
    if build.weights_model:  # [weights] publish = "model": where Kaggle mounts a Model version
        mounts.append(Mount(build.weights_dir, f"models/{model_source(build.weights_model, DRY_RUN_VERSION)}"))
    mounts += [Mount(folder, target) for folder, target in dry_run_mounts(build.spec, build.owner, build.out_dir)]
    mounts += input_mounts(build.spec, run.kernel_dir)
    mounts.append(Mount(data, f"competitions/{build.spec.competition.slug}"))
    python = build_image_env(run.kernel_dir).python if settings.image_env else None  # built once, then cached
    shown = {ROWS_VARIABLE: str(settings.show_inputs)} if settings.show_inputs > 0 else {}  # each card step's view
    return SandboxSpec(mounts=tuple(mounts), rerun=scenario == "rerun", timeout_seconds=run.timeout_seconds,
                       extra_env=_probe_env(run) | shown,
                       layout=settings.layout, memory_bytes=run.memory_bytes,
                       working_limit_bytes=WORKING_LIMIT_BYTES, python=python, visible=(python.parent.parent,) if python else (),
                       gpu=machine_shape(build.spec.kernel.machine_shape).gpu_bytes is not None, user_env=dict(settings.env))


def _probe_env(run: ScenarioRun) -> dict[str, str]:
    """Card steps time a few steady batches where the rerun is projected: a per-row rate. With the hidden size
    given, a step skips the probe where the rate cannot weigh there (``kkb_runtime.timing``), except after a
    rehearsal on Kaggle, whose per-row rates are set against the local ones for the device factor."""
    if not run.projected:
        return {}
    rehearsed = rehearsal_report(run.build.out_dir).is_file()
    return {PROBE_VARIABLE: str(PROBE_BATCHES)} | ({} if rehearsed else {HIDDEN_ROWS_VARIABLE: str(run.hidden_rows)})


def _evaluation_api_scenario(run: ScenarioRun) -> ScenarioReport:
    """One dry-run scenario of an evaluation-API kernel (:mod:`builder.rehearse.evalapi_scenario`), judged as a CSV
    kernel's run is, with the gateway's view beside it."""
    build, data = run.build, run.data
    section = evaluation_section(build.spec)
    sandbox = scenario_sandbox(run, data)
    sandbox = replace(sandbox, extra_env={**sandbox.extra_env, **sandbox_env(section)})
    ran = run_evaluation_api(run.scenario, sandbox, build.notebook_path, build.spec, data, run.work)
    if ran.rerun is not None:
        (run.out / "rerun.gateway.log").write_text(ran.gateway_log)
    base = scenario_report(run, ran.result, judged=ran.judged)
    verdict = gateway_verdict(ran.report, base.verdict)
    missing = missing_gateway_package(build.spec, data)
    if missing is not None and not verdict.ok:  # not Kaggle's verdict: Kaggle's data has the package
        verdict = Judgement(NOT_REHEARSED, missing, verdict.detail)
    return replace(base, verdict=verdict, evaluation_api={**ran.report.to_json(), "lines": ran.report.lines()})


ScenarioRunner = Callable[[ScenarioRun], ScenarioReport]


@dataclass(frozen=True)
class KindRehearsal:
    """How the dry run rehearses one ``[submission] kind``."""

    run: ScenarioRunner  # one scenario in its sandbox, judged
    checks_columns: bool  # [submission] names the sample's columns (the kernel writes them): checked before any run
    fits_second_size: bool  # the time fit may run a second, larger test (the gateway drives an evaluation-API rerun)
    scored_file: Callable[[KernelSpec], str]  # the file Kaggle scores in /kaggle/working


REHEARSALS: dict[SubmissionKind, KindRehearsal] = {
    SubmissionKind.CSV: KindRehearsal(_csv_scenario, checks_columns=True, fits_second_size=True,
                                      scored_file=lambda spec: spec.competition.submission_file),
    # The gateway writes the file the kernel names ([submission] file, submission.parquet).
    SubmissionKind.EVALUATION_API: KindRehearsal(_evaluation_api_scenario, checks_columns=False, fits_second_size=False,
                                                 scored_file=lambda spec: spec.submission.file),
}

