"""One dry-run scenario of an evaluation-API kernel, run as the CSV kernel's is: the same sandbox, the same judge.

The commit run executes the notebook (``run_local_gateway`` on the public test); the scoring rerun blocks in
``serve()`` while the competition's gateway drives it from another process (:func:`builder.rehearse.evalapi.
rehearse_rerun`). Either way the dry run gets an :class:`~builder.run.execute.ExecutionResult` to judge, save
and project like any other run, with the gateway's view beside it (:class:`EvalApiRun`):

- the sandbox is the scenario's own (:func:`builder.rehearse.scenarios.scenario_sandbox`): ``--image-env``'s
  interpreter, ``--env``, the timing probe, the memory limit and the GPU reach the rerun as they reach the commit;
- the file kept is the gateway's own ``submission.parquet``, byte for byte (its ids in their own type, its order):
  the format check runs on an aligned copy (:func:`judged_copy`), since Kaggle matches the gateway's rows by id;
- the rerun's memory is the inference server's process tree (the notebook and what it starts), not the gateway's.

``builder.rehearse.dryrun`` owns the registry of submission kinds; this module takes the sandbox and notebook from it
and hands back the run, so the two never import each other.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import nbformat

from builder.kkb_runtime.submission import align_to_sample, read_sample
from builder.kkb_runtime.vocabulary import Scenario
from builder.project.spec import KernelSpec
from builder.rehearse.evalapi import EvalApiReport, RerunResult, commit_report, rehearse_rerun, verdict_name, verdict_reason
from builder.rehearse.verdict import COMPUTE, NOT_REHEARSED, Judgement
from builder.run.execute import ExecutionResult, tail
from builder.run.forms import execute_kernel
from builder.run.sandbox import SandboxSpec, outputs_dir
from builder.run.script_run import EXECUTED_SCRIPT

LOG_TAIL_LINES = 20
NINE_HOURS = 9 * 3600.0
JUDGED_DIR = "judged"  # under the scenario's work folder: the aligned copy the format check reads


@dataclass(frozen=True)
class EvalApiRun:
    """A scenario's run in the executor's terms, the gateway's report, and the aligned copy the format check reads."""

    result: ExecutionResult
    report: EvalApiReport
    judged: Path | None  # an aligned copy of the gateway's file (None: the gateway wrote none)
    gateway_log: str = ""
    rerun: RerunResult | None = None


def run_scenario(scenario: Scenario, sandbox: SandboxSpec, notebook: Path, spec: KernelSpec, data: Path,
                 work: Path) -> EvalApiRun:
    """Run ``scenario`` in a new sandbox under ``work`` (see the module docstring); ``notebook``: the kernel's code,
    a notebook or a script (the rerun runs either as one script)."""
    if scenario == Scenario.COMMIT:
        result = execute_kernel(notebook, spec.kernel.type, sandbox, work / "kaggle")
        report, rerun = commit_report(result.working_dir, spec), None
    else:
        rerun = rehearse_rerun(notebook, spec, sandbox, work / "kaggle",
                               timeout_seconds=float(sandbox.timeout_seconds or 0) or NINE_HOURS)
        result, report = as_execution(rerun, notebook), rerun.report
    written = result.working_dir / spec.submission.file
    judged = judged_copy(written, data / spec.competition.sample_submission, spec.submission.id_column, work / JUDGED_DIR)
    return EvalApiRun(result, report, judged, rerun.gateway_log if rerun else "", rerun)


def judged_copy(path: Path, sample_path: Path, id_column: str, folder: Path) -> Path | None:
    """The gateway's file in the sample's row order, ids as text, for the format check (None: no file).

    The gateway decides the order (batch by batch) and Kaggle matches rows by id, so the sample's order is no
    requirement; the check of the dry run would flag it. The gateway's own file is left as it is: it is what is kept."""
    import pandas as pd
    if not path.is_file():
        return None
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / path.name
    shutil.copyfile(path, copy)
    if not sample_path.is_file():
        return copy
    try:
        frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path, dtype={id_column: str})
    except Exception:
        return copy  # unreadable: the check says so, on the copy
    if id_column in frame.columns:
        frame[id_column] = frame[id_column].astype(str)
    aligned = align_to_sample(frame, read_sample(sample_path, id_column), id_column)
    aligned.to_parquet(copy, index=False) if copy.suffix == ".parquet" else aligned.to_csv(copy, index=False)
    return copy


