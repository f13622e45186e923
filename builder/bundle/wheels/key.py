"""The resolution key and the wheelhouse built for it: unchanged content is never resolved, built or pushed again.

The resolution key is a hash of what decides the result (requirements, target, exclusions, for the
helper also the source trees and the script). ``manifest.json`` carries it next to bundle's content hash.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement

from builder.bundle.files import HashCache, Manifest, hash_file
from builder.bundle.wheels.sources import kernel_requirements, wheelhouse_source
from builder.bundle.wheels.target import WheelTarget
from builder.errors import WheelhouseError
from builder.project.jsonfile import read_object
from builder.project.layout import DATASET_METADATA, HELPER_DIR, MANIFEST_FILE, WHEEL_HASH_CACHE, WHEELS_DIR
from builder.project.spec import SPEC_FILE, KernelSpec

HELPER_RECORD = "kkb_wheels.json"   # in HELPER_DIR: the helper version that built the current key
WHEELHOUSE_FILE = "kkb_wheelhouse.json"  # in every wheelhouse; the runtime finds it by its "id"
FORMAT = 1


def resolution_key(requirements: Sequence[str], target: WheelTarget, exclude: Sequence[str]) -> str:
    """What decides a wheelhouse's content; index options do not (they say where, not what)."""
    payload = {"format": FORMAT, "requirements": [str(Requirement(r)) for r in requirements],
               "target": target.to_json(), "exclude": sorted(set(exclude))}
    return "sha256:" + hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def unchanged_wheelhouse(folder: Path, ref: str, key: str, cache: HashCache) -> Manifest | None:
    """The existing wheelhouse when it was built as ``ref`` for ``key`` and is intact (:func:`wheelhouse_damage`)."""
    try:
        if json.loads((folder / MANIFEST_FILE).read_text()).get("resolution_key") != key:
            return None
    except (OSError, ValueError):
        return None
    manifest = Manifest.read(folder / MANIFEST_FILE)
    if manifest is None or manifest.dataset != ref or wheelhouse_damage(folder, manifest, cache) is not None:
        return None
    return manifest


def wheelhouse_damage(folder: Path, manifest: Manifest, cache: HashCache) -> str | None:
    """What is wrong with a wheelhouse against its manifest, in words, or None: a file missing, of another size or
    sha256, a file the manifest does not list (a partial download), a wheel whose zip directory does not open."""
    listed = {entry.path for entry in manifest.files}
    for entry in manifest.files:
        path = folder / entry.path
        if not path.is_file() or path.stat().st_size != entry.size:
            return f"{entry.path} is missing or of another size"
        sha = cache.lookup(path) or hash_file(path)
        cache.store(path, sha)
        if sha != entry.sha256:
            return f"{entry.path} changed since it was downloaded"
        if path.suffix == ".whl" and not _opens(path):
            return f"{entry.path} is not a readable wheel"
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder).as_posix()
        if relative not in listed and relative not in (MANIFEST_FILE, DATASET_METADATA):
            return f"{relative} is not in its manifest"
    return None


def _opens(wheel: Path) -> bool:
    try:
        with zipfile.ZipFile(wheel) as archive:
            return any(name.endswith(".dist-info/RECORD") for name in archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def add_resolution_key(manifest_path: Path, key: str) -> None:
    """manifest.json keeps bundle's shape; the resolution key rides along (readers ignore unknown keys)."""
    raw = json.loads(manifest_path.read_text())
    raw["resolution_key"] = key
    manifest_path.write_text(json.dumps(raw, indent=1, sort_keys=True) + "\n")


def read_record(folder: Path) -> dict[str, Any]:
    return read_object(Path(folder) / WHEELHOUSE_FILE)


def wheelhouse_to_push(spec: KernelSpec, kernel_dir: Path, owner: str, out_dir: Path) -> tuple[str, Path, str] | None:
    """What ``kkb push`` attaches: the local wheelhouse dataset (ref, folder, content hash), or the
    helper kernel (ref, folder, key@version) with ``[install] on_kaggle``; None without requirements.

    Push never resolves, downloads or runs the helper (that needs the index options ``kkb wheels``
    was given); it refuses a missing or stale wheelhouse instead of pushing a kernel whose install
    cell would fail.
    """
    source = wheelhouse_source(spec, owner)
    if source is None:
        return None
    if source.kind == "kernel":
        return _helper_to_attach(kernel_dir, Path(out_dir), source.ref)
    key = resolution_key(kernel_requirements(spec, kernel_dir), WheelTarget.of(spec), spec.install.exclude)
    folder = Path(out_dir) / WHEELS_DIR
    cache = HashCache(Path(out_dir) / WHEEL_HASH_CACHE)
    manifest = unchanged_wheelhouse(folder, source.ref, key, cache)
    if manifest is None:
        state = "is out of date" if (folder / MANIFEST_FILE).is_file() else "has not been built"
        recorded = Manifest.read(folder / MANIFEST_FILE)
        damage = wheelhouse_damage(folder, recorded, cache) if recorded is not None else None
        state = f"is damaged ({damage})" if damage else state
        raise WheelhouseError(f"{Path(kernel_dir) / SPEC_FILE}: [install] needs the wheelhouse dataset {source.ref}, "
                              f"which {state} in {folder}",
                              hint=f"run `kkb wheels {kernel_dir}` first; push then uploads it with the kernel")
    return source.ref, folder, manifest.content_hash


def _helper_to_attach(kernel_dir: Path, out_dir: Path, ref: str) -> tuple[str, Path, str]:
    """The helper kernel whose output the inference kernel attaches: it must have run to completion."""
    record = read_object(out_dir / HELPER_DIR / HELPER_RECORD)
    if record.get("kernel") != ref or record.get("status") != "complete":
        state = f"its last run is {record['status']}" if record.get("status") else "it has not been pushed from here"
        raise WheelhouseError(f"{Path(kernel_dir) / SPEC_FILE}: [install] on_kaggle attaches the output of {ref}, but {state}",
                              hint=f"run `kkb wheels {kernel_dir} --on-kaggle` (it waits for the helper's run) before kkb push")
    return ref, out_dir / HELPER_DIR, f"{record['key']}@v{record['version']}"
