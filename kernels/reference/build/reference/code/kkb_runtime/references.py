"""What the test's rows reference, found and replicated under consistent new keys (``--rerun-scale``).

Most code competitions keep a small table of ids and the data in files keyed by them: Optiver's
``test.csv`` rows (``stock_id, time_id, row_id``) point at ``book_test.parquet/stock_id=0/`` and
``trade_test.parquet/stock_id=0/`` partitions, and ``row_id`` is ``f"{stock_id}-{time_id}"``. Copying the
table's rows alone gives rows with no data. This module finds, for the test table's key columns (every
column but the id):

- **partitions**: hive-style ``key=value/`` folders (parquet or CSV) whose values are all test values;
- **files**: files or folders named by a key value under a test folder (``test_audio/<clip_id>.ogg``,
  ``test/<patient_id>/``);
- **tables**: further tables (flat, or the files inside a partitioned dataset) with the key column, all of
  whose values are test values (train tables hold others: they are left alone);
- **id**: an id composed of key columns (``{stock_id}-{time_id}``), rebuilt from the new keys.

The keys that name data (partitions, files) get new values per copy (numbers shifted past the largest
value seen anywhere in the data, strings suffixed ``_r<k>``); without such a key, the keys joining further
tables do. ``[competition.stand_in]`` states what detection cannot (``keys``, ``tables``, ``files``,
``id``). Test-side tables kkb cannot follow are named (:attr:`StandInPlan.unfollowed`): the caller refuses.
Standard library + pandas only (this runs inside the kernel too).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

TABLE_SUFFIXES = (".csv", ".parquet")
SEPARATORS = ("-", "_", ":", "|", "/", " ")
_PARTITION = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.+)$")

ReferenceKind = Literal["partitions", "files", "table"]
KeyMaker = Callable[[object, int], object]


class ScaleError(ValueError):
    """The data cannot be scaled (no sample submission, no id column, a bad factor, a stand-in stated wrong)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


@dataclass(frozen=True)
class Reference:
    """One way the test's rows reach data: ``path`` (relative to the data folder) keyed by ``key``."""

    kind: ReferenceKind
    path: str
    key: str

    def describe(self, factor: int) -> str:
        if self.kind == "partitions":
            return f"{self.path} partitions by {self.key} x {factor}"
        if self.kind == "files":
            return f"{self.path} files by {self.key} x {factor}"
        return f"{self.path} rows by {self.key} x {factor}"


@dataclass(frozen=True)
class StandInConfig:
    """``[competition.stand_in]``: what detection cannot see. Every item left empty is detected."""

    keys: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    id: str | None = None


@dataclass(frozen=True)
class StandInPlan:
    """How the test is replicated: its table, the keys given new values, what follows them, the composed id."""

    test_table: str | None
    keys: tuple[str, ...] = ()
    references: tuple[Reference, ...] = ()
    id_template: str | None = None
    unfollowed: tuple[str, ...] = ()
    declared: bool = False

    def followed(self) -> tuple[Reference, ...]:
        """The references whose key gets new values (the others still match: their keys are unchanged)."""
        return tuple(ref for ref in self.references if ref.key in self.keys)

    def describe(self, factor: int, id_files: Iterable[str] = ()) -> str:
        """``stand-in: test.csv rows x 10; book_test.parquet partitions by stock_id x 10; row_id = {stock_id}-{time_id}``."""
        parts = [f"{self.test_table or 'the sample submission'} rows x {factor}"]
        parts += [ref.describe(factor) for ref in self.followed()]
        parts += [f"{path} files by id x {factor}" for path in _group(id_files)]
        if self.id_template:
            parts.append(f"id rebuilt as {self.id_template}")
        if self.keys:
            parts.append(f"new {', '.join(self.keys)} per copy")
        return "stand-in: " + "; ".join(parts) + (" (as [competition.stand_in] states)" if self.declared else "")


@dataclass
class Scan:
    """One walk of the data folder: partitioned datasets, flat tables, and every other file."""

    partitions: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # dataset -> key -> values
    tables: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    inner: dict[str, str] = field(default_factory=dict)  # dataset -> one of its data files (its columns)


def scan(source: Path) -> Scan:
    found = Scan()
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source).as_posix()
        match = _PARTITION.match(path.name) if path.is_dir() else None
        if match:
            dataset = _dataset_of(relative)
            if dataset == path.parent.relative_to(source).as_posix():  # the outermost partition level only
                found.partitions.setdefault(dataset, {}).setdefault(match.group(1), set()).add(match.group(2))
            continue
        dataset = _dataset_of(relative) if path.is_file() else ""
        if dataset and path.suffix in TABLE_SUFFIXES:
            found.inner.setdefault(dataset, relative)
        elif path.is_file() and not dataset:
            (found.tables if path.suffix in TABLE_SUFFIXES else found.files).append(relative)
    return found


