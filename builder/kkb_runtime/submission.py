"""Combine step outputs, round them, and check the submission against the sample before writing it.

Kaggle answers a malformed file hours later with "Submission Scoring Error" and no reason. These
checks name the reason (columns, row count, ids, NaN/inf, types) before the file is written.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .vocabulary import CombineKind

if TYPE_CHECKING:  # imported where used: importing kkb_runtime stays free of them (kkb_runtime/__init__)
    import pandas as pd


class SubmissionError(ValueError):
    """The submission would not score: the message lists every reason."""

    def __init__(self, problems: Sequence[str], file: str = "submission") -> None:
        self.problems = list(problems)
        super().__init__(f"{file} would not score (Submission Scoring Error):\n" + "\n".join(f"  - {p}" for p in self.problems))


class MetricCheckError(SubmissionError):
    """The metric's check failed on a file already written (the scoring rerun): Kaggle scores it and fails."""

    written = True


def target_columns(sample: pd.DataFrame, id_column: str, configured: Sequence[str] = ()) -> list[str]:
    return list(configured) or [column for column in sample.columns if column != id_column]


def sample_columns(path: Path) -> list[str]:
    """The header of a CSV file as ``pd.read_csv`` names its columns, read without pandas (kkb's checks before a run
    need no more): a byte-order mark dropped, an empty name ``Unnamed: i``, a repeated one numbered as pandas' C
    parser numbers it (``x``, ``x.1``; named columns before unnamed ones, skipping names the header holds)."""
    with open(path, newline="", encoding="utf-8-sig") as file:
        header = [name or f"Unnamed: {index}" for index, name in enumerate(next(csv.reader(file), []))]
    unnamed = [index for index, name in enumerate(header) if name == f"Unnamed: {index}"]
    counts: dict[str, int] = {}
    for index in [i for i in range(len(header)) if i not in unnamed] + unnamed:
        name = original = header[index]
        count = counts.get(name, 0)
        while count > 0:
            counts[original] = count + 1
            name = f"{original}.{count}"
            count = count + 1 if name in header else counts.get(name, 0)
        header[index] = name
        counts[name] = count + 1
    return header


def read_sample(path: Path, id_column: str) -> pd.DataFrame:
    # ids stay strings: "007" and 7 are different ids to Kaggle's scorer.
    import pandas as pd
    return pd.read_csv(path, dtype={id_column: str})


def read_predictions(path: Path, id_column: str, targets: Sequence[str]) -> pd.DataFrame:
    import pandas as pd
    frame = pd.read_csv(path, dtype={id_column: str})
    missing = [column for column in [id_column, *targets] if column not in frame.columns]
    if missing:
        raise SubmissionError([f"{path.name}: missing column(s) {', '.join(missing)} (it has: {', '.join(map(str, frame.columns))})"],
                              file=path.name)
    return frame[[id_column, *targets]]


@dataclass(frozen=True)
class Combiner:
    """One ``[submission] combine`` kind: whether the steps' weights count, and what each block becomes first."""

    weighted: bool
    prepare: Callable[[pd.DataFrame], pd.DataFrame]
    normalised: bool = True  # divided by the weights' sum (a mean); False: the weighted sum as a notebook writes it


# Ranks scaled to (0, 1]: for rank metrics (AUC, Spearman) where the models' scales differ.
COMBINERS: dict[CombineKind, Combiner] = {
    CombineKind.MEAN: Combiner(weighted=False, prepare=lambda block: block),
    CombineKind.WEIGHTED_MEAN: Combiner(weighted=True, prepare=lambda block: block),
    CombineKind.WEIGHTED_SUM: Combiner(weighted=True, prepare=lambda block: block, normalised=False),
    CombineKind.RANK_MEAN: Combiner(weighted=False, prepare=lambda block: block.rank(method="average", pct=True)),
}


def combine(frames: Sequence[pd.DataFrame], id_column: str, targets: Sequence[str], method: str = "mean",
            weights: Sequence[float] | None = None) -> pd.DataFrame:
    """Ensemble step outputs row-aligned by id: ``mean``, ``weighted_mean``, ``weighted_sum`` or ``rank_mean``."""
    import numpy as np
    import pandas as pd
    if not frames:
        raise ValueError("no step outputs to combine")
    combiner = COMBINERS[CombineKind(method)]
    weights = list(weights) if weights is not None and combiner.weighted else [1.0] * len(frames)
    if len(weights) != len(frames):
        raise ValueError(f"{len(weights)} weights for {len(frames)} step outputs")
    ids = frames[0][id_column]
    aligned = []
    for frame in frames:
        indexed = frame.set_index(id_column)
        if set(indexed.index) != set(ids):
            raise ValueError("step outputs cover different ids; every step must predict the same rows")
        aligned.append(combiner.prepare(indexed.loc[ids, list(targets)].astype(float)).to_numpy())
    factors = np.asarray(weights, dtype=float)
    stacked = (np.average(np.stack(aligned), axis=0, weights=factors) if combiner.normalised
               else np.tensordot(factors, np.stack(aligned), axes=1))
    out = pd.DataFrame(stacked, columns=list(targets))
    out.insert(0, id_column, ids.to_numpy())
    return out


