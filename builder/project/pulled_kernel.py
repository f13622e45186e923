"""A folder as ``kaggle kernels pull -m`` writes it, read for ``kkb init --from``.

``kernel-metadata.json`` and the notebook or script are the user's files, possibly edited by hand: every
shape that is not Kaggle's (a string where a list belongs, JSON that is not an object, cells that are not
cells) is refused naming the file and the key, never an internal error. The sources become inputs, except
the user's own ``…-weights`` and ``…-code`` datasets, which kkb builds from now on (``[weights]``, ``[code]``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

from builder.errors import SpecError
from builder.kkb_runtime.vocabulary import KernelForm
from builder.project.pm_requirements import REQUIREMENTS_FILE, is_dependency_manager, pip_lines
from builder.project.scaffold import CardSuggestion, InputEntry, OwnDataset
from builder.project.spec import MACHINE_SHAPES, FileSelection, parse_input_ref

KERNEL_METADATA = "kernel-metadata.json"
PULL_HINT = "pull the kernel again: kaggle kernels pull OWNER/SLUG -p DIR -m"
SOURCE_KINDS = {"dataset_sources": "dataset", "model_sources": "model", "kernel_sources": "notebook"}
OWN_SUFFIXES = {"-weights": "weights", "-code": "code"}
_INPUT_READ = re.compile(r"(?:/kaggle/input|\.\./input)(?:/[^\s'\"()\[\]{},;\x00-\x1f]*)?")
_TIMM_ARCH = re.compile(r"timm\.create_model\(\s*['\"]([A-Za-z0-9_.]+)['\"]")
_NUM_CLASSES = re.compile(r"num_classes\s*=\s*(\d+)")
_CHECKPOINT_SUFFIXES = (".pth", ".pt", ".bin", ".safetensors", ".ckpt")
_NOT_A_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def read_metadata(source_dir: Path) -> dict[str, Any]:
    path = source_dir / KERNEL_METADATA
    if not path.is_file():
        raise SpecError(f"{path}: file not found",
                        hint="pass --from a folder written by `kaggle kernels pull OWNER/SLUG -p DIR -m`")
    meta = _read_json(path, "not valid JSON")
    if not isinstance(meta, dict):
        raise SpecError(f"{path}: not a JSON object (it holds a {type(meta).__name__})", hint=PULL_HINT)
    return meta


def _read_json(path: Path, what: str) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})",
                        hint=PULL_HINT) from None
    except ValueError as exc:
        raise SpecError(f"{path}: {what}: {exc}", hint=PULL_HINT) from None


def sources(meta: dict[str, Any], key: str, path: Path, notes: list[str]) -> list[str]:
    """A list of references from the metadata: a lone string is one reference (said so), anything else refused."""
    value = meta.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        notes.append(f"{KERNEL_METADATA}: {key} is a string, not a list: read as one source '{value}'")
        return [value] if value.strip() else []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SpecError(f"{path}: {key} must be a list of strings, not {json.dumps(value)[:80]}",
                        hint=f'write it as ["owner/slug", ...], or {PULL_HINT}')
    return list(value)


def code_file(source_dir: Path, meta: dict[str, Any]) -> Path:
    named = meta.get("code_file")
    if isinstance(named, str) and named and (source_dir / named).is_file():
        return source_dir / named
    found = sorted(p for p in source_dir.iterdir() if p.suffix in (".ipynb", ".py") and p.is_file())
    if len(found) == 1:
        return found[0]
    raise SpecError(f"{source_dir}: no code file (code_file = {named!r} in {KERNEL_METADATA}, and "
                    f"{len(found)} notebooks or scripts next to it)",
                    hint="pull the kernel again with `kaggle kernels pull OWNER/SLUG -p DIR -m`")


def kernel_form(meta: dict[str, Any]) -> str:
    """``[kernel] type`` from the metadata's ``kernel_type`` (Kaggle's default: a notebook)."""
    value = str(meta.get("kernel_type") or KernelForm.NOTEBOOK).lower()
    return value if value in KernelForm.values() else KernelForm.NOTEBOOK.value


def flag(value: object, default: bool) -> bool:
    if value is None:
        return default
    return value.strip().lower() == "true" if isinstance(value, str) else bool(value)


def accelerator(meta: dict[str, Any], unmapped: list[str]) -> str:
    shape = meta.get("machine_shape")
    if shape in MACHINE_SHAPES:
        return str(shape)
    if shape:
        unmapped.append(f"machine_shape: '{shape}' (not a shape kkb knows; using the default for the flags)")
    if flag(meta.get("enable_tpu"), False):
        return "tpu"
    return "gpu" if flag(meta.get("enable_gpu"), False) else "none"


# -- sources: inputs, or the user's own datasets -------------------------------------------------------


def own_role(kind: str, ref: str, owner: str | None) -> str | None:
    """``weights`` or ``code`` for the user's own ``<owner>/<...>-weights|-code`` dataset, else None."""
    parts = ref.split("/")
    if kind != "dataset" or owner is None or parts[0].lower() != owner.lower():
        return None
    role = next((role for suffix, role in OWN_SUFFIXES.items() if parts[1].endswith(suffix)), None)
    try:
        FileSelection(dataset="/".join(parts[:2]))  # kkb can version it under this id
    except ValueError:
        return None
    return role


