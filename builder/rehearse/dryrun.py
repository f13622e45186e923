"""``kkb dry-run``: rehearse Kaggle's commit run and scoring rerun locally, and say what Kaggle would say.

Each scenario builds nothing new: the kernel is built once (as ``kkb build``), then each scenario runs the rendered
notebook in a fresh sandbox (``builder.run.sandbox``), the code and weights bundles mounted as datasets:

``commit``
    No ``KAGGLE_IS_COMPETITION_RERUN``, the public test as given. When ``[fast_commit]`` says the fast path
    should trigger and the commit ran every step anyway, Kaggle still accepts the commit: the report keeps
    its verdict and warns (the full inference time, and GPU quota, is spent at every save).
``rerun``
    ``KAGGLE_IS_COMPETITION_RERUN=1``, the full pipeline, on the public test, on a test replicated ``--rerun-scale``
    times, or on a hidden stand-in (``--rerun-data DIR``). Its time is projected to the hidden test's rows by
    :mod:`builder.rehearse.projection` (fixed + per-row cost; a second run on a replicated test when it is too small to
    separate them), its memory limited to and compared with the machine shape's RAM (``--memory`` overrides).

Each scenario's sandbox says which isolation ran (:mod:`builder.run.isolation`) and which limits were enforced
(:mod:`builder.run.limits`), with what each card fed its model (:mod:`builder.rehearse.card_inputs`), a reference's
comparison (:mod:`builder.rehearse.reference`) and what the run found mounted (:mod:`builder.rehearse.mounted`).
Results go to ``build/NAME/dryrun/``: ``<scenario>.ipynb`` (the executed notebook), ``<scenario>.log.json`` (Kaggle's
log shape), ``<scenario>.submission.csv``, ``report.json``. The sandboxes are temporary; nothing else is written to.
"""

from __future__ import annotations

import difflib
import errno
import functools
import json
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from builder.build import BuildResult, BuildSettings, build_kernel
from builder.bundle.model_weights import DRY_RUN_VERSION, model_source
from builder.errors import DryRunError, SpecError
from builder.kkb_runtime.cards.views import ROWS_VARIABLE
from builder.kkb_runtime.timing import PROBE_VARIABLE
from builder.kkb_runtime.vocabulary import Layout, SubmissionKind, Verdict
from builder.project.credentials import kaggle_username
from builder.project.layout import DRYRUN_DIR, REPORT_FILE
from builder.project.settings_types import check_settings
from builder.project.spec import SPEC_FILE, KernelSpec, spec_of
from builder.rehearse.card_inputs import DEFAULT_ROWS, card_inputs
from builder.rehearse.collapse import rerun_collapse
from builder.rehearse.evalapi import missing_gateway_package
from builder.rehearse.evalapi_scenario import gateway_verdict
from builder.rehearse.evalapi_scenario import run_scenario as run_evaluation_api
from builder.rehearse.html_report import write_html_report
from builder.rehearse.image_notes import image_notes
from builder.rehearse.metric_report import MetricReport
from builder.rehearse.metric_run import check_before_rerun, float_targets, rerun_metric_report, step_rounding
from builder.rehearse.mounted import mounted_warnings
from builder.rehearse.own_imports import own_modules
from builder.rehearse.projection import (
    PROBE_BATCHES,
    Projection,
    RunTimes,
    fit_factor,
    limit_warning,
    project_rerun,
    timeout_reason,
)
from builder.rehearse.reference import ReferenceSettings, check_reference, compare_reference
from builder.rehearse.report import SCENARIOS, DryRunReport, Scenario, ScenarioChoice, ScenarioReport
from builder.rehearse.verdict import (
    NOT_REHEARSED,
    OK,
    SCORING_ERROR,
    Judgement,
    Limits,
    failing_step,
    judge,
    machine_shape,
    projected_seconds,
)
from builder.rehearse.wheelhouse import dry_run_check, dry_run_mounts
from builder.run.execute import ExecutionResult, tail
from builder.run.forms import execute_kernel
from builder.run.gateway import evaluation_section, sandbox_env
from builder.run.image_env import build_image_env, image_env_note
from builder.run.limits import WORKING_LIMIT_BYTES, memory_enforcement, working_enforcement
from builder.run.sandbox import Mount, SandboxSpec, blocked_network, remove_sandbox
from builder.run.sandbox_files import in_working
from builder.run.skew import skew_records, skew_warnings
from builder.run.stand_ins import input_mounts, replicated_test

