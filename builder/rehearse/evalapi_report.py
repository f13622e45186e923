"""What an evaluation-API run said, for people and for the dry run's judge: :class:`EvalApiReport`.

The gateway's ``result.json`` decides (its error class, ``SERVER_NEVER_STARTED``, ``INVALID_SUBMISSION`` with the
expected and received rows, ``GRPC_DEADLINE_EXCEEDED``, ...); kkb's runtime record (``kkb_evaluation.json``) and the
supervisor's explain: the time to ``serve()``, the first and the slowest ``predict`` call against the competition's
limits, each limit with its CPU time and wait for a CPU beside the wall clock (:mod:`builder.run.deadlines`), and
the run's parts as the projection fits them (:func:`predict_steps`). ``builder.rehearse.evalapi`` runs the rerun and
builds the report from these records.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from builder.kkb_runtime.vocabulary import Scenario
from builder.rehearse.projection import DECLARED_FIXED, FIT_KEY, RATE
from builder.rehearse.verdict import OK, SCORING_ERROR, THREW, TIMEOUT
from builder.run.deadlines import LimitCheck, evaluation_checks, tripped_by_load
from builder.run.execute import tail

STATE_FILE = "kkb_evaluation.json"  # written by kkb_runtime.evaluation in the working dir
# Kaggle's gateway error classes (kaggle_evaluation/core/base_gateway.py).
ERROR_CLASSES = ("SERVER_NEVER_STARTED", "SERVER_CONNECTION_FAILED", "SERVER_RAISED_EXCEPTION", "SERVER_MISSING_ENDPOINT",
                 "GATEWAY_RAISED_EXCEPTION", "INVALID_SUBMISSION", "GRPC_DEADLINE_EXCEEDED")
_ROWS = re.compile(r"expected (\d+) rows but received (\d+)")
_CLASS_IN_TEXT = re.compile(r"\b(" + "|".join(ERROR_CLASSES) + r")\b")
# How long a gateway may keep running after the notebook died (Kaggle's fails at once: no container).
# The gateway's errors a busy machine can cause by itself: a slow call, a late serve(), the run's timeout.
LOAD_SENSITIVE = ("GRPC_DEADLINE_EXCEEDED", "SERVER_NEVER_STARTED", "Timeout")
LOG_TAIL_LINES = 20


@dataclass(frozen=True)
class EvalApiReport:
    """What the gateway said, and the two times the competition limits."""

    scenario: Scenario
    succeeded: bool
    error_type: str | None = None  # one of ERROR_CLASSES, or the exception's type when it is not the gateway's
    error_details: str | None = None
    expected_rows: int | None = None
    received_rows: int | None = None
    serve_seconds: float | None = None  # kernel start -> serve() (rerun only)
    startup_limit_seconds: float | None = None
    predict_calls: int = 0
    fast_calls: int = 0
    first_predict_seconds: float | None = None  # no deadline on the first call
    slowest_predict_seconds: float | None = None  # calls after the first
    slowest_call: int | None = None
    slowest_in_flight: bool = False  # the slowest call had not finished when the run ended
    response_timeout_seconds: float | None = None
    predict_seconds_total: float = 0.0
    submission_rows: int | None = None
    notebook_exit: int | None = None  # rerun: the notebook ended by itself (it should block in serve())
    notes: tuple[str, ...] = field(default_factory=tuple)
    # the limits with the CPU time and the wait for a CPU beside the wall clock (builder.run.deadlines)
    limits: tuple[LimitCheck, ...] = ()

    @property
    def ok(self) -> bool:
        return self.succeeded

    @property
    def tripped_by_load(self) -> LimitCheck | None:
        """The limit behind the gateway's error, when only the machine's load passed it."""
        if self.error_type not in LOAD_SENSITIVE:
            return None
        return tripped_by_load(self.limits)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        data["ok"] = self.ok
        data["limits"] = [check.to_json() for check in self.limits]
        return data

    def lines(self) -> list[str]:
        """The report as people read it (the CLI prints these)."""
        head = "gateway: succeeded" if self.succeeded else f"gateway: {self.error_type}: {self.error_details or ''}".rstrip(": ")
        lines = [head]
        if self.expected_rows is not None:
            lines.append(f"  rows: expected {self.expected_rows}, received {self.received_rows}")
        if self.scenario == "rerun":
            lines.append(f"  serve() reached: {_seconds(self.serve_seconds)} after the kernel started "
                         f"(limit {_seconds(self.startup_limit_seconds)})")
        slowest = _seconds(self.slowest_predict_seconds) + (" (still running when the run ended)" if self.slowest_in_flight else "")
        lines.append(f"  predict: {self.predict_calls} calls, first {_seconds(self.first_predict_seconds)} (no deadline), "
                     f"slowest later call {slowest} (deadline {_seconds(self.response_timeout_seconds)})")
        if self.submission_rows is not None:
            lines.append(f"  submission.parquet: {self.submission_rows} rows")
        lines += [f"  note: {note}" for note in self.notes]
        lines += [f"  note: {check.note()}" for check in self.limits if check.loaded]
        return lines


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def rerun_report(limits: tuple[float | None, float | None], supervisor: dict[str, Any], gateway: dict[str, Any],
                 result: dict[str, Any], state: dict[str, Any], texts: dict[str, str], timed_out: bool, timeout: float,
                 submission: Path | None) -> EvalApiReport:
    """Put the records together: the gateway's ``result.json`` decides; the rest explains. ``limits``: the
    competition's (startup, response deadline), where the gateway's own record does not say them."""
    stats = state.get("predict") or {}
    error_type, details = _rerun_error(result, gateway, supervisor, texts, timed_out, timeout)
    expected, received = rows_in(details)
    slowest, in_flight = _slowest(stats, supervisor)
    startup = gateway.get("startup_limit_seconds") or limits[0]
    deadline = gateway.get("response_timeout_seconds") or limits[1]
    serve = state.get("serve_seconds") if state.get("mode") == "serve" else None
    notes = _rerun_notes(state, supervisor, texts) + limit_notes(slowest, deadline, serve, startup)
    return EvalApiReport(
        scenario=Scenario.RERUN, succeeded=bool(result.get("Succeeded")) and not timed_out, error_type=error_type,
        error_details=details, expected_rows=expected, received_rows=received, serve_seconds=serve,
        startup_limit_seconds=startup, predict_calls=int(gateway.get("calls") or stats.get("calls") or 0),
        fast_calls=int(stats.get("fast_calls") or 0), first_predict_seconds=stats.get("first_seconds"),
        slowest_predict_seconds=slowest, slowest_call=stats.get("in_flight_call") if in_flight else stats.get("slowest_call"),
        slowest_in_flight=in_flight, response_timeout_seconds=deadline,
        predict_seconds_total=float(stats.get("total_seconds") or 0.0),
        submission_rows=parquet_rows(submission) if submission else None,
        notebook_exit=supervisor.get("notebook_exit"), notes=tuple(notes),
        limits=evaluation_checks(state, slowest, in_flight, deadline, serve, startup),
    )


def predict_steps(state: dict[str, Any], gateway: dict[str, Any], peak: int) -> list[dict[str, Any]]:
    """The run's parts that the projection fits, as step records (:func:`builder.rehearse.projection.declared_fit`):
    the first predict call fixed (the model load, no deadline), the later calls per row (with a sample of their
    seconds per row, their wait for a CPU and the load: a busy machine is taken out as for a step), and the
    gateway's own share of those calls (the relay, data per batch) per row. Kernel start to ``serve()`` and the
    gateway's start are the rest of the run, fixed."""
    stats = state.get("predict") or {}
    calls, first, total = int(stats.get("calls") or 0), stats.get("first_seconds"), float(stats.get("total_seconds") or 0.0)
    if calls == 0 or first is None:
        return [{"name": "predict", "seconds": total, "peak_rss_bytes": peak}]
    steps: list[dict[str, Any]] = [{"name": "predict: first call", "seconds": float(first), FIT_KEY: DECLARED_FIXED,
                                    "why": "the first predict call: the model load, no deadline", "peak_rss_bytes": peak}]
    later_rows = int(stats.get("rows") or 0) - int(stats.get("first_rows") or 0)
    if calls < 2 or later_rows <= 0:  # one call: nothing tells its per-row cost from its fixed cost
        steps[0] = {"name": "predict", "seconds": total, "peak_rss_bytes": peak}
        return steps
    later = total - float(first)
    steps.append({"name": "predict", "seconds": later, "rows": later_rows, FIT_KEY: RATE, "rates": stats.get("later_rates"),
                  "peak_rss_bytes": peak,
                  "why": f"{calls - 1} calls after the first", "cpu_seconds": stats.get("later_cpu_seconds"),
                  "run_delay_seconds": stats.get("later_waited_seconds"), "load": stats.get("load"), "cpus": stats.get("cpus")})
    relay = float(gateway.get("later_seconds") or 0.0) - later
    if relay > 0:
        steps.append({"name": "gateway: batches", "seconds": relay, "rows": later_rows, FIT_KEY: RATE, "host": True,
                      "why": "the gateway's time per call beside predict: its data and the relay"})
    return steps


