"""``kkb dry-run``: rehearse Kaggle's commit run and scoring rerun locally, and say what Kaggle would say.

Each scenario builds nothing new: the kernel is built once (as ``kkb build``), then each scenario runs
the rendered notebook in a fresh sandbox (``builder.sandbox``) with the code and weights bundles
mounted as datasets and the competition data as the competition:

``commit``
    No ``KAGGLE_IS_COMPETITION_RERUN``, the public test as given. When ``[fast_commit]`` says the
    fast path should trigger and the commit ran every step anyway, Kaggle still accepts the commit:
    the report keeps its verdict and adds a warning (the full inference time, and GPU quota, is
    spent at every save).
``rerun``
    ``KAGGLE_IS_COMPETITION_RERUN=1``, the full pipeline, on the public test, on a test replicated
    ``--rerun-scale`` times, or on a hidden stand-in (``--rerun-data DIR``). Its time is projected
    to the hidden test's rows by :mod:`builder.projection` (fixed + per-row cost; when the test is
    too small to separate them, a second run on a replicated test measures the second size), its
    memory limited to and compared with the machine shape's RAM (``--memory`` overrides).

Each scenario's sandbox says which isolation ran (:mod:`builder.isolation`) and which limits were
enforced (:mod:`builder.limits`); both go into the report.

Results go to ``build/NAME/dryrun/``: ``<scenario>.ipynb`` (the executed notebook),
``<scenario>.log.json`` (Kaggle's log shape), ``<scenario>.submission.csv`` when one was written, and
``report.json``. The sandboxes are temporary; the project and the bundles are never written to.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from builder.build import BuildResult, BuildSettings, build_kernel
from builder.errors import DryRunError, SpecError
from builder.execute import ExecutionResult, execute_notebook, tail
from builder.html_report import write_html_report
from builder.limits import WORKING_LIMIT_BYTES, memory_enforcement, working_enforcement
from builder.projection import Projection, RunTimes, fit_factor, project
from builder.sandbox import Mount, SandboxSpec, blocked_network, remove_sandbox, scale_competition_data
from builder.spec import SPEC_FILE, KernelSpec
from builder.verdict import (NOT_REHEARSED, OK, Limits, Verdict, failing_step, judge, machine_shape,
                             projected_seconds)
from builder.wheels import dry_run_check, dry_run_mounts

Scenario = Literal["commit", "rerun"]
SCENARIOS: dict[str, tuple[Scenario, ...]] = {"commit": ("commit",), "rerun": ("rerun",), "both": ("commit", "rerun")}
REPORT_FILE = "report.json"
LOG_TAIL_LINES = 20
# The runtime prints its fast-commit decision as "[kkb] <reason>" (kkb_runtime.commit.decide).
_DECISION = re.compile(r"^\[kkb\] (.*(?:running every step|writing the sample submission|fast commit).*)$", re.MULTILINE)
_FAST_TAKEN = "commit run ("


@dataclass(frozen=True)
class DryRunSettings:
    kernel_dir: Path
    data_dir: Path | None = None  # default: [competition] data, relative to the kernel folder
    scenario: Literal["commit", "rerun", "both"] = "both"
    rerun_scale: int = 1
    hidden_rows: int | None = None  # default: [competition] hidden_rows
    timeout_seconds: float | None = None  # default: [kernel] timeout_seconds, else the competition's limit
    layout: Literal["current", "legacy"] = "current"
    out_dir: Path | None = None  # the build folder, default build/<kernel folder name>
    owner: str | None = None
    keep_sandbox: bool = False  # leave each sandbox on disk (its path is in the report)
    rerun_data_dir: Path | None = None  # the rerun's data (a hidden stand-in); the commit keeps data_dir
    memory_bytes: int | None = None  # default: the machine shape's RAM
    fit: bool = True  # a second, replicated rerun when the test is too small to fit fixed + per-row time
    progress: Callable[[str], None] | None = None  # one line per event (builder.cli shows it with rich); never printed here

    def __post_init__(self) -> None:
        if self.scenario not in SCENARIOS:
            raise DryRunError(f"unknown scenario '{self.scenario}'", hint="use commit, rerun or both")
        if self.rerun_scale < 1:
            raise DryRunError(f"--rerun-scale must be at least 1, got {self.rerun_scale}")
        if self.hidden_rows is not None and self.hidden_rows < 1:
            raise DryRunError(f"--hidden-rows must be positive, got {self.hidden_rows}")
        if self.timeout_seconds is not None and self.timeout_seconds <= 0:
            raise DryRunError(f"--timeout must be positive, got {self.timeout_seconds}")
        if self.layout not in ("current", "legacy"):
            raise DryRunError(f"unknown input layout '{self.layout}'", hint="use current or legacy")
        if self.memory_bytes is not None and self.memory_bytes < 64 * 2**20:
            raise DryRunError(f"--memory must be at least 64 MiB, got {self.memory_bytes} bytes")
        if self.rerun_data_dir is not None and self.scenario == "commit":
            raise DryRunError("--rerun-data needs a rerun scenario", hint="use --scenario rerun or both")


@dataclass(frozen=True)
class ScenarioReport:
    scenario: Scenario
    verdict: Verdict
    wall_seconds: float
    peak_rss_bytes: int
    peak_gpu_bytes: int | None
    timed_out: bool
    failed_cell: int | None
    failing_step: str | None
    ename: str | None
    evalue: str | None
    traceback_tail: str | None
    stderr_tail: str | None
    steps: list[dict[str, Any]]
    rows: int
    hidden_rows: int | None
    projected_seconds: float
    time_limit_seconds: float
    ram_limit_bytes: int
    gpu_limit_bytes: int | None
    fast_commit: str | None  # the runtime's decision, as it printed it
    blocked_network: list[str]
    notebook: Path
    log: Path
    submission: Path | None
    sandbox: Path | None = None
    evaluation_api: dict[str, Any] | None = None  # builder.evalapi.EvalApiReport.to_json(), issue 8
    data: Path | None = None
    isolation: str = "python"
    isolation_note: str = ""
    memory_limit: str = ""  # how the memory limit was enforced (or that it was not)
    working_bytes: int = 0
    working_limit: str = ""
    projection: dict[str, Any] | None = None  # builder.projection.Projection.to_json()
    warnings: tuple[str, ...] = ()
    member_outputs: dict[str, str] = field(default_factory=dict)  # step name -> its CSV, kept in the dry-run folder

    @property
    def ok(self) -> bool:
        return self.verdict.ok

    @property
    def rehearsed(self) -> bool:
        return self.verdict.name != NOT_REHEARSED

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        for key in ("notebook", "log", "submission", "sandbox", "data"):
            data[key] = str(data[key]) if data[key] is not None else None
        return data


@dataclass(frozen=True)
class DryRunReport:
    kernel_name: str
    kernel_id: str
    kernel_type: str
    out_dir: Path
    report_path: Path
    scenarios: tuple[ScenarioReport, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(scenario.ok for scenario in self.scenarios)

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel_name, "kernel_id": self.kernel_id, "kernel_type": self.kernel_type,
                "ok": self.ok, "scenarios": [scenario.to_json() for scenario in self.scenarios]}


# Nothing leaves the machine in a dry run, so the owner in the dataset ids only has to be consistent.
LOCAL_OWNER = "kkb-local"


def _owner(settings: DryRunSettings) -> str:
    from builder.credentials import kaggle_username
    from builder.spec import load_spec

    return settings.owner or load_spec(Path(settings.kernel_dir)).kernel.owner or kaggle_username() or LOCAL_OWNER


def dry_run(settings: DryRunSettings) -> DryRunReport:
    """Build the kernel, run each scenario in its own sandbox, judge it, and write the report."""
    kernel_dir = Path(settings.kernel_dir)
    _progress(settings, f"building {kernel_dir}")
    build = build_kernel(BuildSettings(kernel_dir=kernel_dir, out_dir=settings.out_dir, owner=_owner(settings)))
    data = competition_data(settings, build.spec)
    rerun_data = competition_data(replace(settings, data_dir=settings.rerun_data_dir), build.spec) if settings.rerun_data_dir else data
    dry_run_check(kernel_dir, build.out_dir)  # [install] requirements: the wheelhouse installs offline (issue 7)
    out = build.out_dir / "dryrun"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    reports = tuple(_run_scenario(scenario, settings, build, rerun_data if scenario == "rerun" else data, out)
                    for scenario in SCENARIOS[settings.scenario])
    report = DryRunReport(kernel_name=build.kernel_name, kernel_id=build.kernel_id, kernel_type=build.spec.kernel.kernel_type,
                          out_dir=out, report_path=out / REPORT_FILE, scenarios=reports)
    report.report_path.write_text(json.dumps(report.to_json(), indent=1) + "\n")
    write_html_report(report)
    return report


def competition_data(settings: DryRunSettings, spec: KernelSpec) -> Path:
    """``--data``, else ``[competition] data`` relative to the kernel folder; it must hold the sample."""
    if settings.data_dir is not None:
        data = Path(settings.data_dir)
    elif spec.competition.data is not None:
        data = Path(settings.kernel_dir) / spec.competition.data
    else:
        raise DryRunError("no competition data to mount", hint="pass --data DIR or set [competition] data in kernel.toml")
    sample = data / spec.competition.sample_submission
    if not sample.is_file():
        raise DryRunError(f"{sample}: the competition data has no sample submission",
                          hint="point --data (or [competition] data) at the folder with the public test files")
    if spec.submission.kind == "csv":
        _check_columns(Path(settings.kernel_dir) / SPEC_FILE, spec, sample)
    return data


def _check_columns(spec_path: Path, spec: KernelSpec, sample: Path) -> None:
    """[submission] names columns of the sample submission: a typo there fails only the rerun, hours later."""
    import difflib

    import pandas as pd

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
        if scenario == "rerun" and settings.rerun_scale > 1:
            data = scale_competition_data(data, work / "scaled", settings.rerun_scale, id_column=spec.submission.id_column,
                                          sample_submission=spec.competition.sample_submission,
                                          test=spec.competition.test).path
        if spec.submission.kind == "evaluation-api":  # the competition's gateway drives the notebook (issue 8)
            from builder.evalapi import dry_run_scenario

            return dry_run_scenario(scenario, settings, build, data, out, work)
        _progress(settings, f"{scenario}: running the notebook")
        result = execute_notebook(scenario_notebook(build, work), _with_script(scenario_sandbox(scenario, settings, build, data), work),
                                  work / "kaggle",
                                  progress=lambda line: _progress(settings, f"{scenario}: {line}"))
        _progress(settings, f"{scenario}: finished in {result.wall_seconds:.1f} s ({result.isolation} sandbox)")
        fit_runs = _fit_runs(scenario, settings, build, source, _rows(data, spec), result, work)
        return scenario_report(scenario, settings, build, data, result, out, work if settings.keep_sandbox else None,
                               fit_runs=fit_runs)
    finally:
        if not settings.keep_sandbox:
            remove_sandbox(work)


def _progress(settings: DryRunSettings, line: str) -> None:
    if settings.progress is not None:
        settings.progress(line)


def _fit_runs(scenario: Scenario, settings: DryRunSettings, build: BuildResult, source: Path, rows: int,
              result: ExecutionResult, work: Path) -> tuple[RunTimes, ...]:
    """The runs the time projection fits: this one (``rows``), plus one on ``source`` (the data before
    ``--rerun-scale``) replicated further when the test is too small to tell fixed from per-row time."""
    spec = build.spec
    runs = [RunTimes(rows, result.wall_seconds, tuple(result.steps))]
    hidden = settings.hidden_rows or spec.competition.hidden_rows
    factor = fit_factor(rows)
    if scenario != "rerun" or not settings.fit or not hidden or hidden <= rows or factor == 1 or not result.ok:
        return tuple(runs)
    if spec.submission.kind != "csv" or _card_steps_only(result):
        return tuple(runs)  # card steps time themselves; the gateway drives evaluation-API kernels
    try:
        scaled = scale_competition_data(source, work / "fit-data", factor * settings.rerun_scale, id_column=spec.submission.id_column,
                                        sample_submission=spec.competition.sample_submission, test=spec.competition.test)
    except DryRunError as error:
        _progress(settings, f"rerun: no second size for the time fit ({error.message}); projecting proportionally")
        return tuple(runs)
    _progress(settings, f"rerun: a second run on {scaled.rows} rows ({factor}x) to separate fixed from per-row time")
    if scaled.rows <= rows:
        return tuple(runs)
    second = execute_notebook(scenario_notebook(build, work / "fit"),
                              _with_script(scenario_sandbox(scenario, settings, build, scaled.path), work / "fit"), work / "kaggle-fit")
    if second.ok:
        runs.append(RunTimes(scaled.rows, second.wall_seconds, tuple(second.steps)))
    else:
        _progress(settings, f"rerun: the second run failed ({second.ename}); projecting proportionally")
    return tuple(runs)


def _with_script(sandbox: SandboxSpec, work: Path) -> SandboxSpec:
    """A script kernel runs from ``work/script`` (see :func:`scenario_notebook`): the kernel must see it there."""
    script = work / "script"
    return replace(sandbox, visible=(*sandbox.visible, script)) if script.is_dir() else sandbox


def _card_steps_only(result: ExecutionResult) -> bool:
    return bool(result.steps) and all(step.get("infer_seconds") is not None for step in result.steps)


def _rows(data: Path, spec: KernelSpec) -> int:
    return len(pd.read_csv(data / spec.competition.sample_submission, dtype={spec.submission.id_column: str}))


def scenario_notebook(build: BuildResult, work: Path) -> Path:
    """The notebook to run; a script kernel becomes one cell that runs the script as ``__main__``."""
    if build.notebook_path.suffix != ".py":
        return build.notebook_path
    import nbformat

    script = work / "script" / build.notebook_path.name
    script.parent.mkdir(parents=True)
    shutil.copyfile(build.notebook_path, script)
    cell = nbformat.v4.new_code_cell(f"import runpy\nrunpy.run_path({str(script)!r}, run_name='__main__')")
    notebook = work / "script" / "script.ipynb"
    nb = nbformat.v4.new_notebook(cells=[cell], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(nb, notebook)
    return notebook


def scenario_sandbox(scenario: Scenario, settings: DryRunSettings, build: BuildResult, data: Path) -> SandboxSpec:
    mounts = [Mount(build.code_dir, f"datasets/{build.code_dataset}")]
    if build.weights_dataset:
        mounts.append(Mount(build.weights_dir, f"datasets/{build.weights_dataset}"))
    mounts += [Mount(folder, target) for folder, target in dry_run_mounts(build.spec, build.owner, build.out_dir)]
    mounts.append(Mount(data, f"competitions/{build.spec.competition.slug}"))
    return SandboxSpec(mounts=tuple(mounts), rerun=scenario == "rerun", timeout_seconds=_timeout(settings, build.spec),
                       layout=settings.layout, memory_bytes=_memory(settings, build.spec),
                       working_limit_bytes=WORKING_LIMIT_BYTES)


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
            out: Path, sandbox: Path | None, fit_runs: tuple[RunTimes, ...] = ()) -> ScenarioReport:
    spec = build.spec
    sample = data / spec.competition.sample_submission
    rows = len(pd.read_csv(sample, dtype={spec.submission.id_column: str}))
    limits = _limits(scenario, settings, spec, rows)
    projection = _projection(limits, fit_runs or (RunTimes(rows, result.wall_seconds, tuple(result.steps)),))
    expected = spec.competition.submission_file if spec.submission.kind == "csv" else spec.submission.file
    verdict = judge(result, kernel_type=spec.kernel.kernel_type, submission_file=expected,
                    sample_submission=sample, id_column=spec.submission.id_column,
                    target_columns=spec.submission.target_columns, limits=limits, kernel_file=spec.submission.file,
                    projected=_judged_seconds(projection, limits))
    decision = fast_commit_decision(result)
    warnings = []
    if scenario == "commit":
        warning = check_fast_commit(result, spec, rows, decision)
        warnings += [warning] if warning else []
    if projection is not None and projection.may_pass_limit():
        warnings.append(f"the projected rerun may pass the limit: {projection.summary()}")
    if result.isolation == "python":
        warnings.append(f"weaker sandbox: {result.isolation_note}")
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
        memory_limit=memory_enforcement(result.memory_limit_bytes).how, working_bytes=result.working_bytes,
        working_limit=working_enforcement(result.working_limit_bytes).how,
        projection=projection.to_json() if projection else None, warnings=tuple(warnings),
        member_outputs=_save_member_outputs(scenario, result, out),
    )


def _save_member_outputs(scenario: Scenario, result: ExecutionResult, out: Path) -> dict[str, str]:
    """Each step's CSV (an ensemble member's predictions), copied out of the sandbox for the HTML report."""
    saved: dict[str, str] = {}
    for step in result.steps:
        source = Path(str(step.get("output") or ""))
        if source.is_relative_to("/kaggle/working"):  # written through the real path inside the namespaces
            source = result.working_dir / source.relative_to("/kaggle/working")
        if source.suffix == ".csv" and source.is_file():
            target = out / f"{scenario}.step-{step.get('name')}.csv"
            shutil.copyfile(source, target)
            saved[str(step.get("name"))] = str(target)
    return saved


def _projection(limits: Limits, runs: tuple[RunTimes, ...]) -> Projection | None:
    if not limits.hidden_rows:
        return None
    return project(runs, limits.hidden_rows, limits.time_limit_seconds)


def _judged_seconds(projection: Projection | None, limits: Limits) -> float | None:
    """What the timeout check compares with the limit: the fit's value when it is trusted, else 0 (no verdict)."""
    if projection is None:
        return None
    return projection.seconds if projection.over_limit() else min(projection.seconds, limits.time_limit_seconds or 0.0)


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
    notebook = out / f"{scenario}.ipynb"
    if result.executed_notebook.is_file():
        shutil.copyfile(result.executed_notebook, notebook)
    log = out / f"{scenario}.log.json"
    log.write_text(json.dumps(result.log, indent=1) + "\n")
    written = result.working_dir / submission_file
    submission = out / f"{scenario}.{submission_file}" if written.is_file() else None
    if submission is not None:
        shutil.copyfile(written, submission)
    return notebook, log, submission


__all__ = ["OK", "DryRunReport", "DryRunSettings", "ScenarioReport", "check_fast_commit", "competition_data", "dry_run",
           "fast_commit_decision"]
