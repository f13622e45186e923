"""Kaggle's error descriptions and logs, turned into what to do next (the rehearsal that checks each one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from builder.kkb_runtime.metric_file import metric_file_reference
from builder.kkb_runtime.metrics import parse_metric, rules
from builder.kkb_runtime.vocabulary import Verdict

# What to do about each of Kaggle's verdicts, as a hint ({kernel_dir}: the kernel folder); None where
# Kaggle never reports it as a submission error.
DRY_RUN_HINTS: dict[Verdict, str | None] = {
    Verdict.OK: None,
    Verdict.TIMEOUT: "the dry run times the scoring rerun on hidden-size test data against "
    "[competition] time_limit_hours and reports 'Notebook Timeout': kkb dry-run {kernel_dir}",
    Verdict.THREW: "the dry run runs the scoring rerun (KAGGLE_IS_COMPETITION_RERUN set, hidden "
    "test data, internet off) and shows the exception with its traceback: kkb dry-run {kernel_dir}",
    Verdict.CSV_NOT_FOUND: "the dry run checks that the rerun writes [competition] submission_file into "
    "/kaggle/working under exactly that name: kkb dry-run {kernel_dir}",
    Verdict.SCORING_ERROR: "the dry run checks the CSV against sample_submission.csv: same ids in any order, "
    "the same columns, one row per id, no NaN or infinite values: kkb dry-run {kernel_dir}",
    Verdict.COMPUTE: "the dry run reports peak RAM and GPU memory and the wall time "
    "against Kaggle's limits: kkb dry-run {kernel_dir}",
    Verdict.NOT_REHEARSED: None,  # kkb's own verdict: Kaggle never says it
    Verdict.KAGGLE_ERROR: "a Kaggle-side failure: submit the same version again with kkb submit --version N --resubmit",
}


def dry_run_hint(error_description: str, kernel_dir: Path | str, metric: str | None = None) -> str:
    """What ``kkb dry-run`` would check for Kaggle's ``error_description`` (and, for a scoring error, what it
    cannot check: a dry run that passed the same file is no proof)."""
    key = (error_description or "").strip().lower()
    if SCORING_ERROR in key:
        return scoring_error_hint(error_description, kernel_dir, metric)
    for verdict, hint in DRY_RUN_HINTS.items():
        if hint is not None and verdict.value.lower() in key:
            return hint.format(kernel_dir=kernel_dir)
    return f"kkb dry-run {kernel_dir} rehearses the scoring rerun locally"


SCORING_ERROR = "submission scoring error"
_UNCHECKED = ("the hidden test's own values (the dry run scores the rerun on the data it was given)",
              "the public/private split unless [competition] public_ids names it (else only the chance of a constant "
              "public part is estimated)")


def scoring_error_hint(error_description: str, kernel_dir: Path | str, metric: str | None) -> str:
    """The server's reason when it gave one (the local Kaggle does; kaggle.com never does), else the checks
    the dry run makes and the ones it cannot make."""
    reason = error_description.partition(":")[2].strip()
    name = parse_metric(metric)
    found = rules(name)
    if name.known and found is not None:
        checks = f"the {name.label} checks ({found.checked})"
    elif metric and metric_file_reference(metric) is not None:
        checks = f"the competition's metric file {metric} with the answers (--answers), as Kaggle runs it"
    elif metric:
        checks = f"no check of the metric '{metric}' (kkb does not know it)"
    else:
        checks = "no metric check ([competition] metric is not set)"
    made = (f"the CSV against sample_submission.csv (the ids in any order, the columns, one row per id, no NaN or "
            f"infinite values) and {checks}")
    if reason:
        return f"the server names the reason above; kkb dry-run {kernel_dir} checks {made} on the rerun's file"
    return (f"Kaggle gives no reason. kkb dry-run {kernel_dir} checks {made}; it cannot check "
            + " nor ".join(_UNCHECKED))


def tail_block(entries: list[dict[str, Any]], failure_message: str, limit: int = 30) -> str:
    tail = exception_tail(entries, limit)
    last = tail.strip().splitlines()[-1] if tail.strip() else ""
    if not last or last in failure_message:  # Kaggle's failure message already shows the exception
        return ""
    return f"\n--- end of the kernel log ---\n{tail}"


def exception_tail(entries: list[dict[str, Any]], limit: int = 30) -> str:
    """The last traceback in a Kaggle log (or its last lines when there is none)."""
    text = "".join(str(entry.get("data", "")) for entry in entries)
    lines = text.rstrip().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    chosen = lines[starts[-1]:] if starts else lines
    return "\n".join(chosen[-limit:])



