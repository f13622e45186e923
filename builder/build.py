"""``kkb build``: a kernel project becomes two dataset folders and a kernel folder, offline.

Everything is staged in a temporary folder next to the output and moved into place only when the
whole build succeeded, so a failed build leaves ``build/`` exactly as it was.
"""

from __future__ import annotations

import difflib
import errno
import hashlib
import importlib.resources
import json
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from builder import __version__
from builder.bundle.card_run import CardRunPlan, call_seconds, run_cards
from builder.bundle.cards import card_files, record_notes, require_card_extras
from builder.bundle.cards.settings import ResolvedSetting, blend_note, resolved_settings
from builder.bundle.checkpoints import checkpoint_sources
from builder.bundle.clean_scans import CleanScans
from builder.bundle.competition_checks import check_competition, with_competition_metric
from builder.bundle.files import (
    HashCache,
    Manifest,
    copy_tree,
    manifest_for,
    refuse_credentials,
    refuse_secret_values,
    select_files,
    stage_files,
    swap_into_place,
    write_metadata,
)
from builder.bundle.function_args import check_function_args
from builder.bundle.kernel_config import Ids, kernel_config
from builder.bundle.model_weights import DRY_RUN_VERSION, model_source, publishes_model, weights_model_id, write_model_metadata
from builder.bundle.preflight import CardCheck, check_against_public_data
from builder.bundle.preflight_record import preflight_key, recorded_checks, write_record
from builder.bundle.submission_checks import check_postprocess
from builder.bundle.wheels import (
    install_context,
    keep_wheel_folders,
    kernel_sources,
    source_package_files,
    wheelhouse_source,
)
from builder.bundle.wheels.dependency_manager import DependencyManager, dependency_manager
from builder.errors import BundleError
from builder.kkb_runtime.card import BuiltCard
from builder.kkb_runtime.config import KernelConfig, config_text
from builder.kkb_runtime.vocabulary import Layout
from builder.notebook.render import FORMS, cells_for, render_code
from builder.project.credentials import Secret, resolve_owner, secret_values
from builder.project.ids import dataset_slug, dataset_title
from builder.project.image import load_image
from builder.project.image_facts import kernel_image
from builder.project.layout import (
    BUILD_ENTRIES,
    CODE_DIR,
    DATASET_METADATA,
    HASH_CACHE,
    KERNEL_CONFIG,
    KERNEL_DIR,
    KERNEL_METADATA,
    MANIFEST_FILE,
    PREFLIGHT_RECORD,
    SCAN_RECORD,
    WEIGHTS_DIR,
    WHEELS_DIR,
    out_dir_of,
)
from builder.project.settings_types import check_settings
from builder.project.spec import CUDA_ARCH, INPUT_KINDS, SPEC_FILE, KernelSpec, spec_of

# The kernel-side runtime as installed with kkb (a wheel ships it like the rest of the package).
RUNTIME_SOURCE = Path(str(importlib.resources.files("builder.kkb_runtime")))
RUNTIME_PACKAGE = "kkb_runtime"
RESERVED = (RUNTIME_PACKAGE, KERNEL_CONFIG, MANIFEST_FILE, DATASET_METADATA)



@dataclass(frozen=True)
class BuildSettings:
    kernel_dir: Path
    out_dir: Path | None = None
    owner: str | None = None
    # Credential values no bundle may hold; None: those of the credentials in use (project.credentials).
    secrets: tuple[Secret, ...] | None = None
    # The command's loaded kernel.toml (read once per command); None: load kernel_dir's.
    spec: KernelSpec | None = None
    # Where the build's run of the user's code sees the inputs (the dry run's --legacy-layout asks for the old one).
    layout: Layout = Layout.CURRENT
    # A call of the user's code (a feature function, a model file's load) that runs longer ends the build, named;
    # None: $KKB_BUILD_CALL_SECONDS, else 300 s.
    call_seconds: float | None = None

    def __post_init__(self) -> None:
        check_settings(self, error=BundleError)  # each field of its type: a kernel_dir=None is named, not a TypeError


