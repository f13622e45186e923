"""Competitions scored through Kaggle's evaluation API (``kaggle_evaluation``), kernel side.

The competition data ships ``kaggle_evaluation/``; the notebook wraps ``predict`` in the competition's
inference server and calls ``serve()`` in the scoring rerun (a gateway in another container calls
``predict`` batch by batch, and ``serve()`` must be reached within the startup limit, 15 minutes on
Kaggle) or ``run_local_gateway(paths)`` otherwise (the competition's gateway in this process, on the
public test, writing ``submission.parquet``). This module resolves the inputs, puts the competition
folder on ``sys.path``, wraps the user's ``predict`` (rounding, timing, the fast-commit answers) and
picks between the two. What it measured goes to ``kkb_evaluation.json`` in the working dir, where
``kkb dry-run`` reads it.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import commit, prerun, submission
from .config import EvaluationApiSection, FastCommitSection, KernelConfig
from .config_reader import load_config
from .inputs import Inputs, find_competition, find_dataset, working_dir
from .install import SANDBOX_MARKER
from .predict_stats import CallClock, PredictStats, load_now, rows_of, thread_waits

if TYPE_CHECKING:  # imported where used: importing kkb_runtime stays free of them (kkb_runtime/__init__)
    import pandas as pd

STATE_FILE = "kkb_evaluation.json"
WATCH_SECONDS = 0.5  # how often the sandbox's watcher records what the call in flight has cost so far
# The competition folder is the one that ships the package (Kaggle's data may have no sample submission).
COMPETITION_SENTINEL = "kaggle_evaluation"
_IMPORTED = time.time()


class EvaluationSetupError(RuntimeError):
    """The kernel cannot be wired to the competition's inference server (config, predict, fast answers)."""