def read_step_output(path: Path, step: str, id_column: str, columns: Sequence[str]) -> pd.DataFrame:
    """A step's CSV with the columns it must write; a missing one names the step, not the submission."""
    import pandas as pd
    frame = pd.read_csv(path, dtype={id_column: str})
    missing = [column for column in [id_column, *columns] if column not in frame.columns]
    if missing:
        raise SubmissionError([f"step '{step}' wrote no column(s) {', '.join(missing)} in {path.name} "
                               f"(it has: {', '.join(map(str, frame.columns))})"], file=f"step '{step}'")
    return frame[[id_column, *columns]]


def combine_groups(outputs: Sequence[tuple[str, pd.DataFrame, Sequence[str]]], id_column: str,
                   columns: Sequence[str], method: str = "mean", weights: Sequence[float] | None = None) -> pd.DataFrame:
    """Column groups: each column is the ensemble (:func:`combine`) of the steps that write it, joined by id.

    ``outputs`` are ``(step name, frame, the step's columns)``. Steps of disjoint columns (a question
    model and an answer model) are joined; steps sharing a column are combined on it (``method``), with their weights.
    """
    import pandas as pd
    weights = list(weights) if weights is not None else [1.0] * len(outputs)
    uncovered = [column for column in columns if not any(column in own for _, _, own in outputs)]
    if uncovered:
        raise ValueError(f"no step writes the prediction column(s) {', '.join(uncovered)}: add them to a step's columns")
    ids = outputs[0][1][id_column]
    for name, frame, _ in outputs[1:]:
        if set(frame[id_column]) != set(ids):
            raise ValueError(f"step '{name}' covers other ids than step '{outputs[0][0]}'; every step must predict the same rows")
    out = pd.DataFrame({id_column: ids.to_numpy()})
    for column in columns:
        writers = [(frame, weight) for (_, frame, own), weight in zip(outputs, weights, strict=True) if column in own]
        block = combine([frame for frame, _ in writers], id_column, [column], method, [weight for _, weight in writers])
        out[column] = block.set_index(id_column).loc[ids, column].to_numpy()
    return out


def column_kind(values: pd.Series) -> str:
    """What a sample submission column holds: ``int``, ``float``, ``bool`` or ``str``."""
    import pandas as pd
    if pd.api.types.is_bool_dtype(values):
        return "bool"
    if pd.api.types.is_integer_dtype(values):
        return "int"
    if pd.api.types.is_float_dtype(values):
        return "float"
    return "str"


COLUMN_TYPES = ("int", "float", "str")


def retype_sample(sample: pd.DataFrame, column_types: Mapping[str, str] | None, id_column: str = "") -> pd.DataFrame:
    """The sample with ``column_types`` (``[submission] column_types``) overriding what its values say.

    For samples whose placeholders mislead: RANZCR's sample holds integer 0s where probabilities are
    scored. ``"*"`` names every column but the id.
    """
    import numpy as np
    import pandas as pd
    if not column_types:
        return sample
    out = sample.copy()
    for column in out.columns:
        kind = column_types.get(column) or (column_types.get("*") if column != id_column else None)
        if kind == "float":
            out[column] = out[column].astype(float)
        elif kind == "int":
            out[column] = pd.to_numeric(out[column], errors="coerce").fillna(0).astype(np.int64)
        elif kind == "str":
            out[column] = out[column].astype(str)
    return out


def round_predictions(frame: pd.DataFrame, targets: Sequence[str], decimals: int | None,
                      sample: pd.DataFrame | None = None) -> pd.DataFrame:
    """Round the float target columns: float noise (1e-17, 0.30000000000000004) has failed real scorers.

    With ``sample``, only the columns the sample holds as floats are rounded: rounding 0.6 to 1.0 in a
    column of integer labels would turn a refusal into a silently wrong label.
    """
    import pandas as pd
    if decimals is None:
        return frame
    out = frame.copy()
    for column in targets:
        if sample is not None and column in sample.columns and column_kind(sample[column]) != "float":
            continue
        if column in out.columns and pd.api.types.is_float_dtype(out[column]):
            out[column] = out[column].round(decimals)
            out.loc[out[column] == 0, column] = 0.0  # -0.0 prints as "-0.0"
    return out


