"""The drift guard: Kaggle's image moved since the wheelhouse was built, and what no longer fits.

A wheelhouse records the image it was built for (``built_for`` in ``kkb_wheelhouse.json``, the helper kernel's
record): the Python ABI, and the torch and CUDA that compiled extensions link against. Compared with the image the
push will get (``builder.project.image_facts``):

- a **Python** change makes the whole wheelhouse stale: it was resolved for the old interpreter (markers,
  ``requires-python``), and its ``cpXY`` wheels never install on the new one (named);
- a **torch** or **CUDA** change makes stale what links against torch: a binary wheel whose shared objects load
  ``libc10``/``libtorch`` or that requires torch (prebuilt NVIDIA apex, flash-attn), and the source packages the
  helper kernel compiled with ``cpp_ext``/``cuda_ext``. Pure-Python wheels, and source packages the kernel compiles
  itself at run time, stay as they are.

``kkb push`` refuses a stale wheelhouse naming what changed and what is stale (:class:`~builder.errors.StaleWheelhouse`);
``kkb wheels`` rebuilds it for the new image (here, or in the helper kernel inside Kaggle's image).
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from builder.bundle.wheels.check import incompatible_wheels
from builder.bundle.wheels.commands import wheel_metadata
from builder.bundle.wheels.target import WheelTarget
from builder.errors import StaleWheelhouse
from builder.project.image_facts import ImageFacts
from builder.project.spec import SPEC_FILE, KernelSpec

TORCH_LIBRARIES = (b"libc10", b"libtorch")  # what a torch C++/CUDA extension's shared objects load


@dataclass(frozen=True)
class WheelDrift:
    ref: str                    # the wheelhouse dataset, or the helper kernel whose output is attached
    kind: str                   # "dataset" | "kernel"
    built_for: ImageFacts
    now: ImageFacts
    changes: tuple[str, ...]    # "Python ABI cp312 → cp313", "torch 2.10.0 → 2.11.0"
    stale: tuple[str, ...]      # what no longer fits

    @property
    def what(self) -> str:
        return f"the wheelhouse dataset {self.ref}" if self.kind == "dataset" else f"the helper kernel {self.ref}'s wheels"

    def error(self, kernel_dir: Path, pinned_python: str | None = None) -> StaleWheelhouse:
        """kkb push's refusal: what changed, what is stale, and the command that rebuilds it."""
        message = (f"{Path(kernel_dir) / SPEC_FILE}: Kaggle's image moved since the wheelhouse was built "
                   f"({'; '.join(self.changes)}): {self.what} is stale: {', '.join(self.stale)}\n"
                   f"  built for  {self.built_for.describe()} ({self.built_for.source}, {self.built_for.captured[:10]})\n"
                   f"  image now  {self.now.describe()} ({self.now.source}, {self.now.captured[:10]})")
        command = f"kkb wheels {kernel_dir}" + (" --on-kaggle" if self.kind == "kernel" else "")
        where = "the helper kernel builds them again inside Kaggle's image" if self.kind == "kernel" else \
            f"it resolves for {self.now.abi} (Python {self.now.python})"
        hint = f"run `{command}` ({where}), then push again"
        if pinned_python and pinned_python != self.now.python:
            hint += (f"; [install] python_version = '{pinned_python}' pins the old Python: remove it to follow the image, "
                     "or pin the old image with [kernel] docker_image")
        return StaleWheelhouse(message, hint=hint)


def torch_bound(wheel: Path) -> bool:
    """Whether a wheel links against torch: a binary wheel whose shared objects load libc10/libtorch, or that
    requires torch. A pure-Python wheel never is (it imports torch, whichever build the image has)."""
    try:
        tags = parse_wheel_filename(wheel.name)[3]
    except InvalidWheelFilename:
        return False
    if all(tag.abi == "none" and tag.platform == "any" for tag in tags):
        return False
    try:
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if name.endswith(".so") or ".so." in name.rsplit("/", 1)[-1]:
                    data = archive.read(name)
                    if any(library in data for library in TORCH_LIBRARIES):
                        return True
    except (OSError, zipfile.BadZipFile):
        return False
    return any(_requires_torch(text) for text in wheel_metadata(wheel).get_all("Requires-Dist") or [])


def _requires_torch(text: str) -> bool:
    try:
        return canonicalize_name(Requirement(text).name) == "torch"
    except InvalidRequirement:
        return False


def torch_bound_wheels(folder: Path) -> list[str]:
    return sorted(path.name for path in Path(folder).glob("*.whl") if torch_bound(path))


def recorded_facts(record: Mapping[str, Any], python: str | None) -> ImageFacts | None:
    """The image a wheelhouse (or the helper) was built for; an older record knows only its target's Python."""
    facts = ImageFacts.from_json(record.get("built_for"))
    if facts is not None or not python:
        return facts
    return ImageFacts(python, None, None, "unknown", "its target (no image recorded)")


def dataset_drift(folder: Path, record: Mapping[str, Any], ref: str, now: ImageFacts) -> WheelDrift | None:
    """What of the wheelhouse dataset in ``folder`` no longer fits ``now``; None when nothing does."""
    target = dict(record.get("target") or {})
    built_for = recorded_facts(record, target.get("python_version"))
    changes = built_for.changes(now) if built_for is not None else []
    if built_for is None or not changes:
        return None
    if built_for.python != now.python:
        refused = [name for name, _ in incompatible_wheels(folder, WheelTarget(now.python, str(target.get("platform") or
                                                                                             WheelTarget.platform)))]
        stale = [f"resolved for {built_for.abi}", *([f"{len(refused)} wheel(s) that cannot install on {now.abi}: "
                                                     + ", ".join(refused)] if refused else [])]
    else:
        bound = record.get("torch_bound")
        stale = list(bound) if isinstance(bound, list) else torch_bound_wheels(folder)
    return WheelDrift(ref, "dataset", built_for, now, tuple(changes), tuple(stale)) if stale else None


def helper_drift(record: Mapping[str, Any], spec: KernelSpec, ref: str, now: ImageFacts) -> WheelDrift | None:
    """What the helper kernel built that no longer fits ``now``: everything on a Python change, the source packages it
    compiled against torch (``cpp_ext``/``cuda_ext``) on a torch or CUDA change."""
    built_for = recorded_facts(record, None)
    changes = built_for.changes(now) if built_for is not None else []
    if built_for is None or not changes:
        return None
    if built_for.python != now.python:
        stale: Sequence[str] = [f"every wheel it built, for {built_for.abi}"]
    else:
        stale = [f"{package.name} (compiled against torch {built_for.torch or '?'}, CUDA {built_for.cuda or '?'})"
                 for package in spec.install.source_packages if package.cpp_ext or package.cuda_ext]
    return WheelDrift(ref, "kernel", built_for, now, tuple(changes), tuple(stale)) if stale else None


__all__ = ["WheelDrift", "dataset_drift", "helper_drift", "recorded_facts", "torch_bound", "torch_bound_wheels"]