def split_sources(meta: dict[str, Any], path: Path, owner: str | None, unmapped: list[str],
                  notes: list[str]) -> tuple[list[InputEntry], dict[str, OwnDataset]]:
    """Every source as an ``[[inputs]]`` with a stand-in folder, except the user's own datasets (one per role)."""
    inputs: list[InputEntry] = []
    own: dict[str, OwnDataset] = {}
    names: set[str] = set()
    for key, kind in SOURCE_KINDS.items():
        for ref in sources(meta, key, path, notes):
            try:
                parts = parse_input_ref(kind, ref)
            except ValueError as exc:
                unmapped.append(f"{key}: {exc}")
                continue
            role = own_role(kind, ref, owner)
            if role is not None and role not in own:
                own[role] = _own_dataset(role, "/".join(parts[:2]))
                continue
            if any(entry.ref == ref for entry in inputs):
                unmapped.append(f"{key}: '{ref}' is listed twice (attached once)")
                continue
            name = parts[1] if parts[1] not in names else _NOT_A_NAME.sub("-", "-".join(parts))
            names.add(name)
            inputs.append(InputEntry(kind, ref, key, f"inputs/{name}", _download(kind, ref, f"inputs/{name}"),
                                     name=None if name == parts[1] else name))
    return inputs, own


def dependency_manager_input(inputs: list[InputEntry]) -> InputEntry | None:
    """The input Kaggle's Dependency Manager attached (``pm-<digits>-at-<date>``), if the kernel has one."""
    return next((entry for entry in inputs if is_dependency_manager(entry.ref.split("/")[1])), None)


def dependency_manager_files(source_dir: Path, entry: InputEntry) -> Path | None:
    """The Dependency Manager input's files beside the pulled kernel (``DIR/<slug>/``, what ``kaggle kernels output
    OWNER/SLUG -p DIR/<slug>`` writes), when they are there: a folder holding its ``input_requirements.txt``."""
    slug = entry.ref.split("/")[1]
    for folder in (source_dir / slug, source_dir / "inputs" / slug, source_dir / Path(entry.path).name):
        if (folder / REQUIREMENTS_FILE).is_file():
            return folder
    return None


def read_requirements(folder: Path) -> list[str]:
    """The requirements of a Dependency Manager input's ``input_requirements.txt``."""
    path = folder / REQUIREMENTS_FILE
    return pip_lines(path.read_text(encoding="utf-8"), str(path))


def _own_dataset(role: str, ref: str) -> OwnDataset:
    if role == "weights":
        todo = (f"it ships once its files are here: kaggle datasets download {ref} -p weights --unzip (in this folder),",
                'then include = ["weights/**"]; the kernel finds them under $KKB_WEIGHTS_DIR/weights/')
    else:
        todo = (f"it ships once its files are here: kaggle datasets download {ref} -p . --unzip (in this folder),",
                'then add them to include, e.g. "my_package/**/*.py"; they keep their paths under $KKB_CODE_DIR')
    return OwnDataset(role, ref, todo)


def _download(kind: str, ref: str, folder: str) -> str:
    command = {"dataset": f"kaggle datasets download {ref} --unzip",
               "model": f"kaggle models instances versions download {ref} --untar",
               "notebook": f"kaggle kernels output {ref}"}[kind]
    return f"{command} -p {folder}"


