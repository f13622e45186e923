"""Two submissions on the same data, compared column by column: what ``kkb dry-run --reference`` and
``kkb compare`` print.

Rows are matched by id, never by position. Ids are compared as the sample types them: where the sample's
ids are integers, ``7`` and ``7.0`` are the same id (Kaggle's scorer reads them so); where they are text,
``007`` and ``7`` are not. Per target column: the largest and the mean absolute difference, the rows
whose difference exceeds the tolerance, and Pearson's and Spearman's correlation between the two
files. A text column (labels) counts the rows whose values differ. The default tolerance is what
rounding to the submission's ``decimals`` explains (one unit in the last kept place: each file may have
been rounded half a unit away), else 1e-6.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from builder.errors import KkbError

if TYPE_CHECKING:  # imported where used: the CLI starts without them (tests/test_dry_run_cost.py)
    import numpy as np
    import pandas as pd

DEFAULT_TOLERANCE = 1e-6
SHOWN_IDS = 5
IdKind = Literal["int", "float", "str"]


def default_tolerance(decimals: int | None) -> tuple[float, str]:
    """The tolerance nothing but rounding explains, and the words that say where it came from."""
    if decimals is None:
        return DEFAULT_TOLERANCE, f"{DEFAULT_TOLERANCE:g} (no rounding configured)"
    tolerance = 10.0 ** -decimals
    return tolerance, f"{tolerance:g} (rounding to decimals = {decimals})"


@dataclass(frozen=True)
class ColumnDiff:
    column: str
    numeric: bool
    beyond: int  # rows whose difference exceeds the tolerance (text: rows whose values differ)
    max_abs: float | None = None
    mean_abs: float | None = None
    pearson: float | None = None
    spearman: float | None = None

    def cells(self) -> tuple[str, ...]:
        return (self.column, _num(self.max_abs), _num(self.mean_abs), str(self.beyond), _num(self.pearson, 4),
                _num(self.spearman, 4))


HEADER = ("column", "max |diff|", "mean |diff|", "rows beyond", "pearson", "spearman")


@dataclass(frozen=True)
class Comparison:
    """``left`` (the run's file) against ``right`` (the reference), on the ids both hold."""

    left: str
    right: str
    id_column: str
    tolerance: float
    tolerance_basis: str
    rows: int  # ids both files hold
    columns: tuple[ColumnDiff, ...]
    only_left_ids: tuple[str, ...] = ()
    only_right_ids: tuple[str, ...] = ()
    only_left_columns: tuple[str, ...] = ()
    only_right_columns: tuple[str, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)  # ids only in one file, in all (the tuples show a few)

    @property
    def ok(self) -> bool:
        return not (self.counts.get("only_left") or self.counts.get("only_right") or self.only_left_columns
                    or self.only_right_columns or any(column.beyond for column in self.columns))

    def worst(self) -> list[ColumnDiff]:
        """The columns, worst first: most rows beyond the tolerance, then the largest difference."""
        return sorted(self.columns, key=lambda c: (-c.beyond, -(c.max_abs or 0.0), c.column))

    def failures(self) -> list[str]:
        """What makes the two files differ, worst first, one short phrase each."""
        found = [f"{c.column} ({c.beyond} of {self.rows} rows beyond {self.tolerance:g}"
                 + (f", max {c.max_abs:.3g}" if c.max_abs is not None else "") + ")"
                 for c in self.worst() if c.beyond]
        for side, name in (("only_left", self.left), ("only_right", self.right)):
            if self.counts.get(side):
                shown = self.only_left_ids if side == "only_left" else self.only_right_ids
                found.append(f"{self.counts[side]} id(s) only in {name} ({', '.join(shown)}{', …' if self.counts[side] > len(shown) else ''})")
        for columns, name in ((self.only_left_columns, self.left), (self.only_right_columns, self.right)):
            if columns:
                found.append(f"column(s) only in {name}: {', '.join(columns)}")
        return found

    def lines(self) -> list[str]:
        """The table as plain text (what ``kkb compare`` and the dry run's summary print)."""
        rows = [HEADER, *(column.cells() for column in self.worst())]
        widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
        table = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
        verdict = "equal within" if self.ok else "differs beyond"
        return [f"{self.left} vs {self.right}: {self.rows} common ids, {verdict} the tolerance {self.tolerance_basis}",
                *table, *(f"differs: {failure}" for failure in self.failures())]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "worst": [c.column for c in self.worst() if c.beyond],
                "failures": self.failures()}