@dataclass(frozen=True)
class BuildResult:
    spec: KernelSpec
    kernel_name: str
    out_dir: Path
    code_dir: Path
    weights_dir: Path
    kernel_dir: Path
    notebook_path: Path
    owner: str
    kernel_id: str
    code_dataset: str
    weights_dataset: str | None
    code_hash: str
    weights_hash: str | None
    code_bytes: int
    weights_bytes: int
    # [weights] publish = "model": owner/model/framework/variation (and weights_dataset is None).
    weights_model: str | None = None
    # What a model card's opt-ins did: pickles loaded with allow_pickle, keys left out with strict = false.
    model_notes: tuple[str, ...] = ()
    # Each card's settings the user did not write, as the kernel will use them (printed by kkb build).
    card_settings: tuple[ResolvedSetting, ...] = ()


@dataclass(frozen=True)
class _Names:
    owner: str
    slug: str
    kernel_id: str
    code_dataset: str
    weights_dataset: str


def build_kernel(settings: BuildSettings) -> BuildResult:
    kernel_dir = Path(settings.kernel_dir)
    spec = with_competition_metric(spec_of(settings.spec, kernel_dir), kernel_dir)  # else competition.toml's named metric
    names = _names(spec, settings.owner, kernel_dir / SPEC_FILE)
    out_dir = out_dir_of(kernel_dir, settings.out_dir)
    _check_out_dir(out_dir, kernel_dir)
    require_card_extras(spec, kernel_dir)  # a card's libraries (kkb[vision], ...) before anything is read
    secrets = settings.secrets if settings.secrets is not None else secret_values()
    scans = CleanScans.load(out_dir / SCAN_RECORD, secrets)  # contents the last builds found clean: not read again
    code_files, weights_files = _selections(spec, kernel_dir, secrets, scans, HashCache(out_dir / HASH_CACHE), out_dir)
    # Widths, post-processing: before anything is staged; again only when the spec or the sample changed.
    passed = preflight_key(spec, kernel_dir)
    recorded = recorded_checks(out_dir / PREFLIGHT_RECORD, passed)
    checks = recorded if recorded is not None else check_against_public_data(spec, kernel_dir)
    check_competition(spec, kernel_dir)  # the metric file and its arguments, public_ids
    manager = dependency_manager(spec, kernel_dir, kernel_image(spec, names.owner), load_image()) \
        if spec.install.dependency_manager else None  # Kaggle's Dependency Manager: each install offline, named if not
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}-staging-"))
    except OSError as exc:
        raise _unwritable(out_dir, exc) from None
    try:
        plan = _plan(settings, spec, names, kernel_dir, code_files, weights_files, checks, manager)
        result = _build_into(stage, out_dir, names, plan, manager)
        keep_wheel_folders(out_dir, stage)  # kkb wheels' output lives in build/NAME too
        _refuse_secrets(stage, secrets)
        scans.save(stage / SCAN_RECORD)
        write_record(stage / PREFLIGHT_RECORD, passed, checks)
        try:
            swap_into_place(stage, out_dir)
        except OSError as exc:
            raise _unwritable(out_dir, exc) from None
    except BaseException as exc:
        shutil.rmtree(stage, ignore_errors=True)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _disk_full(out_dir, exc) from None
        raise
    return result


def _disk_full(out_dir: Path, exc: OSError) -> BundleError:
    """ENOSPC mid-build: the staging folder is gone again and the previous build is untouched."""
    return BundleError(f"build folder {out_dir}: the disk is full ({exc.strerror}"
                       f"{f': {exc.filename}' if exc.filename else ''}); nothing was changed",
                       hint=f"free space where the build goes (df -h {out_dir.parent}), or pass --out a folder on "
                            "another disk")


# Where each uploaded folder of the build comes from, to say where to remove a secret.
_SECRET_FIXES = (
    (CODE_DIR, "code dataset", "remove the value from the file, or leave the file out with [code] exclude"),
    (WEIGHTS_DIR, "weights dataset", "remove the value from the file, or leave the file out with [weights] exclude"),
    (WHEELS_DIR, "wheelhouse dataset", "rebuild the wheelhouse (kkb wheels --force) from packages without it"),
    (KERNEL_DIR, "kernel", "the notebook is rendered from kernel.toml and the templates: remove the value there"),
)