def cast_like_sample(frame: pd.DataFrame, sample: pd.DataFrame, targets: Sequence[str]) -> pd.DataFrame:
    """Each target column with the type the sample holds: integers as integers, strings as strings.

    Floats that are whole numbers (``1.0``, what a mean or ``decimals = 0`` leaves) become integers
    where the sample holds integers; any other float stays a float, and :func:`check_submission`
    refuses it naming the column, rather than truncating a prediction here.
    """
    import numpy as np
    import pandas as pd
    out = frame.copy()
    for column in targets:
        if column not in out.columns or column not in sample.columns:
            continue
        kind, values = column_kind(sample[column]), out[column]
        if kind in ("int", "bool") and pd.api.types.is_float_dtype(values):
            finite = values.notna() & np.isfinite(values.to_numpy(dtype=float, na_value=np.nan))
            if finite.all() and bool((values == values.round()).all()):
                out[column] = values.astype(np.int64).astype(bool) if kind == "bool" else values.astype(np.int64)
        elif kind == "str" and not pd.api.types.is_string_dtype(values):
            out[column] = values.map(lambda value: value if pd.isna(value) else str(value))
    return out


def align_to_sample(frame: pd.DataFrame, sample: pd.DataFrame, id_column: str) -> pd.DataFrame:
    """Reorder rows to the sample's id order when the id sets match (Kaggle joins on order for some metrics)."""
    if id_column not in frame.columns or frame[id_column].duplicated().any():
        return frame
    if set(frame[id_column]) != set(sample[id_column]):
        return frame
    return frame.set_index(id_column).loc[sample[id_column]].reset_index()


def check_submission(frame: pd.DataFrame, sample: pd.DataFrame, id_column: str,
                     targets: Sequence[str] = (), check_order: bool = True,
                     column_types: Mapping[str, str] | None = None, float_targets: bool | None = None) -> list[str]:
    """Every reason the frame would fail Kaggle's scorer, compared with the sample submission.

    A pure function of two frames: the notebook's check, the dry run's verdict and the local Kaggle's
    scorer all call it, so a file one of them refuses cannot pass another. ``check_order`` is off for
    the scorer, which joins on ids. ``column_types`` overrides the sample's types (:func:`retype_sample`).
    ``float_targets`` is the metric's word (:func:`.metrics.scores_floats`): True, a regression or probability
    metric scores floats whatever the sample's placeholders hold (Bike Sharing's integer 0s under RMSLE);
    False, a label metric needs the sample's integers; None (no metric, a metric file), the sample decides.
    """
    sample = retype_sample(sample, column_types, id_column)
    problems: list[str] = []
    expected = list(sample.columns)
    missing = [column for column in expected if column not in frame.columns]
    extra = [column for column in frame.columns if column not in expected]
    if missing:
        problems.append(f"missing column(s): {', '.join(map(str, missing))}")
    if extra:
        problems.append(f"extra column(s): {', '.join(map(str, extra))}")
    duplicated = id_column in frame.columns and bool(frame[id_column].astype(str).duplicated().any())
    if len(frame) != len(sample) and not duplicated:  # duplicated ids are said as such, not as a row count
        problems.append(f"row count: expected {len(sample)} rows (as the sample submission), got {len(frame)}")
    if id_column in frame.columns:
        problems.extend(_id_problems(frame[id_column].astype(str), sample[id_column].astype(str), check_order))
    placeholders = []
    for column in target_columns(sample, id_column, targets):
        declared = _declared(column_types, column, id_column)  # kernel.toml's word on the column beats the metric's
        if (float_targets is None and declared is None and column in frame.columns
                and _probabilities_over_placeholders(frame[column], sample[column])):
            placeholders.append(column)
        elif column in frame.columns:
            integers = declared == "int" or (declared is None and float_targets is not True)
            problems.extend(_value_problems(frame[column], sample[column], column, integers=integers))
    if placeholders:
        problems.append(_placeholder_problem(placeholders, len(frame)))
    return problems


def _declared(column_types: Mapping[str, str] | None, column: str, id_column: str) -> str | None:
    """The type ``[submission] column_types`` gives ``column`` (by name, else ``"*"``), None where it says nothing."""
    if not column_types:
        return None
    return column_types.get(column) or (column_types.get("*") if column != id_column else None)


