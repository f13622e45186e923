"""What a kernel asks for: its requirements, where its wheelhouse comes from, what its metadata attaches."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import (
    canonicalize_name,
)

from builder.bundle.files import select_files
from builder.errors import BundleError, WheelhouseError
from builder.project.ids import kernel_slug
from builder.project.layout import CARRIED
from builder.project.spec import SPEC_FILE, KernelSpec


@dataclass(frozen=True)
class WheelSource:
    """Where the inference kernel's wheels come from: a dataset or a helper kernel's output."""

    kind: str  # "dataset" | "kernel"
    ref: str   # owner/slug


def kernel_requirements(spec: KernelSpec, kernel_dir: Path) -> list[str]:
    """``[install] requirements`` then the lines of ``requirements_file`` (comments and blanks skipped)."""
    requirements = list(spec.install.requirements)
    if spec.install.requirements_file:
        path = Path(kernel_dir) / spec.install.requirements_file
        if not path.is_file():
            raise WheelhouseError(f"{Path(kernel_dir) / SPEC_FILE}: install.requirements_file: {path} not found",
                                  hint="create the file or fix the path (relative to the kernel folder)")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            text = re.sub(r"(^|\s)#.*$", "", line).strip()
            if not text:
                continue
            if text.startswith("-"):
                raise WheelhouseError(f"{path}:{number}: pip options ('{text}') are not supported here",
                                      hint="list requirements only; pass index options to kkb wheels (--index-url, --find-links)")
            parse_requirement(text, f"{path}:{number}")
            requirements.append(text)
    return requirements


def parse_requirement(text: str, where: str) -> Requirement:
    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        raise WheelhouseError(f"{where}: '{text}' is not a pip requirement: {exc}", hint="write it as pip would take it") from None


def matches(name: str, patterns: Iterable[str]) -> bool:
    key = canonicalize_name(name)
    return any(fnmatch.fnmatchcase(key, canonicalize_name(pattern)) for pattern in patterns)


def wheelhouse_source(spec: KernelSpec, owner: str) -> WheelSource | None:
    """The wheelhouse the inference kernel attaches, or None when it installs nothing from one."""
    install = spec.install
    has_requirements = bool(install.requirements or install.requirements_file)
    if install.on_kaggle and (has_requirements or install.source_packages):
        return WheelSource("kernel", install.wheelhouse or f"{owner}/{kernel_slug(helper_title(spec))}")
    if has_requirements:
        return WheelSource("dataset", install.wheelhouse or f"{owner}/{spec.kernel.kernel_slug[:43].rstrip('-')}-wheels")
    return None


def helper_title(spec: KernelSpec) -> str:
    if spec.install.wheelhouse:  # a kernel's slug is slugify(title): a slug is its own title
        return spec.install.wheelhouse.partition("/")[2]
    return f"{spec.kernel.title[:43].rstrip()} wheels"


def install_context(spec: KernelSpec, kernel_dir: Path, owner: str) -> dict[str, Any]:
    """Template variables of the install cell (``templates/notebook/30_install.py.j2``)."""
    source = wheelhouse_source(spec, owner)
    return {
        "requirements": kernel_requirements(spec, kernel_dir),
        "wheelhouse_expr": f"kkb.inputs.find_wheelhouse({source.ref!r}, {source.kind!r})" if source else None,
        # With the helper kernel, source packages arrive compiled: install its wheels instead.
        "sources_prebuilt": source is not None and source.kind == "kernel",
    }


def kernel_sources(spec: KernelSpec, owner: str) -> tuple[list[str], list[str]]:
    """(extra ``dataset_sources``, ``kernel_sources``) of the inference kernel's metadata."""
    source = wheelhouse_source(spec, owner)
    if source is None:
        return [], []
    return ([source.ref], []) if source.kind == "dataset" else ([], [source.ref])


def source_package_files(spec: KernelSpec, kernel_dir: Path) -> dict[str, Path]:
    """Every file of every ``[[install.source_packages]]`` tree, for the code dataset."""
    files: dict[str, Path] = {}
    for index, package in enumerate(spec.install.source_packages):
        if not (Path(kernel_dir) / package.path).is_dir():
            raise BundleError(f"{Path(kernel_dir) / SPEC_FILE}: install.source_packages[{index}].path: "
                              f"'{package.path}' is not a folder in the kernel folder",
                              hint=f"put {package.name}'s source tree (the folder with setup.py) there or fix the path")
        for relative, path in select_files(kernel_dir, [package.path], spec.code.exclude, "code").items():
            inner = Path(relative).relative_to(package.path).parts
            # A tree compiled here before carries build/, dist/ and *.egg-info: stale objects, never sources.
            if inner and (inner[0] in ("build", "dist") or inner[0].endswith(".egg-info")):
                continue
            files[relative] = path
    return files


def keep_wheel_folders(previous: Path, stage: Path) -> None:
    """Carry ``build/NAME/wheels*`` and ``dryrun/`` (layout.CARRIED) into a new build stage (hard links: no copy)."""
    for name in CARRIED:
        source, target = Path(previous) / name, Path(stage) / name
        if not source.exists() or target.exists():
            continue
        if source.is_dir():
            shutil.copytree(source, target, copy_function=_link_or_copy)
        else:
            _link_or_copy(str(source), str(target))


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