def _refuse_secrets(stage: Path, secrets: tuple[Secret, ...]) -> None:
    """Nothing that can be uploaded (the datasets, the wheelhouse, the notebook) holds a credential value."""
    for folder, what, fix in _SECRET_FIXES:
        refuse_secret_values(stage / folder, what, secrets, fix)


# What kkb itself keeps in a build folder; `kkb build` replaces the whole folder, so --out may only
# name a new or empty folder or one of these (anything else would be deleted with it).


def _check_out_dir(out_dir: Path, kernel_dir: Path) -> None:
    target, kernel = out_dir.resolve(), kernel_dir.resolve()
    if target == kernel or target in kernel.parents:
        raise BundleError(f"build folder {out_dir}: it holds the kernel project {kernel_dir}, and kkb build "
                          "replaces its output folder as a whole",
                          hint=f"pass --out a folder of its own, e.g. --out build/{kernel.name} (the default)")
    cwd = Path.cwd().resolve()
    if target == cwd or target in cwd.parents:
        raise BundleError(f"build folder {out_dir}: it is (or holds) the current folder, and kkb build replaces its "
                          "output folder as a whole", hint=f"pass --out another folder, e.g. --out build/{kernel.name}")
    if target.exists() and not target.is_dir():
        raise BundleError(f"build folder {out_dir}: this is a file, not a folder",
                          hint=f"pass --out a new or empty folder, e.g. --out build/{kernel.name} (the default)")
    if target.is_dir():
        strangers = sorted(entry.name for entry in target.iterdir()
                           if entry.name not in BUILD_ENTRIES and not entry.name.startswith(".wheels-staging-"))
        if strangers:
            shown = ", ".join(strangers[:5]) + (", ..." if len(strangers) > 5 else "")
            raise BundleError(f"build folder {out_dir}: not a kkb build folder (it holds {shown}), and kkb build replaces "
                              "its output folder as a whole",
                              hint=f"pass --out a new or empty folder, e.g. --out build/{kernel.name} (the default)")


def _unwritable(out_dir: Path, exc: OSError) -> BundleError:
    where = f" ({exc.filename})" if exc.filename else ""
    return BundleError(f"build folder {out_dir}: cannot write it: {exc.strerror or exc}{where}",
                       hint="pass --out a folder you can write to")


def _names(spec: KernelSpec, owner: str | None, spec_path: Path) -> _Names:
    owner = resolve_owner(owner, spec.kernel.owner, spec_path)
    slug = spec.kernel.kernel_slug
    weights = (weights_model_id(spec, owner, dataset_slug(slug, "weights")) if publishes_model(spec)
               else spec.weights.dataset or f"{owner}/{dataset_slug(slug, 'weights')}")
    return _Names(owner, slug, f"{owner}/{slug}", spec.code.dataset or f"{owner}/{dataset_slug(slug, 'code')}", weights)


def _selections(spec: KernelSpec, kernel_dir: Path, secrets: tuple[Secret, ...], scans: CleanScans,
                hashes: HashCache, out_dir: Path) -> tuple[dict[str, Path], dict[str, Path]]:
    code = _not_built(select_files(kernel_dir, spec.code.include, spec.code.exclude, "code"), kernel_dir, out_dir)
    code.update(source_package_files(spec, kernel_dir))  # the install cell compiles them from the code dataset
    weights = _not_built(select_files(kernel_dir, spec.weights.include, spec.weights.exclude, "weights", allow_links=True),
                         kernel_dir, out_dir)
    for card in spec.models:
        for checkpoint in checkpoint_sources(card, kernel_dir):  # one per fold; each must exist
            weights.setdefault(checkpoint, kernel_dir / checkpoint)
        for relative in card_files(card, kernel_dir):  # a text model's config and tokenizer
            weights.setdefault(relative, kernel_dir / relative)
    for relative in code:
        if relative.split("/")[0] in RESERVED:
            raise BundleError(f"{relative}: this name is reserved for kkb in the code dataset", hint="rename the file or folder")
        if relative in weights:
            raise BundleError(f"{relative}: selected for both the code and the weights dataset",
                              hint="add it to [code] exclude or [weights] exclude: weights travel apart from code")
    refuse_credentials(code, "code", secrets, scans, hashes)
    refuse_credentials(weights, "weights", secrets, scans, hashes)
    _check_step_scripts(spec, kernel_dir, code)
    check_postprocess(spec, kernel_dir, code)  # functions in the code dataset, no stage on the id column
    check_function_args(spec, kernel_dir, code)  # encode_args, feature_args, a stage's args: the signatures take them
    return code, dict(sorted(weights.items()))


