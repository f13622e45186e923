"""How the list RPCs filter and sort: ListKernels, ListDatasets and ListCompetitions, as kagglesdk asks.

The request fields and enum names are kagglesdk's (``ApiListKernelsRequest``, ``ApiListDatasetsRequest``,
``ApiListCompetitionsRequest``); enums arrive as their names (``"DATE_CREATED"``,
``"DATASET_SORT_BY_UPDATED"``), in any case. Each service hands its records plus the few facts a filter
needs (a kernel's output files, a dataset's files and size...) as :class:`KernelRow`, :class:`DatasetRow`,
:class:`CompetitionRow`; this module decides which rows are listed and in what order.

What a local Kaggle does not have is honoured as an empty fact, not ignored: there are no votes,
comments, views or forks here, so sorting by them keeps the default order and the groups made of
them (``UPVOTED``, ``BOOKMARKED``, ``FORK``...) and ``parentKernel`` (forks of a kernel) list nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from builder.local_kaggle.wire import Call, Json, bad_request

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".svg", ".html", ".webp"})
FILE_TYPES = {"CSV": (".csv",), "SQLITE": (".sqlite", ".sqlite3", ".db"), "JSON": (".json",),
              "PARQUET": (".parquet",), "BIG_QUERY": ()}
LICENSE_GROUPS: dict[str, Callable[[str], bool]] = {
    "CC": lambda name: name.upper().startswith("CC"),
    "GPL": lambda name: "GPL" in name.upper(),
    "ODB": lambda name: name in ("ODbL-1.0", "DbCL-1.0", "ODC-BY-1.0", "PDDL"),
}


def enum_name(call: Call, key: str, prefix: str = "") -> str:
    """The enum a request names, upper-case and without its type prefix; "" when absent."""
    value = call.text(key).strip().upper()
    return value[len(prefix):] if prefix and value.startswith(prefix) else value


def _relevance(title: str, search: str) -> int:
    title, search = title.lower(), search.lower()
    return 0 if title == search else 1 if title.startswith(search) else 2


# -- kernels ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelRow:
    record: Json
    outputs: Sequence[str] = ()   # the latest version's output files


def list_kernels(rows: list[KernelRow], call: Call) -> list[KernelRow]:
    group = enum_name(call, "group")
    if group == "PROFILE":
        owner = call.text("user") or call.user
        rows = [r for r in rows if r.record["owner"] == owner]
    elif group in ("UPVOTED", "COLLABORATION", "FORK", "BOOKMARKED", "RECENTLY_VIEWED"):
        return []  # no votes, collaborators, forks, bookmarks or views on a local Kaggle
    parent = call.text("parentKernel")
    if parent:
        if len(parent.strip("/").split("/")) != 2:
            raise bad_request(f"Invalid parentKernel {parent!r}: use owner/kernel-slug")
        return []  # the local Kaggle has no forks: no kernel has a parent
    tests: dict[str, Callable[[KernelRow, str], bool]] = {
        "user": lambda r, v: r.record["owner"] == v,
        "competition": lambda r, v: v in r.record.get("competitionSources", []),
        "dataset": lambda r, v: v in r.record.get("datasetSources", []),
        "search": lambda r, v: v.lower() in r.record["title"].lower(),
        "language": lambda r, v: v.lower() == "all" or str(r.record.get("language", "")).lower() == v.lower(),
        "kernelType": lambda r, v: v.lower() == "all" or str(r.record.get("kernelType", "")).lower() == v.lower(),
        "outputType": lambda r, v: _output_type(r, v.lower()),
    }
    for key, test in tests.items():
        value = call.text(key)
        if value:
            rows = [r for r in rows if test(r, value)]
    return _sort_kernels(rows, enum_name(call, "sortBy"), call.text("search"))


def _output_type(row: KernelRow, wanted: str) -> bool:
    if wanted == "all":
        return True
    if wanted == "visualization":
        return any(PurePosixPath(name).suffix.lower() in IMAGE_SUFFIXES for name in row.outputs)
    if wanted == "data":
        return any(PurePosixPath(name).suffix.lower() not in IMAGE_SUFFIXES for name in row.outputs)
    raise bad_request(f"Invalid outputType {wanted!r}: use all, visualization or data")


def _last_run(row: KernelRow) -> float:
    """When the kernel last ran: its last push, else its creation."""
    return float(row.record.get("lastPushed") or row.record.get("created") or 0)


def _sort_kernels(rows: list[KernelRow], sort: str, search: str) -> list[KernelRow]:
    by_id = sorted(rows, key=lambda r: r.record["id"])
    if sort in ("DATE_CREATED",):
        return sorted(by_id, key=lambda r: r.record.get("created", 0), reverse=True)
    if sort in ("", "HOTNESS", "DATE_RUN"):  # hotness: the most recently run first
        return sorted(by_id, key=_last_run, reverse=True)
    if sort == "RELEVANCE":
        if not search:
            raise bad_request("Cannot sort by relevance without a search term.")
        return sorted(by_id, key=lambda r: _relevance(r.record["title"], search))
    if sort in ("COMMENT_COUNT", "SCORE_ASCENDING", "SCORE_DESCENDING", "VIEW_COUNT", "VOTE_COUNT"):
        return by_id  # every count is 0 here, and kernels carry no score: ties keep the id order
    raise bad_request(f"Invalid sortBy {sort!r}")


# -- datasets --------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetRow:
    record: Json
    total_bytes: int = 0
    files: Sequence[str] = ()
    updated: float = 0.0
    downloads: int = 0
    notebooks: int = 0           # kernels that use it as a source


def list_datasets(rows: list[DatasetRow], call: Call) -> list[DatasetRow]:
    group = enum_name(call, "group", "DATASET_SELECTION_GROUP_")
    me, user = call.user, call.text("user")
    groups: dict[str, Callable[[DatasetRow], bool]] = {
        "": lambda r: not r.record["isPrivate"], "PUBLIC": lambda r: not r.record["isPrivate"],
        "ALL": lambda r: True, "MY": lambda r: r.record["owner"] == me,
        "USER": lambda r: r.record["owner"] == user,
        "MY_PRIVATE": lambda r: r.record["owner"] == me and r.record["isPrivate"],
        "MY_PUBLIC": lambda r: r.record["owner"] == me and not r.record["isPrivate"],
    }
    if group not in groups:
        return []  # upvoted, bookmarked, shared, featured...: nothing of the kind on a local Kaggle
    rows = [r for r in rows if groups[group](r)]
    if user:
        rows = [r for r in rows if r.record["owner"] == user]
    search = call.text("search").lower()
    if search:
        rows = [r for r in rows if search in r.record["slug"] or search in r.record["title"].lower()]
    rows = _dataset_filters(rows, call)
    return _sort_datasets(rows, enum_name(call, "sortBy", "DATASET_SORT_BY_"), call.text("search"))


def _dataset_filters(rows: list[DatasetRow], call: Call) -> list[DatasetRow]:
    file_type = enum_name(call, "fileType", "DATASET_FILE_TYPE_GROUP_")
    if file_type not in ("", "ALL"):
        suffixes = FILE_TYPES.get(file_type)
        if suffixes is None:
            raise bad_request(f"Invalid fileType {call.text('fileType')!r}")
        rows = [r for r in rows if any(name.lower().endswith(suffixes) for name in r.files)] if suffixes else []
    license_group = enum_name(call, "license", "DATASET_LICENSE_GROUP_")
    if license_group not in ("", "ALL"):
        if license_group == "OTHER":
            rows = [r for r in rows if not any(test(r.record["licenseName"]) for test in LICENSE_GROUPS.values())]
        elif license_group in LICENSE_GROUPS:
            rows = [r for r in rows if LICENSE_GROUPS[license_group](r.record["licenseName"])]
        else:
            raise bad_request(f"Invalid license {call.text('license')!r}")
    tags = [t.strip().lower() for t in call.text("tagIds").split(",") if t.strip()]
    if tags:
        rows = [r for r in rows if set(tags) <= {k.lower() for k in r.record.get("keywords", [])}]
    low, high = call.integer("minSize"), call.integer("maxSize")
    if low is not None:
        rows = [r for r in rows if r.total_bytes >= low]
    if high is not None:
        rows = [r for r in rows if r.total_bytes <= high]
    return rows


def _sort_datasets(rows: list[DatasetRow], sort: str, search: str) -> list[DatasetRow]:
    by_id = sorted(rows, key=lambda r: r.record["id"])
    if sort in ("", "HOTTEST", "UPDATED", "ACTIVE"):  # hottest: the most recently updated first
        return sorted(by_id, key=lambda r: r.updated, reverse=True)
    if sort == "PUBLISHED":
        return sorted(by_id, key=lambda r: r.record.get("created", 0), reverse=True)
    if sort == "DOWNLOAD_COUNT":
        return sorted(by_id, key=lambda r: r.downloads, reverse=True)
    if sort == "NOTEBOOK_COUNT":
        return sorted(by_id, key=lambda r: r.notebooks, reverse=True)
    if sort == "RELEVANCE":
        return sorted(by_id, key=lambda r: _relevance(r.record["title"], search)) if search else by_id
    if sort in ("VOTES", "USABILITY", "LAST_VIEWED"):
        return by_id  # no votes, ratings or views here: ties keep the id order
    raise bad_request(f"Invalid sortBy {sort!r}")


# -- competitions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CompetitionRow:
    slug: str
    record: Json
    teams: set[str] = field(default_factory=set)    # users who submitted


def list_competitions(rows: list[CompetitionRow], call: Call) -> list[CompetitionRow]:
    group = enum_name(call, "group", "COMPETITION_LIST_TAB_")
    if group == "ENTERED":
        rows = [r for r in rows if call.user in r.teams]
    elif group in ("COMMUNITY", "HOSTED", "UNLAUNCHED", "UNLAUNCHED_COMMUNITY"):
        return []  # every local competition is a launched, featured one hosted by nobody you can be
    elif group not in ("", "GENERAL", "EVERYTHING"):
        raise bad_request(f"Invalid group {call.text('group')!r}")
    category = enum_name(call, "category", "HOST_SEGMENT_")
    if category not in ("", "UNSPECIFIED", "FEATURED"):
        return []  # local competitions are all in the Featured category
    search = call.text("search").lower()
    if search:
        rows = [r for r in rows if search in r.slug or search in str(r.record.get("title", "")).lower()]
    sort = enum_name(call, "sortBy", "COMPETITION_SORT_BY_")
    by_id = sorted(rows, key=lambda r: r.record.get("id", 0))
    if sort == "NUMBER_OF_TEAMS":
        return sorted(by_id, key=lambda r: len(r.teams), reverse=True)
    if sort == "RECENTLY_CREATED":
        return sorted(by_id, key=lambda r: r.record.get("created", 0), reverse=True)
    if sort == "RELEVANCE":
        return sorted(by_id, key=lambda r: _relevance(str(r.record.get("title", "")), search)) if search else by_id
    if sort in ("", "GROUPED", "BEST", "PRIZE", "EARLIEST_DEADLINE", "LATEST_DEADLINE"):
        return by_id  # one prize ("Knowledge") and one deadline for all: ties keep the id order
    raise bad_request(f"Invalid sortBy {call.text('sortBy')!r}")
