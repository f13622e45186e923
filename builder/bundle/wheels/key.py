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
from builder.bundle.wheels.target import WheelTarget
from builder.project.jsonfile import read_object
from builder.project.layout import DATASET_METADATA, MANIFEST_FILE

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