@dataclass
class EvaluationRun:
    """The state of one notebook run against the competition's inference server."""

    config: KernelConfig
    inputs: Inputs
    settings: EvaluationApiSection
    process_started: float
    decision: commit.FastCommitDecision | None = None
    stats: PredictStats = field(default_factory=PredictStats)
    mode: str | None = None  # "serve" (rerun) or "local" (run_local_gateway)
    serve_seconds: float | None = None
    error: dict[str, Any] | None = None
    submission_rows: int | None = None
    serve_spent: dict[str, Any] | None = None  # the process's CPU time and its wait for a CPU when serve() was reached
    _warned: set[str] = field(default_factory=set)
    _clock: CallClock | None = None

    @property
    def state_path(self) -> Path:
        return self.inputs.working / STATE_FILE

    @property
    def targets(self) -> list[str]:
        return list(self.config.submission.target_columns)

    # --- the fast commit ------------------------------------------------------------------------

    def fast_commit(self) -> commit.FastCommitDecision:
        """Decide as for CSV kernels; what a fast commit means here is in :func:`_decision_reason`."""
        rows = public_rows(self.inputs.competition, self.config, self.settings)
        known_rows = rows if rows is not None else self.config.fast_commit.rows_below
        decision = commit.decide(self.config.fast_commit, lambda: known_rows)
        reason = _decision_reason(decision, self.config.fast_commit, self.settings, rows)
        self.decision = commit.FastCommitDecision(decision.fast, reason, decision.write, decision.row_limit)
        print(f"[kkb] {self.decision.reason}", flush=True)
        self._write_state()
        return self.decision

    # --- predict --------------------------------------------------------------------------------

    def predict_endpoint(self) -> Callable[..., Any]:
        """The function to hand to the inference server: the user's predict, rounded and timed.

        It is named ``predict`` whatever the user's function is called: the relay registers each
        endpoint under its ``__name__`` and the gateway calls "predict".
        """
        user = load_function(self.settings.predict)
        fast = self._fast_answer()
        decimals = self.config.submission.decimals
        sandboxed = bool(os.environ.get(SANDBOX_MARKER))  # the wait for a CPU: read in kkb's sandbox only

        def predict(*args: Any, **kwargs: Any) -> Any:
            index = self.stats.calls
            use_fast = fast is not None and (self.decision is None or self.decision.row_limit is None
                                             or index >= self.decision.row_limit)
            self.stats.started(index)
            self._write_state()
            self._clock = CallClock.start(sandboxed)
            rows = None
            try:
                answer = round_answer((fast if use_fast and fast is not None else user)(*args, **kwargs), decimals, self.targets)
                self._check_finite(answer)
                rows = rows_of(answer)
                return answer
            except BaseException as exc:
                self.error = {"where": f"predict call {index}", "type": type(exc).__name__, "details": str(exc)[:2000]}
                raise
            finally:
                self.stats.finished(index, self._clock.now(), use_fast, rows)
                self._clock = None
                self._after_call(index)

        if sandboxed:
            threading.Thread(target=self._watch, name="kkb-predict-watch", daemon=True).start()

        predict.__name__ = predict.__qualname__ = "predict"
        return predict

    def _watch(self) -> None:
        """While a call runs, record what it has cost so far: one past its deadline is abandoned by the gateway, and
        the dry run judges it by these numbers (builder.run.deadlines)."""
        while True:
            time.sleep(WATCH_SECONDS)
            clock = self._clock
            if clock is not None and self.stats.in_flight_since is not None:
                self.stats.running(clock.now())
                self._write_state()

    def _fast_answer(self) -> Callable[..., Any] | None:
        """What answers the commit run's batches when the fast commit applies: ``fast_predict``, else the sample."""
        if self.decision is None or not self.decision.fast:
            return None
        if self.settings.fast_predict:
            return load_function(self.settings.fast_predict)
        return sample_answer(self.inputs.competition / self.config.competition.sample_submission,
                             self.config.submission.id_column, self.targets)

    def _after_call(self, index: int) -> None:
        seconds = self.stats.first_seconds if index == 0 else self.stats.slowest_seconds
        if index == 0:
            print(f"[kkb] first predict call: {seconds:.2f} s (no deadline on the first call: lazy model loading belongs here)",
                  flush=True)
        timeout = self.settings.response_timeout_seconds
        if index > 0 and timeout and seconds is not None and seconds > timeout and "deadline" not in self._warned:
            self._warned.add("deadline")
            print(f"[kkb] WARNING: predict call {self.stats.slowest_call} took {seconds:.2f} s > the response deadline of "
                  f"{timeout} s: the gateway fails with GRPC_DEADLINE_EXCEEDED", flush=True)
        self._write_state()

    def _check_finite(self, answer: Any) -> None:
        import numpy as np
        import pandas as pd
        if "finite" in self._warned:
            return
        values = answer.select_dtypes("number").to_numpy() if isinstance(answer, pd.DataFrame) else answer
        try:
            finite = bool(np.isfinite(np.asarray(values, dtype=float)).all())
        except (TypeError, ValueError):
            return
        if not finite:
            self._warned.add("finite")
            print("[kkb] WARNING: predict returned NaN or inf; Kaggle's scorer refuses them (Submission Scoring Error)",
                  flush=True)

    # --- serve or run the local gateway ---------------------------------------------------------

    def serve(self, server: Any) -> None:
        """``serve()`` in the scoring rerun (blocks), ``run_local_gateway(paths)`` otherwise."""
        if commit.is_rerun():
            self._serve(server)
        else:
            self._run_local_gateway(server)

    def _serve(self, server: Any) -> None:
        self.mode = "serve"
        self.serve_seconds = time.time() - self.process_started
        load, cpus = load_now()
        self.serve_spent = {"cpu_seconds": round(time.process_time(), 3),
                            "waited_seconds": round(max(thread_waits().values(), default=0.0), 3)
                            if os.environ.get(SANDBOX_MARKER) else None, "load": load, "cpus": cpus}
        limit = self.settings.startup_limit_seconds
        print(f"[kkb] scoring rerun: serve() reached {self.serve_seconds:.1f} s after the kernel started "
              f"(the gateway waits {limit} s for it)", flush=True)
        if limit and self.serve_seconds > limit:
            print(f"[kkb] WARNING: {self.serve_seconds:.0f} s > the startup limit of {limit} s: the gateway fails with "
                  "SERVER_NEVER_STARTED; move slow work (model loading) into the first predict call", flush=True)
        self._write_state()
        server.serve()
        print("[kkb] WARNING: serve() returned in the scoring rerun; Kaggle's serve() blocks until the gateway is done",
              flush=True)

    def _run_local_gateway(self, server: Any) -> None:
        self.mode = "local"
        paths = tuple(str(self.inputs.competition / path) for path in self.settings.gateway_paths)
        self._write_state()
        started = time.perf_counter()
        # The gateway writes submission.parquet in the cwd; on Kaggle that is /kaggle/working.
        with _cwd(self.inputs.working):
            try:
                server.run_local_gateway(paths) if paths else server.run_local_gateway()
            except Exception as exc:
                self.error = gateway_error(exc)
                self._write_state()
                raise
        self.submission_rows = _parquet_rows(self.inputs.working / "submission.parquet")
        self._write_state()
        print(f"[kkb] local gateway: {self.stats.calls} predict calls in {time.perf_counter() - started:.1f} s, "
              f"submission.parquet: {self.submission_rows} rows", flush=True)

    # --- what the dry run reads -----------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        return {"mode": self.mode, "fast_commit": self.decision.fast if self.decision else None,
                "serve_seconds": self.serve_seconds, "serve_spent": self.serve_spent, "predict": vars(self.stats).copy(),
                "submission_rows": self.submission_rows, "error": self.error}

    def _write_state(self) -> None:
        data = {**self.summary(), "process_started": self.process_started,
                "fast_commit_reason": self.decision.reason if self.decision else None,
                "startup_limit_seconds": self.settings.startup_limit_seconds,
                "response_timeout_seconds": self.settings.response_timeout_seconds}
        partial = self.state_path.with_name(STATE_FILE + ".partial")
        try:
            partial.write_text(json.dumps(data, indent=1))
            os.replace(partial, self.state_path)
        except OSError:  # a full disk must not fail a predict call; the record is only for the dry run
            pass