LOG_TAIL_LINES = 20
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
# The runtime prints its fast-commit decision as "[kkb] <reason>" (kkb_runtime.commit.decide).
_DECISION = re.compile(r"^\[kkb\] (.*(?:running every step|writing the sample submission|fast commit).*)$", re.MULTILINE)
_FAST_TAKEN = "commit run ("


@dataclass(frozen=True)
class DryRunSettings:
    kernel_dir: Path
    data_dir: Path | None = None  # default: [competition] data, relative to the kernel folder
    scenario: ScenarioChoice = "both"
    rerun_scale: int = 1
    hidden_rows: int | None = None  # default: [competition] hidden_rows
    timeout_seconds: float | None = None  # default: [kernel] timeout_seconds, else the competition's limit
    layout: Layout = Layout.CURRENT
    out_dir: Path | None = None  # the build folder, default build/<kernel folder name>
    owner: str | None = None
    keep_sandbox: bool = False  # leave each sandbox on disk (its path is in the report)
    rerun_data_dir: Path | None = None  # the rerun's data (a hidden stand-in); the commit keeps data_dir
    memory_bytes: int | None = None  # default: the machine shape's RAM
    image_env: bool = False  # run the kernel in kkb env's environment: the image's versions (builder.run.image_env)
    fit: bool = True  # a second, replicated rerun when the test is too small to fit fixed + per-row time
    progress: Callable[[str], None] | None = None  # one line per event (builder.cli shows it with rich); never printed here
    answers: Path | None = None  # the rerun data's answers (id, targets, optional Usage): the expected score, the split
    spec: KernelSpec | None = None  # the command's loaded kernel.toml (read once per command); None: load kernel_dir's
    reference: ReferenceSettings = ReferenceSettings()  # --reference: the original notebook's output on the same data
    show_inputs: int = DEFAULT_ROWS  # the first test rows each card's input is shown for (report.json inputs)
    env: Mapping[str, str] = field(default_factory=dict)  # --env NAME=VALUE: added to the kernel's environment

    def __post_init__(self) -> None:
        if isinstance(self.scenario, str) and self.scenario not in SCENARIOS:
            raise DryRunError(f"unknown scenario '{self.scenario}'", hint=f"use {', '.join(SCENARIOS)}")
        check_settings(self, error=DryRunError)  # each field of its type: a rerun_scale="2" is named, never a TypeError
        if self.rerun_scale < 1:
            raise DryRunError(f"--rerun-scale must be at least 1, got {self.rerun_scale}")
        if self.hidden_rows is not None and self.hidden_rows < 1:
            raise DryRunError(f"--hidden-rows must be positive, got {self.hidden_rows}")
        if self.timeout_seconds is not None and self.timeout_seconds <= 0:
            raise DryRunError(f"--timeout must be positive, got {self.timeout_seconds}")
        if self.layout not in Layout.values():
            raise DryRunError(f"unknown input layout '{self.layout}'", hint=f"use {' or '.join(Layout.values())}")
        if self.memory_bytes is not None and self.memory_bytes < 64 * 2**20:
            raise DryRunError(f"--memory must be at least 64 MiB, got {self.memory_bytes} bytes")
        if self.show_inputs < 0:
            raise DryRunError(f"--show-inputs must be at least 0 (the test rows to show), got {self.show_inputs}",
                              hint="--show-inputs N shows the first N rows (--show-inputs alone: 3); 0 shows none")
        if self.rerun_data_dir is not None and self.scenario == "commit":
            raise DryRunError("--rerun-data needs a rerun scenario", hint="use --scenario rerun or both")


