"""A bigger test set made from the public one: every test row and file replicated under new ids.

One implementation for both rehearsals of a large hidden test: the local dry run's ``--rerun-scale``
(``builder.rehearse.sandbox`` wraps it) and the rehearsal on Kaggle's own machines
(``kkb_runtime.rehearsal``, inside the kernel, where it writes under ``/kaggle/temp``). Standard
library + pandas only, like the rest of the runtime.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

Fallback = Literal["copy", "symlink"]


class ScaleError(ValueError):
    """The data cannot be scaled (no sample submission, no id column, a bad factor)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


TABLE_SUFFIXES = (".csv", ".parquet")


@dataclass(frozen=True)
class ScaledData:
    """Competition data with the test replicated ``factor`` times under new ids."""

    path: Path
    factor: int
    rows: int  # rows of the new sample submission
    replicated: tuple[str, ...]  # files rewritten or added, relative to ``path``


def scale_competition_data(source: Path, dest: Path, factor: int, *, id_column: str,
                           sample_submission: str = "sample_submission.csv", test: str | None = None,
                           fallback: Fallback = "copy") -> ScaledData:
    """Copy ``source`` to ``dest`` with every test row and test file repeated ``factor`` times.

    Copy 0 keeps the original ids; copy k gets new ones (numeric ids are shifted past the largest,
    others get a ``_r<k>`` suffix), in the sample submission, in every test table (rows whose ids
    are all sample ids) and in the names of files and folders named by an id (``test/<id>.jpg``).
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
    _link_tree(source, dest, fallback)
    ids = sample[id_column].tolist()
    new_id = _id_maker(ids)
    mapping = [{old: new_id(old, k) for old in ids} for k in range(factor)]
    replicated = [sample_submission]
    _write_table(_replicate(sample, id_column, mapping), dest / sample_submission)
    for relative in _test_tables(source, sample_submission, test, id_column, set(ids)):
        table = _read_table(source / relative, id_column)
        _write_table(_replicate(table, id_column, mapping), dest / relative)
        replicated.append(relative)
    for relative in _test_files(source, test, set(ids)):
        replicated += _copy_with_new_ids(dest, relative, mapping, fallback)
    return ScaledData(path=dest, factor=factor, rows=len(sample) * factor, replicated=tuple(replicated))


def _link_tree(source: Path, dest: Path, fallback: Fallback) -> None:
    shutil.copytree(source, dest, copy_function=lambda src, dst: _link(src, dst, fallback))


def _link(src: str | Path, dst: str | Path, fallback: Fallback) -> None:
    try:
        os.link(src, dst)  # a link to a symlink is a symlink (Linux does not follow it): still no copy
    except OSError:
        if fallback == "symlink":
            os.symlink(os.path.realpath(src), dst)
        else:
            shutil.copy2(src, dst)


def _id_maker(ids: list[str]):  # type: ignore[no-untyped-def]
    """Numeric ids (no leading zeros) shift past the largest id; other ids get a suffix."""
    numeric = all(value.isdigit() and (value == "0" or not value.startswith("0")) for value in ids) and ids
    if numeric:
        span = max(int(value) for value in ids) + 1
        return lambda value, k: value if k == 0 else str(int(value) + k * span)
    return lambda value, k: value if k == 0 else _suffixed(value, k)


def _suffixed(value: str, k: int) -> str:
    """``abc_r1``; an id that carries a file extension keeps it last: ``abc.jpg`` -> ``abc_r1.jpg``."""
    path = PurePosixPath(value)
    if re.fullmatch(r"\.[A-Za-z][A-Za-z0-9]{0,4}", path.suffix) and path.stem:
        return value[: -len(path.suffix)] + f"_r{k}" + path.suffix
    return f"{value}_r{k}"


def _replicate(frame, id_column: str, mapping: list[dict[str, str]]):  # type: ignore[no-untyped-def]
    import pandas as pd

    copies = []
    for ids in mapping:
        copy = frame.copy()
        copy[id_column] = copy[id_column].map(ids)
        for column in copy.columns:
            if column != id_column and (pd.api.types.is_string_dtype(copy[column]) or copy[column].dtype == object):
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
        try:
            column = _read_table(path, id_column)
        except Exception:
            continue
        if id_column in column.columns and len(column) and set(column[id_column].astype(str)) <= ids:
            found.append(relative)
    return found


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
