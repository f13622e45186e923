"""What Kaggle would say about a run, in Kaggle's words, and what Kaggle never says: why.

Kaggle's submission statuses (code-competition debugging doc, see docs/ and the runtime notes §5):

- ``Notebook Timeout``: the run passed the competition's run-time limit; here also *projected*: the
  measured run scaled to the hidden test's row count passes it.
- ``Notebook Exceeded Allowed Compute``: more RAM (or GPU memory) than the machine shape has.
- ``Notebook Threw Exception``: only for *script* kernels (``FORM_JUDGING``, one entry per kernel form).
- ``Submission CSV Not Found``: no submission file after the run. A notebook's exception ends
  here: Kaggle does not report exceptions for notebooks, it looks for the file.
- ``Submission Scoring Error``: the file does not match the sample submission.

kkb adds one verdict Kaggle does not have: ``Not Rehearsed``. The run failed for a reason that says
nothing about Kaggle (a package Kaggle's image has and this environment lacks, CUDA on a machine
without a GPU): the dry run cannot predict Kaggle's verdict, and says what to do instead.

The order of the checks follows what happens on Kaggle: a run killed for time or memory never
gets to write its file; a notebook that raised is judged by the file it left behind.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from builder.kkb_runtime import vocabulary
from builder.kkb_runtime.submission import check_submission
from builder.kkb_runtime.vocabulary import KernelForm, Layout, MemoryAccounting
from builder.rehearse.diagnose import disk_full, disk_overflow, layout_mismatch, not_rehearsed, out_of_memory, skew_beside
from builder.run.execute import ExecutionResult
from builder.run.limits import duration_text, size_text
from builder.run.sandbox import blocked_network

if TYPE_CHECKING:  # imported where used: the CLI starts without them (tests/test_dry_run_cost.py)
    import pandas as pd

# The names are vocabulary.Verdict's (the one home of Kaggle's words); kept here because many modules import them.
OK = vocabulary.Verdict.OK
CSV_NOT_FOUND = vocabulary.Verdict.CSV_NOT_FOUND
THREW = vocabulary.Verdict.THREW
SCORING_ERROR = vocabulary.Verdict.SCORING_ERROR
TIMEOUT = vocabulary.Verdict.TIMEOUT
COMPUTE = vocabulary.Verdict.COMPUTE
NOT_REHEARSED = vocabulary.Verdict.NOT_REHEARSED  # kkb's: the run failed for a reason that says nothing about Kaggle
# What a dry run can say: every verdict but Kaggle's own infrastructure failure.
VERDICTS = tuple(name for name in vocabulary.Verdict if name is not vocabulary.Verdict.KAGGLE_ERROR)

GB = 1024**3
# Memory of Kaggle's machine shapes. Approximate, and Kaggle changes them: RAM is what a session
# reports as available (about 29 GiB of the nominal 30-32 GB on the CPU, T4 x2 and P100 shapes);
# GPU memory is per device (a T4 has 16 GB nominal, about 15 GiB usable). Shapes whose RAM was
# never observed fall back to the common 29 GiB.
DEFAULT_RAM = 29 * GB


@dataclass(frozen=True)
class MachineShape:
    name: str
    ram_bytes: int
    gpu_bytes: int | None  # per device; None for CPU and TPU


MACHINE_SHAPES = {
    "none": MachineShape("CPU", DEFAULT_RAM, None),
    "NvidiaTeslaT4": MachineShape("GPU T4 x2", DEFAULT_RAM, 15 * GB),
    "NvidiaTeslaT4Highmem": MachineShape("GPU T4 x2 (high memory)", DEFAULT_RAM, 15 * GB),
    "NvidiaTeslaP100": MachineShape("GPU P100", DEFAULT_RAM, 16 * GB),
    "NvidiaTeslaA100": MachineShape("GPU A100", DEFAULT_RAM, 40 * GB),
    "NvidiaL4": MachineShape("GPU L4 x4", DEFAULT_RAM, 22 * GB),
    "NvidiaL4X1": MachineShape("GPU L4", DEFAULT_RAM, 22 * GB),
    "NvidiaH100": MachineShape("GPU H100", DEFAULT_RAM, 80 * GB),
    "NvidiaRtxPro6000": MachineShape("GPU RTX Pro 6000", DEFAULT_RAM, 96 * GB),
}


def machine_shape(shape: str | None) -> MachineShape:
    """The memory of a ``machine_shape`` (None: a CPU session); unknown shapes (TPUs) get the CPU's RAM."""
    return MACHINE_SHAPES.get(shape or "none", MachineShape(shape or "CPU", DEFAULT_RAM, None))


