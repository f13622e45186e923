"""Telling Kaggle's commit run from the scoring rerun, and the fast-commit short-circuit.

Kaggle's own code tests *presence* of ``KAGGLE_IS_COMPETITION_RERUN`` (kaggle_evaluation's
base_gateway), so we do too. The commit run only has to produce *a* valid file to make the version
submittable; running every model on it burns GPU quota for nothing. kkb's dry run rehearses the full
rerun locally, which is where the real pipeline is tested.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .config import FastCommitSection

RERUN_VARIABLE = "KAGGLE_IS_COMPETITION_RERUN"


def is_rerun(environ: Mapping[str, str] | None = None) -> bool:
    return RERUN_VARIABLE in (os.environ if environ is None else environ)


@dataclass(frozen=True)
class FastCommitDecision:
    fast: bool
    reason: str
    write: str = "sample"
    row_limit: int | None = None


def decide(settings: FastCommitSection, count_rows: Callable[[], int],
           environ: Mapping[str, str] | None = None) -> FastCommitDecision:
    """Whether this run may short-circuit, and why (printed in the notebook). ``count_rows`` gives the sample's rows,
    asked only where the answer depends on them (a commit run): a scoring rerun decides without reading the sample."""
    if not settings.enabled:
        return FastCommitDecision(False, "fast commit disabled in kernel.toml: running every step")
    if is_rerun(environ):
        return FastCommitDecision(False, f"{RERUN_VARIABLE} is set: scoring rerun, running every step")
    threshold = settings.rows_below
    sample_rows = count_rows()
    if settings.detect == "env_and_rows" and sample_rows >= threshold:
        return FastCommitDecision(False, f"{RERUN_VARIABLE} is absent but the sample submission has {sample_rows} rows "
                                         f"(>= {threshold}): running every step")
    limit = settings.first_rows if settings.write == "first_rows" else None
    what = "writing the sample submission" if settings.write == "sample" else f"running every step on the first {limit} rows"
    return FastCommitDecision(True, f"commit run ({RERUN_VARIABLE} absent, sample has {sample_rows} rows): {what}",
                              settings.write, limit)