def blend_notes(spec: KernelSpec) -> tuple[str, ...]:
    note = blend_note(spec)
    return (note,) if note else ()


def _not_built(selected: dict[str, Path], kernel_dir: Path, out_dir: Path) -> dict[str, Path]:
    """The selection without kkb's own output: ``kkb build .`` from inside the kernel folder builds into its
    ``build/NAME`` (and stages beside it), which a pattern such as ``**/*.py`` would otherwise take in."""
    kernel, out = kernel_dir.resolve(), out_dir.resolve()
    built = out.parent if out.parent != kernel and out.parent.is_relative_to(kernel) else out
    if not built.is_relative_to(kernel):
        return selected
    inside = built.relative_to(kernel).as_posix() + "/"
    return {relative: path for relative, path in selected.items() if not relative.startswith(inside)}


def _check_step_scripts(spec: KernelSpec, kernel_dir: Path, code: dict[str, Path]) -> None:
    """``python predict.py`` runs the code dataset's predict.py (kkb_runtime.steps): it must be selected."""
    for index, step in enumerate(spec.steps):
        parts = shlex.split(step.run)
        if len(parts) < 2 or parts[0] not in ("python", "python3") or not parts[1].endswith(".py") or "{" in parts[1]:
            continue
        script = PurePosixPath(parts[1])
        if script.is_absolute() or script.as_posix() in code:
            continue
        if (kernel_dir / script).is_file():
            hint = f"add '{script}' to [code] include"
        else:
            close = difflib.get_close_matches(script.as_posix(), sorted(code), n=1, cutoff=0.6)
            hint = f"did you mean '{close[0]}'?" if close else f"there is no {kernel_dir / script}: fix the path or add the file"
        raise BundleError(f"{kernel_dir / SPEC_FILE}: steps[{index}].run: '{script}' is not in the code dataset, "
                          f"so step '{step.name}' could not start", hint=hint)


def _plan(settings: BuildSettings, spec: KernelSpec, names: _Names, kernel_dir: Path, code_files: dict[str, Path],
          weights_files: dict[str, Path], checks: tuple[CardCheck, ...], manager: DependencyManager | None) -> CardRunPlan:
    """What the build's sandboxed run of the user's code reads, and where the kernel mounts the datasets it is in."""
    weights_target = (f"models/{model_source(names.weights_dataset, DRY_RUN_VERSION)}" if publishes_model(spec)
                      else f"datasets/{names.weights_dataset}")
    config = kernel_config(spec, Ids(names.kernel_id, names.code_dataset, names.weights_dataset), manager=manager)
    return CardRunPlan(spec=spec, config=config, kernel_dir=kernel_dir, code_files=code_files, weights_files=weights_files,
                       checks=checks, code_target=f"datasets/{names.code_dataset}", weights_target=weights_target,
                       layout=settings.layout, call_seconds=call_seconds(settings.call_seconds))


