"""Column names in ``[[postprocess]]`` and ``[submission] unrounded`` are checked against the columns they act on.

Before: ``threshold`` with ``columns = ["targte"]``, a ``round = false`` stage naming an unknown column, or
``[submission] unrounded = ["targte"]`` built and pushed, and the kernel then thresholded nothing or rounded
the column it was told to leave alone: a silent change of the file. Each stage's ``columns`` must be
columns the stage gets (the prediction columns, then what the stages before it wrote); a ``function``
stage's ``columns`` (what it writes, for rounding) must be target columns or columns it gets;
``unrounded`` must be target columns. A stage after a ``function`` gets columns nobody can know here: from
there on only the targets are checked.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

from builder.errors import BundleError
from builder.kkb_runtime import postprocess
from builder.project.spec import SPEC_FILE, KernelSpec


def check_named_columns(spec: KernelSpec, kernel_dir: Path, predictions: Sequence[str], targets: Sequence[str]) -> None:
    """Every column a stage or ``unrounded`` names exists where it is used (see the module docstring)."""
    where = kernel_dir / SPEC_FILE
    columns: list[str] | None = list(predictions)
    for index, stage in enumerate(spec.postprocess):
        known = [*targets, *(columns or [])] if stage.kind == "function" or columns is None else columns
        unknown = [column for column in stage.columns if column not in known]
        if unknown:
            what = "the target columns and the columns it gets" if stage.kind == "function" else (
                "the columns it gets" if columns is not None else "the target columns")
            raise BundleError(f"{where}: postprocess[{index}].columns ({stage.kind}"
                              f"{', round = false' if not stage.round else ''}): {_quoted(unknown)} is no column "
                              f"here ({what}: {', '.join(dict.fromkeys(known))})",
                              hint=_guess(unknown[0], known) + "list columns of the submission the stage acts on")
        if columns is not None:
            columns = postprocess.STAGES[stage.kind].outputs(columns, postprocess.read_stage(stage.resolved()), predictions)
    unknown = [column for column in spec.submission.unrounded if column not in targets]
    if unknown:
        raise BundleError(f"{where}: submission.unrounded: {_quoted(unknown)} is no target column "
                          f"({', '.join(targets)})",
                          hint=_guess(unknown[0], targets) + "unrounded lists target columns of the sample submission")


def _quoted(columns: Sequence[str]) -> str:
    return ", ".join(f"'{column}'" for column in columns)


def _guess(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'? " if close else ""
