"""Building here: the wheelhouse dataset resolved, downloaded (or built from sdists), staged and checked."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.utils import (
    canonicalize_name,
)

from builder.bundle.files import HashCache, Manifest, manifest_for, swap_into_place, write_metadata
from builder.bundle.wheels.check import OfflineCheck, check_offline_install, refuse_incompatible_wheels
from builder.bundle.wheels.commands import distribution_name, run_pip
from builder.bundle.wheels.drift import dataset_drift, torch_bound_wheels
from builder.bundle.wheels.key import FORMAT, WHEELHOUSE_FILE, add_resolution_key, read_record, resolution_key, unchanged_wheelhouse
from builder.bundle.wheels.resolve import pin, resolve_for_target
from builder.bundle.wheels.sources import kernel_requirements, matches, parse_requirement
from builder.bundle.wheels.target import WheelTarget
from builder.errors import WheelhouseError
from builder.project.image import pin_conflicts, preinstalled_patterns
from builder.project.image_facts import ImageFacts
from builder.project.layout import MANIFEST_FILE, WHEEL_HASH_CACHE, WHEELS_DIR
from builder.project.spec import KernelSpec


@dataclass(frozen=True)
class WheelsResult:
    kernel_name: str
    mode: str                     # "dataset" | "kernel" | "none"
    ref: str | None               # the wheelhouse dataset or the helper kernel
    action: str                   # "built" | "unchanged" | "pushed" | "pending" (helper still running) | "nothing"
    key: str | None
    out_dir: Path | None          # build/NAME/wheels or build/NAME/wheels-kernel
    content_hash: str | None = None
    files: tuple[str, ...] = ()
    total_bytes: int = 0
    sdists: tuple[str, ...] = ()            # shipped as source: they compile in the kernel
    built_from_sdist: tuple[str, ...] = ()  # no wheel on the index; built here (pure Python)
    left_to_image: tuple[str, ...] = ()     # name==version the image is expected to provide
    replaces_image: tuple[str, ...] = ()    # named in requirements although the image has them
    check: OfflineCheck | None = None
    kernel_version: int | None = None
    kernel_url: str | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class WheelhouseOptions:
    """How ``kkb wheels`` builds a wheelhouse here (the helper kernel has its own, see ``builder.remote.wheels``)."""

    force: bool = False                      # resolve and download again even when the key is unchanged
    check: bool = True                       # run the offline install check after the build
    index_args: tuple[str, ...] = ()         # pip index options (--index-url, --find-links ...)


def build_wheelhouse(spec: KernelSpec, kernel_dir: Path, out_dir: Path, ref: str,
                     settings: WheelhouseOptions, image: ImageFacts) -> WheelsResult:
    """Resolve, download and check the wheelhouse dataset ``ref`` into ``out_dir/wheels`` for ``image`` (the image
    the kernel's push gets), or keep it: the same key, built for an image it still fits."""
    requirements = kernel_requirements(spec, kernel_dir)
    target = WheelTarget.of(spec, image)
    key = resolution_key(requirements, target, spec.install.exclude)
    folder = out_dir / WHEELS_DIR
    cache = HashCache(out_dir / WHEEL_HASH_CACHE)
    name = kernel_dir.resolve().name
    previous = None if settings.force else unchanged_wheelhouse(folder, ref, key, cache)
    drift = dataset_drift(folder, read_record(folder), ref, image) if previous is not None else None
    if previous is not None and drift is None:
        cache.save()
        check = check_offline_install(folder, requirements, target=target) if settings.check else None
        return _image_notes(_result(name, ref, "unchanged", key, folder, previous, check), requirements)
    out_dir.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=out_dir, prefix=f".{WHEELS_DIR}-staging-"))
    try:
        with tempfile.TemporaryDirectory(prefix="kkb-wheels-") as work:
            record = _populate(stage, Path(work), requirements, target, spec, settings.index_args)
        # The image it is built for, and what links against its torch: the drift guard compares them with the next image.
        record.update({"id": ref, "key": key, "built_for": image.to_json(), "torch_bound": torch_bound_wheels(stage)})
        (stage / WHEELHOUSE_FILE).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        refuse_incompatible_wheels(stage, target)
        manifest = manifest_for(stage, ref)
        write_metadata(stage, ref, f"{spec.kernel.title[:43].rstrip()} wheels", manifest)
        add_resolution_key(stage / MANIFEST_FILE, key)
        check = check_offline_install(stage, requirements, target=target) if settings.check else None
        swap_into_place(stage, folder)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    for entry in manifest.files:  # hashed once now; the next unchanged run reads stat data only
        cache.store(folder / entry.path, entry.sha256)
    cache.save()
    result = _image_notes(_result(name, ref, "built", key, folder, manifest, check), requirements)
    rebuilt = f"rebuilt for {image.describe()}: the image moved ({'; '.join(drift.changes)})" if drift is not None else None
    return replace(result, notes=(*result.notes, *([rebuilt] if rebuilt else []), *_pinned_python(spec, image)))