def _dataset_of(relative: str) -> str:
    """``book_test.parquet/stock_id=0/x.parquet`` -> ``book_test.parquet``; "" outside a partitioned dataset."""
    parts = relative.split("/")
    for index, part in enumerate(parts):
        if _PARTITION.match(part):
            return "/".join(parts[:index])
    return ""


def test_side(relative: str) -> bool:
    """A path of the test's side (``book_test.parquet``, ``test_images/``): a train table is never followed."""
    return "test" in relative.lower()


def key_columns(frame: Any, id_column: str) -> list[str]:
    """The test table's columns that can key data: whole numbers or text, never the id or a float."""
    import pandas as pd

    return [str(c) for c in frame.columns if c != id_column and (pd.api.types.is_integer_dtype(frame[c])
                                                                   or pd.api.types.is_string_dtype(frame[c])
                                                                   or frame[c].dtype == object)]


def detect(source: Path, test_table: str | None, frame: Any, id_column: str,
           config: StandInConfig, found: Scan, read_columns: Callable[[Path], list[str]]) -> StandInPlan:
    """The plan for ``frame`` (the test table, or None without one): what its keys reference."""
    if frame is None:
        return StandInPlan(test_table=None)
    _check_stated(config, source, test_table, [str(c) for c in frame.columns], found)
    columns = key_columns(frame, id_column)
    values = {column: {str(v) for v in frame[column].dropna()} for column in columns}
    if config.tables:  # stated: these tables and datasets, nothing detected
        tables = [ref for name in config.tables for ref in _declared_table(source, name, found, values, read_columns)]
    else:
        tables = (_partitions(found, values) + _inside_partitions(source, found, values, read_columns)
                  + _joined(source, found, values, test_table, read_columns))
    references = list(dict.fromkeys(tables + _named_files(found, values, config)))
    template = config.id or composed_id(frame, id_column, columns)
    keys = list(config.keys) or _keys_to_shift(references)
    if template and not any(f"{{{key}}}" in template for key in keys):  # copies need ids of their own
        keys += [c for c in template_columns(template) if c in columns][:1]
    plan = StandInPlan(test_table=test_table, keys=tuple(dict.fromkeys(keys)), references=tuple(references),
                       id_template=template,
                       declared=bool(config.keys or config.tables or config.files or config.id))
    return _with_unfollowed(plan, found, read_columns, source, set(frame.columns))


def _check_stated(config: StandInConfig, source: Path, test_table: str | None, columns: list[str], found: Scan) -> None:
    """``[competition.stand_in]`` names columns of the test table and tables of the data, or it is refused."""
    named = [("keys", key) for key in config.keys] + [("id", c) for c in template_columns(config.id or "")]
    named += [("files", c) for pattern in config.files for c in template_columns(pattern)]
    for item, column in named:
        if column not in columns:
            raise ScaleError(f"[competition.stand_in] {item}: '{column}' is not a column of {test_table} ({', '.join(columns)})",
                             "name the test table's columns that key the data (kernel.toml)")
    for pattern in config.files:
        if not template_columns(pattern):
            raise ScaleError(f"[competition.stand_in] files: '{pattern}' names no key", 'write the key in braces: "test_audio/{clip_id}.ogg"')
    for table in config.tables:
        if table not in found.partitions and not (source / table).is_file():
            raise ScaleError(f"[competition.stand_in] tables: '{table}' is neither a table nor a partitioned dataset in {source}",
                             "name a file or a key=value/ dataset folder, relative to the competition data")


def _keys_to_shift(references: list[Reference]) -> list[str]:
    naming = [ref.key for ref in references if ref.kind in ("partitions", "files")]
    return list(dict.fromkeys(naming or [ref.key for ref in references]))


def _partitions(found: Scan, values: Mapping[str, set[str]]) -> list[Reference]:
    return [Reference("partitions", dataset, key) for dataset, keys in found.partitions.items()
            for key, seen in keys.items() if key in values and seen and seen <= values[key]]


def _inside_partitions(source: Path, found: Scan, values: Mapping[str, set[str]],
                       read_columns: Callable[[Path], list[str]]) -> list[Reference]:
    """A test-side partitioned dataset whose files hold a key column (``time_id`` inside ``stock_id=0/``):
    followed only when that key is the one given new values (``[competition.stand_in] keys``)."""
    references = []
    for dataset, sample in found.inner.items():
        if test_side(dataset) and dataset in found.partitions:
            columns = set(read_columns(source / sample)) - set(found.partitions[dataset])
            references += [Reference("table", dataset, key) for key in values if key in columns]
    return references


