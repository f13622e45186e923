"""An evaluation-API test at hidden scale: more batches along the gateway's key, never wider ones.

An evaluation-API gateway serves the test one value of a key at a time (Jane Street's ``date_id``, each date a
``test.parquet/date_id=N/`` partition; kkb-evalapi's ``date_id`` column), and a real ``predict`` keeps state across
batches (lags from the previous date, rolling windows per symbol). ``--rerun-scale N`` therefore replicates the test
*along* that key: copy ``k`` of every batch gets the key value ``v + k * span`` (``span`` = the key's range), so new
dates follow the last one, each partition holds only its own rows, the ids keep the test's own type (an integer
``row_id`` shifted past the largest, text ``_r<k>``), and the grouping and order inside a batch are kept: a stateful
``predict`` sees a series N times longer, not a batch N times wider.

The key is, in order: ``[competition.stand_in] batch_key``; the partition key of a gateway path
(``test.parquet/date_id=0/``); the column the gateway's module groups by (``groupby("date_id")``,
``group_by``, ``partition_by``). Where none is found, or the key holds text, the dry run refuses naming what it
looked at. Every table the gateway reads (``[evaluation_api] gateway_paths``) that has the key is replicated; one
without it (a static table) is kept as it is; the sample submission follows the ids.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from builder.errors import DryRunError
from builder.kkb_runtime.references import suffixed
from builder.kkb_runtime.scale import ScaledData
from builder.project.spec import SPEC_FILE, KernelSpec
from builder.run.gateway import evaluation_section, gateway_module

if TYPE_CHECKING:  # imported where used: the CLI starts without them (tests/test_dry_run_cost.py)
    import pandas as pd

TABLES = (".csv", ".parquet")
_PARTITION = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.+)$")
# What a gateway groups its test by: pandas' groupby, polars' group_by / partition_by, first argument a column name.
_GROUPED = re.compile(r"\b(?:groupby|group_by|partition_by)\(\s*\[?\s*['\"]([A-Za-z_][A-Za-z0-9_]*)['\"]")
IdMaker = Callable[[object, int], object]


@dataclass(frozen=True)
class BatchKey:
    """The column the gateway serves the test by, and where kkb found it (the report says)."""

    column: str
    found: str


def replicate_batches(spec: KernelSpec, source: Path, dest: Path, factor: int, kernel_dir: Path | None = None) -> ScaledData:
    """``source`` (the public test) at ``dest`` with ``factor`` times the batches along the gateway's key."""
    paths = gateway_tables(spec, source, kernel_dir)
    key = batch_key(spec, source, paths, kernel_dir)
    values = [value for path in paths for value in _key_values(source / path, key)]
    if not values:
        raise DryRunError(f"{_where(kernel_dir)}: the gateway's batch key '{key.column}' ({key.found}) is in none of the "
                          f"tables the gateway reads ({', '.join(paths)})",
                          hint="state the column the gateway serves the test by in [competition.stand_in] batch_key")
    span = int(max(values)) - int(min(values)) + 1
    id_column = spec.submission.id_column
    ids = _id_maker([v for path in [*paths, spec.competition.sample_submission] for v in _values(source / path, id_column)])
    shutil.copytree(source, dest, copy_function=_link)
    for path in paths:
        _replicate_path(source / path, dest / path, key.column, span, id_column, ids, factor)
    sample = _read(source / spec.competition.sample_submission)
    _write(_copies(sample, None, span, id_column, ids, factor), dest / spec.competition.sample_submission)
    batches = len(set(values))
    return ScaledData(path=dest, factor=factor, rows=len(sample) * factor, replicated=(*paths, spec.competition.sample_submission),
                      description=(f"stand-in: {', '.join(paths)} x {factor} along {key.column} (the gateway's batches: "
                                   f"{batches} -> {batches * factor}, each new {key.column} after the last; {key.found}); "
                                   f"{id_column} in the test's own type"))


def gateway_tables(spec: KernelSpec, source: Path, kernel_dir: Path | None = None) -> list[str]:
    """What the gateway reads: ``[evaluation_api] gateway_paths``, else ``[competition] test``."""
    paths = list(evaluation_section(spec).gateway_paths) or ([spec.competition.test] if spec.competition.test else [])
    if not paths:
        raise DryRunError(f"{_where(kernel_dir)}: cannot tell which tables the competition's gateway serves",
                          hint="set [evaluation_api] gateway_paths (relative to the competition folder), e.g. ['test.csv']")
    missing = [path for path in paths if not (source / path).exists()]
    if missing:
        raise DryRunError(f"{source}: the gateway's {', '.join(missing)} is missing from the competition data",
                          hint="point --data at the competition folder the gateway reads, or fix [evaluation_api] gateway_paths")
    return paths


def batch_key(spec: KernelSpec, source: Path, paths: list[str], kernel_dir: Path | None = None) -> BatchKey:
    """The gateway's batching key (see the module docstring), or a refusal naming where kkb looked."""
    stated = spec.competition.stand_in.batch_key
    if stated:
        return BatchKey(stated, "as [competition.stand_in] batch_key states")
    for path in paths:
        partitions = [match.group(1) for folder in sorted((source / path).glob("*")) if folder.is_dir()
                      and (match := _PARTITION.match(folder.name))] if (source / path).is_dir() else []
        if partitions:
            return BatchKey(partitions[0], f"{path} is partitioned by it")
    module = gateway_module(evaluation_section(spec))
    code = source / (module.replace(".", "/") + ".py")
    columns = {column for path in paths for column in _columns(source / path)}
    text = code.read_text(encoding="utf-8", errors="replace") if code.is_file() else ""
    for column in _GROUPED.findall(text):
        if column in columns:
            return BatchKey(column, f"the gateway ({module}) groups the test by it")
    raise DryRunError(f"{_where(kernel_dir)}: cannot find the key the competition's gateway ({module}) serves the test "
                      f"by: no partition folder in {', '.join(paths)}, no groupby/group_by/partition_by of one of their "
                      f"columns in {code.name if code.is_file() else code}",
                      hint="state it in [competition.stand_in] batch_key = \"<column>\" (e.g. \"date_id\"): --rerun-scale "
                           "appends new batches after the last along it")