def compare_files(left: Path, right: Path, id_column: str | None = None, *, tolerance: float | None = None,
                  decimals: int | None = None, sample: Path | None = None, columns: list[str] | None = None,
                  labels: tuple[str, str] | None = None) -> Comparison:
    """Compare two CSV files by id. ``id_column`` defaults to the first column of ``left``; ``sample`` (the
    competition's sample submission) decides how ids are typed; ``columns`` limits the compared columns."""
    check_tolerance(tolerance, "--tolerance")
    a, b, id_column = aligned_frames(left, right, id_column, sample)
    if tolerance is None:
        tolerance, basis = default_tolerance(decimals)
    else:
        basis = f"{tolerance:g} (given)"
    names = labels or (str(left), str(right))
    return _compare(a, b, tolerance, basis, names, id_column, columns)


def check_tolerance(tolerance: float | None, option: str) -> None:
    """A tolerance is a number of at least 0: NaN would let every difference pass (no comparison with NaN is true)."""
    if tolerance is not None and not (isinstance(tolerance, (int, float)) and tolerance >= 0):
        raise KkbError(f"{option} {tolerance}: the largest difference allowed per value must be a number of at least 0",
                       hint=f"give {option} a number such as 1e-4, or leave it out for what rounding to "
                            "[submission] decimals explains")


