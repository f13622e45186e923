"""A bigger test set made from the public one: every test row and file replicated under new ids.

One implementation for both rehearsals of a large hidden test: the local dry run's ``--rerun-scale``
(``builder.run.sandbox`` wraps it) and the rehearsal on Kaggle's own machines
(``kkb_runtime.rehearsal``, inside the kernel, where it writes under ``/kaggle/temp``). Standard
library + pandas only, like the rest of the runtime.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from .references import (
    KeyMaker,
    ScaleError,
    Scan,
    StandInConfig,
    StandInPlan,
    detect,
    key_maker,
    render,
    replicate_reference,
    scan,
    suffixed,
    test_side,
)

Fallback = Literal["copy", "symlink"]


TABLE_SUFFIXES = (".csv", ".parquet")


@dataclass(frozen=True)
class ScaledData:
    """Competition data with the test replicated ``factor`` times under new ids."""

    path: Path
    factor: int
    rows: int  # rows of the new sample submission
    replicated: tuple[str, ...]  # files rewritten or added, relative to ``path``
    description: str = ""  # what was replicated and how (``stand-in: test.csv rows x 10; ...``)


def scale_competition_data(source: Path, dest: Path, factor: int, *, id_column: str,
                           sample_submission: str = "sample_submission.csv", test: str | None = None,
                           fallback: Fallback = "copy", stand_in: StandInConfig | None = None) -> ScaledData:
    """Copy ``source`` to ``dest`` with every test row and the data it references repeated ``factor`` times.

    Copy 0 keeps the original ids; copy k gets new ones (numeric ids are shifted past the largest,
    others get a ``_r<k>`` suffix), in the sample submission, in every test table (rows whose ids
    are all sample ids) and in the names of files and folders named by an id (``test/<id>.jpg``).
    The test table's key columns get new values the same way, and what they reference follows them
    (:mod:`kkb_runtime.references`: ``key=value/`` partitions, files named by a key, joined tables; an id
    composed of keys is rebuilt from the new ones). Test data kkb cannot follow is refused by name.
    ``test`` (``[competition] test``) names the test table or folder; without it kkb looks for them.
    Unchanged files are hard links where the file system allows (never written through: every file
    kkb rewrites is unlinked first); elsewhere ``fallback`` decides: ``copy`` (the dry run: its sandbox
    may not see the source's path) or ``symlink`` (inside a kernel: ``/kaggle/input`` is another file
    system, and a copy of the training data would fill ``/kaggle/temp``).
    """
    import pandas as pd

    if factor < 1:
        raise ScaleError(f"--rerun-scale must be at least 1, got {factor}")
    source, dest = Path(source), Path(dest)
    sample_path = source / sample_submission
    if not sample_path.is_file():
        raise ScaleError(f"{sample_path}: no sample submission to scale", "check [competition] data and sample_submission")
    sample = pd.read_csv(sample_path, dtype={id_column: str})
    if id_column not in sample.columns:
        raise ScaleError(f"{sample_path}: no id column '{id_column}'", "set [submission] id_column")
    ids = sample[id_column].tolist()
    tables = _test_tables(source, sample_submission, test, id_column, set(ids))
    plan, frame, found = _plan(source, tables, id_column, stand_in or StandInConfig())
    if factor > 1 and plan.unfollowed:
        raise ScaleError(f"{source}: cannot replicate the test consistently: {', '.join(plan.unfollowed)} "
                         f"{'is' if len(plan.unfollowed) == 1 else 'are'} test data kkb cannot follow from "
                         f"{plan.test_table or sample_submission}'s rows (replicated rows would have no data there)",
                         "state how the rows reference them in [competition.stand_in] (keys, tables, files, id), "
                         "or give a bigger stand-in with --rerun-data")
    makers = {key: key_maker(_all_values(key, frame, found)) for key in plan.keys}
    mapping = _id_mapping(ids, frame, id_column, plan, makers, factor)
    _refuse_collisions(source, sample_path, id_column, mapping, _test_files(source, test, set(ids)))
    shutil.copytree(source, dest, copy_function=lambda src, dst: _link(src, dst, fallback))  # a new folder of kkb's
    replicated = [sample_submission]
    _write_table(_replicate(sample, id_column, mapping), dest / sample_submission)
    for relative in tables:
        table = _read_table(source / relative, id_column)
        _write_table(_replicate(table, id_column, mapping, makers), dest / relative)
        replicated.append(relative)
    for reference in plan.followed():
        replicated += replicate_reference(source, dest, reference, frame, makers, factor,
                                          lambda a, b: _link_tree(a, b, fallback), lambda a, b: _link(a, b, fallback))
    id_files = [added for relative in _test_files(source, test, set(ids))
                for added in _copy_with_new_ids(dest, relative, mapping, fallback)]
    return ScaledData(path=dest, factor=factor, rows=len(sample) * factor, replicated=(*replicated, *id_files),
                      description=plan.describe(factor, _test_files(source, test, set(ids))))


def _plan(source: Path, tables: list[str], id_column: str, config: StandInConfig) -> tuple[StandInPlan, Any, Scan]:
    """The test table (one named like a test first) and what its rows reference."""
    found = scan(source)
    ordered = sorted(tables, key=lambda name: (not test_side(name), name))
    test_table = ordered[0] if ordered else None
    frame = _read_table(source / test_table, id_column) if test_table else None
    return detect(source, test_table, frame, id_column, config, found, _columns), frame, found


def _all_values(key: str, frame: Any, found: Scan) -> list[str]:
    """Every value of ``key`` kkb saw (test rows, partition folders of every dataset): new keys pass them all."""
    values = {str(v) for v in frame[key].dropna()} if frame is not None and key in frame.columns else set()
    for keys in found.partitions.values():
        values |= keys.get(key, set())
    return sorted(values)


def _id_mapping(ids: list[str], frame: Any, id_column: str, plan: StandInPlan, makers: dict[str, KeyMaker],
                factor: int) -> list[dict[str, str]]:
    """Per copy, old id -> new id: rendered from the copy's new keys when the id is composed of them."""
    if plan.id_template is None or frame is None or id_column not in frame.columns:
        new_id = _id_maker(ids)
        return [{old: new_id(old, k) for old in ids} for k in range(factor)]
    rows = frame.to_dict("records")
    mapping = []
    for k in range(factor):
        copy = {str(row[id_column]): render(plan.id_template, {c: makers[c](v, k) if c in makers else v
                                                               for c, v in row.items()}) for row in rows}
        mapping.append({old: copy.get(old, old if k == 0 else f"{old}_r{k}") for old in ids})
    return mapping