def _named_files(found: Scan, values: Mapping[str, set[str]], config: StandInConfig) -> list[Reference]:
    """Files or folders under a test folder named by a key value (``test/<patient_id>/``, ``<clip_id>.ogg``):
    the folder holding them, once per key; the outermost name that matches counts."""
    if config.files:
        return [Reference("files", pattern, key) for pattern in config.files for key in template_columns(pattern)]
    references: dict[tuple[str, str], None] = {}
    for relative in (path for path in found.files if test_side(path)):
        parts = relative.split("/")
        for depth, part in enumerate(parts):
            names = {part, Path(part).stem} if depth == len(parts) - 1 else {part}
            key = next((key for key, seen in values.items() if names & seen), None)
            if key is not None:
                references.setdefault(("/".join(parts[:depth]) or ".", key), None)
                break
    return [Reference("files", folder, key) for folder, key in references]


def _joined(source: Path, found: Scan, values: Mapping[str, set[str]], test_table: str | None,
            read_columns: Callable[[Path], list[str]]) -> list[Reference]:
    """Further tables with a key column whose values are all test values."""
    references = []
    for relative in found.tables:
        if relative == test_table or not test_side(relative):
            continue
        columns = read_columns(source / relative)
        for key in (key for key in values if key in columns):
            seen = _column_values(source / relative, key)
            if seen and seen <= values[key]:
                references.append(Reference("table", relative, key))
    return references


def _declared_table(source: Path, name: str, found: Scan, values: Mapping[str, set[str]],
                    read_columns: Callable[[Path], list[str]]) -> list[Reference]:
    if name in found.partitions:  # by its partition key, and by a key inside its files
        inner = set(read_columns(source / found.inner[name])) - set(found.partitions[name]) if name in found.inner else set()
        return ([Reference("partitions", name, key) for key in found.partitions[name] if key in values]
                + [Reference("table", name, key) for key in values if key in inner])
    if not (source / name).is_file():
        return []
    columns = read_columns(source / name)
    return [Reference("table", name, key) for key in values if key in columns]


def _column_values(path: Path, column: str) -> set[str]:
    import pandas as pd

    frame = pd.read_parquet(path, columns=[column]) if path.suffix == ".parquet" else pd.read_csv(path, usecols=[column])
    return {str(v) for v in frame[column].dropna().unique()}


def _with_unfollowed(plan: StandInPlan, found: Scan, read_columns: Callable[[Path], list[str]], source: Path,
                     test_columns: set[str]) -> StandInPlan:
    """Test-side tables and partitioned datasets the plan does not follow although they hold a key that
    changes, or share no column with the test table (kkb cannot tell how they are joined)."""
    referenced = {ref.path for ref in plan.references}
    missing = []
    for dataset, keys in found.partitions.items():
        if test_side(dataset) and dataset not in referenced and (set(keys) & set(plan.keys) or not set(keys) & test_columns):
            missing.append(dataset)
    for relative in found.tables:
        if relative == plan.test_table or relative in referenced or not test_side(relative):
            continue
        columns = set(read_columns(source / relative))
        if columns & set(plan.keys) or not columns & test_columns:
            missing.append(relative)
    return StandInPlan(plan.test_table, plan.keys, plan.references, plan.id_template, tuple(missing), plan.declared)


def composed_id(frame: Any, id_column: str, columns: list[str]) -> str | None:
    """``{stock_id}-{time_id}`` when every id is the key columns joined by one separator; else None."""
    if id_column not in frame.columns or not len(frame) or not columns:
        return None
    ids = frame[id_column].astype(str).tolist()
    first = {column: str(frame[column].iloc[0]) for column in columns}
    for separator in SEPARATORS:
        parts = ids[0].split(separator)
        if len(parts) < 2:
            continue
        order = [next((c for c in columns if first[c] == part), None) for part in parts]
        if None in order:
            continue
        template = separator.join(f"{{{c}}}" for c in order)
        if all(render(template, row) == ident for ident, row in zip(ids, _rows(frame, order), strict=True)):
            return template
    return None


def _rows(frame: Any, columns: list[str | None]) -> list[dict[str, object]]:
    names = [c for c in columns if c is not None]
    return frame[names].to_dict("records")  # type: ignore[no-any-return]


def template_columns(template: str) -> list[str]:
    return re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", template)


def render(template: str, row: Mapping[str, object]) -> str:
    return re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: str(row[m.group(1)]), template)


def key_maker(values: Iterable[str]) -> KeyMaker:
    """Whole numbers (no leading zeros) shift past the largest value seen; other values get ``_r<k>``."""
    seen = [str(v) for v in values]
    if seen and all(v.lstrip("-").isdigit() and (v.lstrip("-") == "0" or not v.lstrip("-").startswith("0")) for v in seen):
        span = max(int(v) for v in seen) + 1
        return lambda value, k: value if k == 0 else type(value)(int(str(value)) + k * span)  # type: ignore[call-arg]
    return lambda value, k: value if k == 0 else suffixed(str(value), k)


