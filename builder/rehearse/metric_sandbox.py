"""The competition's metric file scored in a sandbox of its own, never in kkb's process: the dry run's expected score
and the local Kaggle's scorer.

A metric file is Python from the competition (or copied from a notebook nobody has read): kkb runs it as any other
user code, in :func:`builder.run.program.call_program`'s sandbox: no network, no credential, nothing of this machine
but what Kaggle's image has, its folder and the files it scores (copies) read-only. Each call of it (its load, each
part's score, each rounding trial) is bounded (``$KKB_METRIC_SECONDS``, default :data:`METRIC_SECONDS`); what it
prints stays in its sandbox. However it ends, the outcome is one of three:

- scores (each part's, and the rounding's effect on them when the run kept its predictions before rounding);
- the submission's failure (a ``ParticipantVisibleError``, a non-number, NaN): Kaggle's "Submission Scoring Error";
- the metric's own failure (an exception of another kind, ``sys.exit``, a call past its bound, a crash): named, never
  blamed on the submission.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.errors import DryRunError
from builder.kkb_runtime.metric_file import MetricFile
from builder.run.program import ProgramAnswer, ProgramCall, call_program
from builder.run.sandbox import Mount

METRIC_SECONDS = 600.0  # one call of the metric file
METRIC_SECONDS_VARIABLE = "KKB_METRIC_SECONDS"
RUN_SECONDS = 6 * 3600.0  # every call of one scoring together (rounding trials score the file again and again)
GUEST = "builder.rehearse.metric_guest"
METRIC_MOUNT, FILES_MOUNT = "datasets/kkb/metric", "datasets/kkb/scoring"
TAIL_LINES = 3


@dataclass(frozen=True)
class MetricJob:
    """A metric file and what it scores against: the answers, the split's public ids, its keyword arguments."""

    reference: MetricFile
    base_dir: Path  # the folder the setting names the file from (the kernel's, or the competition's)
    answers: Path
    id_column: str
    targets: tuple[str, ...]
    arguments: Mapping[str, Any] = field(default_factory=dict)
    public_ids: Path | None = None


@dataclass(frozen=True)
class MetricOutcome:
    """``expected``: ``{"public", "private", "split"[, "rounding"]}`` or ``{"error"[, "metric_failed"]}`` (with
    ``answers``); ``failures``: the submission's, Kaggle's Submission Scoring Error; ``warnings``: the rest."""

    expected: dict[str, Any]
    failures: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def metric_failed(self) -> bool:
        return bool(self.expected.get("metric_failed"))


def metric_seconds() -> float:
    """``$KKB_METRIC_SECONDS``, else :data:`METRIC_SECONDS`: a positive number of seconds."""
    text = os.environ.get(METRIC_SECONDS_VARIABLE, "").strip()
    if not text:
        return METRIC_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise DryRunError(f"{METRIC_SECONDS_VARIABLE}={text!r} is not a positive number of seconds",
                          hint=f"give the seconds one call of the competition's metric file may take (default {METRIC_SECONDS:g})")
    return value


def score_metric_file(job: MetricJob, submission: Path, *, unrounded: Path | None = None,
                      rounding: Sequence[Mapping[str, Any]] = (), label: str = "") -> MetricOutcome:
    """``submission`` scored by the metric file in its own sandbox (see the module docstring); ``unrounded`` and
    ``rounding`` (the run's records): the rounding judged by the score too."""
    bound = metric_seconds()
    file = (job.base_dir / job.reference.path).resolve()
    if not file.is_file():
        return _metric_failed(job, f"the metric file {file} does not exist")
    files = Path(tempfile.mkdtemp(prefix="kkb-metric-files-"))
    try:
        names = _stage(files, {"submission": submission, "answers": job.answers, "public_ids": job.public_ids,
                               "unrounded": unrounded})
        call = ProgramCall(GUEST, (Mount(file.parent, METRIC_MOUNT), Mount(files, FILES_MOUNT)), call_seconds=bound,
                           run_seconds=RUN_SECONDS)
        answered = call_program(call, lambda where: {
            "file": str(where(METRIC_MOUNT) / file.name), "function": job.reference.function,
            "files": {key: str(where(FILES_MOUNT) / name) for key, name in names.items()},
            "id_column": job.id_column, "targets": list(job.targets), "arguments": dict(job.arguments),
            "rounding": [dict(record) for record in rounding], "label": label or job.reference.text})
    finally:
        shutil.rmtree(files, ignore_errors=True)
    return _outcome(job, answered, bound, file)


def _stage(folder: Path, sources: Mapping[str, Path | None]) -> dict[str, str]:
    """The files the metric reads, linked (or copied) into ``folder``, which the sandbox mounts read-only."""
    names = {}
    for key, source in sources.items():
        if source is None or not Path(source).is_file():
            continue
        name = key + Path(source).suffix
        try:
            os.link(source, folder / name)
        except OSError:
            shutil.copyfile(source, folder / name)
        names[key] = name
    return names


def _outcome(job: MetricJob, answered: ProgramAnswer, bound: float, file: Path) -> MetricOutcome:
    answer, run = answered.answer, answered.run
    if answer is not None and isinstance(answer.get("expected"), dict):
        expected = {**answer["expected"], "answers": str(job.answers)}
        return MetricOutcome(expected, tuple(map(str, answer.get("failures") or ())), tuple(map(str, answer.get("warnings") or ())))
    call = run.timed_out_call or run.open_call
    what = f"{call.subject} ({call.what})" if call is not None else f"the metric file {file.name}"
    if run.timed_out_call is not None:
        said = (f"{what} did not return within {bound:g} s: the competition's metric, not the submission "
                f"({METRIC_SECONDS_VARIABLE}=SECONDS gives a call more time)")
    elif run.timed_out:
        said = f"the metric file {file.name} did not finish scoring within {RUN_SECONDS:g} s"
    else:
        ended = f"crashed ({run.signal})" if run.signal else f"ended the scoring process (exit code {run.returncode})"
        said = f"{what} {ended} without a score: the competition's metric, not the submission{_last_words(run.stderr)}"
    return _metric_failed(job, said)


def _metric_failed(job: MetricJob, said: str) -> MetricOutcome:
    return MetricOutcome({"error": said, "answers": str(job.answers), "metric_failed": True}, (), (said,))


def _last_words(stderr: str) -> str:
    tail = [line.strip() for line in stderr.strip().splitlines() if line.strip()][-TAIL_LINES:]
    return f"; its last words: {' | '.join(tail)}" if tail else ""


__all__ = ["METRIC_SECONDS", "METRIC_SECONDS_VARIABLE", "MetricJob", "MetricOutcome", "metric_seconds",
           "score_metric_file"]
