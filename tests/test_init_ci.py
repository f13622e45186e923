"""``kkb init --ci github``: a workflow that builds and dry-runs on every push and submits on a tag or a dispatch."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from builder import __version__, cli
from builder.errors import SpecError
from builder.project.ci import ACTIONS, WORKFLOWS, CiProvider
from builder.project.init import InitSettings, init_project
from tests.support.files import KERNELS

yaml = pytest.importorskip("yaml")

PUBLIC = KERNELS / "minimal" / "data" / "competition" / "public"
USER, KEY = "ci-user", "ci-secret-key-0123456789abcdef"
CACHE_SHA = "0057852bfaa89a56745cba8c7296529d2fc39830"
SECRETS = {"KAGGLE_USERNAME": "${{ secrets.KAGGLE_USERNAME }}", "KAGGLE_KEY": "${{ secrets.KAGGLE_KEY }}"}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository (its root holds .git), the current folder, with credentials in the environment."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    monkeypatch.chdir(root)
    monkeypatch.setenv("KAGGLE_USERNAME", USER)
    monkeypatch.setenv("KAGGLE_KEY", KEY)
    return root


def _workflow(root: Path) -> tuple[str, dict[Any, Any]]:  # YAML: keys `on` read as True
    text = (root / ".github" / "workflows" / "kkb.yml").read_text()
    return text, yaml.safe_load(text)


def _runs(job: dict[str, Any]) -> str:
    return "\n".join(str(step.get("run", "")) for step in job["steps"])


def test_a_new_project_gets_a_workflow_that_builds_dry_runs_and_submits(repo: Path) -> None:
    data = shutil.copytree(PUBLIC, repo / "kernels" / "mine" / "data" / "kkb-minimal")
    result = init_project(InitSettings(kernel_dir=Path("kernels/mine"), competition="kkb-minimal", data_dir=data,
                                       ci=CiProvider.GITHUB))
    assert [path.name for path in result.written] == ["kernel.toml", "predict.py", "kkb.yml"]
    text, workflow = _workflow(repo)
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert triggers["push"] == {"branches": ["**"], "tags": ["v*"]} and "workflow_dispatch" in triggers
    assert workflow["env"]["KKB_KERNEL"] == "kernels/mine" and workflow["env"]["KKB_DATA"] == "kernels/mine/data/kkb-minimal"
    dry, submit = workflow["jobs"]["dry-run"], workflow["jobs"]["submit"]
    assert 'pip install "$KKB_REQUIREMENT"' in _runs(dry) and 'kkb build "$KKB_KERNEL"' in _runs(dry)
    assert 'kkb dry-run "$KKB_KERNEL" --data "$KKB_DATA"\n' in _runs(dry) + "\n"  # a CPU kernel: any failure fails
    assert submit["needs"] == "dry-run" and 'kkb submit "$KKB_KERNEL"' in _runs(submit)
    assert submit["if"] == "startsWith(github.ref, 'refs/tags/v') || github.event_name == 'workflow_dispatch'"
    caches = [step["with"]["path"].split() for step in dry["steps"] if step.get("uses") == f"actions/cache@{CACHE_SHA}"]
    assert caches == [["kernels/mine/.kkb", "!kernels/mine/.kkb/tmp", "build/mine"], ["kernels/mine/data/kkb-minimal"]]
    assert KEY not in text and USER not in text  # the credentials in the environment never enter the file
    expressions = set(re.findall(r"\$\{\{\s*([^}]*?)\s*\}\}", text))
    assert expressions == {"runner.os", "github.sha", "secrets.KAGGLE_USERNAME", "secrets.KAGGLE_KEY"}


def test_ci_alone_adds_the_workflow_to_an_existing_project(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(KERNELS / "minimal", repo / "kernels" / "minimal", ignore=shutil.ignore_patterns(".kkb"))
    assert cli.main(["init", "kernels/minimal", "--ci", "github"]) == 0
    _, workflow = _workflow(repo)
    assert workflow["env"]["KKB_DATA"] == "kernels/minimal/data/competition/public"  # [competition] data, in the repo
    out = capsys.readouterr().out  # the kernel folder as kkb took it: against the current folder, at the door
    assert f"created {repo / 'kernels' / 'minimal'}: {repo / '.github' / 'workflows' / 'kkb.yml'}" in out


def test_an_accelerated_kernel_accepts_not_rehearsed_on_a_runner_without_one(repo: Path) -> None:
    kernel = Path(shutil.copytree(KERNELS / "minimal", repo / "k", ignore=shutil.ignore_patterns(".kkb")))
    spec = (kernel / "kernel.toml").read_text().replace('accelerator = "none"', 'accelerator = "gpu"')
    (kernel / "kernel.toml").write_text(spec)
    init_project(InitSettings(kernel_dir=kernel, ci=CiProvider.GITHUB))
    text, workflow = _workflow(repo)
    assert 'kkb dry-run "$KKB_KERNEL" --data "$KKB_DATA" || [ $? -eq 5 ]' in _runs(workflow["jobs"]["dry-run"])
    assert "exit 5: not rehearsed here (this runner has no NvidiaTeslaT4)" in text


@pytest.mark.parametrize(
    ("setup", "message", "hint"),
    [
        pytest.param("existing", "{root}/.github/workflows/kkb.yml: already exists; kkb init does not overwrite a workflow",
                     "delete it to have kkb write it again, or edit it by hand", id="existing"),
        pytest.param("outside", "--ci github: the kernel folder {kernel} is outside the repository {root}",
                     "run kkb init from the repository's root, with the kernel folder inside it", id="outside"),
        pytest.param("no-project", "{kernel}/kernel.toml: file not found; --ci alone adds a workflow to an existing project",
                     "pass --competition SLUG or --from DIR as well, to create the project first", id="no-project"),
    ],
)
def test_bad_ci(repo: Path, tmp_path: Path, setup: str, message: str, hint: str) -> None:
    kernel = tmp_path / "elsewhere" if setup == "outside" else repo / "kernels" / "new"
    if setup == "existing":
        (repo / ".github" / "workflows").mkdir(parents=True)
        (repo / ".github" / "workflows" / "kkb.yml").write_text("name: mine\n")
    competition = None if setup == "no-project" else "kkb-minimal"
    with pytest.raises(SpecError) as caught:
        init_project(InitSettings(kernel_dir=kernel, competition=competition, data_dir=PUBLIC, ci=CiProvider.GITHUB,
                                  repo_root=repo))
    assert (caught.value.message, caught.value.hint) == (message.format(root=repo, kernel=kernel), hint)
    assert not kernel.exists()  # refused before the project was written


def test_the_workflow_reads_only_pins_every_action_and_hands_the_secrets_only_to_kaggle_steps(repo: Path) -> None:
    kernel = Path(shutil.copytree(KERNELS / "minimal", repo / "k", ignore=shutil.ignore_patterns(".kkb")))
    init_project(InitSettings(kernel_dir=kernel, ci=CiProvider.GITHUB))
    text, workflow = _workflow(repo)
    assert workflow["permissions"] == {"contents": "read"}
    steps = [(job, step) for job, body in workflow["jobs"].items() for step in body["steps"]]
    uses = [line.strip() for line in text.splitlines() if line.strip().removeprefix("- ").startswith("uses:")]
    assert uses and all(re.fullmatch(r"(- )?uses: actions/[a-z-]+@[0-9a-f]{40}  # v\d+\.\d+\.\d+", line) for line in uses)
    assert "uses: actions/checkout@11d5960a326750d5838078e36cf38b85af677262  # v4.4.0" in text
    with_secrets = [(job, step.get("name")) for job, step in steps if "secrets." in str(step)]
    assert with_secrets == [("dry-run", "download the competition's public data"), ("submit", "kkb submit")]
    assert all(step["env"] == SECRETS for job, step in steps if "secrets." in str(step))
    assert all("env" not in body for body in workflow["jobs"].values())  # not the whole job: pip install never sees them


def test_the_minimal_kernels_workflow_matches_its_golden_file(repo: Path, update_golden: bool) -> None:
    kernel = Path(shutil.copytree(KERNELS / "minimal", repo / "kernels" / "minimal", ignore=shutil.ignore_patterns(".kkb")))
    init_project(InitSettings(kernel_dir=kernel, ci=CiProvider.GITHUB))
    text, _ = _workflow(repo)
    # What depends on the machine that rendered it: kkb's version, this interpreter's Python.
    text = text.replace(__version__, "<kkb version>").replace(f'"{sys.version_info.major}.{sys.version_info.minor}"',
                                                              '"<python version>"')
    golden = Path(__file__).parent / "golden" / "github-workflow.kkb.yml"
    if update_golden:
        golden.write_text(text)
    assert text == golden.read_text(), "the workflow changed: check it, then run pytest --update-golden"


def test_pinned_actions_are_full_commits_with_their_tag() -> None:
    assert {action.repository for action in ACTIONS.values()} == {
        "actions/checkout", "actions/setup-python", "actions/cache", "actions/upload-artifact"}
    for action in ACTIONS.values():
        assert re.fullmatch(r"[0-9a-f]{40}", action.commit) and re.fullmatch(r"v\d+\.\d+\.\d+", action.tag)
        assert action.uses() == f"{action.repository}@{action.commit}  # {action.tag}"


def test_outside_a_git_repository_ci_says_so_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    if any((folder / ".git").exists() for folder in (tmp_path, *tmp_path.parents)):
        pytest.skip("the temporary folder is inside a git repository")
    monkeypatch.setenv("KAGGLE_USERNAME", USER)
    monkeypatch.chdir(tmp_path)
    kernel = tmp_path / "kernels" / "new"
    assert cli.main(["init", str(kernel), "--competition", "kkb-minimal", "--data", str(PUBLIC), "--ci", "github"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert (f"--ci github: {kernel} is not inside a git repository, so there is no root for .github/workflows/kkb.yml; "
            "nothing was written") in err
    assert "pass --repo-root DIR" in err
    assert sorted(path.name for path in tmp_path.iterdir()) == []  # no kernel folder, no .github/
    # --repo-root names the root: the workflow goes there.
    assert cli.main(["init", str(kernel), "--competition", "kkb-minimal", "--data", str(PUBLIC), "--ci", "github",
                     "--repo-root", str(tmp_path)]) == 0
    assert (tmp_path / ".github" / "workflows" / "kkb.yml").is_file() and (kernel / "kernel.toml").is_file()


def test_repo_root_without_ci_is_a_usage_error(tmp_path: Path) -> None:
    assert cli.main(["init", str(tmp_path / "k"), "--competition", "kkb-minimal", "--repo-root", str(tmp_path)]) == 64


def test_every_ci_provider_has_a_workflow() -> None:
    assert set(WORKFLOWS) == set(CiProvider)
