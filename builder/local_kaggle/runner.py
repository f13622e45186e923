"""The seam between the local Kaggle and whatever executes a kernel.

:class:`SandboxRunner` is the real thing: the dry run's Kaggle-like sandbox, a notebook or a script each run as
Kaggle runs that form (``builder.run.forms.execute_kernel``), and its verdicts (``builder.rehearse.verdict.judge``).
Tests pass a fake :class:`KernelRunner` instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from builder.kkb_runtime.vocabulary import Verdict
from builder.rehearse.verdict import Judgement, Limits, judge
from builder.rehearse.verdict import machine_shape as shape_of
from builder.run.execute import ExecutionResult
from builder.run.forms import execute_kernel
from builder.run.sandbox import Mount, SandboxSpec


@dataclass(frozen=True)
class RunRequest:
    notebook: Path                        # the kernel's code as pushed: an .ipynb, or a script (kernel_type "script")
    mounts: tuple[Mount, ...]
    rerun: bool                           # the scoring rerun: KAGGLE_IS_COMPETITION_RERUN is set
    timeout_seconds: float | None
    root: Path                            # the sandbox root; the kernel's working dir is root/"working"
    kernel_type: str = "notebook"
    visible: tuple[Path, ...] = ()        # host folders the kernel reads at their own paths (internet-on kernels)


@dataclass(frozen=True)
class RunResult:
    ok: bool
    timed_out: bool
    working_dir: Path                     # what the run left in /kaggle/working: the session's output
    log: list[dict[str, Any]]             # Kaggle's log shape: {"stream_name", "time", "data"}
    failure: str | None = None            # one line for failureMessage when not ok
    execution: Any = field(default=None, compare=False)  # the executor's own result, for the judge


class KernelRunner(Protocol):
    def run(self, request: RunRequest) -> RunResult:
        """Execute the notebook in a fresh sandbox; never raises for a failing kernel (that is ``ok=False``)."""
        ...

    def judge(self, result: RunResult, *, kernel_type: str, submission_file: Path, sample_submission: Path,
              id_column: str, target_columns: Sequence[str], machine_shape: str | None = None,
              column_types: dict[str, str] | None = None) -> Judgement:
        """Kaggle's verdict on a scoring rerun's output: OK or an error description.

        ``machine_shape`` (the kernel's, None for CPU) sets the memory the run may have used.
        """
        ...


class InstantRunner:
    """Every kernel run succeeds at once with no output: for what is about uploads and the wire
    protocol (push tests, the push benchmark), where executing notebooks would only add time."""

    def run(self, request: RunRequest) -> RunResult:
        working = request.root / "working"
        working.mkdir(parents=True, exist_ok=True)
        return RunResult(ok=True, timed_out=False, working_dir=working, log=[])

    def judge(self, result: RunResult, **kwargs: Any) -> Judgement:
        return Judgement(Verdict.OK.value)


class SandboxRunner:
    """Runs kernels with the dry run's sandbox (``execute_kernel`` per kernel form, and ``judge``)."""

    def run(self, request: RunRequest) -> RunResult:
        spec = SandboxSpec(
            mounts=request.mounts,
            rerun=request.rerun,
            timeout_seconds=request.timeout_seconds,
            visible=request.visible,
        )
        result = execute_kernel(request.notebook, request.kernel_type, spec, request.root)
        return RunResult(
            ok=bool(result.ok), timed_out=bool(result.timed_out), working_dir=Path(result.working_dir),
            log=list(result.log), failure=None if result.ok else _failure_line(result), execution=result,
        )

    def judge(self, result: RunResult, *, kernel_type: str, submission_file: Path, sample_submission: Path,
              id_column: str, target_columns: Sequence[str], machine_shape: str | None = None,
              column_types: dict[str, str] | None = None) -> Judgement:
        # The rerun really ran on the hidden test under the real time limit: only memory is checked
        # against the machine shape; nothing is projected.
        shape = shape_of(machine_shape)
        return judge(result.execution, kernel_type=kernel_type, submission_file=submission_file,
                     sample_submission=sample_submission, id_column=id_column, target_columns=list(target_columns),
                     limits=Limits(ram_bytes=shape.ram_bytes, gpu_bytes=shape.gpu_bytes), column_types=column_types)


def _failure_line(result: ExecutionResult) -> str:
    if result.timed_out:
        return f"{Verdict.TIMEOUT.value}: the run exceeded its time limit"
    if result.ename:
        where = f" (cell {result.failed_cell})" if result.failed_cell is not None else ""
        return f"{result.ename}: {result.evalue}{where}"
    return "The notebook failed"
