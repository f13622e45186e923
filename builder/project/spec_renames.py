"""``kernel.toml`` keys kkb renamed: the old spelling is still read, with a warning naming the key to write.

Durations end in ``_seconds`` everywhere (``timeout_seconds``, ``startup_limit_seconds``); ``[push]``'s waits were
once ``_s``. An old key is renamed before validation (so every error names the new one) and warned about once per
process as a :class:`SpecDeprecation`, which the command line shows as a ``warning:`` line.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

# table -> {old key: new key}
RENAMED: dict[str, dict[str, str]] = {
    "push": {"dataset_timeout_s": "dataset_timeout_seconds", "run_timeout_s": "run_timeout_seconds",
             "score_timeout_s": "score_timeout_seconds"},
    "kernel": {"kernel_type": "type"},
}
# What stays the same under the new name, said in the warning.
SAME_VALUE = {"push": "the same value, in seconds", "kernel": "the same value"}


class SpecDeprecation(FutureWarning):
    """A ``kernel.toml`` spelling kkb still reads; the message names the key to write instead."""


def renamed(table: str, raw: Any) -> Any:
    """``raw`` (a table of ``kernel.toml``) with its old keys under their new names, each warned about."""
    if not isinstance(raw, Mapping) or not RENAMED.get(table, {}).keys() & raw.keys():
        return raw
    out = dict(raw)
    for old, new in RENAMED[table].items():
        if old not in out:
            continue
        if new in out:
            raise ValueError(f"[{table}] sets both {old} and {new}: keep {new} ({old} is its old spelling)")
        warnings.warn(f"kernel.toml: [{table}] {old} is deprecated: write {new} = {out[old]!r} ({SAME_VALUE[table]})",
                      SpecDeprecation, stacklevel=2)
        out[new] = out.pop(old)
    return out


EVALUATION_API = "evaluation-api"  # kkb_runtime.vocabulary.SubmissionKind.EVALUATION_API's value, in the raw TOML
DEFAULT_SUBMISSION_FILE = "submission.csv"


def one_submission_file(raw: Any) -> Any:
    """``[competition] submission_file`` is the one name of the file Kaggle scores (and the kernel writes).

    ``[submission] file`` was a second name: still read, with a warning, where it means the same file (it equals the
    competition's, or an evaluation-API kernel names the file its gateway writes, the file Kaggle scores there). A
    CSV kernel whose ``[submission] file`` differs from the competition's is refused: Kaggle would not find it
    (``Submission CSV Not Found``), and taking it as the competition's name would make the dry run say OK.
    """
    if not isinstance(raw, Mapping) or not isinstance(raw.get("submission"), Mapping) or "file" not in raw["submission"]:
        return _with_derived_file(raw)
    submission = dict(raw["submission"])
    competition = dict(raw.get("competition") or {})
    written = submission.pop("file")
    declared = competition.get("submission_file")
    if declared is None and submission.get("kind") == EVALUATION_API:
        competition["submission_file"] = declared = written
    elif declared is None:
        declared = DEFAULT_SUBMISSION_FILE
    if written != declared:
        raise ValueError(f"[submission] file = {written!r}, but Kaggle scores [competition] submission_file = {declared!r}: "
                         f"the kernel writes the competition's file; remove [submission] file, and set [competition] "
                         f"submission_file = {written!r} only if the competition names that file")
    warnings.warn(f"kernel.toml: [submission] file is deprecated: the file is [competition] submission_file "
                  f"(= {declared!r}); remove [submission] file", SpecDeprecation, stacklevel=2)
    return _with_derived_file({**raw, "submission": submission, "competition": competition})


def _with_derived_file(raw: Any) -> Any:
    """``[submission] file`` as the rest of kkb reads it: always the competition's file."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("competition", {}), Mapping):
        return raw
    if not isinstance(raw.get("submission", {}), Mapping):
        return raw
    declared = (raw.get("competition") or {}).get("submission_file", DEFAULT_SUBMISSION_FILE)
    return {**raw, "submission": {**(raw.get("submission") or {}), "file": declared}}


__all__ = ["DEFAULT_SUBMISSION_FILE", "RENAMED", "SpecDeprecation", "one_submission_file", "renamed"]