# Nothing leaves the machine in a dry run, so the owner in the dataset ids only has to be consistent.
LOCAL_OWNER = "kkb-local"


def _owner(settings: DryRunSettings, spec: KernelSpec) -> str:
    return settings.owner or spec.kernel.owner or kaggle_username() or LOCAL_OWNER


def dry_run(settings: DryRunSettings) -> DryRunReport:
    """Build the kernel, run each scenario in its own sandbox, judge it, and write the report."""
    kernel_dir = Path(settings.kernel_dir)
    spec = spec_of(settings.spec, kernel_dir)
    _progress(settings, f"building {kernel_dir}")
    build = build_kernel(BuildSettings(kernel_dir=kernel_dir, out_dir=settings.out_dir, owner=_owner(settings, spec), spec=spec,
                                       layout=settings.layout))  # the build's run of the user's code: the same layout
    data = competition_data(settings, build.spec)
    input_mounts(build.spec, kernel_dir)  # a missing stand-in is refused before anything runs
    rerun_data = competition_data(replace(settings, data_dir=settings.rerun_data_dir), build.spec) if settings.rerun_data_dir else data
    dry_run_check(build.spec, kernel_dir, build.out_dir, build.owner)  # [install] requirements: the wheelhouse installs offline
    if "rerun" in SCENARIOS[settings.scenario]:  # public_ids and the answers against the rerun's test, before it runs
        check_before_rerun(build.spec, kernel_dir, rerun_data, answers_for(settings, rerun_data))
    check_reference(settings.reference, build.spec, settings.rerun_scale)
    out = build.out_dir / DRYRUN_DIR
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    with disk_full_named(out):
        reports = tuple(_run_scenario(scenario, settings, build, rerun_data if scenario == "rerun" else data, out)
                        for scenario in SCENARIOS[settings.scenario])
    report = DryRunReport(kernel_name=build.kernel_name, kernel_id=build.kernel_id, kernel_type=build.spec.kernel.type,
                          out_dir=out, report_path=out / REPORT_FILE, scenarios=reports, environment=image_env_note(settings.image_env),
                          reference=compare_reference(settings.reference, build.spec, reports, rerun_data),
                          inputs=card_inputs(build, data, settings.show_inputs,
                                             [step for scenario in reports for step in scenario.steps]),
                          image=image_notes(build.spec, build.owner))  # kkb env's venv is over this same Python
    with disk_full_named(out):
        report.report_path.write_text(json.dumps(report.to_json(), indent=1) + "\n")
        write_html_report(report)
    return report