def _build_into(stage: Path, out_dir: Path, names: _Names, plan: CardRunPlan, manager: DependencyManager | None) -> BuildResult:
    spec, kernel_dir = plan.spec, plan.kernel_dir
    cache = HashCache(out_dir / HASH_CACHE)
    weights_manifest, cards, notes = _stage_weights(stage / WEIGHTS_DIR, out_dir / WEIGHTS_DIR, names, plan, cache)
    # The cards as prepared; the weights dataset only when the build made one.
    config = replace(plan.config, models=tuple(cards), datasets=replace(
        plan.config.datasets, weights=names.weights_dataset if weights_manifest is not None else None))
    code_manifest = _stage_code(stage / CODE_DIR, out_dir / CODE_DIR, spec, names, plan.code_files, config, cache)
    notebook = _write_kernel(stage / KERNEL_DIR, spec, names, kernel_dir, code_manifest, weights_manifest)
    cache.path = stage / HASH_CACHE
    cache.save()
    return BuildResult(
        spec=spec, kernel_name=kernel_dir.resolve().name, out_dir=out_dir, code_dir=out_dir / CODE_DIR,
        weights_dir=out_dir / WEIGHTS_DIR, kernel_dir=out_dir / KERNEL_DIR,
        notebook_path=out_dir / notebook.relative_to(stage),  # where it will be after the swap
        owner=names.owner, kernel_id=names.kernel_id, code_dataset=names.code_dataset,
        weights_dataset=names.weights_dataset if weights_manifest and not publishes_model(spec) else None,
        weights_model=names.weights_dataset if weights_manifest and publishes_model(spec) else None,
        code_hash=code_manifest.content_hash,
        weights_hash=weights_manifest.content_hash if weights_manifest else None,
        code_bytes=code_manifest.total_bytes, weights_bytes=weights_manifest.total_bytes if weights_manifest else 0,
        # every reorder/mapping of a model's input or output; what the Dependency Manager installs
        model_notes=record_notes(cards) + notes + (manager.notes if manager else ()) + blend_notes(spec),
        card_settings=resolved_settings(cards, spec.models),
    )


def _stage_weights(stage: Path, previous: Path, names: _Names, plan: CardRunPlan,
                   cache: HashCache) -> tuple[Manifest | None, list[BuiltCard], tuple[str, ...]]:
    spec, kernel_dir, files = plan.spec, plan.kernel_dir, plan.weights_files
    stage.mkdir(parents=True)
    # Checkpoints never ship as they are: the cards' preparation reads them from the kernel folder and writes the
    # normalised files, so copying them into the stage first would only be undone (gigabytes, each build).
    checkpoints = {path for card in spec.models for path in checkpoint_sources(card, kernel_dir)}
    stage_files({rel: path for rel, path in files.items() if rel not in checkpoints}, stage, cache, previous=previous)
    run = run_cards(plan, stage, previous, cache)  # the user's code, where the kernel runs it (or the last build's)
    if not any(stage.rglob("*")):
        return None, run.cards, run.notes
    manifest = manifest_for(stage, names.weights_dataset, cache, files)
    write_metadata(stage, names.weights_dataset, dataset_title(spec.weights.title, spec.kernel.title, "weights"), manifest)
    if publishes_model(spec):
        write_model_metadata(stage, names.weights_dataset, dataset_title(spec.weights.title, spec.kernel.title, "weights"), spec)
    return manifest, run.cards, run.notes


def _stage_code(stage: Path, previous: Path, spec: KernelSpec, names: _Names, files: dict[str, Path],
                config: KernelConfig, cache: HashCache) -> Manifest:
    stage_files(files, stage, cache, previous=previous)
    copy_tree(RUNTIME_SOURCE, stage / RUNTIME_PACKAGE)
    (stage / KERNEL_CONFIG).write_text(config_text(config))
    manifest = manifest_for(stage, names.code_dataset, cache, files)
    write_metadata(stage, names.code_dataset, dataset_title(spec.code.title, spec.kernel.title, "code"), manifest)
    return manifest


def _write_kernel(stage: Path, spec: KernelSpec, names: _Names, kernel_dir: Path, code: Manifest,
                  weights: Manifest | None) -> Path:
    stage.mkdir(parents=True)
    provenance = {
        "builder": "kkb", "builder_version": __version__, "git_commit": _git_commit(kernel_dir),
        "kernel": names.kernel_id, "spec_sha256": spec.source_sha256 or _sha256(kernel_dir / SPEC_FILE),
        "code_dataset": names.code_dataset, "code_hash": code.content_hash,
        "weights_dataset": names.weights_dataset if weights else None,
        "weights_hash": weights.content_hash if weights else None,
    }
    context = _template_context(spec, names, kernel_dir, provenance)
    code_file = stage / f"{names.slug}{FORMS[spec.kernel.type].suffix}"
    code_file.write_text(render_code(spec.kernel.type, cells_for(spec.submission.kind), context, provenance,
                                     kernel_dir / "templates"))
    (stage / KERNEL_METADATA).write_text(json.dumps(_kernel_metadata(spec, names, code_file.name, weights is not None),
                                                    indent=1) + "\n")
    return code_file