def _rerun_error(result: dict[str, Any], gateway: dict[str, Any], supervisor: dict[str, Any], texts: dict[str, str],
                 timed_out: bool, timeout: float) -> tuple[str | None, str | None]:
    if timed_out:
        return "Timeout", f"the rerun exceeded its timeout of {timeout:g} s and was killed"
    if result:
        return (None, None) if result.get("Succeeded") else (result.get("ErrorName"), result.get("ErrorDetails"))
    if supervisor.get("gateway_stopped"):
        # Kaggle's gateway would fail at once: the inference container (and its host name) is gone.
        return "SERVER_CONNECTION_FAILED", (f"the notebook ended (exit code {supervisor.get('notebook_exit')}) before "
                                            "the gateway finished; on Kaggle the gateway then cannot reach the server")
    log = tail(texts.get("gateway.log", ""), LOG_TAIL_LINES)
    found = _CLASS_IN_TEXT.search(log)
    return (found.group(1) if found else "GATEWAY_RAISED_EXCEPTION"), f"the gateway wrote no result.json:\n{log}"


def _slowest(stats: dict[str, Any], supervisor: dict[str, Any]) -> tuple[float | None, bool]:
    """The slowest call after the first, counting one still running when the gateway gave up."""
    slowest = stats.get("slowest_seconds")
    since, call = stats.get("in_flight_since"), stats.get("in_flight_call")
    ended = supervisor.get("notebook_stopped") or supervisor.get("gateway_finished")
    if since and call and ended:
        running = float(ended) - float(since)
        if slowest is None or running > slowest:
            return round(running, 3), True
    return slowest, False