# --- helpers ------------------------------------------------------------------------------------

def start(code_dir: Path | str | None = None) -> EvaluationRun:
    """Load ``kkb_kernel.json``, resolve the inputs, and put the competition folder on ``sys.path``."""
    config = load_config(code_dir)
    settings = config.evaluation_api
    if settings is None:
        raise EvaluationSetupError(f"{config.path}: no evaluation_api settings; rebuild with [submission] kind = 'evaluation-api'")
    weights = find_dataset(config.datasets.weights) if config.datasets.weights else None
    competition = find_competition(config.competition.slug, COMPETITION_SENTINEL)
    inputs = Inputs(code=config.code_dir, weights=weights, competition=competition, working=working_dir())
    inputs.working.mkdir(parents=True, exist_ok=True)
    prerun.before_the_kernel(config, inputs.working)  # the image recorded; in kkb's sandbox, Kaggle's pre-run installs
    # Kaggle does not promise the competition folder is importable; in the current layout it is
    # input/competitions/<slug>, so put it first on the path before `import kaggle_evaluation...`.
    if str(competition) not in sys.path:
        sys.path.insert(0, str(competition))
    os.environ.update(_kernel_env(config, inputs))
    print(inputs.describe(), flush=True)
    return EvaluationRun(config=config, inputs=inputs, settings=settings, process_started=process_start_time())


def _kernel_env(config: KernelConfig, inputs: Inputs) -> dict[str, str]:
    """The variables steps get (docs/ARCHITECTURE.md), for a predict that runs in the notebook's process."""
    env = {"KKB_CODE_DIR": str(inputs.code), "KKB_COMPETITION_DIR": str(inputs.competition),
           "KKB_KERNEL_CONFIG": str(config.path)}
    if inputs.weights is not None:
        env["KKB_WEIGHTS_DIR"] = str(inputs.weights)
    return env


def load_function(reference: str) -> Callable[..., Any]:
    """``"package.module:function"`` from the code dataset."""
    module_name, _, name = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EvaluationSetupError(f"cannot import {module_name} for {reference}: {exc}") from exc
    function = getattr(module, name, None)
    if not callable(function):
        raise EvaluationSetupError(f"{module_name} has no function {name} ({reference})")
    found: Callable[..., Any] = function
    return found


def public_rows(competition: Path, config: KernelConfig, settings: EvaluationApiSection) -> int | None:
    """Rows of the test this run sees: the sample submission, else the first table of ``gateway_paths``."""
    candidates = [competition / config.competition.sample_submission]
    candidates += [competition / path for path in settings.gateway_paths]
    for path in candidates:
        if path.is_file() and path.suffix == ".csv":
            with path.open("rb") as handle:
                return max(sum(1 for _ in handle) - 1, 0)
        if path.is_file() and path.suffix == ".parquet":
            return _parquet_rows(path)
    return None


def _decision_reason(decision: commit.FastCommitDecision, settings: FastCommitSection, evaluation: EvaluationApiSection,
                     rows: int | None) -> str:
    """The runtime's words for the decision; kkb dry-run reads them ("commit run (" = the fast path)."""
    predict = evaluation.predict
    if not settings.enabled:
        return f"fast commit disabled in kernel.toml: {predict} answers every batch"
    if commit.is_rerun():
        return f"{commit.RERUN_VARIABLE} is set: scoring rerun, no fast commit: {predict} answers every batch"
    if rows is None and settings.detect == "env_and_rows":
        return (f"{commit.RERUN_VARIABLE} is absent but the public test's row count is unknown: no fast commit, "
                f"{predict} answers every batch")
    if not decision.fast:
        return (f"{commit.RERUN_VARIABLE} is absent but the public test has {rows} rows "
                f"(>= {settings.rows_below}): no fast commit, {predict} answers every batch")
    source = evaluation.fast_predict or "the sample submission's rows"
    seen = f"public test has {rows} rows" if rows is not None else "detect = env"
    if decision.row_limit:
        return (f"commit run ({commit.RERUN_VARIABLE} absent, {seen}): fast commit, {predict} answers the first "
                f"{decision.row_limit} batches and {source} the rest, through the competition's local gateway")
    return (f"commit run ({commit.RERUN_VARIABLE} absent, {seen}): fast commit, every batch answered by {source} "
            f"through the competition's local gateway; {predict} is not called")