def suffixed(value: str, k: int) -> str:
    """``abc_r1``; a value that carries a file extension keeps it last: ``abc.jpg`` -> ``abc_r1.jpg``."""
    path = PurePosixPath(value)
    if re.fullmatch(r"\.[A-Za-z][A-Za-z0-9]{0,4}", path.suffix) and path.stem:
        return value[: -len(path.suffix)] + f"_r{k}" + path.suffix
    return f"{value}_r{k}"


def _group(paths: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(str(Path(path).parent) if "/" in path else "." for path in paths))


# --- replication -----------------------------------------------------------------------------------

Linker = Callable[[Path, Path], None]


def replicate_reference(source: Path, dest: Path, reference: Reference, frame: Any,
                        makers: Mapping[str, KeyMaker], factor: int, link_tree: Linker, link: Linker) -> list[str]:
    """Copies 1..factor-1 of what ``reference`` holds for the test's keys, under their new keys; the paths added
    or rewritten (relative to ``dest``). ``link_tree``/``link``: how unchanged folders and files are copied."""
    values = sorted({str(v) for v in frame[reference.key].dropna()})
    maker = makers[reference.key]
    if reference.kind == "partitions":
        return _copy_named(dest / reference.path, [f"{reference.key}={v}" for v in values],
                           lambda name, k: f"{reference.key}={maker(name.partition('=')[2], k)}", factor, dest, link_tree, link)
    if reference.kind == "files" and "{" in reference.path:
        return _copy_pattern(dest, reference, values, maker, factor, link_tree, link)
    if reference.kind == "files":
        folder = dest / reference.path
        names = [p.name for p in sorted(folder.iterdir()) if p.name in values or Path(p.name).stem in values]
        return _copy_named(folder, names, lambda name, k: _renamed(name, values, maker, k), factor, dest, link_tree, link)
    files = [dest / reference.path] if (dest / reference.path).is_file() else sorted(
        path for path in (dest / reference.path).rglob("*") if path.suffix in TABLE_SUFFIXES and path.is_file())
    return [path.relative_to(dest).as_posix() for path in files
            if _replicate_rows(path, reference.key, set(values), makers, factor)]


def _copy_named(folder: Path, names: list[str], rename: Callable[[str, int], str], factor: int, dest: Path,
                link_tree: Linker, link: Linker) -> list[str]:
    added = []
    for name in names:
        original = folder / name
        if not original.exists():  # a test row with no data of its own: nothing to copy
            continue
        for k in range(1, factor):
            target = folder / rename(name, k)
            (link_tree if original.is_dir() else link)(original, target)
            added.append(target.relative_to(dest).as_posix())
    return added


def _renamed(name: str, values: list[str], maker: KeyMaker, k: int) -> str:
    if name in values:
        return str(maker(name, k))
    suffix = Path(name).suffix
    return str(maker(name[: -len(suffix)], k)) + suffix


def _copy_pattern(dest: Path, reference: Reference, values: list[str], maker: KeyMaker, factor: int,
                  link_tree: Linker, link: Linker) -> list[str]:
    """A declared pattern (``test_audio/{clip_id}.ogg``): each test value's file, once per copy."""
    added = []
    for value in values:
        original = dest / render(reference.path, {reference.key: value})
        if not original.exists():
            continue
        for k in range(1, factor):
            target = dest / render(reference.path, {reference.key: maker(value, k)})
            target.parent.mkdir(parents=True, exist_ok=True)
            (link_tree if original.is_dir() else link)(original, target)
            added.append(target.relative_to(dest).as_posix())
    return added


def _replicate_rows(path: Path, key: str, values: set[str], makers: Mapping[str, KeyMaker], factor: int) -> bool:
    """A joined table: its rows for the test's keys repeated under each copy's new keys (every changed key
    column it holds follows). False when it holds none of them."""
    import pandas as pd

    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    if key not in frame.columns:
        return False
    rows = frame[frame[key].astype(str).isin(values)]
    copies = [frame]
    for k in range(1, factor):
        copy = rows.copy()
        for column, maker in makers.items():
            if column in copy.columns:
                copy[column] = copy[column].map(lambda value, maker=maker, k=k: maker(value, k))
        copies.append(copy)
    path.unlink()  # a hard link to the source: never write through it
    out = pd.concat(copies, ignore_index=True)
    out.to_parquet(path, index=False) if path.suffix == ".parquet" else out.to_csv(path, index=False)
    return True