# -- the code --------------------------------------------------------------------------------------------


def code_text(path: Path) -> tuple[str, list[str]]:
    """The code (a notebook's code cells, in order), with shell and magic lines commented out."""
    text = _notebook_code(path) if path.suffix == ".ipynb" else _script_text(path)
    lines, shell = [], []
    for line in text.splitlines():
        if line.lstrip().startswith(("!", "%")):
            shell.append(line.strip())
            lines.append(f"# kkb init: not run in a step: {line.strip()}")
        else:
            lines.append(line)
    return "\n".join(lines) + "\n", shell


def _script_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})",
                        hint=PULL_HINT) from None


def _notebook_code(path: Path) -> str:
    notebook = _read_json(path, "not a valid notebook")
    cells = notebook.get("cells", []) if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        what = "its cells are not a list" if isinstance(notebook, dict) else f"it holds a {type(notebook).__name__}"
        raise SpecError(f"{path}: not a notebook: a notebook is a JSON object with a list of cells, and {what}",
                        hint=PULL_HINT)
    chunks = []
    for index, cell in enumerate(cells):
        if not isinstance(cell, dict):
            raise SpecError(f"{path}: cells[{index}] is not a cell (a JSON object)", hint=PULL_HINT)
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(part, str) for part in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise SpecError(f"{path}: cells[{index}].source is neither text nor a list of lines", hint=PULL_HINT)
        if cell.get("cell_type") == "code" and source.strip():
            chunks.append(source.rstrip())
    return "\n\n".join(chunks)


def reads(code: str) -> list[str]:
    seen: dict[str, None] = {}
    for match in _INPUT_READ.finditer(code):
        seen.setdefault(match.group(0).rstrip("/"), None)
    return list(seen)


def map_read(path: str, competition: str, inputs: list[InputEntry], own: dict[str, OwnDataset]) -> str | None:
    """``/kaggle/input/<...>`` in either layout → what it reads, e.g. ``dataset bob/timm (find_input('timm'))``."""
    parts = PurePosixPath(path.split("input", 1)[1]).parts[1:]
    if not parts:
        return None
    if parts[0] in ("competitions", competition) and competition in parts[:2]:
        return f"competition {competition}"
    for dataset in own.values():
        owner, slug = dataset.ref.split("/")
        if parts[:3] == ("datasets", owner, slug) or parts[:1] == (slug,):
            where = "$KKB_WEIGHTS_DIR/weights/" if dataset.role == "weights" else "$KKB_CODE_DIR/"
            return f"[{dataset.role}] {dataset.ref}, built by kkb (read it from {where}...)"
    for entry in inputs:
        ref_parts = entry.ref.split("/")
        slug = ref_parts[1]
        current = {"dataset": ("datasets", *ref_parts[:2]), "notebook": ("notebooks", *ref_parts[:2]),
                   "model": ("models", *ref_parts)}[entry.kind]
        legacy = tuple(ref_parts[1:]) if entry.kind == "model" else (slug,)
        if parts[:len(current)] == current or parts[:len(legacy)] == legacy or (entry.kind == "model" and parts[:1] == (slug,)):
            return f"{entry.kind} {entry.ref} (find_input('{entry.name or slug}'))"
    return None


def suggested_cards(code: str, read_paths: list[str]) -> tuple[CardSuggestion, ...]:
    """A ``[[models]]`` card per timm architecture the code builds, with the checkpoints it reads."""
    checkpoints = sorted({f"weights/{PurePosixPath(path).name}" for path in read_paths if path.endswith(_CHECKPOINT_SUFFIXES)})
    classes = _NUM_CLASSES.search(code)
    cards = []
    for index, arch in enumerate(dict.fromkeys(_TIMM_ARCH.findall(code))):
        checkpoint: str | list[str] = checkpoints[0] if len(checkpoints) == 1 else (checkpoints or [f"weights/{arch}.pth"])
        cards.append(CardSuggestion(f"the code builds timm '{arch}': kkb_runtime.predict can run it (--model NAME in a step)",
                                    f"m{index + 1}", checkpoint, int(classes.group(1)) if classes else 1, arch=arch))
    return tuple(cards)
