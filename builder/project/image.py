"""Kaggle's image as data: which Python and packages a Kaggle kernel finds already installed.

The description ships with kkb as ``builder/data/kaggle-image.json`` (dated, with where each version
comes from, and ``verified: false`` while it is not captured on Kaggle itself). A user replaces it
by pointing ``$KKB_KAGGLE_IMAGE`` at another file of the same shape, e.g. one captured on Kaggle
with ``pip list`` in a notebook.

Two users:

- ``kkb wheels`` leaves out of a wheelhouse what the image has (:func:`preinstalled_patterns`) and
  warns when a requirement pins a version the image does not have (:func:`pin_conflicts`).
- The dry run tells "Kaggle would fail" from "not rehearsed here": a step importing a package the
  image has and this environment lacks (:func:`image_package_for_module`).
"""

from __future__ import annotations

import fnmatch
import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from builder.errors import SpecError
from builder.project.image_store import IMAGE_ENV, stored_image_path

IMAGE_RESOURCE = "kaggle-image.json"


@dataclass(frozen=True)
class ImageVariable:
    """One environment variable a Kaggle kernel's process has: set by the image (a Dockerfile ``ENV``) or its runtime.

    ``stand_in``: the real value differs per session or is a secret (a proxy token); a run here gets ``value``, an
    inert stand-in, never a real one. ``accelerator``: only that image has it (``gpu``: CUDA's paths)."""

    name: str
    value: str
    source: str = ""
    stand_in: bool = False
    accelerator: str | None = None


@dataclass(frozen=True)
class KaggleImage:
    name: str
    captured: str
    python: str
    packages: dict[str, str]  # canonical name -> version
    patterns: tuple[str, ...] = ()  # families named by pattern (nvidia-*), versions not listed
    import_names: dict[str, str] = field(default_factory=dict)  # module -> distribution, where they differ
    sources: tuple[str, ...] = ()
    verified: bool = False
    path: str = ""
    cuda: str | None = None  # the CUDA torch is built for on the GPU image
    environment: tuple[ImageVariable, ...] = ()  # the kernel's variables (builder.project.kaggle_env gives them)
    environment_sources: tuple[str, ...] = ()

    @property
    def torch(self) -> str | None:
        return self.packages.get("torch")

    def has(self, name: str) -> bool:
        key = canonicalize_name(name)
        return key in self.packages or any(fnmatch.fnmatchcase(key, pattern) for pattern in self.patterns)

    def describe(self) -> str:
        return f"{self.name}, Python {self.python}, as of {self.captured}" + ("" if self.verified else " (unverified)")


def load_image(path: str | Path | None = None) -> KaggleImage:
    """The image description: ``path``, else ``$KKB_KAGGLE_IMAGE``, else the one ``kkb image --on-kaggle``
    captured (``builder.project.image_store``), else the one shipped with kkb."""
    chosen = path or stored_image_path()
    return _load(str(chosen) if chosen else "")


@functools.lru_cache(maxsize=8)
def _load(path: str) -> KaggleImage:
    where = path or f"builder/data/{IMAGE_RESOURCE}"
    try:
        shipped = resources.files("builder").joinpath("data", IMAGE_RESOURCE)
        text = Path(path).read_text(encoding="utf-8") if path else shipped.read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, ValueError) as exc:
        raise SpecError(f"{where}: not a readable Kaggle image description: {exc}",
                        hint=f"fix the file or unset {IMAGE_ENV} to use the one shipped with kkb") from None
    if not isinstance(data, dict) or not isinstance(data.get("packages"), dict) or not data.get("python"):
        raise SpecError(f"{where}: a Kaggle image description needs 'python' and a 'packages' table",
                        hint='e.g. {"python": "3.12", "captured": "2026-08-12", "packages": {"torch": "2.10.0"}}, '
                             f'or unset {IMAGE_ENV} to use the one shipped with kkb')
    return KaggleImage(
        name=str(data.get("name", "Kaggle image")), captured=str(data.get("captured", "unknown date")),
        python=str(data["python"]), packages={canonicalize_name(k): str(v) for k, v in data["packages"].items()},
        patterns=tuple(str(p) for p in data.get("preinstalled_patterns", ())),
        import_names={str(k): canonicalize_name(str(v)) for k, v in dict(data.get("import_names") or {}).items()},
        sources=tuple(str(s) for s in data.get("sources", ())), verified=bool(data.get("verified", False)), path=where,
        cuda=str(data["cuda"]) if data.get("cuda") else None,
        environment=_variables(data.get("environment"), where),
        environment_sources=tuple(str(s) for s in dict(data.get("environment") or {}).get("sources", ())),
    )


