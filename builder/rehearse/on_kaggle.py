"""A rehearsal that ran on Kaggle (``kkb dry-run --on-kaggle``), judged and reported like a local dry run.

The kernel judged what only it could see (the exception, the failing step, the submission check:
``kkb_runtime.rehearsal``) and wrote ``report.json`` in the shape of :class:`ScenarioReport`. Here the
same limits as the local dry run are applied to what it measured on Kaggle's machine: the peak memory
against the machine shape, and the time projected to ``[competition] hidden_rows`` against the
competition's limit (the rehearsal ran at its ``--rerun-scale``, usually still smaller than the hidden
test). The result is a :class:`DryRunReport`, so the CLI prints the same summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from builder.kkb_runtime.vocabulary import Scenario
from builder.project.spec import KernelSpec
from builder.rehearse.collapse import collapse_warnings
from builder.rehearse.dryrun import DryRunReport, ScenarioReport
from builder.rehearse.projection import Projection, RunTimes, limit_warning, project_rerun, timeout_reason
from builder.rehearse.verdict import COMPUTE, OK, TIMEOUT, Judgement, Limits, machine_shape
from builder.run.execute import ExecutionResult

GB = 1024**3


def report_from_kaggle(report: Mapping[str, Any], spec: KernelSpec, *, kernel_name: str, kernel_id: str,
                       out_dir: Path, hidden_rows: int | None = None, kernel_dir: Path | None = None) -> DryRunReport:
    """The kernel's ``report.json`` (downloaded into ``out_dir``) as the dry run's report; ``kernel_dir``: where
    the local public test is (``[competition] data``), to tell the replicated rows from the public ones."""
    data = spec.competition.data_dir(kernel_dir) if kernel_dir is not None else None
    public_sample = data / spec.competition.sample_submission if data is not None else None
    scenario = scenario_from_kaggle(report, spec, out_dir, hidden_rows, public_sample)
    return DryRunReport(kernel_name=kernel_name, kernel_id=kernel_id, kernel_type=spec.kernel.type,
                        out_dir=out_dir, report_path=out_dir / "report.json", scenarios=(scenario,))


def scenario_from_kaggle(report: Mapping[str, Any], spec: KernelSpec, out_dir: Path,
                         hidden_rows: int | None = None, public_sample: Path | None = None) -> ScenarioReport:
    shape = machine_shape(spec.kernel.machine_shape)
    rows = int(report.get("rows") or 0)
    hidden = hidden_rows or spec.competition.hidden_rows
    limits = Limits(time_limit_seconds=spec.competition.time_limit_hours * 3600, ram_bytes=shape.ram_bytes,
                    gpu_bytes=shape.gpu_bytes, rows_run=rows if hidden else None, hidden_rows=hidden)
    given = report.get("verdict") or {}
    verdict = Judgement(str(given.get("name") or "unknown"), str(given.get("reason") or ""), given.get("detail"))
    measured = _measured(report, out_dir, verdict.ok)
    projection = project_rerun((RunTimes(rows, measured.wall_seconds, tuple(measured.steps)),), hidden,
                               limits.time_limit_seconds, spec.kernel.machine_shape, on_target=True) if hidden and rows else None
    projected = projection.seconds if projection is not None else measured.wall_seconds
    if verdict.ok:
        verdict = _over_limits(measured, limits, projection) or verdict
    return ScenarioReport(
        scenario=Scenario.RERUN, verdict=verdict, wall_seconds=measured.wall_seconds, peak_rss_bytes=measured.peak_rss_bytes,
        peak_gpu_bytes=measured.peak_gpu_bytes, timed_out=False, failed_cell=None,
        failing_step=report.get("failing_step"), ename=report.get("ename"), evalue=report.get("evalue"),
        traceback_tail=report.get("traceback_tail"), stderr_tail=None, steps=measured.steps, rows=rows,
        hidden_rows=limits.hidden_rows, projected_seconds=round(projected, 3),
        time_limit_seconds=limits.time_limit_seconds or 0.0, ram_limit_bytes=limits.ram_bytes or 0,
        gpu_limit_bytes=limits.gpu_bytes, fast_commit=report.get("fast_commit"), blocked_network=[],
        notebook=out_dir / "report.json", log=Path(str(report.get("log") or out_dir / "report.json")),
        submission=Path(str(report["submission"])) if report.get("submission") else None,
        projection=projection.to_json() if projection is not None else None,
        warnings=((limit_warning(projection),) if projection is not None and projection.may_pass_limit() else ())
        + tuple(_collapsed(report, spec, public_sample)),
        mounted=dict(report["mounted"]) if isinstance(report.get("mounted"), Mapping) else None,
    )


def _collapsed(report: Mapping[str, Any], spec: KernelSpec, public_sample: Path | None) -> list[str]:
    """The rehearsal's submission against the public rows it holds (a test replicated ``--rerun-scale`` times)."""
    import pandas as pd
    submission = Path(str(report["submission"])) if report.get("submission") else None
    if submission is None or public_sample is None or not public_sample.is_file():
        return []
    id_column = spec.submission.id_column
    public_ids = set(pd.read_csv(public_sample, dtype={id_column: str}, usecols=[id_column])[id_column])
    return collapse_warnings({"submission.csv (on Kaggle)": submission}, id_column, spec.submission.target_columns, public_ids)


def _measured(report: Mapping[str, Any], out_dir: Path, ok: bool) -> ExecutionResult:
    steps = [dict(step) for step in report.get("steps") or [] if isinstance(step, Mapping)]
    return ExecutionResult(
        root=out_dir, working_dir=out_dir, executed_notebook=out_dir / "report.json", ok=ok, timed_out=False,
        failed_cell=None, ename=report.get("ename"), evalue=report.get("evalue"),
        traceback_tail=report.get("traceback_tail"), wall_seconds=float(report.get("wall_seconds") or 0.0),
        peak_rss_bytes=int(report.get("peak_rss_bytes") or 0),
        peak_gpu_bytes=int(report["peak_gpu_bytes"]) if report.get("peak_gpu_bytes") else None, log=[], steps=steps,
    )


def _over_limits(measured: ExecutionResult, limits: Limits, projection: Projection | None) -> Judgement | None:
    """What Kaggle's limits say about a run that passed at the rehearsal's size."""
    if limits.ram_bytes and measured.peak_rss_bytes > limits.ram_bytes:
        return Judgement(COMPUTE, f"peak memory {measured.peak_rss_bytes / GB:.1f} GiB on Kaggle > "
                                f"{limits.ram_bytes / GB:.1f} GiB of RAM on the machine shape")
    if limits.gpu_bytes and measured.peak_gpu_bytes and measured.peak_gpu_bytes > limits.gpu_bytes:
        return Judgement(COMPUTE, f"peak GPU memory {measured.peak_gpu_bytes / GB:.1f} GiB on Kaggle > "
                                f"{limits.gpu_bytes / GB:.1f} GiB per GPU on the machine shape")
    if projection is not None and projection.over_limit():  # the lower end of the range: measured on Kaggle
        return Judgement(TIMEOUT, f"{timeout_reason(projection)} (measured on Kaggle: {measured.wall_seconds:.1f} s for "
                                f"{limits.rows_run} rows)")
    return None


__all__ = ["OK", "report_from_kaggle", "scenario_from_kaggle"]