def _refuse_collisions(source: Path, sample_path: Path, id_column: str, mapping: list[dict[str, str]],
                       id_files: list[str]) -> None:
    """Before anything is written: a new id that is an id of the test already, or whose file (``test/<new id>.jpg``) the
    data already has, is refused by name. The copy would take the data's own file for its own (and a copy made in its
    place would be written where the data's file is linked)."""
    originals = set(mapping[0])
    for k, ids in enumerate(mapping[1:], start=1):
        taken = sorted(new for old, new in ids.items() if new in originals and new != old)
        if taken:
            raise ScaleError(f"{sample_path}: copy {k} of the test would give the id '{taken[0]}' to another row, but "
                             f"'{taken[0]}' is an id of the test already ({len(taken)} such id(s))",
                             "the test's ids look like kkb's copies (<id>_r<k>): give a bigger test with --rerun-data")
    for relative in id_files:
        original = source / relative
        key = original.name if original.name in mapping[0] else original.stem
        for k, ids in enumerate(mapping[1:], start=1):
            name = ids[key] + ("" if key == original.name else original.suffix)
            if name != original.name and os.path.lexists(original.with_name(name)):
                raise ScaleError(f"{original.with_name(name)}: copy {k} of {relative} would be named "
                                 f"{original.with_name(name).relative_to(source).as_posix()}, a file the data already has: "
                                 "kkb never writes over or mixes in your data",
                                 "rename that file, or give a bigger test with --rerun-data")


def _link_tree(source: Path, dest: Path, fallback: Fallback) -> None:
    if os.path.lexists(dest):
        raise ScaleError(f"{dest}: a copy of the test would be made where a file or folder of the data is already",
                         "rename it, or give a bigger test with --rerun-data")
    shutil.copytree(source, dest, copy_function=lambda src, dst: _link(src, dst, fallback))


def _link(src: str | Path, dst: str | Path, fallback: Fallback) -> None:
    """``dst`` as a new name of ``src``'s file (a hard link; else a symlink or a copy), never written over: a name that
    exists already is refused, since writing there could write through to the data's own file."""
    if os.path.lexists(dst):
        raise ScaleError(f"{dst}: a copy of a test file would be named like a file the data already has",
                         "rename that file, or give a bigger test with --rerun-data")
    try:
        os.link(src, dst)  # a link to a symlink is a symlink (Linux does not follow it): still no copy
    except OSError:
        if fallback == "symlink":
            os.symlink(os.path.realpath(src), dst)
        else:
            with open(src, "rb") as reading, open(dst, "xb") as writing:  # "x": a new file, never an existing one
                shutil.copyfileobj(reading, writing)
            shutil.copystat(src, dst)