@contextmanager
def disk_full_named(out: Path) -> Iterator[None]:
    """kkb's own write on a full disk: the disk named, never an internal error."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in DISK_FULL:
            raise
        raise DryRunError(f"the disk is full: {exc.strerror} ({exc.filename or out})",
                          hint=f"free space on the disks of {out} and of the sandboxes' folder ({tempfile.gettempdir()}), "
                               "then run the dry run again") from None


def competition_data(settings: DryRunSettings, spec: KernelSpec) -> Path:
    """``--data``, else ``[competition] data`` relative to the kernel folder; it must hold the sample."""
    data = Path(settings.data_dir) if settings.data_dir is not None else spec.competition.data_dir(Path(settings.kernel_dir))
    if data is None:
        raise DryRunError("no competition data to mount", hint="pass --data DIR or set [competition] data in kernel.toml")
    sample = data / spec.competition.sample_submission
    if not sample.is_file():
        raise DryRunError(f"{sample}: the competition data has no sample submission",
                          hint="point --data (or [competition] data) at the folder with the public test files")
    if REHEARSALS[spec.submission.kind].checks_columns:
        _check_columns(Path(settings.kernel_dir) / SPEC_FILE, spec, sample)
    return data


def _check_columns(spec_path: Path, spec: KernelSpec, sample: Path) -> None:
    """[submission] names columns of the sample submission: a typo there fails only the rerun, hours later."""
    columns = [str(column) for column in pd.read_csv(sample, nrows=0).columns]
    wanted = [("submission.id_column", spec.submission.id_column)]
    wanted += [(f"submission.target_columns[{i}]", name) for i, name in enumerate(spec.submission.target_columns)]
    for key, name in wanted:
        if name not in columns:
            close = difflib.get_close_matches(name, columns, n=1, cutoff=0.6)
            guess = f"did you mean '{close[0]}'? " if close else ""
            raise SpecError(f"{spec_path}: {key}: '{name}' is not a column of {sample} ({', '.join(columns)})",
                            hint=f"{guess}the names must match the sample submission's header exactly")


def _run_scenario(scenario: Scenario, settings: DryRunSettings, build: BuildResult, data: Path, out: Path) -> ScenarioReport:
    spec = build.spec
    work = Path(tempfile.mkdtemp(prefix=f"kkb-dryrun-{scenario}-"))
    source = data
    try:
        scaled = (replicated_test(spec, data, work / "scaled", settings.rerun_scale, Path(settings.kernel_dir))
                  if scenario == "rerun" and settings.rerun_scale > 1 else None)
        report = REHEARSALS[spec.submission.kind].run(scenario, settings, build, scaled.path if scaled else data, source, out, work)
        return replace(report, stand_in=scaled.description) if scaled else report
    finally:
        if not settings.keep_sandbox:
            remove_sandbox(work)


def _csv_scenario(scenario: Scenario, settings: DryRunSettings, build: BuildResult, data: Path, source: Path, out: Path,
                  work: Path) -> ScenarioReport:
    """One dry-run scenario of a kernel that writes a submission file: the notebook runs as Kaggle runs it.
    ``source`` is the data before ``--rerun-scale``: the time projection may run a second size from it."""
    _progress(settings, f"{scenario}: running the {build.spec.kernel.type}")
    result = execute_kernel(build.notebook_path, build.spec.kernel.type, scenario_sandbox(scenario, settings, build, data),
                            work / "kaggle", progress=lambda line: _progress(settings, f"{scenario}: {line}"))
    _progress(settings, f"{scenario}: finished in {result.wall_seconds:.1f} s ({result.isolation} sandbox)")
    fit_runs = _fit_runs(scenario, settings, build, source, _rows(data, build.spec), result, work)
    return scenario_report(scenario, settings, build, data, result, out, work if settings.keep_sandbox else None,
                           fit_runs=fit_runs)


def _progress(settings: DryRunSettings, line: str) -> None:
    if settings.progress is not None:
        settings.progress(line)


def _fit_runs(scenario: Scenario, settings: DryRunSettings, build: BuildResult, source: Path, rows: int,
              result: ExecutionResult, work: Path) -> tuple[RunTimes, ...]:
    """The runs the time projection fits: this one (``rows``), plus a second size to tell fixed from per-row time:
    ``source`` (the data before ``--rerun-scale``) replicated further when the test is too small to tell them apart,
    else, after ``--rerun-scale``, the public test itself (a smaller, cheaper run)."""
    spec = build.spec
    runs = [RunTimes(rows, result.wall_seconds, tuple(result.steps))]
    hidden = settings.hidden_rows or spec.competition.hidden_rows
    factor = fit_factor(rows)
    if scenario != "rerun" or not settings.fit or not hidden or hidden <= rows or not result.ok:
        return tuple(runs)
    if not REHEARSALS[spec.submission.kind].fits_second_size or (result.steps and all(s.get("infer_seconds") is not None for s in result.steps)):
        return tuple(runs)  # card steps time themselves; the gateway drives evaluation-API kernels
    if factor > 1:  # too few rows to tell fixed from per-row time: the test replicated further
        try:
            scaled = replicated_test(spec, source, work / "fit-data", factor * settings.rerun_scale, Path(settings.kernel_dir))
        except DryRunError as error:
            _progress(settings, f"rerun: no second size for the time fit ({error.message}); the projection's basis is the "
                                "measured run only")
            return tuple(runs)
        second_data, second_rows, how = scaled.path, scaled.rows, f"{factor}x"
    elif settings.rerun_scale > 1:  # two sizes at hand: the replicated test and the public one
        second_data, second_rows, how = source, _rows(source, spec), "the public test, before --rerun-scale"
    else:
        return tuple(runs)
    if second_rows == rows:
        return tuple(runs)
    _progress(settings, f"rerun: a second run on {second_rows} rows ({how}) to separate fixed from per-row time")
    second = execute_kernel(build.notebook_path, build.spec.kernel.type, scenario_sandbox(scenario, settings, build, second_data),
                            work / "kaggle-fit")
    if second.ok:
        runs.append(RunTimes(second_rows, second.wall_seconds, tuple(second.steps)))
    else:
        _progress(settings, f"rerun: the second run failed ({second.ename}); projecting proportionally")
    return tuple(runs)


def _rows(data: Path, spec: KernelSpec) -> int:
    return len(pd.read_csv(data / spec.competition.sample_submission, dtype={spec.submission.id_column: str}))


def scenario_sandbox(scenario: Scenario, settings: DryRunSettings, build: BuildResult, data: Path) -> SandboxSpec:
    mounts = [Mount(build.code_dir, f"datasets/{build.code_dataset}")]
    if build.weights_dataset:
        mounts.append(Mount(build.weights_dir, f"datasets/{build.weights_dataset}"))
    if build.weights_model:  # [weights] publish = "model": where Kaggle mounts a Model version
        mounts.append(Mount(build.weights_dir, f"models/{model_source(build.weights_model, DRY_RUN_VERSION)}"))
    mounts += [Mount(folder, target) for folder, target in dry_run_mounts(build.spec, build.owner, build.out_dir)]
    mounts += input_mounts(build.spec, Path(settings.kernel_dir))
    mounts.append(Mount(data, f"competitions/{build.spec.competition.slug}"))
    python = build_image_env(Path(settings.kernel_dir)).python if settings.image_env else None  # built once, then cached
    probe = {PROBE_VARIABLE: str(PROBE_BATCHES)} if scenario == "rerun" else {}  # card steps time steady batches
    shown = {ROWS_VARIABLE: str(settings.show_inputs)} if settings.show_inputs > 0 else {}  # each card step's view
    return SandboxSpec(mounts=tuple(mounts), rerun=scenario == "rerun", timeout_seconds=_timeout(settings, build.spec),
                       extra_env=probe | shown,
                       layout=settings.layout, memory_bytes=_memory(settings, build.spec),
                       working_limit_bytes=WORKING_LIMIT_BYTES, python=python, visible=(python.parent.parent,) if python else (),
                       gpu=machine_shape(build.spec.kernel.machine_shape).gpu_bytes is not None, user_env=dict(settings.env))


def _memory(settings: DryRunSettings, spec: KernelSpec) -> int:
    """``--memory``, else the machine shape's RAM."""
    return settings.memory_bytes or machine_shape(spec.kernel.machine_shape).ram_bytes