def gateway_verdict(report: EvalApiReport, judged: Judgement) -> Judgement:
    """The gateway's error decides when there is one; otherwise the dry run's own judgement stands
    (it checks submission.parquet against the sample, the projected time and the memory). The memory limit ended the
    run first, or the failure says nothing about Kaggle (a package the image has in another version): the judge's."""
    if report.succeeded or report.error_type is None or judged.name in (COMPUTE, NOT_REHEARSED):
        return judged
    loaded = report.tripped_by_load
    if loaded is not None:  # a deadline passed only because this machine was busy: nothing Kaggle would say
        return Judgement(NOT_REHEARSED, f"{verdict_reason(report)}; {loaded.reason()}", "\n".join(report.lines()))
    return Judgement(verdict_name(report), verdict_reason(report), "\n".join(report.lines()))


def as_execution(rerun: RerunResult, notebook: Path) -> ExecutionResult:
    """The rerun in the executor's terms, so the dry run judges, saves and projects it like any other run."""
    if rerun.submission is not None:  # the gateway's file, by its own name, where the dry run looks for the output
        # (the run is over and sealed: no process of it is left, no link it made remains to write through)
        shutil.copyfile(rerun.submission, rerun.working_dir / rerun.submission.name)
    executed = outputs_dir(rerun.root) / ("__notebook__.ipynb" if notebook.suffix == ".ipynb" else EXECUTED_SCRIPT)
    _write_rerun_notebook(notebook, executed)
    exit_code = rerun.report.notebook_exit
    failed = exit_code not in (None, 0)
    last = tail(rerun.notebook_stderr, 1).strip()
    ename, _, evalue = last.partition(": ")
    return ExecutionResult(
        root=rerun.root, working_dir=rerun.working_dir, executed_notebook=executed, ok=not failed and not rerun.timed_out,
        timed_out=rerun.timed_out, failed_cell=None, ename=(ename or "NotebookExited") if failed else None,
        evalue=(evalue or f"exit code {exit_code}") if failed else None,
        traceback_tail=(tail(rerun.notebook_stderr, LOG_TAIL_LINES) or None) if failed else None,
        wall_seconds=rerun.wall_seconds, peak_rss_bytes=rerun.peak_rss_bytes, peak_gpu_bytes=None,
        log=[{"stream_name": name, "time": rerun.wall_seconds, "data": text}
             for name, text in (("stdout", rerun.notebook_stdout), ("stderr", rerun.notebook_stderr)) if text],
        steps=rerun.steps, isolation=rerun.isolation, isolation_note=rerun.isolation_note,
        memory_limit_bytes=rerun.memory_limit_bytes, memory_accounting=rerun.memory_accounting,
        memory_exceeded=rerun.memory_exceeded, memory_step="predict" if rerun.memory_exceeded else None,
        environment=rerun.environment, version_skew=rerun.version_skew, time_limit_check=rerun.time_limit_check,
        left_behind=rerun.left_behind,
    )


def _write_rerun_notebook(notebook: Path, target: Path) -> None:
    if notebook.suffix != ".ipynb":  # a script kernel: the script as it ran
        shutil.copyfile(notebook, target)
        return
    nb = nbformat.read(notebook, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_markdown_cell(
        "**kkb: the scoring rerun ran these cells as one script, blocked in `serve()` and driven by the "
        "competition's gateway from another process.** Its output is in `rerun.log.json`, the gateway's in "
        "`rerun.gateway.log`."))
    nbformat.write(nb, target)
