"""One dry-run scenario's run judged: Kaggle's verdict on what it left, the time projection, the metric's checks, the
dry run's warnings (fast commit, skews, what was mounted, a collapsed rerun), and its files kept in the build folder."""

from __future__ import annotations

import errno
import functools
import importlib
import json
import re
import shutil
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from builder.kkb_runtime.vocabulary import Scenario, Verdict
from builder.project.spec import KernelSpec
from builder.rehearse.collapse import rerun_collapse
from builder.rehearse.dryrun_settings import ScenarioRun, answers_for
from builder.rehearse.metric_report import MetricReport
from builder.rehearse.metric_run import float_targets, rerun_metric_report, step_rounding
from builder.rehearse.mounted import mounted_check, mounted_warnings
from builder.rehearse.own_imports import own_modules
from builder.rehearse.projection import Projection, RunTimes, limit_warning, project_rerun, timeout_reason
from builder.rehearse.report import ScenarioReport
from builder.rehearse.verdict import SCORING_ERROR, Judgement, Limits, failing_step, judge, machine_shape, projected_seconds
from builder.run.execute import ExecutionResult, tail
from builder.run.limits import memory_enforcement, working_enforcement
from builder.run.sandbox import blocked_network
from builder.run.sandbox_files import in_working
from builder.run.skew import module_distributions, skew_records, skew_warnings

LOG_TAIL_LINES = 20
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
# The runtime prints its fast-commit decision as "[kkb] <reason>" (kkb_runtime.commit.decide).
_DECISION = re.compile(r"^\[kkb\] (.*(?:running every step|writing the sample submission|fast commit).*)$", re.MULTILINE)
_FAST_TAKEN = "commit run ("


def warm_up_while_the_kernel_runs() -> None:
    """What judging the run needs first, readied in a background thread while the kernel starts and runs (this process
    only waits for it then): pandas, which reads the run's files (~0.3 s to import), and the installed distributions'
    table, which the version-skew check reads (~0.05 s). A later ``import pandas`` waits for this one."""
    def ready() -> None:
        importlib.import_module("pandas")
        module_distributions()

    if "pandas" not in sys.modules:
        threading.Thread(target=ready, name="kkb-import", daemon=True).start()


def rows_of(data: Path, spec: KernelSpec) -> int:
    """The test's rows: the sample submission's."""
    import pandas as pd
    return len(pd.read_csv(data / spec.competition.sample_submission, dtype={spec.submission.id_column: str}))


def _limits(run: ScenarioRun, rows: int) -> Limits:
    settings, spec = run.settings, run.spec
    shape = machine_shape(spec.kernel.machine_shape)
    scaled = run.projected
    return Limits(time_limit_seconds=spec.competition.time_limit_hours * 3600, ram_bytes=run.memory_bytes,
                  gpu_bytes=shape.gpu_bytes, rows_run=rows if scaled else None, hidden_rows=run.hidden_rows if scaled else None,
                  shape_has_gpu=shape.gpu_bytes is not None, layout=settings.layout)


def scenario_report(run: ScenarioRun, result: ExecutionResult, fit_runs: tuple[RunTimes, ...] = (),
                    judged: Path | None = None, rows: int | None = None) -> ScenarioReport:
    """The scenario's run judged as Kaggle would, with the dry run's warnings; its files saved to ``run.out``.
    ``judged``: the file the format check reads, when not the run's own (an evaluation-API gateway's, aligned);
    ``rows``: the test's rows when the caller counted them already (:func:`rows_of` reads the whole sample)."""
    scenario, settings, build, data, out, spec = run.scenario, run.settings, run.build, run.data, run.out, run.spec
    sandbox = run.work if settings.keep_sandbox else None
    sample = data / spec.competition.sample_submission
    rows = rows_of(data, spec) if rows is None else rows
    limits = _limits(run, rows)
    projection = _projection(limits, fit_runs or (RunTimes(rows, result.wall_seconds, tuple(result.steps)),),
                             spec.kernel.machine_shape, build.out_dir)
    expected = run.scored_file
    verdict = judge(result, kernel_type=spec.kernel.type, submission_file=judged or expected,
                    sample_submission=sample, id_column=spec.submission.id_column,
                    target_columns=spec.submission.target_columns, limits=limits,
                    column_types=spec.submission.column_types, kernel_file=spec.submission.file,
                    projected=_judged_seconds(projection, limits), float_targets=float_targets(spec, settings.kernel_dir))
    if projection is not None and projection.over_limit() and verdict.name == Verdict.TIMEOUT and not result.timed_out:
        verdict = replace(verdict, reason=timeout_reason(projection))
    decision = fast_commit_decision(result)
    warnings = _run_warnings(run, result, rows, decision, projection)
    members = _save_member_outputs(scenario, result, out)
    own = own_modules(settings.kernel_dir, spec)
    warnings += skew_warnings(result.version_skew, own) + rerun_collapse(scenario, out, members, result.working_dir / expected,
                                                                         run.public / sample.name, spec.submission)
    warnings += mounted_warnings(mounted := mounted_check(result.working_dir, build))  # equal here, recorded
    metric = _metric_report(run, result.working_dir / expected, sample, result.working_dir)
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
        member_outputs=members, mounted=mounted.to_json(),
        metric=metric.to_json() if metric is not None else None, version_skew=skew_records(result.version_skew, own),
        variables=result.environment.listing(), variables_summary=result.environment.summary() if result.environment.given else "",
    )


def _run_warnings(run: ScenarioRun, result: ExecutionResult, rows: int, decision: str | None,
                  projection: Projection | None) -> list[str]:
    """What the run itself warns of: a commit that skipped the fast path, a projection near the limit, a weaker
    sandbox, the links a run left."""
    warnings = []
    if run.scenario == "commit":
        warning = check_fast_commit(result, run.spec, rows, decision)
        warnings += [warning] if warning else []
    if projection is not None and projection.may_pass_limit():
        warnings.append(limit_warning(projection))
    if result.isolation == "python":
        warnings.append(f"weaker sandbox: {result.isolation_note}")
    if result.left_behind:
        warnings.append(left_behind_warning(result.left_behind))
    return warnings


def _metric_report(run: ScenarioRun, submission: Path, sample: Path, working: Path) -> MetricReport | None:
    """The metric's checks on the rerun's file (the commit run is not scored) and, with answers, the expected score."""
    if run.scenario != "rerun":
        return None
    return rerun_metric_report(run.spec, run.kernel_dir, submission, sample, working, answers_for(run.settings, run.data),
                               run.settings.hidden_rows)


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