def _timeout(settings: DryRunSettings, spec: KernelSpec) -> float:
    """An explicit timeout, else the kernel's, else the competition's limit: Kaggle kills a run there."""
    return float(settings.timeout_seconds or spec.kernel.timeout_seconds or spec.competition.time_limit_hours * 3600)


def _limits(scenario: Scenario, settings: DryRunSettings, spec: KernelSpec, rows: int) -> Limits:
    shape = machine_shape(spec.kernel.machine_shape)
    hidden = settings.hidden_rows or spec.competition.hidden_rows
    scaled = scenario == "rerun" and hidden is not None
    return Limits(time_limit_seconds=spec.competition.time_limit_hours * 3600, ram_bytes=_memory(settings, spec),
                  gpu_bytes=shape.gpu_bytes, rows_run=rows if scaled else None, hidden_rows=hidden if scaled else None,
                  shape_has_gpu=shape.gpu_bytes is not None, layout=settings.layout)


def scenario_report(scenario: Scenario, settings: DryRunSettings, build: BuildResult, data: Path, result: ExecutionResult,
                    out: Path, sandbox: Path | None, fit_runs: tuple[RunTimes, ...] = (),
                    judged: Path | None = None) -> ScenarioReport:
    """``judged``: the file the format check reads, when not the run's own (an evaluation-API gateway's, aligned)."""
    spec = build.spec
    sample = data / spec.competition.sample_submission
    rows = _rows(data, spec)
    limits = _limits(scenario, settings, spec, rows)
    projection = _projection(limits, fit_runs or (RunTimes(rows, result.wall_seconds, tuple(result.steps)),),
                             spec.kernel.machine_shape, build.out_dir)
    expected = REHEARSALS[spec.submission.kind].scored_file(spec)
    verdict = judge(result, kernel_type=spec.kernel.type, submission_file=judged or expected,
                    sample_submission=sample, id_column=spec.submission.id_column,
                    target_columns=spec.submission.target_columns, limits=limits,
                    column_types=spec.submission.column_types, kernel_file=spec.submission.file,
                    projected=_judged_seconds(projection, limits), float_targets=float_targets(spec, settings.kernel_dir))
    if projection is not None and projection.over_limit() and verdict.name == Verdict.TIMEOUT and not result.timed_out:
        verdict = replace(verdict, reason=timeout_reason(projection))
    decision = fast_commit_decision(result)
    warnings = []
    if scenario == "commit":
        warning = check_fast_commit(result, spec, rows, decision)
        warnings += [warning] if warning else []
    if projection is not None and projection.may_pass_limit():
        warnings.append(limit_warning(projection))
    if result.isolation == "python":
        warnings.append(f"weaker sandbox: {result.isolation_note}")
    if result.left_behind:
        warnings.append(left_behind_warning(result.left_behind))
    members = _save_member_outputs(scenario, result, out)
    own = own_modules(settings.kernel_dir, spec)
    warnings += skew_warnings(result.version_skew, own) + rerun_collapse(scenario, out, members, result.working_dir / expected,
                                                                         competition_data(settings, spec) / sample.name, spec.submission)
    warnings += mounted_warnings(result.working_dir, build)
    metric = _metric_report(scenario, settings, spec, result.working_dir / expected, sample, result.working_dir, data)
    if scenario == "rerun":  # a step that rounds its own output under a relative-error metric
        warnings += step_rounding(spec, Path(settings.kernel_dir), result.steps, result.working_dir, sample)
    if metric is not None:
        verdict = _with_metric(verdict, metric)
        warnings += list(metric.warnings)
    notebook, log, submission = _save_outputs(scenario, result, expected if (result.working_dir / expected).is_file()
                                              else spec.submission.file, out)
    return ScenarioReport(
        scenario=scenario, verdict=verdict, wall_seconds=result.wall_seconds, peak_rss_bytes=result.peak_rss_bytes,
        peak_gpu_bytes=result.peak_gpu_bytes, timed_out=result.timed_out, failed_cell=result.failed_cell,
        failing_step=failing_step(result), ename=result.ename, evalue=result.evalue,
        traceback_tail=result.traceback_tail, stderr_tail=_stderr_tail(result), steps=result.steps, rows=rows,
        hidden_rows=limits.hidden_rows,
        projected_seconds=round(projection.seconds if projection else projected_seconds(result, limits), 3),
        time_limit_seconds=limits.time_limit_seconds or 0.0, ram_limit_bytes=limits.ram_bytes or 0,
        gpu_limit_bytes=limits.gpu_bytes, fast_commit=decision, blocked_network=blocked_network(result.root),
        notebook=notebook, log=log, submission=submission, sandbox=sandbox, data=data,
        isolation=result.isolation, isolation_note=result.isolation_note,
        memory_limit=memory_enforcement(result.memory_limit_bytes, result.memory_accounting).how, working_bytes=result.working_bytes,
        working_limit=working_enforcement(result.working_limit_bytes).how,
        projection=projection.to_json() if projection else None, warnings=tuple(warnings),
        member_outputs=members,
        metric=metric.to_json() if metric is not None else None, version_skew=skew_records(result.version_skew, own),
        variables=result.environment.listing(), variables_summary=result.environment.summary() if result.environment.given else "",
    )