def _id_maker(ids: list[str]):  # type: ignore[no-untyped-def]
    """Numeric ids (no leading zeros) shift past the largest id; other ids get a suffix."""
    numeric = all(value.isdigit() and (value == "0" or not value.startswith("0")) for value in ids) and ids
    if numeric:
        span = max(int(value) for value in ids) + 1
        return lambda value, k: value if k == 0 else str(int(value) + k * span)
    return lambda value, k: value if k == 0 else suffixed(value, k)


def _replicate(frame, id_column: str, mapping: list[dict[str, str]],  # type: ignore[no-untyped-def]
               makers: dict[str, KeyMaker] | None = None):
    import pandas as pd

    copies = []
    for k, ids in enumerate(mapping):
        copy = frame.copy()
        copy[id_column] = copy[id_column].map(ids)
        for key, maker in (makers or {}).items():
            if key in copy.columns:
                copy[key] = copy[key].map(lambda value, maker=maker, k=k: maker(value, k))
        for column in copy.columns:
            if column != id_column and column not in (makers or {}) and (pd.api.types.is_string_dtype(copy[column]) or copy[column].dtype == object):
                copy[column] = copy[column].map(lambda value, ids=ids: _rename_path(value, ids))
        copies.append(copy)
    return pd.concat(copies, ignore_index=True)


def _rename_path(value: object, ids: dict[str, str]) -> object:
    """``test/<id>.jpg`` in a table column follows its file's new name."""
    if not isinstance(value, str):
        return value
    path = PurePosixPath(value)
    if path.name in ids and path.name != ids[path.name]:  # the id is the file name, extension included
        return str(path.with_name(ids[path.name]))
    if path.stem in ids and path.stem != ids[path.stem]:
        return str(path.with_name(ids[path.stem] + path.suffix))
    return value


def _read_table(path: Path, id_column: str):  # type: ignore[no-untyped-def]
    import pandas as pd

    if path.suffix == ".parquet":
        frame = pd.read_parquet(path)
        if id_column in frame.columns:
            frame[id_column] = frame[id_column].astype(str)
        return frame
    return pd.read_csv(path, dtype={id_column: str})


def _write_table(frame, path: Path) -> None:  # type: ignore[no-untyped-def]
    path.unlink(missing_ok=True)  # a hard link to the source: never write through it
    if path.suffix == ".parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)


def _test_tables(source: Path, sample_submission: str, test: str | None, id_column: str, ids: set[str]) -> list[str]:
    if test and (source / test).is_file():
        return [test] if (source / test).suffix in TABLE_SUFFIXES else []
    candidates = [path for path in sorted(source.rglob("*")) if path.suffix in TABLE_SUFFIXES and path.is_file()]
    found = []
    for path in candidates:
        relative = path.relative_to(source).as_posix()
        if relative == sample_submission:
            continue
        if id_column not in _columns(path):  # the header first: most tables (train, partitions) lack the id
            continue
        try:
            column = _read_table(path, id_column)
        except Exception:
            continue
        if id_column in column.columns and len(column) and set(column[id_column].astype(str)) <= ids:
            found.append(relative)
    return found


def _columns(path: Path) -> list[str]:
    """A table's column names without reading its rows ([] for a file that is no table kkb can read)."""
    import pandas as pd

    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

            return [str(name) for name in pq.read_schema(path).names]  # type: ignore[no-untyped-call,unused-ignore]
        return [str(name) for name in pd.read_csv(path, nrows=0).columns]
    except Exception:  # a parquet without pyarrow, a CSV that is not one: not a table here
        return []


def _test_files(source: Path, test: str | None, ids: set[str]) -> list[str]:
    """Files and folders named by a test id (``test/<id>.jpg``, ``test_images/<id>/``), outermost only."""
    base = source / test if test and (source / test).is_dir() else source
    found: list[str] = []
    for path in sorted(base.rglob("*")):
        if path.suffix in TABLE_SUFFIXES and path.is_file():
            continue
        if path.stem in ids or path.name in ids:
            relative = path.relative_to(source).as_posix()
            if not any(relative.startswith(parent + "/") for parent in found):
                found.append(relative)
    return found


def _copy_with_new_ids(dest: Path, relative: str, mapping: list[dict[str, str]], fallback: Fallback) -> list[str]:
    original = dest / relative
    key = original.name if original.name in mapping[0] else original.stem
    added = []
    for ids in mapping[1:]:
        name = ids[key] + ("" if key == original.name else original.suffix)
        target = original.with_name(name)
        if original.is_dir():
            _link_tree(original, target, fallback)
        else:
            _link(original, target, fallback)
        added.append(target.relative_to(dest).as_posix())
    return added
