"""Find the competition data and the attached datasets under ``/kaggle/input``.

Kaggle moved to an owner-qualified layout in 2026 (``input/competitions/<slug>``,
``input/datasets/<owner>/<slug>``) and the rollout was uneven, so every lookup tries the current
layout, then the old one (``input/<slug>``), then searches for a sentinel file. When nothing
matches, the error shows the tree of what *is* mounted: Kaggle never tells you.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from .config import CONFIG_FILE, InputSection, KernelConfig, default_config_path, read_inputs

MANIFEST_FILE = "manifest.json"


class InputNotFound(FileNotFoundError):
    """An attached dataset or the competition data is not where any layout puts it."""


def kaggle_root() -> Path:
    """``/kaggle``, or ``$KKB_KAGGLE_ROOT`` when the notebook runs in kkb's local sandbox."""
    return Path(os.environ.get("KKB_KAGGLE_ROOT", "/kaggle"))


def working_dir() -> Path:
    return kaggle_root() / "working"


def dataset_candidates(dataset_id: str, root: Path | None = None) -> list[Path]:
    owner, _, slug = dataset_id.partition("/")
    base = (root or kaggle_root()) / "input"
    return [base / "datasets" / owner / slug, base / slug]


def competition_candidates(slug: str, root: Path | None = None) -> list[Path]:
    base = (root or kaggle_root()) / "input"
    return [base / "competitions" / slug, base / slug]


def find_dir(candidates: Iterable[Path], sentinel: str, what: str, accept: Callable[[Path], bool] | None = None,
             root: Path | None = None) -> Path:
    """The first candidate holding ``sentinel``, else a folder found by searching for it."""
    candidates = list(candidates)
    for candidate in candidates:
        if (candidate / sentinel).exists() and (accept is None or accept(candidate)):
            return candidate
    base = (root or kaggle_root()) / "input"
    for hit in _shallow_search(base, sentinel):
        if accept is None or accept(hit.parent):
            return hit.parent
    tried = "\n".join(f"  {path}" for path in candidates)
    raise InputNotFound(
        f"{what}: not found. Tried:\n{tried}\nand searched {base} for '{sentinel}'.\n"
        f"What is mounted:\n{input_tree(base)}"
    )


def _shallow_search(base: Path, name: str, depth: int = 5) -> list[Path]:
    """Matches of ``name`` at most ``depth`` levels down: a hidden test of a million images must not be walked."""
    hits: list[Path] = []
    for level in range(1, depth + 1):
        hits += sorted(base.glob("/".join(["*"] * (level - 1) + [name])))
    return hits


def input_tree(base: Path, depth: int = 4, limit: int = 200) -> str:
    """An indented listing of ``base`` (``/kaggle/input``) down to ``depth`` levels."""
    if not base.is_dir():
        return f"  ({base} does not exist)"
    lines: list[str] = []

    def walk(folder: Path, level: int) -> None:
        for entry in sorted(folder.iterdir()):
            if len(lines) >= limit:
                return
            lines.append("  " * (level + 1) + entry.name + ("/" if entry.is_dir() else ""))
            if entry.is_dir() and level + 1 < depth:
                walk(entry, level + 1)

    walk(base, 0)
    if len(lines) >= limit:
        lines.append("  ...")
    return "\n".join(lines) or "  (empty)"


def _manifest_of(dataset_id: str) -> Callable[[Path], bool]:
    def accept(folder: Path) -> bool:
        try:
            return bool(json.loads((folder / MANIFEST_FILE).read_text()).get("dataset") == dataset_id)
        except (OSError, ValueError):
            return False

    return accept


def find_dataset(dataset_id: str, root: Path | None = None) -> Path:
    """The folder of an attached kkb dataset (one with a ``manifest.json`` naming it)."""
    return find_dir(dataset_candidates(dataset_id, root), MANIFEST_FILE, f"dataset {dataset_id}", _manifest_of(dataset_id), root)


def kernel_output_candidates(kernel_id: str, root: Path | None = None) -> list[Path]:
    """Where an attached notebook's output (``kernel_sources``) is mounted: current layout, then the old one."""
    owner, _, slug = kernel_id.partition("/")
    base = (root or kaggle_root()) / "input"
    return [base / "notebooks" / owner / slug, base / slug]


def find_kernel_output(kernel_id: str, sentinel: str, accept: Callable[[Path], bool] | None = None,
                       root: Path | None = None) -> Path:
    """The output folder of an attached notebook: the candidate holding ``sentinel`` (a file or folder name
    directly in it), else a folder found by searching ``input/`` for ``sentinel``."""
    return find_dir(kernel_output_candidates(kernel_id, root), sentinel, f"output of notebook {kernel_id}", accept, root)


WHEELHOUSE_FILE = "kkb_wheelhouse.json"
WHEELHOUSE_SUBDIR = "wheels"  # the kkb wheels helper kernel writes /kaggle/working/wheels


def _wheelhouse_of(ref: str) -> Callable[[Path], bool]:
    def accept(folder: Path) -> bool:
        try:
            return bool(json.loads((folder / WHEELHOUSE_FILE).read_text()).get("id") == ref)
        except (OSError, ValueError):
            return False

    return accept


