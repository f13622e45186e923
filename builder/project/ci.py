"""``kkb init --ci github``: a CI workflow that builds and dry-runs the kernel on every push and submits on a tag.

The workflow is rendered from ``templates/scaffold/`` through the one strict Jinja environment. It names the
Kaggle credentials only as the repository's secrets (``${{ secrets.KAGGLE_USERNAME }}``,
``${{ secrets.KAGGLE_KEY }}``), and only on the steps that talk to Kaggle (the data download, ``kkb submit``): no
value is ever written into it, and ``pip install`` never sees them. Its token may only read the repository
(``permissions: contents: read``), and every action is pinned by commit (:data:`ACTIONS`), its tag in a comment. It
goes into the git repository that holds the kernel folder; outside one, ``--repo-root DIR`` says where. It caches kkb's hash caches (the kernel's
``.kkb/`` folder and its build folder, ``build/<name>``, with the wheelhouse) so that a runner does not hash,
build or upload again what did not change, and the competition's public data (downloaded once).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from builder import __version__
from builder.errors import SpecError
from builder.kkb_runtime.vocabulary import StrEnum
from builder.project.layout import BUILD_ROOT
from builder.project.spec import SPEC_FILE, KernelSpec, spec_of
from builder.project.templating import render_scaffold

STATE_DIR = ".kkb"  # the kernel's own state: history, lock (builder.remote.history.STATE_DIR)


class CiProvider(StrEnum):
    """Where ``kkb init --ci`` writes a workflow for."""

    GITHUB = "github"


@dataclass(frozen=True)
class WorkflowKind:
    path: str  # relative to the repository root
    template: str  # in templates/scaffold/


WORKFLOWS = {CiProvider.GITHUB: WorkflowKind(".github/workflows/kkb.yml", "github-workflow.yml.j2")}


@dataclass(frozen=True)
class PinnedAction:
    repository: str
    commit: str  # the full SHA the tag pointed to when kkb pinned it
    tag: str

    def uses(self) -> str:
        """The ``uses:`` value: the commit (a tag can be moved, a commit cannot), the tag in a comment."""
        return f"{self.repository}@{self.commit}  # {self.tag}"


# The GitHub actions the workflow runs, pinned by commit (read from each repository's tag).
ACTIONS = {
    "checkout": PinnedAction("actions/checkout", "11d5960a326750d5838078e36cf38b85af677262", "v4.4.0"),
    "setup_python": PinnedAction("actions/setup-python", "a26af69be951a213d495a4c3e4e4022e16d87065", "v5.6.0"),
    "cache": PinnedAction("actions/cache", "0057852bfaa89a56745cba8c7296529d2fc39830", "v4.3.0"),
    "upload_artifact": PinnedAction("actions/upload-artifact", "ea165f8d65b6e75b540449e92b4886f43607fa02", "v4.6.2"),
}


@dataclass(frozen=True)
class WorkflowTarget:
    root: Path  # the repository root
    path: Path  # the workflow file
    kernel: str  # the kernel folder, relative to the root (POSIX)


def repository_root(provider: CiProvider, kernel_dir: Path, explicit: Path | None = None) -> Path:
    """The folder ``.github/`` belongs in: ``explicit`` (``--repo-root``), else the git repository holding the kernel
    folder (or, for a folder not made yet, the nearest one that exists); outside any, a SpecError (nothing written)."""
    if explicit is not None:
        return Path(explicit).resolve()
    start = Path(kernel_dir).resolve()
    root = next((folder for folder in (start, *start.parents) if (folder / ".git").exists()), None)
    if root is None:
        raise SpecError(f"--ci {provider}: {kernel_dir} is not inside a git repository, so there is no root for "
                        f"{WORKFLOWS[provider].path}; nothing was written",
                        hint="run kkb init inside your repository (git init first), or pass --repo-root DIR: the "
                             "repository's root, which holds the kernel folder")
    return root


def check_workflow_target(provider: CiProvider, kernel_dir: Path, repo_root: Path | None = None) -> WorkflowTarget:
    """Where the workflow goes; refused before anything is written when it exists or the kernel is outside."""
    root = repository_root(provider, kernel_dir, repo_root)
    kernel = Path(kernel_dir).resolve()
    if kernel != root and root not in kernel.parents:
        raise SpecError(f"--ci {provider}: the kernel folder {kernel_dir} is outside the repository {root}",
                        hint="run kkb init from the repository's root, with the kernel folder inside it")
    path = root / WORKFLOWS[provider].path
    if path.exists():
        raise SpecError(f"{path}: already exists; kkb init does not overwrite a workflow",
                        hint="delete it to have kkb write it again, or edit it by hand")
    return WorkflowTarget(root, path, kernel.relative_to(root).as_posix() if kernel != root else ".")


def workflow_text(provider: CiProvider, target: WorkflowTarget, kernel_dir: Path, spec: KernelSpec | None = None) -> str:
    spec = spec_of(spec, kernel_dir)
    name = Path(kernel_dir).resolve().name
    return render_scaffold(WORKFLOWS[provider].template, {
        "kkb_version": __version__, "requirement": f"kkb=={__version__}",
        "python_version": f"{sys.version_info.major}.{sys.version_info.minor}",
        "kernel_dir": target.kernel, "state_dir": STATE_DIR, "kernel_name": name, "build_dir": (BUILD_ROOT / name).as_posix(),
        "data_dir": _data_in_repository(spec.competition.data_dir(Path(kernel_dir)), target, spec.competition.slug),
        "competition": spec.competition.slug, "accelerated": spec.kernel.machine_shape is not None,
        "accelerator_name": spec.kernel.machine_shape or "accelerator",
        "actions": {name: action.uses() for name, action in ACTIONS.items()},
    })


def _data_in_repository(data: Path | None, target: WorkflowTarget, slug: str) -> str:
    """``[competition] data`` relative to the root when inside the repository, else a folder the workflow fills."""
    if data is not None:
        resolved = data.expanduser().resolve()
        if target.root in resolved.parents:
            return resolved.relative_to(target.root).as_posix()
    return f"{target.kernel}/data/{slug}" if target.kernel != "." else f"data/{slug}"


def write_workflow(provider: CiProvider, target: WorkflowTarget, kernel_dir: Path, spec: KernelSpec | None = None) -> Path:
    """Renders and writes the workflow for the project in ``kernel_dir`` (its ``kernel.toml`` must load; ``spec``:
    the one the command loaded)."""
    if not (Path(kernel_dir) / SPEC_FILE).is_file():
        raise SpecError(f"{Path(kernel_dir) / SPEC_FILE}: file not found",
                        hint="run kkb init with --competition SLUG or --from DIR first, or pass the kernel folder")
    text = workflow_text(provider, target, kernel_dir, spec)
    target.path.parent.mkdir(parents=True, exist_ok=True)
    target.path.write_text(text, encoding="utf-8")
    return target.path
