"""The official client's own command tests, run with the real ``kaggle`` 2.2.5 against the local Kaggle.

Kaggle's client repository tests its commands two ways: a shell script that runs every command once
(``tests/test_commands.sh``) and a unittest module that drives the in-process API against a Kaggle
backend (``tests/backend``). This module runs the same dataset, kernel and competition commands, our
own way: each one through the real ``kaggle`` command (a subprocess, through the sitecustomize shim)
or the real in-process ``KaggleApi``, against one local Kaggle, and checks what came back.

The scripts name kaggle.com's catalogue (``titanic``, ``house-prices-...``, other users' kernels and
datasets); here they become the local equivalents (the ``tiny-parity`` competition, alice's and bob's
kernels and datasets). What exists only on kaggle.com is skipped with the reason: models, forums and
competition discussion topics, inbox file uploads, ``kernels_run`` (not in kaggle 2.2.5).
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.files import build_file_tree
from tests.support.local_kaggle import (
    COMPETITION,
    OTHER,
    OTHER_KEY,
    USER,
    connect_as,
    kaggle_cli,
    make_competition,
    make_dataset,
    make_kernel,
    start_server,
    wait_kernel,
    wait_submission,
)

pytestmark = [pytest.mark.slow, pytest.mark.loopback]

KERNEL = f"{USER}/parity-kernel"
DATASET = f"{USER}/tiny-numbers"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A local Kaggle with what the scripts expect to exist: a competition with a scored submission,
    a completed kernel of alice's, a public dataset of alice's and one of bob's."""
    root = tmp_path_factory.mktemp("official")
    monkeypatch = pytest.MonkeyPatch()
    with start_server(root / "data") as server:
        server.add_competition(make_competition(root / "competition"))
        api = connect_as(monkeypatch, server.base_url)
        api.kernels_push(str(make_kernel(root / "kernel")))
        assert wait_kernel(api, KERNEL).status.name == "COMPLETE"
        ref = api.competition_submit_code("submission.csv", "seed", COMPETITION, KERNEL, 1, quiet=True).ref
        assert wait_submission(api, ref).status.name == "COMPLETE"
        assert api.dataset_create_new(str(make_dataset(root / "ds", files={"numbers.csv": "n\n1\n2\n"})),
                                      public=True, quiet=True).status == "ok"
        bob = connect_as(monkeypatch, server.base_url, OTHER, OTHER_KEY)
        assert bob.dataset_create_new(str(make_dataset(root / "bds", slug="bobs-numbers", title="Bobs numbers",
                                                       owner=OTHER)), public=True, quiet=True).status == "ok"
        api = connect_as(monkeypatch, server.base_url)  # alice again, for the in-process tests
        yield server, api, root
    monkeypatch.undo()


def kaggle(world: Any, *args: str, cwd: Path | None = None) -> Any:
    server, _, root = world
    work = cwd or root / "work"
    work.mkdir(parents=True, exist_ok=True)
    return kaggle_cli(args, server.base_url, root / "home", cwd=work)


def ok(world: Any, *args: str, cwd: Path | None = None) -> str:
    done = kaggle(world, *args, cwd=cwd)
    assert done.returncode == 0, f"kaggle {' '.join(args)}: {done.stdout}\n{done.stderr}"
    return done.stdout


# == test_commands.sh: competitions ===========================================================


def test_competitions_files_with_paging(world: Any) -> None:
    listed = ok(world, "competitions", "files", COMPETITION, "--page-size=3", "-v")
    assert "sample_submission.csv" in listed and "test.csv" in listed
    # The script's "--page-token=abcd" is no token the local Kaggle issued: refused cleanly, not ignored.
    refused = kaggle(world, "competitions", "files", COMPETITION, "--page-size=3", "--page-token=abcd", "-v", "-q")
    assert refused.returncode == 1 and "Invalid page token 'abcd'" in refused.stdout + refused.stderr


def test_competitions_list_group_category_sort(world: Any) -> None:
    assert COMPETITION in ok(world, "competitions", "list", "--group", "general", "--category", "featured",
                             "--sort-by", "prize")
    assert COMPETITION not in ok(world, "competitions", "list", "--category", "research")


