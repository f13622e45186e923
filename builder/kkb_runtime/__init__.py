"""kkb's kernel-side runtime: shipped in the code dataset, imported by the rendered notebook.

Only the standard library at import time: every module imports pandas and numpy inside the functions that use
them. :func:`start` reads the sample submission, pandas' import included (~0.4 s), in a background thread: a
scoring rerun launches its first step meanwhile (a step's own process start takes seconds on another core), and the
run waits for the sample where it first needs it. torch, timm and albumentations are imported inside the functions
that need them, so the fast-commit path stays fast. Never imports ``builder``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import commit, features, install, metrics, postprocess, preload, prerun, rehearsal, rounding, submission  # noqa: F401  (install: the notebook calls kkb.install)
from .config import KernelConfig
from .config_reader import load_config
from .inputs import InputNotFound, Inputs, find_input, resolve_inputs
from .postprocess import Context as PostprocessContext
from .steps import StepFailed, StepResult, record_steps, run_step
from .submission import SubmissionError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["InputNotFound", "KernelRun", "find_input", "StepFailed", "SubmissionError", "start"]

class SampleRead:
    """The sample submission, read with pandas (its import included) in a background thread; :meth:`frame` waits
    for it and raises what the read raised, where the run first needs the sample."""

    def __init__(self, path: Path, id_column: str, column_types: Mapping[str, str]) -> None:
        self._frame: pd.DataFrame | None = None
        self._error: BaseException | None = None
        self._thread = preload.in_background(lambda: self._read(path, id_column, column_types), "kkb-sample")

    def _read(self, path: Path, id_column: str, column_types: Mapping[str, str]) -> None:
        try:
            self._frame = submission.retype_sample(submission.read_sample(path, id_column), column_types, id_column)
        except BaseException as exc:  # re-raised in the run's own thread by frame()
            self._error = exc

    def failed(self) -> BaseException | None:
        """What the read raised, if it has ended so (never waits)."""
        return None if self._thread.is_alive() else self._error

    def frame(self) -> pd.DataFrame:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._frame is not None
        return self._frame


@dataclass
class KernelRun:
    """The state one notebook run carries from cell to cell."""

    config: KernelConfig
    inputs: Inputs
    sample_read: SampleRead  # the sample submission, read in the background from start()
    finished: bool = False
    decision: commit.FastCommitDecision | None = None
    steps: list[StepResult] = field(default_factory=list)
    predictions: pd.DataFrame | None = None
    written: Path | None = None
    started: float = field(default_factory=time.perf_counter)
    discretised: list[str] = field(default_factory=list)  # columns a post-processing function discretised
    rehearsal_report: rehearsal.RehearsalRecorder | None = None  # kkb dry-run --on-kaggle: report.json as the run goes
    column_rounding: list[rounding.ColumnRounding] = field(default_factory=list)  # per float column: decimals and ties

    @property
    def sample(self) -> pd.DataFrame:
        """The sample submission (waits for its background read)."""
        return self.sample_read.frame()

    def _sample_readable(self) -> None:
        """A sample that could not be read fails the run now, not after every step (the read runs meanwhile)."""
        failed = self.sample_read.failed()
        if failed is not None:
            raise failed

    @property
    def id_column(self) -> str:
        return self.config.submission.id_column

    @property
    def targets(self) -> list[str]:
        return submission.target_columns(self.sample, self.id_column, self.config.submission.target_columns)

    @property
    def prediction_columns(self) -> list[str]:
        """What the steps write and combine averages: ``[submission] prediction_columns``, else the targets."""
        return list(self.config.submission.prediction_columns or self.targets)

    @property
    def metric(self) -> metrics.MetricName:
        """``[competition] metric`` (none set: no metric-specific rounding or check)."""
        return metrics.parse_metric(self.config.competition.metric)

    @property
    def submission_path(self) -> Path:
        return self.inputs.working / self.config.submission.file

    def fast_commit(self) -> commit.FastCommitDecision:
        """Decide, and for ``write = "sample"`` write the sample's own (valid) file and finish."""
        # A scoring rerun decides without the sample: its first step starts while pandas loads (SampleRead).
        self.decision = commit.decide(self.config.fast_commit, lambda: len(self.sample))
        print(f"[kkb] {self.decision.reason}", flush=True)
        if self.rehearsal_report is not None:
            self.rehearsal_report.fast_commit = self.decision.reason
        if self.decision.fast and self.decision.write == "sample":
            self.predictions = self.sample.copy()
            self.check_and_write()
        return self.decision

    def run_steps(self) -> list[StepResult]:
        if self.finished:
            return self.steps
        out_dir = self.inputs.working / "kkb_steps"
        out_dir.mkdir(parents=True, exist_ok=True)
        limit = self.decision.row_limit if self.decision and self.decision.fast else None
        with self._stage("steps"), features.feature_cache(self.inputs.working.parent):  # shared feature tables
            for step in self.config.steps:
                self._sample_readable()
                self.steps.append(run_step(step, self.inputs, self.config.path, out_dir, limit))
                record_steps(self.steps, self.inputs.working)
                print(f"[kkb] step {step.name}: {self.steps[-1].seconds:.1f} s", flush=True)
                self._stage_done("steps")
        return self.steps

    def combine(self) -> pd.DataFrame:
        if self.finished:
            return self.predictions
        with self._stage("combine"):
            columns = self.prediction_columns
            groups = [list(step.columns or columns) for step in self.config.steps]
            outputs = [(result.name, submission.read_step_output(Path(result.output), result.name, self.id_column, own), own)
                       for result, own in zip(self.steps, groups, strict=True)]
            weights = [step.weight for step in self.config.steps]
            self.predictions = submission.combine_groups(outputs, self.id_column, columns,
                                                         self.config.submission.combine, weights)
            if not self.config.postprocess:  # with post-processing, the sample's rows are filled in after it
                self.predictions = self._fill_from_sample(self.predictions)
        return self.predictions

    def postprocess(self) -> pd.DataFrame:
        """The ``[[postprocess]]`` stages on the combined frame: argmax, threshold, clip, your function."""
        if not self.finished:
            with self._stage("postprocess"):
                processed = postprocess.apply(self.predictions, self.config.postprocess, self.id_column,
                                              self.prediction_columns, self.postprocess_context())
                self.discretised = list(processed.attrs.get(postprocess.DISCRETISED) or [])
                self.predictions = self._fill_from_sample(processed)
        return self.predictions

    def postprocess_context(self) -> PostprocessContext:
        """What a post-processing function gets besides the frame (kkb_runtime.postprocess.Context)."""
        attached = {item.name: path for item in self.config.inputs
                    if (path := _attached(item.name, self.config)) is not None}
        return postprocess.Context(weights_dir=self.inputs.weights, code_dir=self.inputs.code,
                                   competition_dir=self.inputs.competition, inputs=attached, config=self.config,
                                   steps={result.name: Path(result.output) for result in self.steps},
                                   id_column=self.id_column, id_type=postprocess.id_type(self.sample[self.id_column]))

    def _fill_from_sample(self, combined: pd.DataFrame) -> pd.DataFrame:
        """With the fast commit's first-rows mode, the rest of the rows keep the sample's values."""
        if not (self.decision and self.decision.fast and self.decision.row_limit):
            return combined
        full = self.sample.copy().set_index(self.id_column)
        full.loc[combined[self.id_column], self.targets] = combined.set_index(self.id_column)[self.targets].to_numpy()
        return full.reset_index()

    def round(self) -> pd.DataFrame:
        """``[submission] decimals``, except where rounding would merge the predictions a rank metric ranks
        (:mod:`.rounding`): such a column keeps the decimals it needs, and the notebook says so."""
        if not self.finished:
            with self._stage("round"):
                floats = [c for c in self.targets
                          if c not in self.sample.columns or submission.column_kind(self.sample[c]) == "float"]
                unrounded = rounding.unrounded_columns(self.config.postprocess, self.config.submission.unrounded,
                                                       self.targets)
                before = self.predictions
                self.predictions, self.column_rounding = rounding.round_safely(
                    self.predictions, self.targets, self.config.submission.decimals, self.metric, floats, unrounded,
                    self.discretised)  # a function's own discretised columns stay as it wrote them
                said = rounding.summary(self.column_rounding)
                if said:
                    print(f"[kkb] {said}", flush=True)
                rounding.record_rounding(self.column_rounding, self.inputs.working)
                if self.column_rounding:
                    rounding.keep_unrounded(before, self.inputs.working.parent / "temp")
        return self.predictions

    def check_and_write(self) -> Path:
        if self.finished and self.written is not None:
            return self.written
        with self._stage("write"):
            frame = submission.align_to_sample(self.predictions, self.sample, self.id_column)
            frame = submission.cast_like_sample(frame, self.sample, self.targets)
            problems = submission.check_submission(frame, self.sample, self.id_column, self.targets,
                                                   column_types=self.config.submission.column_types,
                                                   float_targets=metrics.scores_floats(self.metric))
            if problems:
                raise SubmissionError(problems, file=self.submission_path.name)
            self.written = submission.write_submission(frame[list(self.sample.columns)], self.submission_path)
            self._check_metric(frame)
        self.finished = True
        print(f"[kkb] wrote {self.written} ({len(frame)} rows) in {time.perf_counter() - self.started:.1f} s", flush=True)
        if self.rehearsal_report is not None:
            self.rehearsal_report.succeeded(len(frame))
        return self.written

    def _check_metric(self, frame: pd.DataFrame) -> None:
        """The metric's checks (:mod:`.metrics`) on the written file. In the scoring rerun a failure raises
        after the file is written: Kaggle scores it and fails ("Submission Scoring Error"), as the dry run
        says. The commit run is not scored: there they are warnings (the fast commit's sample is not checked)."""
        if self.decision is not None and self.decision.fast and self.decision.write == "sample":
            return
        sample_labels = {column: labels for column, labels in metrics.label_sets(self.sample, self.targets).items()
                         if len(labels) > 1}  # one placeholder value says nothing about the label set
        findings = metrics.check_predictions(self.metric, frame, self.targets, labels=sample_labels,
                                             labels_from="the sample submission")
        for finding in findings:
            if not finding.failure or not commit.is_rerun():
                print(f"[kkb] warning: {self.metric.label}: {finding.message}", flush=True)
        failed = metrics.failures(findings) if commit.is_rerun() else []
        if failed:
            raise submission.MetricCheckError([f"{self.metric.label}: {finding.message}" for finding in failed],
                                              file=self.submission_path.name)

    @contextlib.contextmanager
    def _stage(self, name: str) -> Iterator[None]:
        """In a rehearsal, a failure here is the verdict: written to report.json before it propagates."""
        if self.rehearsal_report is None:
            yield
            return
        self.rehearsal_report.update(name)
        try:
            yield
        except Exception as exc:
            self.rehearsal_report.steps = rehearsal.step_records(self.steps)
            self.rehearsal_report.failed(exc)
            raise

    def _stage_done(self, name: str) -> None:
        if self.rehearsal_report is not None:
            self.rehearsal_report.update(name, rehearsal.step_records(self.steps))

    def summary(self) -> dict[str, Any]:
        return {"submission": str(self.written) if self.written else None,
                "fast_commit": self.decision.fast if self.decision else None,
                "steps": [asdict(result) for result in self.steps]}


def _attached(name: str, config: KernelConfig) -> Path | None:
    try:
        return find_input(name, config=config)
    except InputNotFound:
        return None


def start(code_dir: Path | str | None = None) -> KernelRun:
    """Load ``kkb_kernel.json`` from the code dataset and resolve every input.

    With a rehearsal file attached for this kernel (``kkb dry-run --on-kaggle``), the run becomes the
    rehearsal of the scoring rerun (:mod:`.rehearsal`).
    """
    config = load_config(code_dir)
    inputs = resolve_inputs(config)
    inputs.working.mkdir(parents=True, exist_ok=True)
    prerun.before_the_kernel(config, inputs.working)  # the image recorded; in kkb's sandbox, Kaggle's pre-run installs
    found = rehearsal.find_rehearsal(config)
    if found is not None:
        inputs = rehearsal.begin(found, config, inputs)
    sample = SampleRead(inputs.competition / config.competition.sample_submission, config.submission.id_column,
                        config.submission.column_types)
    print(inputs.describe(), flush=True)
    run = KernelRun(config=config, inputs=inputs, sample_read=sample)
    if found is not None:
        run.rehearsal_report = rehearsal.recorder(found, config, inputs, len(run.sample))
    return run