def _metric_report(scenario: Scenario, settings: DryRunSettings, spec: KernelSpec, submission: Path, sample: Path,
                   working: Path, data: Path) -> MetricReport | None:
    """The metric's checks on the rerun's file (the commit run is not scored) and, with answers, the expected score."""
    if scenario != "rerun":
        return None
    return rerun_metric_report(spec, Path(settings.kernel_dir), submission, sample, working, answers_for(settings, data),
                               settings.hidden_rows)


def answers_for(settings: DryRunSettings, data: Path) -> Path | None:
    """``--answers``, else a local competition's ``answers.csv`` beside the ``hidden/`` folder the rerun ran on.
    A replicated test (``--rerun-scale``) has new ids: no answers fit it."""
    if settings.rerun_scale > 1:
        return None
    if settings.answers is not None:
        return Path(settings.answers)
    folder = Path(settings.rerun_data_dir or data)
    beside = folder.parent / "answers.csv"
    return beside if folder.name == "hidden" and beside.is_file() else None


def _with_metric(verdict: Judgement, metric: MetricReport) -> Judgement:
    """A file the format check passes and the metric's check fails is Kaggle's "Submission Scoring Error"."""
    if not verdict.ok or not metric.failures:
        return verdict
    detail = "\n".join(part for part in (verdict.reason if "although the notebook failed" in verdict.reason else "",
                                         verdict.detail or "") if part)
    return Judgement(SCORING_ERROR, "; ".join(metric.failures), detail or None)