def test_competitions_download_all_and_one(world: Any) -> None:
    _, _, root = world
    ok(world, "c", "download", COMPETITION, "-w", "-o", "-q", cwd=root / "dl-all")
    with zipfile.ZipFile(root / "dl-all" / f"{COMPETITION}.zip") as zf:
        assert sorted(zf.namelist()) == ["sample_submission.csv", "test.csv"]
    ok(world, "c", "download", COMPETITION, "-f", "test.csv", "-p", "tost", cwd=root / "dl-one")
    assert (root / "dl-one" / "tost" / "test.csv").read_text().startswith("id,x")


def test_competitions_submit_a_file_is_refused_by_a_code_competition(world: Any) -> None:
    _, _, root = world
    ok(world, "c", "download", COMPETITION, "-f", "sample_submission.csv", cwd=root / "submit")
    done = kaggle(world, "c", "submit", COMPETITION, "-f", "sample_submission.csv", "-m", "Test message",
                  cwd=root / "submit")
    assert "only accepts submissions from notebooks" in done.stdout + done.stderr


def test_competitions_submit_a_notebook_and_list_submissions(world: Any) -> None:
    out = ok(world, "c", "submit", COMPETITION, "-k", KERNEL, "-v", "1", "-f", "submission.csv", "-m", "Test message")
    assert "Successfully submitted to Tiny Parity" in out
    listed = ok(world, "c", "submissions", COMPETITION, "-v", "-q")
    assert listed.splitlines()[0].startswith("ref,fileName,date,description,status,publicScore,privateScore")
    assert "Test message" in listed


def test_competitions_leaderboard_download_and_show(world: Any) -> None:
    _, _, root = world
    ok(world, "c", "leaderboard", COMPETITION, "-v", "-q", "-d", "-p", "leaders", cwd=root / "lb")
    with zipfile.ZipFile(root / "lb" / "leaders" / f"{COMPETITION}.zip") as zf:
        assert zf.read(f"{COMPETITION}-publicleaderboard.csv").decode().startswith("TeamId,TeamName,SubmissionDate,Score")
    shown = ok(world, "c", "leaderboard", COMPETITION, "-s")
    assert USER in shown and "1.00000" in shown


# == test_commands.sh: kernels ================================================================


def test_kernels_list_variants(world: Any) -> None:
    mine = ok(world, "k", "list", "-m", "-s", "Parity", "--page-size", "5", "-p", "1", "-v", "--sort-by", "dateRun")
    assert KERNEL in mine
    assert ok(world, "k", "list", "-m", "-s", "Parity", "--page-size", "5", "-p", "2", "-v").strip() == "Not found"
    assert KERNEL not in ok(world, "k", "list", "--parent", KERNEL)
    assert KERNEL in ok(world, "k", "list", "--competition", COMPETITION, "--page-size", "5")
    assert KERNEL not in ok(world, "k", "list", "--dataset", DATASET, "--page-size", "5")
    assert KERNEL in ok(world, "k", "list", "--user", USER, "--language", "python", "--kernel-type", "notebook",
                        "--output-type", "data")


def test_kernels_files(world: Any) -> None:
    listed = ok(world, "kernels", "files", KERNEL, "-v", "--page-size=1")
    assert "submission.csv" in listed


def test_kernels_init_pull_push_status(world: Any) -> None:
    _, _, root = world
    (root / "init").mkdir()
    ok(world, "k", "init", "-p", str(root / "init"))
    assert json.loads((root / "init" / "kernel-metadata.json").read_text())["id"].endswith("INSERT_KERNEL_SLUG_HERE")
    ok(world, "k", "pull", "-p", str(root / "pulled"), KERNEL, "-m")
    metadata = json.loads((root / "pulled" / "kernel-metadata.json").read_text())
    assert (metadata["id"], metadata["kernel_type"], metadata["competition_sources"]) == (KERNEL, "notebook", [COMPETITION])
    ok(world, "k", "pull", "--wp", KERNEL, cwd=root / "pulled-wp")
    assert list((root / "pulled-wp").glob("*.ipynb"))
    pushed = ok(world, "kernels", "push", "-p", str(root / "pulled"))
    assert "Kernel version 2 successfully pushed" in pushed
    status = ok(world, "k", "status", KERNEL)
    assert status.startswith(f'{KERNEL} has status "KernelWorkerStatus.')


# == test_commands.sh: datasets ===============================================================


