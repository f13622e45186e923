"""What ``kkb push`` attaches of the wheelhouse: built, intact, for these requirements, and for the image the push gets."""

from __future__ import annotations

from pathlib import Path

from builder.bundle.files import HashCache, Manifest
from builder.bundle.wheels.drift import dataset_drift, helper_drift
from builder.bundle.wheels.key import HELPER_RECORD, read_record, resolution_key, unchanged_wheelhouse, wheelhouse_damage
from builder.bundle.wheels.sources import kernel_requirements, wheelhouse_source
from builder.bundle.wheels.target import WheelTarget
from builder.errors import WheelhouseError
from builder.project.image_facts import ImageFacts
from builder.project.jsonfile import read_object
from builder.project.layout import HELPER_DIR, MANIFEST_FILE, WHEEL_HASH_CACHE, WHEELS_DIR
from builder.project.spec import SPEC_FILE, KernelSpec


def wheelhouse_to_push(spec: KernelSpec, kernel_dir: Path, owner: str, out_dir: Path,
                       image: ImageFacts) -> tuple[str, Path, str] | None:
    """What ``kkb push`` attaches: the local wheelhouse dataset (ref, folder, content hash), or the
    helper kernel (ref, folder, key@version) with ``[install] on_kaggle``; None without requirements.

    Push never resolves, downloads or runs the helper (that needs the index options ``kkb wheels``
    was given); it refuses a missing or out-of-date wheelhouse instead of pushing a kernel whose install
    cell would fail, and one built for another image than ``image``, the one the push gets (the drift guard,
    ``builder.bundle.wheels.drift``).
    """
    source = wheelhouse_source(spec, owner)
    if source is None:
        return None
    if source.kind == "kernel":
        attached = _helper_to_attach(kernel_dir, Path(out_dir), source.ref)
        drift = helper_drift(read_object(Path(out_dir) / HELPER_DIR / HELPER_RECORD), spec, source.ref, image)
        if drift is not None:
            raise drift.error(kernel_dir)
        return attached
    key = resolution_key(kernel_requirements(spec, kernel_dir), WheelTarget.of(spec, image), spec.install.exclude)
    folder = Path(out_dir) / WHEELS_DIR
    drift = dataset_drift(folder, read_record(folder), source.ref, image) if (folder / MANIFEST_FILE).is_file() else None
    if drift is not None:  # the image moved: say so (a new Python also changed the key: "out of date" would hide why)
        raise drift.error(kernel_dir, spec.install.python_version)
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