# --- replication -----------------------------------------------------------------------------------

def _replicate_path(source: Path, dest: Path, key: str, span: int, id_column: str, ids: IdMaker, factor: int) -> None:
    if source.is_file():
        frame = _read(source)
        if key in frame.columns:
            _write(_copies(frame, key, span, id_column, ids, factor), dest)
        return
    folders = [(folder, match.group(2)) for folder in sorted(source.iterdir())
               if folder.is_dir() and (match := _PARTITION.match(folder.name)) and match.group(1) == key]
    if folders:  # one partition per key value: each new value its own partition, holding only its own rows
        for folder, value in folders:
            for k in range(1, factor):
                target = dest / f"{key}={int(value) + k * span}"
                for table in _tables(folder):
                    frame = _read(table)
                    _write(_copy(frame, key, span, id_column, ids, k), target / table.relative_to(folder))
        return
    for table in _tables(source):  # partitioned by another key, or a folder of tables: each table replicated in place
        frame = _read(table)
        if key in frame.columns:
            _write(_copies(frame, key, span, id_column, ids, factor), dest / table.relative_to(source))


def _copies(frame: pd.DataFrame, key: str | None, span: int, id_column: str, ids: IdMaker, factor: int) -> pd.DataFrame:
    import pandas as pd
    return pd.concat([_copy(frame, key, span, id_column, ids, k) for k in range(factor)], ignore_index=True)


def _copy(frame: pd.DataFrame, key: str | None, span: int, id_column: str, ids: IdMaker, k: int) -> pd.DataFrame:
    """Copy ``k``: the key shifted by ``k * span`` and the ids renamed, every dtype as it was."""
    copy = frame.copy()
    if k == 0:
        return copy
    if key is not None and key in copy.columns:
        copy[key] = (copy[key] + k * span).astype(frame[key].dtype)
    if id_column in copy.columns:
        copy[id_column] = copy[id_column].map(lambda value: ids(value, k)).astype(frame[id_column].dtype)
    return copy


def _id_maker(values: Iterable[object]) -> IdMaker:
    """Integer ids shift past the largest (keeping their type); text ids get ``_r<k>``."""
    seen = list(values)
    if seen and all(isinstance(value, int) and not isinstance(value, bool) for value in seen):
        shift = max(int(value) for value in seen) + 1  # type: ignore[call-overload]
        return lambda value, k: value if k == 0 else int(value) + k * shift  # type: ignore[call-overload]
    return lambda value, k: value if k == 0 else suffixed(str(value), k)


def _key_values(path: Path, batch: BatchKey) -> list[int]:
    """The key's values in a table (or a folder's partitions and tables); text values are refused by name."""
    key = batch.column
    if path.is_dir():
        found = [match.group(2) for folder in path.iterdir() if folder.is_dir() and (match := _PARTITION.match(folder.name))
                 and match.group(1) == key]
        values: list[object] = list(found) or [v for table in _tables(path) for v in _column(table, key)]
    else:
        values = _column(path, key)
    try:
        return [int(str(value)) for value in values]
    except ValueError:
        raise DryRunError(f"{path}: the gateway's batch key '{key}' ({batch.found}) holds text ({values[0]!r}): kkb "
                          "appends new batches "
                          "after the last only along a whole-number key",
                          hint="give a bigger stand-in with --rerun-data, or state an integer key in "
                               "[competition.stand_in] batch_key") from None


def _values(path: Path, column: str) -> list[object]:
    """A column's distinct values in a table, or in every table of a folder."""
    return [v for table in _tables(path) for v in _column(table, column)] if path.is_dir() else _column(path, column)


def _column(path: Path, column: str) -> list[object]:
    if not path.is_file() or column not in _columns(path):
        return []
    return [value.item() if hasattr(value, "item") else value for value in _read(path)[column].dropna().unique()]


def _columns(path: Path) -> list[str]:
    import pandas as pd
    if path.is_dir():
        return [column for table in _tables(path)[:1] for column in _columns(table)]
    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

            return [str(name) for name in pq.read_schema(path).names]  # type: ignore[no-untyped-call,unused-ignore]
        return [str(name) for name in pd.read_csv(path, nrows=0).columns]
    except Exception:  # not a table kkb can read
        return []


def _tables(folder: Path) -> list[Path]:
    return [path for path in sorted(folder.rglob("*")) if path.is_file() and path.suffix in TABLES]


def _read(path: Path) -> pd.DataFrame:
    import pandas as pd
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)


def _write(frame: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)  # a hard link to the source: never write through it
    frame.to_parquet(path, index=False) if path.suffix == ".parquet" else frame.to_csv(path, index=False)


def _link(source: str, dest: str) -> None:
    try:
        Path(dest).hardlink_to(source)
    except OSError:
        shutil.copy2(source, dest)


def _where(kernel_dir: Path | None) -> str:
    return str(Path(kernel_dir) / SPEC_FILE) if kernel_dir is not None else SPEC_FILE