def test_datasets_list_variants(world: Any) -> None:
    deprecated = kaggle(world, "d", "list", "--size", "10")
    assert "--size parameter has been deprecated" in deprecated.stdout + deprecated.stderr  # the client's own refusal
    mine = ok(world, "d", "list", "-m")
    assert DATASET in mine and "bob/" not in mine
    assert f"{OTHER}/bobs-numbers" in ok(world, "d", "list", "--user", OTHER, "--csv")
    assert ok(world, "d", "list", "--file-type", "csv", "--page", "2", "--sort-by", "updated", "-s", "numbers",
              "--min-size", "1", "--max-size", "15000").strip() == "No datasets found"
    assert DATASET in ok(world, "d", "list", "--file-type", "csv", "--page", "1", "--sort-by", "updated", "-s", "numbers",
                         "--min-size", "1", "--max-size", "15000")
    assert ok(world, "d", "list", "--license", "odb", "--tags", "internet", "--search", "telco").strip() == \
        "No datasets found"


def test_datasets_files_with_paging(world: Any) -> None:
    assert "numbers.csv" in ok(world, "datasets", "files", DATASET, "--page-size=7")
    refused = kaggle(world, "datasets", "files", DATASET, "--page-size=7", "--page-token=abcd")
    assert "Invalid page token 'abcd'" in refused.stdout + refused.stderr


def test_datasets_init_create_download_version_metadata_status(world: Any) -> None:
    _, _, root = world
    folder = root / "new-dataset"
    folder.mkdir()
    ok(world, "d", "init", "-p", str(folder))
    meta = folder / "dataset-metadata.json"
    meta.write_text(meta.read_text().replace("INSERT_TITLE_HERE", "TitleHere").replace("INSERT_SLUG_HERE", "testing"))
    (folder / "data.csv").write_text("a,b\n1,2\n")
    created = ok(world, "d", "create", "-p", str(folder), "--public", "-q", "-t", "-r", "skip")
    assert "Your public Dataset is being created" in created
    ok(world, "datasets", "download", "-d", f"{USER}/testing", cwd=root / "dl1")
    assert (root / "dl1" / "testing.zip").is_file()
    ok(world, "d", "download", f"{USER}/testing", "-p", "tmp", "--unzip", "-o", "-q", cwd=root / "dl2")
    assert (root / "dl2" / "tmp" / "data.csv").read_text() == "a,b\n1,2\n"
    ok(world, "d", "download", f"{USER}/testing", "-f", "data.csv", "-w", "-q", "-o", cwd=root / "dl3")
    assert (root / "dl3" / "data.csv").is_file()
    versioned = ok(world, "d", "version", "-m", "VersionNotesGoHere", "-p", str(folder), "-q", "-t", "-r", "skip", "-d")
    assert "Dataset version is being created" in versioned
    ok(world, "datasets", "metadata", f"{USER}/testing", "-p", str(root / "meta"))
    info = json.loads((root / "meta" / "dataset-metadata.json").read_text())["info"]
    assert (info["datasetSlug"], info["data"][0]["name"]) == ("testing", "data.csv")
    assert ok(world, "d", "status", f"{USER}/testing") == "ready"


# == tests/backend: the in-process API ========================================================


def test_backend_kernels(world: Any) -> None:
    _, api, root = world
    kernels = api.kernels_list(sort_by="dateCreated", user=USER, language="python")
    assert [k.ref for k in kernels] == [KERNEL]
    (root / "backend-kernel").mkdir()
    path = api.kernels_initialize(str(root / "backend-kernel"))
    assert "machine_shape" in json.loads(Path(path).read_text())
    folder = make_kernel(root / "backend-kernel-push", title="Testing Backend", competitions=(), code="print('hello')")
    pushed = api.kernels_push(str(folder))
    assert pushed.ref and isinstance(pushed.version_number, int)
    assert wait_kernel(api, f"{USER}/testing-backend").status.name == "COMPLETE"
    assert len(api.kernels_list_files(f"{USER}/testing-backend").files) >= 0
    files, _ = api.kernels_output(KERNEL, str(root / "backend-out"))
    assert any(f.endswith("submission.csv") for f in files)
    pulled = api.kernels_pull(f"{USER}/testing-backend", str(root / "backend-pull"), metadata=True)
    metadata = json.loads((Path(pulled) / "kernel-metadata.json").read_text())
    for key in ("id", "id_no", "title", "code_file", "language", "kernel_type"):
        assert metadata.get(key), key
    for key in ("is_private", "enable_gpu", "enable_tpu", "enable_internet", "keywords", "dataset_sources",
                "kernel_sources", "competition_sources", "model_sources"):
        assert metadata.get(key) is not None, key


