"""API fidelity, method by method, through the real in-process ``KaggleApi`` (kaggle 2.2.5 / kagglesdk).

What the audit found ignored or missing: ``kernels list --mine`` and the ListKernels filters, ``page``
on every list, the ListDatasets and ListCompetitions filters, GetLeaderboard, DownloadLeaderboard,
ListKernelFiles, UpdateDatasetMetadata, and GetDatasetMetadata's collaborators, files and counters.
One small world per module: two users, kernels of each kind, datasets of each license and file type.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.files import build_file_tree
from tests.support.local_kaggle import (
    COMPETITION,
    KEY,
    OTHER,
    OTHER_KEY,
    USER,
    connect_as,
    make_competition,
    make_dataset,
    make_kernel,
    start_server,
    wait_kernel,
    wait_submission,
)

pytestmark = pytest.mark.loopback  # a local Kaggle over loopback HTTP

WRITE_CSV = "open('table.csv', 'w').write('a\\n1\\n')"
WRITE_PNG = "open('plot.png', 'wb').write(b'\\x89PNG')"


def _script_kernel(folder: Path, title: str, code: str, owner: str, private: bool = True) -> Path:
    from slugify import slugify

    metadata = {"id": f"{owner}/{slugify(title)}", "title": title, "code_file": "main.py", "language": "python",
                "kernel_type": "script", "is_private": private, "enable_internet": False}
    return build_file_tree(folder, {"kernel-metadata.json": json.dumps(metadata), "main.py": code})


def _notebook_kernel(folder: Path, title: str, code: str, owner: str, private: bool = True) -> Path:
    folder = make_kernel(folder, title=title, code=code, competitions=(), owner=owner)
    meta = json.loads((folder / "kernel-metadata.json").read_text())
    meta["is_private"] = private
    (folder / "kernel-metadata.json").write_text(json.dumps(meta))
    return folder


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("fidelity")
    monkeypatch = pytest.MonkeyPatch()
    with start_server(root / "data") as server:
        server.add_competition(make_competition(root / "competition"))
        bob = connect_as(monkeypatch, server.base_url, OTHER, OTHER_KEY)
        bob.kernels_push(str(_notebook_kernel(root / "b1", "Bobs Public Notebook", WRITE_CSV, OTHER, private=False)))
        bob.dataset_create_new(str(_dataset(root / "bd", "bobs-public-data", "Bobs public data", "ODbL-1.0",
                                            {"d.json": "{}"}, owner=OTHER)), public=True, quiet=True)
        alice = connect_as(monkeypatch, server.base_url, USER, KEY)
        alice.kernels_push(str(_script_kernel(root / "a1", "Alice Data Script", WRITE_CSV, USER)))
        alice.kernels_push(str(_script_kernel(root / "a2", "Alice Plot Script", WRITE_PNG, USER)))
        alice.kernels_push(str(make_kernel(root / "a3")))  # the parity notebook, on the competition
        for ref in ("alice/alice-data-script", "alice/alice-plot-script", "alice/parity-kernel", "bob/bobs-public-notebook"):
            wait_kernel(alice, ref)
        alice.dataset_create_new(str(_dataset(root / "ad1", "alice-small-csv", "Alice small csv", "CC0-1.0",
                                              {"a.csv": "x\n1\n"}, keywords=["tabular"])), public=True, quiet=True)
        alice.dataset_create_new(str(_dataset(root / "ad2", "alice-big-json", "Alice big json", "GPL-2.0",
                                              {"b.json": "[" + "1," * 500 + "1]"})), public=True, quiet=True)
        yield server, alice, bob, root
    monkeypatch.undo()


def _dataset(folder: Path, slug: str, title: str, license_name: str, files: dict[str, str | bytes], owner: str = USER,
             keywords: list[str] | None = None) -> Path:
    folder = make_dataset(folder, slug=slug, title=title, files=files, owner=owner)
    meta = json.loads((folder / "dataset-metadata.json").read_text())
    meta.update(licenses=[{"name": license_name}], keywords=keywords or [])
    (folder / "dataset-metadata.json").write_text(json.dumps(meta))
    return folder


def _refs(items: Any) -> list[str]:
    return [item.ref for item in items]


# -- ListKernels -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"mine": True}, {"alice/alice-data-script", "alice/alice-plot-script", "alice/parity-kernel"}),
        ({}, {"alice/alice-data-script", "alice/alice-plot-script", "alice/parity-kernel", "bob/bobs-public-notebook"}),
        ({"user": OTHER}, {"bob/bobs-public-notebook"}),
        ({"kernel_type": "script"}, {"alice/alice-data-script", "alice/alice-plot-script"}),
        ({"kernel_type": "notebook", "mine": True}, {"alice/parity-kernel"}),
        ({"output_type": "visualization"}, {"alice/alice-plot-script"}),
        ({"output_type": "data", "mine": True}, {"alice/alice-data-script", "alice/parity-kernel"}),
        ({"language": "r"}, set()),
        ({"language": "python", "user": OTHER}, {"bob/bobs-public-notebook"}),
        ({"competition": COMPETITION}, {"alice/parity-kernel"}),
        ({"parent_kernel": "alice/parity-kernel"}, set()),
    ],
    ids=["mine", "everyone", "user", "script", "notebook", "visualization", "data", "language-r", "language-python",
         "competition", "parent"],
)
def test_list_kernels_filters(world: Any, kwargs: dict[str, Any], expected: set[str]) -> None:
    _, alice, _, _ = world
    assert set(_refs(alice.kernels_list(page_size=100, **kwargs))) == expected


def test_list_kernels_mine_through_the_cli_shows_only_mine(world: Any) -> None:
    from tests.support.local_kaggle import kaggle_cli

    server, _, _, root = world
    listed = kaggle_cli(["kernels", "list", "--mine", "--csv"], server.base_url, root / "home")
    assert listed.returncode == 0, listed.stderr
    assert "bob/" not in listed.stdout and "alice/parity-kernel" in listed.stdout


def test_list_kernels_sorts_and_pages(world: Any) -> None:
    _, alice, _, _ = world
    created = _refs(alice.kernels_list(mine=True, sort_by="dateCreated", page_size=100))
    assert created == ["alice/parity-kernel", "alice/alice-plot-script", "alice/alice-data-script"]
    pages = [_refs(alice.kernels_list(mine=True, sort_by="dateCreated", page=n, page_size=1)) for n in (1, 2, 3, 4)]
    assert pages == [[ref] for ref in created] + [[]]
    relevant = _refs(alice.kernels_list(search="Alice Plot", sort_by="relevance", page_size=100))
    assert relevant == ["alice/alice-plot-script"]
    with pytest.raises(ValueError, match="Cannot sort by relevance without a search term"):
        alice.kernels_list(sort_by="relevance", search="")


# -- ListKernelFiles -------------------------------------------------------------------------


def test_list_kernel_files(world: Any) -> None:
    _, alice, _, _ = world
    files = alice.kernels_list_files("alice/alice-plot-script").files
    assert [(f.name, f.size) for f in files] == [("plot.png", 4)]
    assert alice.kernels_list_files("alice/alice-data-script/1").files[0].name == "table.csv"


# -- ListDatasets ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, {"alice/alice-small-csv", "alice/alice-big-json", "bob/bobs-public-data"}),
        ({"mine": True}, {"alice/alice-small-csv", "alice/alice-big-json"}),
        ({"user": OTHER}, {"bob/bobs-public-data"}),
        ({"license_name": "cc"}, {"alice/alice-small-csv"}),
        ({"license_name": "gpl"}, {"alice/alice-big-json"}),
        ({"license_name": "odb"}, {"bob/bobs-public-data"}),
        ({"license_name": "other"}, set()),
        ({"file_type": "csv"}, {"alice/alice-small-csv"}),
        ({"file_type": "json"}, {"alice/alice-big-json", "bob/bobs-public-data"}),
        ({"file_type": "bigQuery"}, set()),
        ({"tag_ids": "tabular"}, {"alice/alice-small-csv"}),
        ({"min_size": "100"}, {"alice/alice-big-json"}),
        ({"max_size": "10"}, {"alice/alice-small-csv", "bob/bobs-public-data"}),
        ({"search": "big"}, {"alice/alice-big-json"}),
    ],
    ids=["public", "mine", "user", "cc", "gpl", "odb", "other", "csv", "json", "bigquery", "tags", "min-size",
         "max-size", "search"],
)
def test_list_datasets_filters(world: Any, kwargs: dict[str, Any], expected: set[str]) -> None:
    _, alice, _, _ = world
    assert set(_refs(alice.dataset_list(**kwargs))) == expected


def test_list_datasets_sorts_and_pages(world: Any) -> None:
    _, alice, _, _ = world
    published = _refs(alice.dataset_list(sort_by="published"))
    assert published == ["alice/alice-big-json", "alice/alice-small-csv", "bob/bobs-public-data"]
    assert _refs(alice.dataset_list(sort_by="published", page=2)) == []
    server = world[0]

    def page(number: int) -> list[str]:  # the client fixes pageSize at 20 for datasets: page on the wire
        answer = requests.post(f"{server.base_url}/api/v1/datasets.DatasetApiService/ListDatasets", auth=(USER, KEY),
                               json={"sortBy": "DATASET_SORT_BY_PUBLISHED", "page": number, "pageSize": 2}, timeout=30)
        return [d["ref"] for d in answer.json()["datasets"]]

    assert [page(1), page(2)] == [published[:2], published[2:]]


# -- ListCompetitions, leaderboard -----------------------------------------------------------


def test_list_competitions_filters(world: Any, tmp_path: Path) -> None:
    server, alice, _, _ = world
    server.add_competition(make_competition(tmp_path / "second", slug="second-contest"))
    everything = _refs(alice.competitions_list(page_size=100).competitions)
    assert [ref.rsplit("/", 1)[1] for ref in everything] == [COMPETITION, "second-contest"]
    assert alice.competitions_list(category="research").competitions == []
    assert len(alice.competitions_list(category="featured").competitions) == 2
    assert alice.competitions_list(group="hosted").competitions == []
    assert [c.ref.rsplit("/", 1)[1] for c in alice.competitions_list(sort_by="recentlyCreated").competitions] == [
        "second-contest", COMPETITION]
    assert [c.ref.rsplit("/", 1)[1] for c in alice.competitions_list(page=2, page_size=1).competitions] == ["second-contest"]


def test_leaderboard_view_download_and_entered(world: Any, tmp_path: Path) -> None:
    _, alice, _, _ = world
    ref = alice.competition_submit_code("submission.csv", "first", COMPETITION, "alice/parity-kernel", 1, quiet=True).ref
    assert wait_submission(alice, ref).status.name == "COMPLETE"
    board = alice.competition_leaderboard_view(COMPETITION)
    assert [(row.team_name, row.score, row.team_id) for row in board] == [(USER, "1.00000", ref)]
    entered = alice.competitions_list(group="entered").competitions
    assert [c.ref.rsplit("/", 1)[1] for c in entered] == [COMPETITION]
    assert alice.competitions_list(sort_by="numberOfTeams").competitions[0].team_count == 1

    alice.competition_leaderboard_download(COMPETITION, str(tmp_path))
    with zipfile.ZipFile(tmp_path / f"{COMPETITION}.zip") as zf:
        lines = zf.read(f"{COMPETITION}-publicleaderboard.csv").decode().splitlines()
    assert lines[0] == "TeamId,TeamName,SubmissionDate,Score"
    assert lines[1].startswith(f"{ref},{USER},") and lines[1].endswith(",1.00000")


# -- dataset metadata ------------------------------------------------------------------------


def test_dataset_metadata_round_trip(world: Any, tmp_path: Path) -> None:
    """The client writes ``{"info": DatasetInfo}`` without default values, and reads it back for --update."""
    _, alice, bob, _ = world
    bob.dataset_download_files("alice/alice-small-csv", path=str(tmp_path / "dl"), quiet=True)
    bob.dataset_metadata("alice/alice-small-csv", str(tmp_path / "bob-meta"))  # a view, not the owner's
    path = alice.dataset_metadata("alice/alice-small-csv", str(tmp_path / "meta"))
    document = json.loads(Path(path).read_text())
    info = document["info"]
    assert info["data"] == [{"name": "a.csv", "totalBytes": 4}]
    assert (info["totalDownloads"], info["totalViews"], info.get("collaborators", [])) == (1, 1, [])

    info.update(subtitle="A subtitle of twenty chars or more", collaborators=[{"username": OTHER, "role": "writer"}],
                data=[{"name": "a.csv", "description": "the numbers", "columns": [{"name": "x", "type": "integer"}]}],
                isPrivate=False)
    Path(path).write_text(json.dumps(document))
    alice.dataset_metadata_update("alice/alice-small-csv", str(tmp_path / "meta"))
    again = json.loads(Path(alice.dataset_metadata("alice/alice-small-csv", str(tmp_path / "again"))).read_text())["info"]
    assert again["subtitle"] == "A subtitle of twenty chars or more"
    assert again["collaborators"] == [{"username": OTHER, "role": "WRITER"}]
    assert again["data"] == [{"name": "a.csv", "totalBytes": 4, "description": "the numbers",
                              "columns": [{"name": "x", "type": "integer"}]}]


@pytest.mark.parametrize(
    ("settings", "errors"),
    [
        ({"collaborators": [{"username": "nobody-here", "role": "READER"}]}, ["Unknown collaborator 'nobody-here'"]),
        ({"collaborators": [{"username": OTHER, "role": "OWNER"}]},
         ["Invalid collaborator role 'OWNER' for bob: use reader or writer"]),
        ({"licenses": [{"name": "WTFPL"}]}, ["Invalid license 'WTFPL'"]),
        ({"data": [{"name": "missing.csv"}]}, ["File 'missing.csv' is not in the dataset's current version"]),
        ({"title": "abc"}, ["The dataset title must be between 6 and 50 characters"]),
    ],
    ids=["unknown-user", "role", "license", "file", "title"],
)
def test_update_dataset_metadata_errors(world: Any, settings: dict[str, Any], errors: list[str]) -> None:
    server = world[0]
    answer = requests.post(f"{server.base_url}/api/v1/datasets.DatasetApiService/UpdateDatasetMetadata",
                           auth=(USER, KEY), timeout=30,
                           json={"ownerSlug": USER, "datasetSlug": "alice-big-json", "settings": settings})
    assert (answer.status_code, answer.json()) == (200, {"errors": errors})


def test_resources_of_dataset_metadata_json_come_back_as_data(world: Any, tmp_path: Path) -> None:
    _, alice, _, _ = world
    folder = make_dataset(tmp_path / "ds", slug="described-data", title="Described data", files={"d.csv": "id\n1\n"})
    meta = json.loads((folder / "dataset-metadata.json").read_text())
    meta["resources"] = [{"path": "d.csv", "description": "ids", "schema": {"fields": [
        {"name": "id", "description": "the id", "type": "integer"}]}}]
    (folder / "dataset-metadata.json").write_text(json.dumps(meta))
    assert alice.dataset_create_new(str(folder), quiet=True).status == "ok"
    info = json.loads(Path(alice.dataset_metadata("alice/described-data", str(tmp_path / "m"))).read_text())["info"]
    assert info["data"] == [{"name": "d.csv", "totalBytes": 5, "description": "ids",
                             "columns": [{"name": "id", "description": "the id", "type": "integer"}]}]


def test_only_the_owner_or_a_writer_updates_metadata(world: Any) -> None:
    server = world[0]
    answer = requests.post(f"{server.base_url}/api/v1/datasets.DatasetApiService/UpdateDatasetMetadata",
                           auth=(OTHER, OTHER_KEY), timeout=30,
                           json={"ownerSlug": USER, "datasetSlug": "alice-big-json", "settings": {"title": "Taken over"}})
    assert answer.json() == {"errors": ["You do not have permission to update this dataset's metadata"]}