def _template_context(spec: KernelSpec, names: _Names, kernel_dir: Path, provenance: dict[str, Any]) -> dict[str, Any]:
    shape = spec.kernel.machine_shape
    return {
        "kkb_version": __version__, "title": spec.kernel.title, "kernel_name": kernel_dir.resolve().name,
        "competition": spec.competition.slug, "git_commit": provenance["git_commit"],
        "code_dataset": names.code_dataset, "code_hash": provenance["code_hash"],
        "weights_dataset": provenance["weights_dataset"] or "(none)", "weights_hash": provenance["weights_hash"] or "-",
        "machine_shape": shape, "cuda_arch_list": CUDA_ARCH.get(shape or ""),
        **install_context(spec, kernel_dir, names.owner),  # requirements, wheelhouse_expr, sources_prebuilt
        "source_packages": [{"name": p.name, "path": p.path, "cuda_ext": p.cuda_ext,
                             "flags": [f for f, on in (("--cpp_ext", p.cpp_ext), ("--cuda_ext", p.cuda_ext)) if on],
                             "settings": p.model_dump()} for p in spec.install.source_packages],
        "fast_commit": spec.fast_commit.model_dump(), "steps": [step.model_dump() for step in spec.steps],
        "weights": [step.weight for step in spec.steps], "submission": spec.submission.model_dump(),
        "evaluation_api": spec.evaluation_api.model_dump() if spec.evaluation_api else None,
        "gateway_paths": list(spec.evaluation_api.gateway_paths) if spec.evaluation_api else [],
        "postprocess": [stage.model_dump() for stage in spec.postprocess],
        "built_inputs": _built_inputs(spec, names, provenance["weights_dataset"]),
    }


def _built_inputs(spec: KernelSpec, names: _Names, weights: str | None) -> list[dict[str, str]]:
    """The inputs kkb built, each as the notebook looks for it to record what Kaggle mounted (kkb_mounted.json)."""
    items = [{"role": "code", "ref": names.code_dataset, "kind": "dataset"}]
    if weights:
        items.append({"role": "weights", "ref": weights, "kind": "model" if publishes_model(spec) else "dataset"})
    wheels = wheelhouse_source(spec, names.owner)
    if wheels is not None:
        items.append({"role": "wheelhouse", "ref": wheels.ref, "kind": wheels.kind})
    return items


def _kernel_metadata(spec: KernelSpec, names: _Names, code_file: str, has_weights: bool) -> dict[str, Any]:
    # Weights published as a Model are attached by push, with the version Kaggle gave them (model_sources).
    sources = [names.code_dataset] + ([names.weights_dataset] if has_weights and not publishes_model(spec) else [])
    wheel_datasets, wheel_kernels = kernel_sources(spec, names.owner)  # the wheelhouse (kkb wheels)
    sources += wheel_datasets
    attached = {kind: [item.source for item in spec.inputs if item.kind == kind] for kind in INPUT_KINDS}
    sources += [ref for ref in attached["dataset"] if ref not in sources]
    wheel_kernels += [ref for ref in attached["notebook"] if ref not in wheel_kernels]
    metadata: dict[str, Any] = {
        "id": names.kernel_id, "title": spec.kernel.title, "code_file": code_file, "language": "python",
        "kernel_type": spec.kernel.type.value, "is_private": spec.kernel.private,
        "enable_gpu": spec.kernel.uses_gpu, "enable_tpu": spec.kernel.uses_tpu,
        # The client defaults a missing key to true, and an internet-on version cannot be submitted.
        "enable_internet": False,
        "dataset_sources": sources, "competition_sources": [spec.competition.slug],
        "kernel_sources": wheel_kernels, "model_sources": attached["model"],
    }
    if spec.kernel.machine_shape:
        metadata["machine_shape"] = spec.kernel.machine_shape
    if spec.kernel.docker_image_pinning:
        metadata["docker_image_pinning_type"] = spec.kernel.docker_image_pinning
    if spec.kernel.docker_image:
        metadata["docker_image"] = spec.kernel.docker_image
    return metadata


def _git_commit(folder: Path) -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "."], cwd=folder, capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
