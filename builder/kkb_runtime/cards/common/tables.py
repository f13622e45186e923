"""Cards over a test *table* (text, gradient boosting, scikit-learn): the rows, the columns, the output.

The rows are the sample submission's ids, in its order, looked up in the competition's test table
(``[competition] test``, default ``test.csv``; CSV or parquet) by the id column, compared as strings. What a card
hands to the user's functions (a feature or encode function) is the table as the notebook's own ``pd.read_csv`` (or
``pd.read_parquet``) reads it, pandas' defaults, and the id column of the sample submission's type as
``pd.read_csv`` reads the sample (integers for integer ids): :func:`test_rows`.
A step writes its prediction columns: the step's ``columns`` (a column group) when it declares them,
else the card's ``columns``, else every prediction column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...card import Card
from ...config import KernelConfig
from ...context import Context
from ...inputs import find_competition, find_dataset
from ...submission import read_sample, target_columns, write_submission

if TYPE_CHECKING:  # imported where used: importing kkb_runtime stays free of them (kkb_runtime/__init__)
    import numpy as np
    import pandas as pd


DEFAULT_TEST_TABLE = "test.csv"
TABLE_SUFFIXES = (".csv", ".parquet", ".pq")


class PredictError(RuntimeError):
    """The step cannot predict: missing images, a card that does not match the targets, ..."""


class TableError(RuntimeError):
    """The test table is missing, or lacks the ids or the columns a card reads."""


@dataclass(frozen=True)
class TableJob:
    """One ``predict`` run of a table card: the rows (in the sample's order) and where the output goes."""

    table: pd.DataFrame
    ids: list[str]
    id_column: str
    columns: list[str]
    weights_dir: Path
    out: Path
    competition_dir: Path

    def context(self, card: Card, config: KernelConfig) -> Context:
        """What the card's own functions get as ``ctx``: the folders this step reads, the card."""
        return card_context(card, config, self.weights_dir, self.competition_dir)


def weights_dir(config: KernelConfig, environ: Mapping[str, str]) -> Path:
    if environ.get("KKB_WEIGHTS_DIR"):
        return Path(environ["KKB_WEIGHTS_DIR"])
    if not config.datasets.weights:
        raise PredictError("no weights dataset: set KKB_WEIGHTS_DIR or list the checkpoints under [weights] in kernel.toml")
    return find_dataset(config.datasets.weights)


def competition_dir(config: KernelConfig, environ: Mapping[str, str]) -> Path:
    if environ.get("KKB_COMPETITION_DIR"):
        return Path(environ["KKB_COMPETITION_DIR"])
    return find_competition(config.competition.slug, config.competition.sample_submission)


def row_limit(environ: Mapping[str, str]) -> int | None:
    value = environ.get("KKB_ROW_LIMIT", "").strip()
    return int(value) if value else None


def step_columns(config: KernelConfig, environ: Mapping[str, str], card: Card, predictions: Sequence[str]) -> list[str]:
    """The columns this step writes: its own ``columns``, else the card's, else every prediction column."""
    name = environ.get("KKB_STEP_NAME")
    step = config.step(name)
    declared = list((step.columns if step is not None else ()) or card.columns)
    unknown = [column for column in declared if column not in predictions]
    if unknown:
        raise TableError(f"step '{name or card.name}' declares column(s) {', '.join(unknown)}, which are no "
                         f"prediction column ({', '.join(predictions)})")
    return declared or list(predictions)


def prediction_columns(config: KernelConfig, sample: pd.DataFrame) -> list[str]:
    """``[submission] prediction_columns``, else the sample's target columns."""

    submission = config.submission
    return list(submission.prediction_columns) or target_columns(sample, submission.id_column, submission.target_columns)


def table_path(config: KernelConfig, competition: Path) -> Path:
    configured = config.competition.test
    path = competition / (configured or DEFAULT_TEST_TABLE)
    if not path.is_file() or path.suffix.lower() not in TABLE_SUFFIXES:
        where = f"[competition] test = {configured!r}" if configured else "set [competition] test to the test table"
        raise TableError(f"test table not found: {path} ({where}; a CSV or parquet file with the id column)")
    return path


def read_table(path: Path, id_column: str) -> pd.DataFrame:
    """The table as pandas reads it by default (the notebook's dtypes and missing values), its ids as text (exact)."""
    import pandas as pd
    if path.suffix.lower() in (".parquet", ".pq"):
        frame = pd.read_parquet(path)
        if id_column in frame.columns:
            frame[id_column] = frame[id_column].astype(str)
        return frame
    return pd.read_csv(path, dtype={id_column: str})


def sample_id_dtype(sample: Path, id_column: str) -> Any:
    """The id column's dtype as ``pd.read_csv`` reads the sample submission (int64 for integer ids)."""
    import numpy as np
    import pandas as pd
    try:
        return pd.read_csv(sample, usecols=[id_column])[id_column].dtype
    except (ValueError, OSError):
        return np.dtype(object)


def as_sample_ids(frame: pd.DataFrame, id_column: str, dtype: Any) -> pd.DataFrame:
    """``frame`` with its id column (text) of ``dtype``, as the notebook's reader gives it; text where it is not a
    number (a numeric type the ids do not parse as)."""
    import pandas as pd
    if id_column not in frame.columns or not pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype):
        return frame
    try:
        values = pd.to_numeric(frame[id_column]).astype(dtype)
    except (ValueError, TypeError):
        return frame
    return frame.assign(**{id_column: values})