# A stand-in's value when the description gives none: inert (a secret's real value is never known here).
STAND_IN_VALUE = "kkb-stand-in"


def _variables(section: object, where: str) -> tuple[ImageVariable, ...]:
    """``environment.variables``: ``[{"name", "value", "source", "stand_in", "accelerator"}, ...]`` (a capture's too)."""
    if section is None:
        return ()
    entries = section.get("variables") if isinstance(section, dict) else None
    if not isinstance(entries, list) or not all(isinstance(entry, dict) and entry.get("name") for entry in entries):
        raise SpecError(f"{where}: 'environment' needs a list 'variables' of {{\"name\": ..., \"value\": ...}}",
                        hint=f"fix the file or unset {IMAGE_ENV} to use the one shipped with kkb")
    return tuple(ImageVariable(name=str(entry["name"]), source=str(entry.get("source") or ""),
                               stand_in=bool(entry.get("stand_in", False)),
                               value=str(entry["value"]) if entry.get("value") is not None else STAND_IN_VALUE,
                               accelerator=str(entry["accelerator"]) if entry.get("accelerator") else None)
                 for entry in entries)


def preinstalled_patterns(image: KaggleImage | None = None) -> tuple[str, ...]:
    """Shell patterns on canonical names of what the image has: kkb wheels leaves them out."""
    image = image or load_image()
    return (*sorted(image.packages), *image.patterns)


def pin_conflicts(requirements: Iterable[str], image: KaggleImage | None = None) -> list[str]:
    """Requirements whose version specifier the image's version does not satisfy, in words."""
    image = image or load_image()
    notes = []
    for text in requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        have = image.packages.get(canonicalize_name(requirement.name))
        if have is None or not requirement.specifier:
            continue
        try:
            satisfied = requirement.specifier.contains(Version(have), prereleases=True)
        except InvalidVersion:
            continue
        if not satisfied:
            notes.append(f"{requirement} conflicts with Kaggle's image, which has {requirement.name} {have} "
                         f"({image.captured}): the wheelhouse replaces the image's copy")
    return notes


def image_package_for_module(module: str, image: KaggleImage | None = None) -> tuple[str, str] | None:
    """``(distribution, version)`` when the image provides the top-level module ``module``, else None."""
    image = image or load_image()
    for name in (module, module.split(".")[0]):
        dist = image.import_names.get(name) or canonicalize_name(name)
        if dist in image.packages:
            return dist, image.packages[dist]
    return None


def image_summary(image: KaggleImage | None = None) -> list[str]:
    """What ``kkb image`` prints: the description in use, where it comes from, and its sources."""
    image = image or load_image()
    lines = [f"{image.path}: {image.describe()}: {len(image.packages)} packages" + (
        f" (and {', '.join(image.patterns)} by pattern)" if image.patterns else "")]
    lines += [f"  source: {source}" for source in image.sources]
    return lines


def package_lines(image: KaggleImage | None = None) -> list[str]:
    """``name==version`` per package of the image, sorted, as ``kkb image --packages`` lists them."""
    image = image or load_image()
    return [f"{name}=={version}" for name, version in sorted(image.packages.items())]