@dataclass(frozen=True)
class Limits:
    """What the run is judged against. Without ``hidden_rows``/``rows_run`` time is not scaled."""

    time_limit_seconds: float | None = None
    ram_bytes: int | None = None
    gpu_bytes: int | None = None
    rows_run: int | None = None
    hidden_rows: int | None = None
    shape_has_gpu: bool = False  # a step needing CUDA on a GPU-less machine is "not rehearsed", not a failure
    layout: Layout = Layout.CURRENT

    @property
    def scale(self) -> float:
        if self.rows_run and self.hidden_rows:
            return self.hidden_rows / self.rows_run
        return 1.0


@dataclass(frozen=True)
class Judgement:
    """A run judged: Kaggle's verdict (a ``vocabulary.Verdict`` value, or the name Kaggle's report gave), why, and the
    failure's detail (traceback, step table) when there is one."""

    name: str
    reason: str = ""
    detail: str | None = None

    @property
    def ok(self) -> bool:
        return self.name == OK


def projected_seconds(result: ExecutionResult, limits: Limits) -> float:
    """The run's time at the hidden test's size.

    The steps (inference, recorded by kkb's runtime) scale with the rows; the rest of the run
    (kernel start, installs, model loading outside steps) does not. Without step records the whole
    run is scaled, which over-estimates: a safe error for a time limit.
    """
    if limits.scale == 1.0:
        return result.wall_seconds
    step_seconds = sum(float(step.get("seconds") or 0.0) for step in result.steps)
    if step_seconds <= 0 or step_seconds > result.wall_seconds:
        return result.wall_seconds * limits.scale
    return (result.wall_seconds - step_seconds) + step_seconds * limits.scale


@dataclass(frozen=True)
class FormJudging:
    """How Kaggle judges a failure of one kernel form."""

    where: Callable[[ExecutionResult], str]  # where the failure happened, in words
    # Kaggle's doc: "Notebook Threw Exception ... is currently only possible with scripts (not notebooks)": a script's
    # exception fails the run whatever file it left; a notebook's is judged by the file it left.
    exception_fails_run: bool


FORM_JUDGING: dict[KernelForm, FormJudging] = {
    KernelForm.NOTEBOOK: FormJudging(lambda result: f"cell {result.failed_cell}" if result.failed_cell is not None
                                     else "the notebook", exception_fails_run=False),
    KernelForm.SCRIPT: FormJudging(lambda result: "the script", exception_fails_run=True),
}


def judge(result: ExecutionResult, *, kernel_type: KernelForm | str, submission_file: str | Path,
          sample_submission: Path, id_column: str, target_columns: Sequence[str],
          limits: Limits | None = None, column_types: Mapping[str, str] | None = None, kernel_file: str | None = None,
          projected: float | None = None, float_targets: bool | None = None) -> Judgement:
    """Kaggle's verdict for this run, with the reason Kaggle would not give.

    ``submission_file`` is the name Kaggle looks for in the working dir (the competition's, usually
    ``submission.csv``) or a full path there; ``kernel_file`` the name the kernel was told to write,
    when it differs (its file is then not found, as on Kaggle). ``limits`` (kkb's addition) enables
    the projected timeout and compute checks; ``projected`` replaces the proportional projection
    (``builder.rehearse.projection``'s fit). ``float_targets``: the metric's word on fractional values in a
    column the sample holds as integers (:func:`builder.kkb_runtime.metrics.scores_floats`).
    """
    limits = limits or Limits()
    form = KernelForm(kernel_type)  # kernel-metadata's kernel_type: "notebook" or "script"
    failure = _failure(result, form)
    checks: tuple[Callable[[], Judgement | None], ...] = (
        lambda: _timed_out(result),
        lambda: _compute(result, limits),
        lambda: _not_rehearsed(result, limits),
        lambda: _exception(result, form, failure),
        lambda: _projected_timeout(result, limits, projected),
        lambda: _submission(result, submission_file, sample_submission, id_column, target_columns, failure, column_types,
                            kernel_file, limits.layout, float_targets),
    )
    for check in checks:
        verdict = check()
        if verdict is not None:
            return verdict
    name = Path(submission_file).name
    if failure:
        return Judgement(OK, f"{name} is valid, so Kaggle scores it, although the notebook failed: {failure}",
                       _failure_detail(result))
    return Judgement(OK, f"{name} matches the sample submission", None)