def left_behind_warning(left: tuple[str, ...]) -> str:
    """The links and special files a run left in its sandbox, which kkb removed unread (it follows no link a kernel made)."""
    shown = "; ".join(left[:10]) + ("; ..." if len(left) > 10 else "")
    return (f"the run left {len(left)} link(s) or special file(s) in its sandbox ({shown}): removed before kkb read "
            "anything there (kkb follows no link a kernel made); a file the run meant to keep must be written as a file")


def _save_member_outputs(scenario: Scenario, result: ExecutionResult, out: Path) -> dict[str, str]:
    """Each step's CSV (an ensemble member's predictions), copied out of the sandbox for the HTML report."""
    saved: dict[str, str] = {}
    for step in result.steps:
        source = in_working(str(step.get("output") or ""), result.working_dir)  # the record is the kernel's: never
        if source is not None and source.suffix == ".csv" and source.is_file():  # a path outside the run is read
            target = out / f"{scenario}.step-{_file_name(str(step.get('name')))}.csv"
            if _kept(functools.partial(shutil.copyfile, source, target)):
                saved[str(step.get("name"))] = str(target)
    return saved


def _file_name(name: str) -> str:
    """A step's name as part of a file name in the build folder (the record is the kernel's: no folder in it)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:100] or "step"


def _kept(write: Callable[[], object]) -> bool:
    """``write()`` done; False where the disk is full (the run filled it): the report goes on without that file."""
    try:
        write()
    except OSError as exc:
        if exc.errno not in DISK_FULL:
            raise
        return False
    return True


def _projection(limits: Limits, runs: tuple[RunTimes, ...], machine_shape: str | None, out_dir: Path) -> Projection | None:
    if not limits.hidden_rows:
        return None
    return project_rerun(runs, limits.hidden_rows, limits.time_limit_seconds, machine_shape, out_dir)


def _judged_seconds(projection: Projection | None, limits: Limits) -> float | None:
    """What the timeout check compares with the limit: the range's lower end when even it passes, else at most the limit."""
    if projection is None:
        return None
    return projection.low if projection.over_limit() else min(projection.seconds, limits.time_limit_seconds or 0.0)


def fast_commit_decision(result: ExecutionResult) -> str | None:
    """The runtime's fast-commit decision line, if it printed one."""
    stdout = "".join(entry["data"] for entry in result.log if entry["stream_name"] == "stdout")
    match = _DECISION.search(stdout)
    return match.group(1) if match else None