def test_backend_competitions(world: Any) -> None:
    _, api, root = world
    competitions = api.competitions_list(group="general").competitions
    assert 0 < len(competitions) <= 20
    for field in api.competition_fields:
        assert hasattr(competitions[0], api.camel_to_snake(field))
    assert api.competitions_list(page=2, category="gettingStarted", sort_by="prize").competitions == []
    submissions = api.competition_submissions(COMPETITION)
    assert submissions and all(hasattr(submissions[0], api.camel_to_snake(f)) for f in api.submission_fields)
    files = api.competition_list_files(COMPETITION).files
    assert files and all(hasattr(files[0], api.camel_to_snake(f)) for f in api.competition_file_fields)
    cwd = Path.cwd()
    os.chdir(root / "work")
    try:
        api.competition_download_file(COMPETITION, files[0].ref, force=True, quiet=True)
        assert Path(files[0].ref).exists()
        api.competition_download_files(COMPETITION, quiet=True)
        assert Path(f"{COMPETITION}.zip").stat().st_size > 0
    finally:
        os.chdir(cwd)
    board = api.competition_leaderboard_view(COMPETITION)
    assert board and all(hasattr(board[0], api.camel_to_snake(f)) for f in api.competition_leaderboard_fields)
    api.competition_leaderboard_download(COMPETITION, str(root / "backend-lb"))
    assert (root / "backend-lb" / f"{COMPETITION}.zip").is_file()


def test_backend_datasets(world: Any) -> None:
    _, api, root = world
    datasets = api.dataset_list(sort_by="votes")
    assert datasets and all(hasattr(datasets[0], api.camel_to_snake(f)) for f in api.dataset_fields)
    assert api.dataset_list(license_name="other", file_type="bigQuery") == []  # no BigQuery datasets locally
    meta_dir = root / "backend-meta"
    assert Path(api.dataset_metadata(DATASET, str(meta_dir))).exists()
    api.dataset_metadata_update(DATASET, str(meta_dir))
    listed = api.dataset_list_files(DATASET).dataset_files
    assert listed and all(hasattr(listed[0], api.camel_to_snake(f)) for f in api.dataset_file_fields)
    assert api.dataset_status(DATASET) in ("ready", "pending", "error")
    api.dataset_download_file(DATASET, listed[0].name, str(root / "backend-dl"))
    assert (root / "backend-dl" / listed[0].name).exists()
    api.dataset_download_files(DATASET + "/1", path=str(root / "backend-dl"))
    assert (root / "backend-dl" / "tiny-numbers.zip").exists()
    folder = root / "backend-dataset"
    folder.mkdir()
    api.dataset_initialize(str(folder))
    meta = json.loads((folder / "dataset-metadata.json").read_text())
    meta.update(id=f"{USER}/kaggleapi-dataset-local", title="kaggleapi-dataset-local",
                resources=[{"path": "data.csv", "description": "Description",
                            "schema": {"fields": [{"name": "NumberField", "description": "id", "type": "number"}]}}])
    build_file_tree(folder, {"dataset-metadata.json": json.dumps(meta), "data.csv": "NumberField\n1\n"})
    created = api.dataset_create_new(str(folder))
    assert created.error == ""
    version = api.dataset_create_version(str(folder), "Notes")
    assert (version.error, version.ref != "") == ("", True)
    api.dataset_delete(USER, "kaggleapi-dataset-local", True)
    with pytest.raises(Exception, match="not found"):
        api.dataset_status(f"{USER}/kaggleapi-dataset-local")


@pytest.mark.parametrize(
    "reason",
    ["models (list, create, update, instances, versions): the local Kaggle serves only what kkb push uses (create "
     "model, instance and version; get; files; download), tested in test_local_kaggle_models.py",
     "forums and forum topics: the local Kaggle has no forums",
     "competition discussion topics and their messages: the local Kaggle has no discussions",
     "inbox file uploads (files_upload): the local Kaggle has no inbox",
     "kernels_run: the backend suite targets a newer client; kaggle 2.2.5 has no such method"],
)
def test_parts_that_need_kaggle_com(reason: str) -> None:
    pytest.skip(reason)