def _rerun_notes(state: dict[str, Any], supervisor: dict[str, Any], texts: dict[str, str]) -> list[str]:
    notes = []
    if not state:
        notes.append(f"the notebook wrote no {STATE_FILE}: it stopped before kkb's evaluation runtime started")
    elif state.get("mode") != "serve":
        notes.append("the notebook never reached serve()")
    if supervisor.get("notebook_exit") is not None:
        stderr = tail(texts.get("notebook.stderr", ""), 6)
        notes.append(f"the notebook ended by itself (exit code {supervisor['notebook_exit']}) instead of blocking in "
                     f"serve()" + (f":\n{stderr}" if stderr else ""))
    return notes


def limit_notes(slowest: float | None, deadline: float | None, serve: float | None, startup: float | None) -> list[str]:
    notes = []
    if serve is not None and startup and serve > startup:
        notes.append(f"serve() was reached {serve:.1f} s after the start, past the startup limit of {startup:g} s: "
                     "load models in the first predict call, not before serve()")
    elif serve is not None and startup and serve > 0.5 * startup:
        notes.append(f"serve() was reached after {serve / startup:.0%} of the startup limit")
    if slowest is not None and deadline and slowest > deadline:
        notes.append(f"the slowest predict call after the first took {slowest:.2f} s, past the {deadline:g} s deadline")
    elif slowest is not None and deadline and slowest > 0.5 * deadline:
        notes.append(f"the slowest predict call after the first used {slowest / deadline:.0%} of the {deadline:g} s deadline")
    return notes


# --- verdicts ------------------------------------------------------------------------------------

def verdict_name(report: EvalApiReport) -> str:
    """Kaggle's status for a failed evaluation-API submission. Kaggle maps gateway errors to canned
    messages it does not document; this is kkb's reading of them."""
    if report.succeeded:
        return OK
    if report.error_type in ("SERVER_NEVER_STARTED", "GRPC_DEADLINE_EXCEEDED", "Timeout"):
        return TIMEOUT
    if report.error_type == "INVALID_SUBMISSION":
        return SCORING_ERROR
    return THREW


def verdict_reason(report: EvalApiReport) -> str:
    if report.succeeded:
        return f"the competition's gateway succeeded ({report.predict_calls} predict calls)"
    return f"{report.error_type}: {report.error_details}" if report.error_details else str(report.error_type)


# --- small helpers -------------------------------------------------------------------------------

def rows_in(details: str | None) -> tuple[int | None, int | None]:
    match = _ROWS.search(details or "")
    return (int(match.group(1)), int(match.group(2))) if match else (None, None)


def parquet_rows(path: Path) -> int | None:
    import pandas as pd

    try:
        return len(pd.read_parquet(path))
    except Exception:
        return None



__all__ = ["ERROR_CLASSES", "STATE_FILE", "LOAD_SENSITIVE", "EvalApiReport", "limit_notes", "parquet_rows", "predict_steps", "rerun_report",
           "rows_in", "verdict_name", "verdict_reason"]