def check_fast_commit(result: ExecutionResult, spec: KernelSpec, rows: int, decision: str | None) -> str | None:
    """A warning when the commit should have taken the fast path but ran every step (a removed or broken guard).

    Kaggle accepts such a commit (it is not a verdict): it only spends the full inference time, and
    GPU quota, at every save.
    """
    settings = spec.fast_commit
    expected = settings.enabled and (settings.detect == "env" or rows < settings.rows_below)
    if not expected or (decision is not None and decision.startswith(_FAST_TAKEN)):
        return None
    if decision is None and not result.steps:
        return None  # no guard printed, but no step ran either: the commit was fast
    ran = ", ".join(f"{step.get('name')} {float(step.get('seconds') or 0):.1f} s" for step in result.steps) or "every step"
    why = "detect = \"env\"" if settings.detect == "env" else f"the public sample has {rows} rows < rows_below = {settings.rows_below}"
    said = f"; the kernel printed: {decision}" if decision else "; the notebook printed no fast-commit decision (is the guard cell missing?)"
    return (f"the commit run did not take the fast-commit path although kernel.toml enables it ({why}): "
            f"it ran {ran} in {result.wall_seconds:.1f} s{said}. Kaggle accepts the commit, but every save spends "
            f"the full inference time and GPU quota")


def _stderr_tail(result: ExecutionResult) -> str | None:
    stderr = "".join(entry["data"] for entry in result.log if entry["stream_name"] == "stderr")
    return tail(stderr, LOG_TAIL_LINES) or None


def _save_outputs(scenario: Scenario, result: ExecutionResult, submission_file: str, out: Path) -> tuple[Path, Path, Path | None]:
    notebook = out / f"{scenario}{result.executed_notebook.suffix}"  # the executed notebook, or the script as it ran
    if result.executed_notebook.is_file():
        _kept(lambda: shutil.copyfile(result.executed_notebook, notebook))
    log = out / f"{scenario}.log.json"
    _kept(lambda: log.write_text(json.dumps(result.log, indent=1) + "\n"))
    written = result.working_dir / submission_file
    submission = out / f"{scenario}.{submission_file}" if written.is_file() else None
    if submission is not None and not _kept(functools.partial(shutil.copyfile, written, submission)):
        submission = None
    return notebook, log, submission


# --- the evaluation-API kind ----------------------------------------------------------------------
# The sandbox and report of a CSV kernel (judged against the sample, time, memory), plus the gateway's view.

def _evaluation_api_scenario(scenario: Scenario, settings: DryRunSettings, build: BuildResult, data: Path, source: Path,
                             out: Path, work: Path) -> ScenarioReport:
    """One dry-run scenario of an evaluation-API kernel (:mod:`builder.rehearse.evalapi_scenario`), judged as a CSV
    kernel's run is, with the gateway's view beside it."""
    section = evaluation_section(build.spec)
    sandbox = scenario_sandbox(scenario, settings, build, data)
    sandbox = replace(sandbox, extra_env={**sandbox.extra_env, **sandbox_env(section)})
    run = run_evaluation_api(scenario, sandbox, build.notebook_path, build.spec, data, work)
    if run.rerun is not None:
        (out / "rerun.gateway.log").write_text(run.gateway_log)
    base = scenario_report(scenario, settings, build, data, run.result, out, work if settings.keep_sandbox else None,
                           judged=run.judged)
    verdict = gateway_verdict(run.report, base.verdict)
    missing = missing_gateway_package(build.spec, data)
    if missing is not None and not verdict.ok:  # not Kaggle's verdict: Kaggle's data has the package
        verdict = Judgement(NOT_REHEARSED, missing, verdict.detail)
    return replace(base, verdict=verdict, evaluation_api={**run.report.to_json(), "lines": run.report.lines()})


ScenarioRunner = Callable[[Scenario, DryRunSettings, BuildResult, Path, Path, Path, Path], ScenarioReport]


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

__all__ = ["OK", "DryRunReport", "DryRunSettings", "ScenarioReport", "check_fast_commit", "competition_data", "dry_run",
           "fast_commit_decision"]
