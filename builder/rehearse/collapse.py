"""Collapsed predictions named: a rerun whose rows got no data predicts the same few values for all of them.

A replicated test (``--rerun-scale``, a rehearsal on Kaggle) or a stand-in whose rows reference data that
is not there runs to the end and writes a well-formed file: every feature is NaN, every row gets the
model's default. The file passes every format check; only its values show it. Each output (a step's
CSV, the submission) is compared per target column with the public test's predictions:

- **replicated rows** (ids not in the public test, beside the public rows in the same run): a column
  whose replicated rows hold at most half the distinct values the public rows had, or NaN where the
  public rows had values;
- **another test** (``--rerun-data``) compared with the commit run's predictions on the public test: a
  column of continuous values (floats that are not whole) whose rows are far less distinct than the
  public run's (class labels repeat by nature: they are never judged by their count).

Each finding is a warning naming the step or file and the column; nothing changes the verdict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from builder.project.spec import SubmissionSection

if TYPE_CHECKING:  # imported where used: the CLI starts without them (tests/test_dry_run_cost.py)
    import pandas as pd

MIN_ROWS = 10  # a rerun smaller than this says nothing by its count of distinct values
HINT = ("the replicated rows may have no data: check what the test's rows reference (the dry run prints "
        "'stand-in: ...'; [competition.stand_in] states keys, tables, files)")


def collapse_warnings(outputs: Mapping[str, Path], id_column: str, targets: Sequence[str], public_ids: set[str],
                      public_outputs: Mapping[str, Path] | None = None) -> list[str]:
    """One warning per output and column whose predictions collapsed. ``outputs``: label ("step 'predict'",
    "submission.csv") -> CSV of this run; ``public_ids``: the public test's ids (the rows of copy 0 of a
    replicated test); ``public_outputs``: the same labels in a run on the public test (the commit), if any."""
    warnings = []
    for label, path in outputs.items():
        frame = _read(path, id_column)
        if frame is None:
            continue
        public = frame[frame[id_column].isin(public_ids)]
        replicated = frame[~frame[id_column].isin(public_ids)]
        if len(public) and len(replicated):
            warnings += _replicated(label, public, replicated, targets)
        elif public_outputs and label in public_outputs and (earlier := _read(public_outputs[label], id_column)) is not None:
            warnings += _another_test(label, earlier, frame, targets)
    return warnings


def _read(path: Path, id_column: str) -> pd.DataFrame | None:
    import pandas as pd
    try:
        frame = pd.read_csv(path, dtype={id_column: str})
    except (OSError, ValueError):
        return None
    return frame if id_column in frame.columns else None


def _replicated(label: str, public: pd.DataFrame, replicated: pd.DataFrame, targets: Sequence[str]) -> list[str]:
    found = []
    for column in (c for c in targets if c in public.columns and c in replicated.columns):
        before, after = public[column].nunique(), replicated[column].nunique()
        empty = bool(replicated[column].isna().all() and public[column].notna().any())
        if empty or (before >= 2 and after <= before / 2):
            what = "no predictions (NaN)" if empty else f"{after} distinct prediction{'s' * (after != 1)}"
            found.append(f"{label}: column '{column}': {what} for the {len(replicated)} replicated rows; on the public "
                         f"test {before} of {len(public)} were distinct: {HINT}")
    return found


def _another_test(label: str, earlier: pd.DataFrame, frame: pd.DataFrame, targets: Sequence[str]) -> list[str]:
    found = []
    for column in (c for c in targets if c in earlier.columns and c in frame.columns):
        before, after = earlier[column].nunique(), frame[column].nunique()
        if len(frame) < MIN_ROWS or not _continuous(earlier[column]) or before < 2:
            continue
        if after / len(frame) <= (before / len(earlier)) / 4 and after <= max(3, before):
            found.append(f"{label}: column '{column}': {after} distinct predictions for {len(frame)} rows; on the "
                         f"public test {before} of {len(earlier)} were distinct: {HINT}")
    return found


def _continuous(values: pd.Series) -> bool:
    import pandas as pd
    numbers = pd.to_numeric(values, errors="coerce").dropna()
    return bool(len(numbers)) and pd.api.types.is_float_dtype(values) and bool((numbers % 1 != 0).any())


def rerun_collapse(scenario: str, out: Path, members: Mapping[str, str], submission: Path, public_sample: Path,
                   section: SubmissionSection) -> list[str]:
    """The dry run's rerun: its steps' CSVs and submission, the rows with the public test's ids (``public_sample``:
    copy 0 of a replicated test, or the public rows a stand-in kept) against the others; without public rows,
    against the commit run's outputs (saved in ``out`` when the commit ran its steps)."""
    import pandas as pd
    if scenario != "rerun":
        return []
    id_column = section.id_column
    outputs = {f"step '{name}'": Path(path) for name, path in members.items()}
    outputs[submission.name] = submission
    public_ids = set(pd.read_csv(public_sample, dtype={id_column: str}, usecols=[id_column])[id_column])
    earlier = {f"step '{name}'": out / f"commit.step-{name}.csv" for name in members}
    earlier[submission.name] = out / "commit.submission.csv"
    ran = any(path.is_file() for label, path in earlier.items() if label != submission.name)
    return collapse_warnings(outputs, id_column, section.target_columns, public_ids, earlier if ran else None)