def _timed_out(result: ExecutionResult) -> Judgement | None:
    """Killed at its timeout: Kaggle's ``Notebook Timeout``, unless only the machine's load made it that slow
    (:mod:`builder.run.deadlines`: then ``Not Rehearsed``, with the CPU time and the wait for a CPU)."""
    check = result.time_limit_check
    if not result.timed_out:  # ended in the time the load took from it, past its limit by the wall clock only
        return Judgement(NOT_REHEARSED, check.reason(), _failure_detail(result)) if check and check.by_load else None
    if check is not None and check.by_load:
        return Judgement(NOT_REHEARSED, check.reason(), _failure_detail(result))
    where = f" in cell {result.failed_cell}" if result.failed_cell is not None else ""
    loaded = f"; {check.note()}" if check is not None and check.loaded else ""
    return Judgement(TIMEOUT, f"killed after {duration_text(result.wall_seconds)}{where}: {result.evalue}{loaded}",
                     _failure_detail(result))


def _compute(result: ExecutionResult, limits: Limits) -> Judgement | None:
    died = out_of_memory(result)
    if died is not None:
        what, peak = died
        ram = f"; the machine shape has {size_text(limits.ram_bytes)} of RAM" if limits.ram_bytes else ""
        enforced = (f" (enforced here on the whole run: {size_text(result.memory_limit_bytes)}, {result.memory_accounting})"
                    if result.memory_limit_bytes and result.memory_accounting != MemoryAccounting.NONE else " (no memory limit was enforced here)")
        return Judgement(COMPUTE, f"{what} at a peak of {size_text(peak)}{ram}{enforced}", _failure_detail(result))
    disk = disk_overflow(result) or disk_full(result)
    if disk is not None:
        return Judgement(COMPUTE, disk, _step_table(result))
    if limits.ram_bytes and result.peak_rss_bytes > limits.ram_bytes:
        return Judgement(COMPUTE, f"peak memory {size_text(result.peak_rss_bytes)} (RSS of the kernel and its processes) "
                                f"> {size_text(limits.ram_bytes)} of RAM on the machine shape", _step_table(result))
    if limits.gpu_bytes and result.peak_gpu_bytes and result.peak_gpu_bytes > limits.gpu_bytes:
        return Judgement(COMPUTE, f"peak GPU memory {size_text(result.peak_gpu_bytes)} > {size_text(limits.gpu_bytes)} per GPU "
                                f"on the machine shape", _step_table(result))
    return None


def _not_rehearsed(result: ExecutionResult, limits: Limits) -> Judgement | None:
    why = not_rehearsed(result, limits.shape_has_gpu)
    return Judgement(NOT_REHEARSED, why, _failure_detail(result)) if why else None


def _exception(result: ExecutionResult, form: KernelForm, failure: str | None) -> Judgement | None:
    if not FORM_JUDGING[form].exception_fails_run or not failure:
        return None
    beside = skew_beside(result)
    return Judgement(THREW, failure + (f"; {beside}" if beside else ""), _failure_detail(result))


def _projected_timeout(result: ExecutionResult, limits: Limits, fitted: float | None = None) -> Judgement | None:
    if not limits.time_limit_seconds or not result.ok:
        return None  # a run that failed early says nothing about the time a full run takes
    projected = fitted if fitted is not None else projected_seconds(result, limits)
    if projected <= limits.time_limit_seconds:
        return None
    if fitted is not None:
        basis = (f"projected {duration_text(projected)} for {limits.hidden_rows} hidden rows from a fit of fixed + per-row "
                 f"time (measured {duration_text(result.wall_seconds)} for {limits.rows_run} rows)")
    elif limits.scale != 1.0:
        basis = (f"projected {duration_text(projected)} for {limits.hidden_rows} hidden rows "
                 f"(measured {duration_text(result.wall_seconds)} for {limits.rows_run} rows)")
    else:
        basis = f"the run took {duration_text(projected)}"
    return Judgement(TIMEOUT, f"{basis} > the competition's limit of {duration_text(limits.time_limit_seconds)}", _step_table(result))


def _submission(result: ExecutionResult, submission_file: str | Path, sample_submission: Path, id_column: str,
                target_columns: Sequence[str], failure: str | None,
                column_types: Mapping[str, str] | None = None, kernel_file: str | None = None,
                layout: Layout = Layout.CURRENT, float_targets: bool | None = None) -> Judgement | None:
    path = result.working_dir / submission_file
    submission_file = path.name
    if not path.is_file():
        if failure:
            why = [why for why in (layout_mismatch(result, layout), _network_reason(result), skew_beside(result)) if why]
            return Judgement(CSV_NOT_FOUND, f"the notebook stopped before writing {submission_file}: {failure}"
                           + "".join(f"; {text}" for text in why), _failure_detail(result))
        if kernel_file and kernel_file != submission_file and (result.working_dir / kernel_file).is_file():
            return Judgement(CSV_NOT_FOUND, f"the run wrote {kernel_file} ([submission] file), but Kaggle looks for "
                                          f"{submission_file} in /kaggle/working: the competition declares no other name "
                                          f"(set [competition] submission_file only if it does)", None)
        return Judgement(CSV_NOT_FOUND, f"the run finished but wrote no {submission_file} in /kaggle/working "
                                      f"(it wrote: {_listing(result.working_dir)})", None)
    problems = submission_file_problems(path, Path(sample_submission), id_column, target_columns, column_types, float_targets)
    if problems:
        detail = None
        if failure:
            detail = f"the notebook also failed (Kaggle scores the file it left): {failure}\n{_failure_detail(result) or ''}".rstrip()
        return Judgement(SCORING_ERROR, "; ".join(problems), detail)
    return None


