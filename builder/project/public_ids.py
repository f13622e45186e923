"""``[competition] public_ids``: the file of the test's public ids, read and checked before anything runs.

A file that matches no test id, matches every id, or holds the ids in another column gave "split: unknown"
silently; a missing one was refused only after the whole rerun. Now each of those is a :class:`SpecError`
naming the file and what is wrong, at build, against the public test: every public id must be one of its ids
(the competition's own public ids are the public test's). A hidden stand-in (``--rerun-data``, a port's
synthetic ``hidden/``) is not Kaggle's hidden test and cannot refute them: the dry run names one that lacks them
in a note of its metric report, never a refusal.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from builder.errors import SpecError

_HINT = ("name a file of the test's public ids (one a line, or a CSV whose id column is named as the "
         "submission's), relative to the kernel folder")


def _rows(path: Path) -> list[list[str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [[cell.strip().strip('"') for cell in line.split(",")] for line in lines if line.strip()]


def read_public_ids(path: Path, id_column: str | None = None) -> set[str]:
    """One id a line, or a CSV: its ``id_column`` where the header names it, else its first column (a header line
    that is no id is then one id that matches nothing)."""
    rows = _rows(path)
    if rows and id_column and len(rows[0]) > 1 and id_column in rows[0]:
        at = rows[0].index(id_column)
        return {row[at] for row in rows[1:] if len(row) > at and row[at]}
    return {row[0] for row in rows if row and row[0]}


def check_public_ids(path: Path, where: str, id_column: str, test_ids: Collection[str] | None,
                     test_name: str = "the test", whole: bool = True) -> set[str]:
    """The public ids, refused (``where`` names the setting) when the file is missing, holds several columns none
    of which is the id column, or, against ``test_ids``, holds ids the test lacks, or (``whole``: the test is the
    whole hidden test) names all of them."""
    if not path.is_file():
        raise SpecError(f"{where}: {path} does not exist", hint=_HINT)
    rows = _rows(path)
    if rows and len(rows[0]) > 1 and id_column not in rows[0]:
        raise SpecError(f"{where}: {path} has {len(rows[0])} columns ({', '.join(rows[0][:4])}) and none is the id "
                        f"column '{id_column}'", hint=_HINT)
    ids = read_public_ids(path, id_column)
    if not ids:
        raise SpecError(f"{where}: {path} holds no id", hint=_HINT)
    if test_ids is None:
        return ids
    test = set(test_ids)
    header = rows[0][0] if rows and len(rows[0]) == 1 and rows[0][0] not in test else None
    foreign = ids - test
    unknown = sorted(foreign - {header} if header and foreign != ids else foreign)  # a header line names no id
    if unknown:
        raise SpecError(f"{where}: {len(unknown)} of {len(ids)} ids in {path} are not ids of {test_name} (e.g. "
                        f"{', '.join(repr(i) for i in unknown[:3])})",
                        hint=f"{test_name} has ids like {', '.join(repr(i) for i in sorted(test)[:3])}: the public ids "
                             f"must be a part of them")
    if whole and test <= ids:
        raise SpecError(f"{where}: {path} names every id of {test_name} ({len(test)}): no row would be private",
                        hint="list the public rows only (Kaggle scores the rest as the private part)")
    return ids


__all__ = ["check_public_ids", "read_public_ids"]