def sample_answer(sample_path: Path, id_column: str, targets: list[str]) -> Callable[..., Any]:
    """A predict that answers each batch with the sample submission's rows for the batch's ids."""
    import pandas as pd
    if not sample_path.is_file():
        raise EvaluationSetupError(f"fast commit: no {sample_path.name} to answer the commit run's batches from; "
                                   "set [evaluation_api] fast_predict or disable [fast_commit]")
    sample = submission.read_sample(sample_path, id_column).set_index(id_column)
    columns = targets or list(sample.columns)

    def answer(*args: Any, **kwargs: Any) -> pd.DataFrame:
        batch = next((value for value in (*args, *kwargs.values())
                      if isinstance(value, pd.DataFrame) and id_column in value.columns), None)
        if batch is None:
            raise EvaluationSetupError(f"fast commit: no argument of predict has the id column '{id_column}', so the "
                                       "sample submission cannot answer it; set [evaluation_api] fast_predict")
        ids = batch[id_column]
        answer = sample.loc[ids.astype(str), columns].reset_index(drop=True)
        answer.insert(0, id_column, ids.to_numpy())  # the batch's ids, in their own type: gateways check them
        return answer

    return answer


def round_answer(answer: Any, decimals: int | None, targets: Sequence[str] = ()) -> Any:
    """Round what predict returned: float noise has failed real scorers. Ids and ints are left alone."""
    import numpy as np
    import pandas as pd
    if decimals is None:
        return answer
    if isinstance(answer, pd.DataFrame):
        columns = [c for c in targets if c in answer.columns] or list(answer.select_dtypes("floating").columns)
        return submission.round_predictions(answer, columns, decimals)
    if isinstance(answer, pd.Series):
        if not pd.api.types.is_float_dtype(answer):
            return answer
        rounded = answer.round(decimals)
        return rounded.mask(rounded == 0, 0.0)  # -0.0 would print as "-0.0"
    if isinstance(answer, (float, np.floating)):
        return type(answer)(round(float(answer), decimals) + 0.0) if math.isfinite(answer) else answer
    if type(answer).__module__.split(".")[0] == "polars":
        return _round_polars(answer, decimals, targets)
    return answer


def _round_polars(answer: Any, decimals: int, targets: Sequence[str]) -> Any:
    import polars as pl

    if isinstance(answer, pl.DataFrame):
        columns = [c for c in targets if c in answer.columns and answer[c].dtype.is_float()]
        selector = pl.col(columns) if columns else pl.col(pl.Float32, pl.Float64)
        return answer.with_columns(selector.round(decimals))
    if isinstance(answer, pl.Series) and answer.dtype.is_float():
        return answer.round(decimals)
    return answer


def gateway_error(exc: BaseException) -> dict[str, Any]:
    """The gateway's error class (``error_type.name``) and details, or the exception's type."""
    error_type = getattr(exc, "error_type", None)
    name = getattr(error_type, "name", None)
    details = getattr(exc, "error_details", None) if name else None
    return {"where": "run_local_gateway", "type": name or type(exc).__name__,
            "details": str(details if details is not None else exc)[:8000]}


def process_start_time() -> float:
    """When this process (the notebook's kernel) started, in epoch seconds: Kaggle's clock for ``serve()``."""
    try:
        stat = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime"))
        return boot + int(stat[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return _IMPORTED  # not Linux: when the runtime was imported, a little later than the kernel start


def _parquet_rows(path: Path) -> int | None:
    import pandas as pd
    if not path.is_file():
        return None
    try:
        return len(pd.read_parquet(path))
    except Exception:
        return None


@contextmanager
def _cwd(folder: Path) -> Iterator[None]:
    previous = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(previous)


__all__ = ["COMPETITION_SENTINEL", "STATE_FILE", "EvaluationRun", "EvaluationSetupError", "PredictStats", "gateway_error",
           "load_function", "round_answer", "sample_answer", "start"]
