"""Rehearsal mode: the same notebook, run on Kaggle's machines as the scoring rerun, never submitted.

``kkb dry-run --on-kaggle`` pushes a private *rehearsal kernel* whose notebook is the kernel's own
rendered notebook. What makes it a rehearsal is one small file, ``kkb_rehearsal.json``, in a tiny
dataset that only the rehearsal kernel attaches (the code dataset stays byte for byte the one the
real kernel reads, so a real run can never find the file and turn into a rehearsal)::

    {"format": 1, "kernel": "<owner>/<the real kernel's slug>", "scenario": "rerun", "scale": N}

It is accepted only when ``kernel`` names the kernel of this code dataset's ``kkb_kernel.json``.
With it, :func:`begin` (called by ``kkb_runtime.start``):

- sets ``KAGGLE_IS_COMPETITION_RERUN`` for the notebook and its steps: the fast commit does not
  trigger and every step runs, as in the scoring rerun;
- with ``scale`` > 1 replicates the public test N times under new ids into ``/kaggle/temp`` (as the
  local dry run's ``--rerun-scale``, :mod:`.scale`), and the steps read that copy;
- writes ``/kaggle/working/report.json`` at once (``status: running``), after each step, and at the
  end with the verdict: ``OK`` once the checked file is written, or the failure in Kaggle's words
  (the exception, the failing step, the submission check's problems).

A run that dies where the runtime cannot see it (a crash in another cell, Kaggle's time limit)
leaves ``status: running``: the client then shows the log's tail instead of a verdict.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from . import commit, timing
from .config import KernelConfig
from .inputs import Inputs, kaggle_root
from .references import StandInConfig
from .scale import scale_competition_data
from .steps import StepResult
from .vocabulary import Verdict

REHEARSAL_FILE = "kkb_rehearsal.json"
REPORT_FILE = "report.json"
FORMAT = 1
SCENARIOS = ("rerun",)
# Kaggle's verdict names, from the one vocabulary the dry run's judge uses too.
OK = Verdict.OK
CSV_NOT_FOUND = Verdict.CSV_NOT_FOUND
THREW = Verdict.THREW
SCORING_ERROR = Verdict.SCORING_ERROR
TRACEBACK_LINES = 20


class RehearsalFileError(ValueError):
    """``kkb_rehearsal.json`` is there but says something this runtime cannot do."""


@dataclass(frozen=True)
class Rehearsal:
    """What the rehearsal file asks for, and where it was found."""

    kernel: str
    scenario: str
    scale: int
    path: Path


@dataclass
class RehearsalRecorder:
    """Writes ``report.json`` as the run goes; the shape is the dry run's scenario report."""

    rehearsal: Rehearsal
    report_path: Path
    kernel_type: str
    submission_file: str
    rows: int
    started: float = field(default_factory=time.perf_counter)
    stage: str = "start"
    fast_commit: str | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)

    def update(self, stage: str, steps: list[dict[str, Any]] | None = None) -> None:
        self.stage = stage
        if steps is not None:
            self.steps = steps
        self._write(status="running", verdict=None)

    def succeeded(self, rows: int) -> None:
        self.stage = "written"
        self._write(status="done", verdict={"name": OK, "reason": f"{self.submission_file} matches the sample submission "
                                                                 f"({rows} rows, the public test x{self.rehearsal.scale})",
                                            "detail": None})

    def failed(self, exc: BaseException) -> None:
        ename, evalue = type(exc).__name__, str(exc)
        step = getattr(exc, "step", None) or _step_of(evalue)
        where = "the script" if self.kernel_type == "script" else f"the {self.stage} cell"
        where += f" (step '{step}')" if step else ""
        lines = evalue.strip().splitlines()
        # kkb's SubmissionError lists its reasons as "  - ..." lines: they are the point, keep them.
        bullets = [line.strip()[2:] for line in lines[1:] if line.strip().startswith("- ")]
        failure = f"{ename} in {where}" + (f": {lines[0]}" if lines else "") + (f" {'; '.join(bullets)}" if bullets else "")
        tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).splitlines()[-TRACEBACK_LINES:]
        if getattr(exc, "written", False):  # the metric's check failed on a file the notebook wrote: Kaggle scores it
            verdict = {"name": SCORING_ERROR, "reason": "; ".join(getattr(exc, "problems", [])) or failure}
        elif self.kernel_type == "script":
            verdict = {"name": THREW, "reason": failure}
        else:  # Kaggle does not report a notebook's exception: it looks for the file, which is not there
            verdict = {"name": CSV_NOT_FOUND, "reason": f"the notebook stopped before writing {self.submission_file}: {failure}"}
        # A step's error carries the step's own stderr; the notebook's traceback would only show kkb's runtime.
        verdict["detail"] = evalue.strip() if len(lines) > 1 else "\n".join(tail)
        self._write(status="done", verdict=verdict, failing_step=step, ename=ename, evalue=evalue,
                    traceback_tail="\n".join(tail))

    def _write(self, *, status: str, verdict: dict[str, Any] | None, failing_step: str | None = None,
               ename: str | None = None, evalue: str | None = None, traceback_tail: str | None = None) -> None:
        report = {
            "format": FORMAT, "status": status, "stage": self.stage, "scenario": self.rehearsal.scenario,
            "scale": self.rehearsal.scale, "kernel": self.rehearsal.kernel, "verdict": verdict,
            "ok": bool(verdict and verdict["name"] == OK),
            "wall_seconds": round(time.perf_counter() - self.started, 3),
            "peak_rss_bytes": peak_rss_bytes(), "peak_gpu_bytes": _peak_gpu(self.steps),
            "timed_out": False, "failed_cell": None, "failing_step": failing_step, "ename": ename, "evalue": evalue,
            "traceback_tail": traceback_tail, "steps": self.steps, "rows": self.rows, "fast_commit": self.fast_commit,
            "environment": environment(),
        }
        partial = self.report_path.with_name(self.report_path.name + ".partial")
        partial.write_text(json.dumps(report, indent=1, default=str) + "\n")
        partial.replace(self.report_path)  # never a half-written report, even if the kernel is killed