def submission_problems(submission: pd.DataFrame, sample: pd.DataFrame, id_column: str,
                        target_columns: Sequence[str] = (), column_types: Mapping[str, str] | None = None,
                        float_targets: bool | None = None) -> list[str]:
    """Every reason Kaggle's scorer would refuse ``submission`` (kkb's runtime checks the same)."""
    return check_submission(submission, sample, id_column, list(target_columns), column_types=column_types,
                            float_targets=float_targets)


def submission_file_problems(path: Path, sample_path: Path, id_column: str, target_columns: Sequence[str] = (),
                             column_types: Mapping[str, str] | None = None, float_targets: bool | None = None) -> list[str]:
    """:func:`submission_problems` for files; an unreadable file is a problem too."""
    import pandas as pd
    sample = pd.read_csv(sample_path, dtype={id_column: str})
    try:
        submission = pd.read_csv(path, dtype={id_column: str}) if path.suffix != ".parquet" else pd.read_parquet(path)
    except Exception as exc:
        return [f"{path.name} is not a readable table: {exc}"]
    return submission_problems(submission, sample, id_column, target_columns, column_types, float_targets)


# --- what went wrong, in words ------------------------------------------------------------------

_STEP = re.compile(r"step '([^']+)'")
_OLD_INPUT = re.compile(r"/input/(?!competitions/|datasets/|models/|notebooks/)([A-Za-z0-9][\w.-]*)")


def failing_step(result: ExecutionResult) -> str | None:
    """The kkb step that failed, from the runtime's error (``step 'name' failed ...``)."""
    for text in (result.evalue, result.traceback_tail):
        match = _STEP.search(text or "")
        if match:
            return match.group(1)
    return None


def _failure(result: ExecutionResult, form: KernelForm = KernelForm.NOTEBOOK) -> str | None:
    if result.ok:
        return None
    where = FORM_JUDGING[form].where(result)
    step = failing_step(result)
    where += f" (step '{step}')" if step else ""
    lines = (result.evalue or "").strip().splitlines()
    if not lines:
        return f"{result.ename} in {where}"
    # kkb's SubmissionError lists its reasons as "  - ..." lines: they are the point, keep them.
    bullets = [line.strip()[2:] for line in lines[1:] if line.strip().startswith("- ")]
    return f"{result.ename} in {where}: {lines[0]}" + (f" {'; '.join(bullets)}" if bullets else "")


def _network_reason(result: ExecutionResult) -> str | None:
    hosts = blocked_network(result.root)
    return f"blocked network access: {', '.join(hosts[:3])}" if hosts else None


def _failure_detail(result: ExecutionResult) -> str | None:
    parts: list[str] = []
    hosts = blocked_network(result.root)
    if hosts:
        parts.append("blocked network access (internet is off in code competitions; ship files in a dataset): "
                     + ", ".join(hosts[:5]))
    old = _OLD_INPUT.search(f"{result.evalue or ''}\n{result.traceback_tail or ''}")
    if old:
        parts.append(f"it read input/{old.group(1)}, the old input layout; Kaggle now mounts competitions at "
                     f"input/competitions/<slug> and datasets at input/datasets/<owner>/<slug>: resolve paths "
                     f"with kkb_runtime.inputs or $KKB_COMPETITION_DIR")
    if result.traceback_tail:
        parts.append(result.traceback_tail)
    return "\n".join(parts) or None


def _step_table(result: ExecutionResult) -> str | None:
    if not result.steps:
        return None
    rows = [f"{step.get('name', '?')}: {float(step.get('seconds') or 0):.1f} s, "
            f"{size_text(int(step.get('peak_rss_bytes') or 0))}" for step in result.steps]
    return "steps: " + "; ".join(rows)


def _listing(folder: Path, limit: int = 10) -> str:
    names = sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()) if folder.is_dir() else []
    if not names:
        return "nothing"
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")


__all__ = ["COMPUTE", "CSV_NOT_FOUND", "NOT_REHEARSED", "OK", "SCORING_ERROR", "THREW", "TIMEOUT", "VERDICTS", "Limits", "MachineShape",
           "Judgement", "failing_step", "judge", "machine_shape", "projected_seconds", "submission_file_problems",
           "submission_problems"]