def aligned_frames(left: Path, right: Path, id_column: str | None = None,
                   sample: Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Both files indexed by their typed ids (the id column defaults to the first of ``left``)."""
    frames = [_read(path) for path in (left, right)]
    id_column = id_column or str(frames[0].columns[0])
    for path, frame in zip((left, right), frames, strict=True):
        if id_column not in frame.columns:
            raise KkbError(f"{path}: no id column '{id_column}' (it has: {', '.join(map(str, frame.columns))})",
                           hint="name the id column (--id), or compare files of the same submission")
    kind = id_kind(sample, id_column) if sample is not None else _inferred_kind(frames[0][id_column])
    a, b = (_by_id(frame, id_column, kind, path) for frame, path in zip(frames, (left, right), strict=True))
    return a, b, id_column


def _compare(a: pd.DataFrame, b: pd.DataFrame, tolerance: float, basis: str, names: tuple[str, str], id_column: str,
             wanted: list[str] | None) -> Comparison:
    left_columns = [c for c in a.columns if wanted is None or c in wanted]
    right_columns = [c for c in b.columns if wanted is None or c in wanted]
    common_columns = [c for c in left_columns if c in right_columns]
    common = a.index.intersection(b.index, sort=False)
    only_left = a.index.difference(b.index, sort=False)
    only_right = b.index.difference(a.index, sort=False)
    diffs = tuple(column_diff(str(c), a.loc[common, c], b.loc[common, c], tolerance) for c in common_columns)
    return Comparison(
        left=names[0], right=names[1], id_column=id_column, tolerance=tolerance, tolerance_basis=basis, rows=len(common),
        columns=diffs, only_left_ids=tuple(map(str, only_left[:SHOWN_IDS])),
        only_right_ids=tuple(map(str, only_right[:SHOWN_IDS])),
        only_left_columns=tuple(str(c) for c in left_columns if c not in right_columns),
        only_right_columns=tuple(str(c) for c in right_columns if c not in left_columns),
        counts={"only_left": len(only_left), "only_right": len(only_right)},
    )


def column_diff(name: str, left: pd.Series, right: pd.Series, tolerance: float) -> ColumnDiff:
    """One column of two aligned frames."""
    import numpy as np
    import pandas as pd
    x, y = pd.to_numeric(left, errors="coerce"), pd.to_numeric(right, errors="coerce")
    numeric = bool(x.notna().eq(left.notna()).all() and y.notna().eq(right.notna()).all())
    if not numeric:  # labels: equal or not
        differ = left.astype("string").fillna("<NA>") != right.astype("string").fillna("<NA>")
        return ColumnDiff(name, numeric=False, beyond=int(differ.sum()))
    xv, yv = x.to_numpy(dtype=float), y.to_numpy(dtype=float)
    both = np.isfinite(xv) & np.isfinite(yv)
    same_missing = np.isnan(xv) & np.isnan(yv)
    diff = np.abs(xv[both] - yv[both])
    # Rounding leaves float noise around the tolerance itself (0.1235 - 0.1234 is 1.0000000000000286e-04).
    beyond = int((diff > tolerance * (1 + 1e-9)).sum()) + int((~both & ~same_missing).sum())
    return ColumnDiff(name, numeric=True, beyond=beyond,
                      max_abs=float(diff.max()) if diff.size else None, mean_abs=float(diff.mean()) if diff.size else None,
                      pearson=_correlation(xv[both], yv[both]),
                      spearman=_correlation(pd.Series(xv[both]).rank().to_numpy(), pd.Series(yv[both]).rank().to_numpy()))


def _correlation(x: np.ndarray, y: np.ndarray) -> float | None:
    """Pearson's r; None where it is undefined (fewer than two rows, a constant column)."""
    import numpy as np
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def id_kind(sample: Path, id_column: str) -> IdKind:
    """How the sample's ids are typed: numbers only where every id is written as its number would be
    (``7``, not ``007``: an id with a leading zero is text, and ``007`` is then no ``7``)."""
    import pandas as pd
    try:
        ids = pd.read_csv(sample, usecols=[id_column], dtype=str, keep_default_na=False)[id_column]
    except (OSError, ValueError) as exc:
        raise KkbError(f"{sample}: cannot read the id column '{id_column}': {exc}",
                       hint="point at the competition's sample submission") from exc
    return _inferred_kind(ids)


def _inferred_kind(ids: pd.Series) -> IdKind:
    import pandas as pd
    text = ids.astype(str)
    numbers = pd.to_numeric(text, errors="coerce")
    if len(text) == 0 or numbers.isna().any():
        return "str"
    if bool((numbers == numbers.round()).all()) and bool((numbers.astype("int64").astype(str) == text).all()):
        return "int"
    return "float" if bool((numbers.astype(str) == text).all()) else "str"


def _read(path: Path) -> pd.DataFrame:
    """Every column as text (ids keep their leading zeros; values are converted back per column)."""
    import pandas as pd
    try:
        if path.suffix == ".parquet":  # an evaluation-API kernel's submission
            frame = pd.read_parquet(path)
            return frame.astype("string").astype(object).where(frame.notna(), None)
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    except FileNotFoundError as exc:
        raise KkbError(f"{path}: no such file", hint="name a submission CSV file") from exc
    except (OSError, ValueError) as exc:
        raise KkbError(f"{path}: not a readable submission file: {exc}", hint="name a submission CSV (or parquet) file") from exc


def _by_id(frame: pd.DataFrame, id_column: str, kind: IdKind, path: Path) -> pd.DataFrame:
    """The frame indexed by its ids typed as ``kind``; every other column converted back from text."""
    import pandas as pd
    ids = frame[id_column]
    if kind != "str":
        typed = pd.to_numeric(ids, errors="coerce")
        bad = ids[typed.isna()]
        if len(bad):
            raise KkbError(f"{path}: id '{bad.iloc[0]}' in '{id_column}' is not a number, while the sample's ids are",
                           hint="compare files of the same competition (ids are matched as the sample types them)")
        ids = typed.astype("int64") if kind == "int" and bool((typed == typed.round()).all()) else typed
    duplicated = ids[ids.duplicated()]
    if len(duplicated):
        raise KkbError(f"{path}: id {duplicated.iloc[0]} appears more than once in '{id_column}'",
                       hint="a submission has one row per id")
    return frame.drop(columns=[id_column]).set_axis(pd.Index(ids, name=id_column), axis=0)


def _num(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if digits == 4 else f"{value:.3g}"