def find_wheelhouse(ref: str, kind: str = "dataset", root: Path | None = None) -> Path:
    """The folder of wheels kkb built: a dataset (``kind="dataset"``) or a helper kernel's output (``"kernel"``).

    A kkb wheelhouse holds ``kkb_wheelhouse.json`` naming ``ref``. A dataset made some other way is
    accepted when one of its candidate folders holds wheels.
    """
    if kind == "kernel":
        mounts = kernel_output_candidates(ref, root)
        candidates = [path for mount in mounts for path in (mount / WHEELHOUSE_SUBDIR, mount)]
        return find_dir(candidates, WHEELHOUSE_FILE, f"wheels of notebook {ref}", _wheelhouse_of(ref), root)
    try:
        return find_dir(dataset_candidates(ref, root), WHEELHOUSE_FILE, f"wheelhouse dataset {ref}", _wheelhouse_of(ref), root)
    except InputNotFound:
        for candidate in dataset_candidates(ref, root):
            if candidate.is_dir() and any(candidate.glob("*.whl")):
                return candidate
        raise


def find_competition(slug: str, sample_submission: str, root: Path | None = None) -> Path:
    return find_dir(competition_candidates(slug, root), sample_submission, f"competition data for {slug}", None, root)


def model_candidates(ref: str, root: Path | None = None) -> list[Path]:
    """A Kaggle Model version ``owner/model/framework/variation/version``: current layout, then the old one."""
    owner, model, framework, variation, version = ref.split("/")
    base = (root or kaggle_root()) / "input"
    return [base / "models" / owner / model / framework / variation / version,
            base / model / framework / variation / version]


def find_model_weights(model_id: str, root: Path | None = None) -> Path:
    """kkb's weights published as a Model (``owner/model/framework/variation``): the mounted version whose
    ``manifest.json`` names it (its number is Kaggle's, so every mounted version is a candidate)."""
    owner, model, framework, variation = model_id.split("/")
    base = (root or kaggle_root()) / "input"
    candidates = [path for parent in (base / "models" / owner / model / framework / variation,
                                      base / model / framework / variation)
                  for path in sorted(parent.glob("*"), reverse=True)]
    return find_dir(candidates, MANIFEST_FILE, f"model {model_id}", _manifest_of(model_id), root)


def input_candidates(kind: str, ref: str, root: Path | None = None) -> list[Path]:
    """Where Kaggle mounts an input of ``kind`` (dataset, model, notebook); a version in the ref does not move it."""
    if kind == "model":
        return model_candidates(ref, root)
    owner_slug = "/".join(ref.split("/")[:2])
    if kind == "notebook":
        return kernel_output_candidates(owner_slug, root)
    return dataset_candidates(owner_slug, root)


def find_input(name: str, root: Path | None = None, config: KernelConfig | None = None) -> Path:
    """The folder of an attached input, by its ``[[inputs]]`` name or its reference.

    ``find_input("timm-src")``, ``find_input("bob/timm-src")``, ``find_input("google/gemma/pytorch/2b/1")``.
    A name is looked up in ``kkb_kernel.json`` (``config``, else the one next to this package); a
    reference of five parts is a model, of two or three a dataset or a notebook's output.
    """
    listed = config.inputs if config is not None else _listed_inputs()
    known = [item for item in listed if name in (item.name, item.ref)]
    if known:
        kinds_refs = [(known[0].kind, known[0].ref)]
    elif name.count("/") == 4:
        kinds_refs = [("model", name)]
    elif name.count("/") in (1, 2):
        kinds_refs = [("dataset", name), ("notebook", name)]
    else:
        names = ", ".join(item.name for item in listed) or "none"
        raise InputNotFound(f"input '{name}': no [[inputs]] of that name (known: {names}), and not an "
                            "owner/slug or owner/model/framework/variation/version reference")
    candidates = [path for kind, ref in kinds_refs for path in input_candidates(kind, ref, root)]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    base = (root or kaggle_root()) / "input"
    tried = "\n".join(f"  {path}" for path in candidates)
    raise InputNotFound(f"input '{name}': not mounted. Tried:\n{tried}\nWhat is mounted:\n{input_tree(base)}")


def _listed_inputs() -> tuple[InputSection, ...]:
    """The ``[[inputs]]`` of the ``kkb_kernel.json`` this run has (``$KKB_KERNEL_CONFIG``, else the one next to this
    package); none when there is none to read."""
    try:
        return read_inputs(default_config_path())
    except (OSError, ValueError):
        return ()


@dataclass(frozen=True)
class Inputs:
    code: Path
    weights: Path | None
    competition: Path
    working: Path

    def describe(self) -> str:
        return "\n".join(f"{name:12} {value}" for name, value in vars(self).items())


def resolve_inputs(config: KernelConfig, root: Path | None = None) -> Inputs:
    weights = None
    if config.datasets.weights and config.weights_kind == "model":
        weights = find_model_weights(config.datasets.weights, root)
    elif config.datasets.weights:
        weights = find_dataset(config.datasets.weights, root)
    competition = find_competition(config.competition.slug, config.competition.sample_submission, root)
    return Inputs(code=config.code_dir, weights=weights, competition=competition, working=(root or kaggle_root()) / "working")


__all__ = ["CONFIG_FILE", "InputNotFound", "Inputs", "find_competition", "find_dataset", "find_input", "find_kernel_output",
           "find_wheelhouse", "input_tree", "resolve_inputs"]