def _pinned_python(spec: KernelSpec, image: ImageFacts) -> list[str]:
    pinned = spec.install.python_version
    if pinned is None or pinned == image.python:
        return []
    return [f"warning: [install] python_version = '{pinned}' pins the wheels' Python, but the image kkb knows has Python "
            f"{image.python} ({image.source}): {pinned} wheels of compiled packages do not install there"]


def _image_notes(result: WheelsResult, requirements: list[str]) -> WheelsResult:
    """Warn about pins the image does not satisfy (builder.project.image, the image as data)."""
    return replace(result, notes=(*result.notes, *(f"warning: {note}" for note in pin_conflicts(requirements))))


def _populate(stage: Path, work: Path, requirements: list[str], target: WheelTarget, spec: KernelSpec,
              index_args: Sequence[str]) -> dict[str, Any]:
    """Resolve, select and download into ``stage``; returns the wheelhouse record (kkb_wheelhouse.json)."""
    explicit = {canonicalize_name(parse_requirement(r, "[install] requirements").name) for r in requirements}
    contradictions = sorted(n for n in explicit if matches(n, spec.install.exclude))
    if contradictions:
        raise WheelhouseError(f"{', '.join(contradictions)}: both required and excluded in [install]",
                              hint="remove it from [install] exclude, or from the requirements")
    excluded = [*preinstalled_patterns(), *spec.install.exclude]
    selection, local = resolve_for_target(requirements, target, index_args, work, excluded, explicit)
    pins = [pin(item) for key, item in selection.keep.items() if key not in local]
    if pins:
        run_pip(["download", "--no-deps", "--only-binary=:all:", "--quiet", *target.pip_args(), *index_args,
              "-d", str(stage), *pins], f"downloading {len(pins)} wheels")
    for key in selection.keep:
        if key in local:
            shutil.copy2(local[key].file, stage / local[key].file.name)
    _require_all(stage, selection.keep)
    sdists = {k: {"file": b.file.name, "version": b.version, "requires_dist": b.requires_dist,
                  "requires_python": b.requires_python} for k, b in local.items() if b.kind == "sdist" and k in selection.keep}
    return {
        "format": FORMAT, "built_in": "local", "target": target.to_json(), "requirements": requirements,
        "wheels": sorted(p.name for p in stage.iterdir() if p.name.endswith(".whl")), "sdists": sdists,
        "built_from_sdist": sorted(b.file.name for k, b in local.items() if b.kind == "built" and k in selection.keep),
        "image": dict(sorted(selection.image.items())), "replaces_image": sorted(selection.replaces),
    }


def _require_all(stage: Path, keep: Mapping[str, Mapping[str, Any]]) -> None:
    present = {distribution_name(p) for p in stage.iterdir()} - {None}
    missing = sorted(item["metadata"]["name"] for key, item in keep.items() if key not in present)
    if missing:
        raise WheelhouseError(f"pip download did not produce {', '.join(missing)}",
                              hint="run kkb wheels --force; if it persists, the index changed under the resolution")


def _result(name: str, ref: str, action: str, key: str, folder: Path, manifest: Manifest,
            check: OfflineCheck | None) -> WheelsResult:
    record = read_record(folder)
    return WheelsResult(
        kernel_name=name, mode="dataset", ref=ref, action=action, key=key, out_dir=folder,
        content_hash=manifest.content_hash, files=tuple(e.path for e in manifest.files if e.path != WHEELHOUSE_FILE),
        total_bytes=manifest.total_bytes, sdists=tuple(v["file"] for v in record.get("sdists", {}).values()),
        built_from_sdist=tuple(record.get("built_from_sdist", [])),
        left_to_image=tuple(f"{k}=={v}" for k, v in record.get("image", {}).items()),
        replaces_image=tuple(record.get("replaces_image", [])), check=check,
    )