def test_rows(path: Path, sample: Path, ids: Sequence[str], id_column: str) -> pd.DataFrame:
    """The test table's rows for ``ids`` in that order, as the notebook reads them (see the module): what a card hands
    to the user's functions."""
    rows = rows_in_sample_order(read_table(path, id_column), ids, id_column, path)
    return as_sample_ids(rows, id_column, sample_id_dtype(sample, id_column))


def rows_in_sample_order(table: pd.DataFrame, ids: Sequence[str], id_column: str, where: Path) -> pd.DataFrame:
    """The table's rows for ``ids``, in that order; every id must be there exactly once."""
    if id_column not in table.columns:
        raise TableError(f"{where}: no id column '{id_column}' (it has: {', '.join(map(str, table.columns))})")
    keyed = table.drop_duplicates(id_column).set_index(id_column)
    missing = [image_id for image_id in ids if image_id not in keyed.index]
    if missing:
        raise TableError(f"{where}: {len(missing)} id(s) of the sample submission are not in the test table "
                         f"(e.g. {', '.join(map(repr, missing[:3]))})")
    return keyed.loc[list(ids)].reset_index()


def require_columns(frame: pd.DataFrame, wanted: Sequence[str], card: Card, where: Path) -> None:
    missing = [column for column in wanted if column not in frame.columns]
    if missing:
        raise TableError(f"model '{card.name}': the test table {where.name} has no column(s) {', '.join(missing)} "
                         f"(it has: {', '.join(map(str, frame.columns))})")


def make_table_job(card: Card, out: Path, config: KernelConfig, competition: Path, weights: Path,
                   environ: Mapping[str, str], row_limit: int | None) -> TableJob:

    id_column = config.submission.id_column
    sample_path = competition / config.competition.sample_submission
    sample = read_sample(sample_path, id_column)
    columns = step_columns(config, environ, card, prediction_columns(config, sample))
    if card.num_classes != len(columns):
        raise TableError(f"model '{card.name}' has num_classes = {card.num_classes} but its step writes "
                         f"{len(columns)} column(s) ({', '.join(columns)})")
    ids = sample[id_column].astype(str).tolist()[:row_limit]
    table = test_rows(table_path(config, competition), sample_path, ids, id_column)
    return TableJob(table, ids, id_column, columns, weights, out, competition)


def write_table_output(job: TableJob, values: np.ndarray) -> Path:
    import numpy as np
    import pandas as pd

    values = np.asarray(values, dtype=np.float64).reshape(len(job.ids), -1)
    frame = pd.DataFrame(values, columns=job.columns)
    frame.insert(0, job.id_column, job.ids)
    return write_submission(frame, job.out)  # a step's output is written as atomically as the submission


def table_job(card: Card, out: Path, environ: Mapping[str, str], config: KernelConfig) -> TableJob:
    return make_table_job(card, out, config, competition_dir(config, environ), weights_dir(config, environ), environ,
                          row_limit(environ))


def first_rows(config: KernelConfig, data: Path, rows: int) -> pd.DataFrame:
    """The first ``rows`` test rows in the sample's order, as the kernel hands them to a card (a view's rows)."""

    id_column = config.submission.id_column
    sample = data / config.competition.sample_submission
    ids = read_sample(sample, id_column)[id_column].astype(str).tolist()[:rows]
    test = data / (config.competition.test or DEFAULT_TEST_TABLE)
    return test_rows(test, sample, ids, id_column).reset_index(drop=True)


def card_context(card: Card, config: KernelConfig, weights: Path, data: Path) -> Context:
    """What a card's own functions get as ``ctx``: the weights and competition folders the step (or the view,
    ``--show-inputs``) reads, the code dataset, the card."""
    return Context(competition_dir=data, weights_dir=weights, code_dir=config.code_dir, card=card, config=config,
                   id_column=config.submission.id_column)


def plain(value: Any) -> Any:
    """A numpy scalar as the Python value JSON writes (a view's values)."""
    import numpy as np
    return value.item() if isinstance(value, np.generic) else value


__all__ = [
    "PredictError", "TableError", "TableJob", "competition_dir", "first_rows", "make_table_job", "plain", "prediction_columns",
    "as_sample_ids", "read_table", "row_limit", "rows_in_sample_order", "sample_id_dtype", "step_columns", "table_job",
    "table_path", "test_rows", "weights_dir", "write_table_output", "card_context",
]