def find_rehearsal(config: KernelConfig, root: Path | None = None) -> Rehearsal | None:
    """The rehearsal file attached to this run for this kernel, or None (a real run)."""
    base = (root or kaggle_root()) / "input"
    if not base.is_dir():
        return None
    for pattern in (f"datasets/*/*/{REHEARSAL_FILE}", f"*/{REHEARSAL_FILE}", f"*/*/{REHEARSAL_FILE}"):
        for path in sorted(base.glob(pattern)):
            found = read_rehearsal(path)
            if found.kernel == config.kernel.id:
                return found
    return None


def read_rehearsal(path: Path) -> Rehearsal:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RehearsalFileError(f"{path}: not a readable rehearsal file: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RehearsalFileError(f"{path}: format {data.get('format') if isinstance(data, dict) else '?'} is not {FORMAT}: "
                                 "the rehearsal was pushed by another kkb version; push it again")
    scenario, scale = data.get("scenario"), data.get("scale")
    if scenario not in SCENARIOS:
        raise RehearsalFileError(f"{path}: scenario {scenario!r} is not one of {', '.join(SCENARIOS)}")
    if not isinstance(scale, int) or isinstance(scale, bool) or scale < 1:
        raise RehearsalFileError(f"{path}: scale {scale!r} must be a whole number >= 1")
    return Rehearsal(kernel=str(data.get("kernel")), scenario=scenario, scale=scale, path=path)


def begin(rehearsal: Rehearsal, config: KernelConfig, inputs: Inputs, root: Path | None = None) -> Inputs:
    """Turn this run into the rehearsal: the rerun variable, the scaled test; returns the inputs to use."""
    os.environ[commit.RERUN_VARIABLE] = "1"  # the notebook and every step it starts see a scoring rerun
    os.environ.setdefault(timing.PROBE_VARIABLE, "3")  # card steps time steady batches (kkb_runtime.timing)
    print(f"[kkb] rehearsal of {rehearsal.kernel}: the scoring rerun on the public test x{rehearsal.scale} "
          f"({rehearsal.path}); never submitted", flush=True)
    if rehearsal.scale == 1:
        return inputs
    dest = (root or kaggle_root()) / "temp" / "kkb-rehearsal-data"
    stated = config.competition.stand_in
    stand_in = StandInConfig(stated.keys, stated.tables, stated.files, stated.id) if stated is not None else None
    scaled = scale_competition_data(inputs.competition, dest, rehearsal.scale, id_column=config.submission.id_column,
                                    sample_submission=config.competition.sample_submission,
                                    test=config.competition.test, fallback="symlink", stand_in=stand_in)
    print(f"[kkb] scaled the public test to {scaled.rows} rows in {scaled.path}; {scaled.description}", flush=True)
    return replace(inputs, competition=scaled.path)


def recorder(rehearsal: Rehearsal, config: KernelConfig, inputs: Inputs, rows: int) -> RehearsalRecorder:
    found = RehearsalRecorder(rehearsal=rehearsal, report_path=inputs.working / REPORT_FILE, kernel_type=str(config.kernel.type),
                              submission_file=config.submission.file, rows=rows)
    found.update("inputs")
    return found


def step_records(results: list[StepResult]) -> list[dict[str, Any]]:
    return [asdict(result) for result in results]


def peak_rss_bytes() -> int:
    """The largest resident set of this process or any step it waited for (ru_maxrss: KiB on Linux)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return int(max(own, children)) * 1024


def environment() -> dict[str, Any]:
    """What the rehearsal ran on, as far as the standard library can tell (the GPU from the steps)."""
    return {"python": platform.python_version(), "platform": platform.platform(), "executable": sys.executable,
            "cpus": os.cpu_count(), "docker_image": os.environ.get("KAGGLE_DOCKER_IMAGE") or None,
            "run_type": os.environ.get("KAGGLE_KERNEL_RUN_TYPE") or None}


def _peak_gpu(steps: list[dict[str, Any]]) -> int | None:
    values = [int(step["peak_gpu_bytes"]) for step in steps if step.get("peak_gpu_bytes")]
    return max(values) if values else None


def _step_of(text: str) -> str | None:
    marker = "step '"
    if marker not in text:
        return None
    return text.split(marker, 1)[1].split("'", 1)[0] or None


__all__ = ["REHEARSAL_FILE", "REPORT_FILE", "Rehearsal", "RehearsalFileError", "RehearsalRecorder", "begin",
           "find_rehearsal", "read_rehearsal", "recorder"]