def _probabilities_over_placeholders(values: pd.Series, sample_values: pd.Series) -> bool:
    """Fractions where the sample holds only integer 0s: RANZCR's sample of a probability-scored competition.
    Whether the scorer wants probabilities or labels only kernel.toml can say (``column_types``)."""
    import numpy as np
    import pandas as pd
    if column_kind(sample_values) != "int" or not bool((sample_values == 0).all()):
        return False
    if not pd.api.types.is_float_dtype(values) or not values.notna().all():
        return False
    finite = values.to_numpy(dtype=float)
    return bool(np.isfinite(finite).all() and (values != values.round()).any())


def _placeholder_problem(columns: Sequence[str], rows: int) -> str:
    named = ", ".join(repr(column) for column in columns[:3]) + (", ..." if len(columns) > 3 else "")
    which = f"column {named}" if len(columns) == 1 else f"{len(columns)} columns ({named})"
    return (f"fractional values in {which}, where the sample submission holds only integer 0s: {rows} rows. "
            "If the competition scores probabilities, the 0s are placeholders: set [submission] column_types = "
            "{ \"*\" = \"float\" } in kernel.toml; if it scores labels, write integers (argmax or threshold)")


def _examples(values: Sequence[object], limit: int = 3) -> str:
    shown = ", ".join(repr(value) for value in list(values)[:limit])
    return shown + (", ..." if len(values) > limit else "")


def _id_problems(ids: pd.Series, expected: pd.Series, check_order: bool = True) -> list[str]:
    problems = []
    duplicated = ids[ids.duplicated()].unique().tolist()
    if duplicated:
        repeats = int(ids.duplicated().sum())
        problems.append(f"duplicate ids: {len(duplicated)} (e.g. {_examples(duplicated)}), {repeats} extra row(s)")
    absent = sorted(set(expected) - set(ids))
    unknown = sorted(set(ids) - set(expected))
    if absent or unknown:
        parts = [f"{len(found)} {what} (e.g. {_examples(found)})" for found, what in ((absent, "missing"), (unknown, "unexpected")) if found]
        problems.append("ids do not match the sample submission: " + ", ".join(parts))
    elif check_order and len(ids) == len(expected) and not duplicated and list(ids) != list(expected):
        first = next(i for i, (a, b) in enumerate(zip(ids, expected, strict=False)) if a != b)
        problems.append(f"ids are not in the sample submission's order (row {first}: expected {expected.iloc[first]!r}, got {ids.iloc[first]!r})")
    return problems


def _value_problems(values: pd.Series, sample_values: pd.Series, column: str, integers: bool = True) -> list[str]:
    import pandas as pd
    if column_kind(sample_values) == "str":
        return [f"empty values in column '{column}': {int(values.isna().sum())} rows"] if values.isna().any() else []
    numeric = pd.to_numeric(values, errors="coerce")
    bad = values[numeric.isna() & values.notna()]
    if len(bad):
        return [f"non-numeric values in target column '{column}': {len(bad)} rows (e.g. {_examples(bad.tolist())})"]
    problems = []
    if numeric.isna().any():
        problems.append(f"NaN in target column '{column}': {int(numeric.isna().sum())} rows")
    finite = numeric.dropna().map(math.isfinite)
    if not finite.all():
        problems.append(f"inf in target column '{column}': {int((~finite).sum())} rows")
    if integers and column_kind(sample_values) in ("int", "bool") and not problems:
        problems.extend(_integer_problems(values, numeric, column))
    return problems


def _integer_problems(values: pd.Series, numeric: pd.Series, column: str) -> list[str]:
    """A column the sample holds as integers must hold integers: ``1.0`` is not ``1`` to many scorers."""
    import pandas as pd
    if pd.api.types.is_integer_dtype(values) or pd.api.types.is_bool_dtype(values):
        return []
    if pd.api.types.is_float_dtype(values):
        shown = values[values != values.round()].tolist() or values.tolist()
        return [f"float values in column '{column}', where the sample submission holds integers: {len(values)} rows "
                f"(e.g. {_examples(shown)}); write integers (post-process with argmax or threshold)"]
    text = values.astype(str)
    bad = text[~text.str.fullmatch(r"[+-]?\d+")]
    if len(bad):
        return [f"non-integer values in column '{column}', where the sample submission holds integers: {len(bad)} rows "
                f"(e.g. {_examples(bad.tolist())})"]
    return []


def write_submission(frame: pd.DataFrame, path: Path) -> Path:
    """Write atomically: a half-written submission.csv is worse than none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    if path.suffix == ".parquet":
        frame.to_parquet(partial, index=False)
    else:
        frame.to_csv(partial, index=False)
    os.replace(partial, path)
    return path
