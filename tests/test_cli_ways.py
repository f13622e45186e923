"""kkb as people call it, three ways and more: the ``kkb`` command in a subprocess started in a fresh working folder,
the kernel folder named from inside it (``.``), from its parent (``NAME``), by its absolute path, through a path with a
space and through a symlink; every path a user gives (``--out``, ``--data``, compared files, ``--find-links``) taken
against the folder the command started in.

The small examples (minimal, tabular-style, evalapi) build every way here, and each heavier command runs once per
kernel with the ways rotated over the kernels, so each command meets each of the three ways: ``dry-run --scenario
both``, ``push`` (and ``status``) against the local Kaggle, ``compare``, ``env``. The larger examples build every
way on top of their own end-to-end tests (``test_card_examples``, ``test_example_kernels``, ``test_reference_kernel``),
whose dry runs and submits run from a kernel folder or its parent too (``kkb demo`` submits with ``kkb submit .``).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.local_kaggle import InstantRunner, LocalKaggle
from tests.support.assets import make_assets
from tests.support.cli import build_every_way, dry_run, kkb, said, ways
from tests.support.demo_kaggle import DEMO_KEY, DEMO_USER, serve_local_kaggle
from tests.support.files import KERNELS

pytestmark = [pytest.mark.slow, pytest.mark.loopback]

SMALL = ("minimal", "tabular-style", "evalapi")
# Each command once per kernel, the ways rotated: every command meets inside, parent and absolute.
ROTATION = {
    "dry-run": {"minimal": "parent", "evalapi": "absolute"},  # tabular-style: from inside, in test_card_examples
    "push": {"minimal": "absolute", "tabular-style": "inside", "evalapi": "parent"},
    "compare": {"minimal": "inside", "tabular-style": "parent", "evalapi": "absolute"},
    "env": {"minimal": "parent", "tabular-style": "absolute", "evalapi": "inside"},
}


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh working folder holding copies of the small examples, their assets made."""
    pytest.importorskip("lightgbm")
    made = make_assets(KERNELS / "tabular-style")
    assert made.returncode == 0, made.stdout + made.stderr
    folder = tmp_path_factory.mktemp("work")
    for name in SMALL:
        shutil.copytree(KERNELS / name, folder / name, ignore=shutil.ignore_patterns(".kkb", "build", "__pycache__"))
    image = folder / "image.json"  # an image with nothing pinned: kkb env builds its environment without a download
    image.write_text(json.dumps({"python": "3.12", "captured": "a test image", "packages": {}}))
    return folder


@pytest.fixture(scope="module")
def kaggle(work: Path) -> Iterator[LocalKaggle]:
    """A local Kaggle that takes pushes (runs succeed at once), the small examples' competitions registered."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        for local in serve_local_kaggle(work / "server", monkeypatch, InstantRunner()):
            for name in SMALL[1:]:
                local.add_competition(work / name / "data" / "competition")
            yield local


def _env(work: Path) -> dict[str, str]:
    return {"KAGGLE_USERNAME": DEMO_USER, "KAGGLE_KEY": DEMO_KEY, "KKB_KAGGLE_IMAGE": str(work / "image.json"),
            "KKB_IMAGE_ENV_CACHE": str(work / "envs")}


@pytest.mark.parametrize("name", SMALL)
def test_build_every_way(work: Path, name: str) -> None:
    build_every_way(work / name, work, work / "build" / name, env=_env(work))


@pytest.mark.parametrize(("name", "way"), sorted(ROTATION["dry-run"].items()))
def test_dry_run_both_scenarios(work: Path, name: str, way: str) -> None:
    chosen = ways(work / name, work)[way]
    report = dry_run(chosen, "--scenario", "both", *chosen.out(work / "build" / name), env=_env(work))
    assert [(s["scenario"], s["verdict"]["name"]) for s in report["scenarios"]] == [("commit", "OK"), ("rerun", "OK")]


@pytest.mark.parametrize(("name", "way"), sorted(ROTATION["push"].items()))
def test_push_and_status(work: Path, kaggle: LocalKaggle, name: str, way: str) -> None:
    chosen = ways(work / name, work)[way]
    env = {**_env(work), "KKB_KAGGLE_API": kaggle.base_url}
    pushed = kkb("push", chosen.kernel, *chosen.out(work / "build" / name), "--json", cwd=chosen.cwd, env=env)
    assert pushed.returncode == 0, said(pushed)
    assert json.loads(pushed.stdout)["kernel_version"] == 1, pushed.stdout
    status = kkb("status", chosen.kernel, "--json", cwd=chosen.cwd, env=env)
    assert status.returncode == 0 and json.loads(status.stdout)["kernel_version"] == 1, said(status)
    assert (work / name / ".kkb" / "history.jsonl").is_file()  # the project's own history, whatever the way


@pytest.mark.parametrize(("name", "way"), sorted(ROTATION["compare"].items()))
def test_compare_takes_its_files_from_the_current_folder(work: Path, name: str, way: str) -> None:
    chosen = ways(work / name, work)[way]
    sample = Path(chosen.kernel) / "data/competition/public/sample_submission.csv"  # relative, but the absolute way
    run = kkb("compare", sample, sample, "--kernel", chosen.kernel, "--json", cwd=chosen.cwd)
    assert run.returncode == 0, said(run)
    assert json.loads(run.stdout)["ok"] is True


@pytest.mark.parametrize(("name", "way"), sorted(ROTATION["env"].items()))
def test_env(work: Path, name: str, way: str) -> None:
    chosen = ways(work / name, work)[way]
    (work / "wheels").mkdir(exist_ok=True)
    links = (work / "wheels") if way == "absolute" else Path(os.path.relpath(work / "wheels", chosen.cwd))
    run = kkb("env", chosen.kernel, "--find-links", links, cwd=chosen.cwd, env=_env(work))
    assert run.returncode == 0, said(run)
    assert "0 pins from Kaggle's image" in run.stdout, said(run)
