"""pip's resolution for the target, and the packages kept from it (what the image provides is left out)."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import (
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from builder.bundle.wheels.commands import NO_WHEEL, pip_command, pip_isolated_if_needed, stand_in, tail, wheel_metadata
from builder.bundle.wheels.sources import matches, parse_requirement
from builder.bundle.wheels.target import WheelTarget
from builder.errors import WheelhouseError
from builder.project.image import preinstalled_patterns

MAX_SDIST_FALLBACKS = 25


@dataclass
class LocalBuild:
    """A package with no wheel on the index, built here from its sdist."""

    name: str
    version: str
    kind: str                 # "built": pure wheel shipped | "sdist": sdist shipped, stand-in resolved
                              # | "image": the image provides it, the index lacks it: stand-in only
    file: Path                # what goes into the wheelhouse
    requires_dist: list[str]
    requires_python: str | None


MARKER_ROUNDS = 5  # resolutions again with what pip's markers (this Python's) left out and the target needs


@dataclass
class _Selection:
    keep: dict[str, dict[str, Any]] = field(default_factory=dict)     # canonical name -> report item
    image: dict[str, str] = field(default_factory=dict)              # canonical name -> version
    replaces: list[str] = field(default_factory=list)
    missing: list[Requirement] = field(default_factory=list)         # needed on the target, not in pip's report


def resolve_for_target(requirements: Sequence[str], target: WheelTarget, index_args: Sequence[str], work: Path,
                       excluded: Sequence[str], explicit: AbstractSet[str]) -> tuple[_Selection, dict[str, LocalBuild]]:
    """pip's resolution, and what of it the target needs (:func:`select_packages`).

    pip evaluates environment markers for the Python running it, not for ``--python-version``: a dependency only the
    target's Python needs (``eta; python_version >= "3.13"`` resolved from 3.12) is not in its report. Such a
    dependency is added to the requirements, without its marker, and resolved again: the wheelhouse for cp313 needs
    no Python 3.13 on this machine."""
    asked = list(requirements)
    for _ in range(MARKER_ROUNDS):
        report, local = resolve(asked, target, index_args, work, lambda key: key not in explicit and matches(key, excluded))
        selection = select_packages(report, requirements, target, excluded, explicit)
        added = [text for text in dict.fromkeys(_unmarked(r) for r in selection.missing) if text not in asked]
        if not selection.missing:
            return selection, local
        if not added:
            break
        asked += added
    names = ", ".join(sorted({r.name for r in selection.missing}))
    raise WheelhouseError(f"{names}: needed on Python {target.python_version}, but pip's resolution (made with the Python "
                          "running kkb) leaves it out", hint=f"run kkb wheels with Python {target.python_version} installed "
                                                             "(kkb uses it when found)")


def _unmarked(requirement: Requirement) -> str:
    copy = Requirement(str(requirement))
    copy.marker = None
    return str(copy)


def resolve(requirements: Sequence[str], target: WheelTarget, index_args: Sequence[str], work: Path,
             provided: Callable[[str], bool]) -> tuple[dict[str, Any], dict[str, LocalBuild]]:
    """pip's resolution for the target (a dry run), building what has no wheel from its sdist.

    A package the image provides (``provided``) that the index does not have (an offline or private
    index without torch) is stood in for by metadata at a version its requirement accepts.
    """
    extra = work / "local"
    extra.mkdir(parents=True, exist_ok=True)
    local: dict[str, LocalBuild] = {}
    report_path = work / "report.json"
    for _ in range(MAX_SDIST_FALLBACKS + 1):
        argv = [*pip_command(target), "install", "--dry-run", "--ignore-installed", "--quiet",
                "--disable-pip-version-check", "--report", str(report_path), "--only-binary=:all:",
                *target.pip_args(), *index_args, "--find-links", str(extra), *requirements]
        result = subprocess.run(argv, capture_output=True, text=True)
        if result.returncode == 0:
            return json.loads(report_path.read_text()), local
        missing = NO_WHEEL.search(result.stderr)
        if missing is None:
            raise WheelhouseError(f"pip cannot resolve the requirements for {target.describe()}:\n{tail(result.stderr)}",
                                  hint="relax a pin that conflicts, or exclude a package the image provides")
        requirement = parse_requirement(missing.group(1).strip(), "pip")
        key = canonicalize_name(requirement.name)
        if provided(key) and key not in local:
            version = _version_accepted_by(requirement)
            local[key] = LocalBuild(key, version, "image", stand_in(extra, requirement.name, version), [], None)
            continue
        if key in local:
            raise WheelhouseError(f"{requirement.name}: built from its sdist, but pip still finds no match for "
                                  f"{requirement}:\n{tail(result.stderr)}")
        local[key] = _from_sdist(requirement, target, index_args, work, extra)
    raise WheelhouseError(f"more than {MAX_SDIST_FALLBACKS} packages have no wheel for {target.describe()}",
                          hint="use kkb wheels --on-kaggle, which builds them in Kaggle's image")


def _version_accepted_by(requirement: Requirement) -> str:
    """A version the requirement's specifier accepts: the image's real one is unknown here."""
    candidates = ["0"]
    for clause in requirement.specifier:
        base = clause.version.removesuffix(".*")
        candidates += [base, f"{base}.post1", f"{base}.1"]
    valid = []
    for text in candidates:
        with contextlib.suppress(InvalidVersion):
            valid.append(Version(text))
    accepted = [v for v in valid if requirement.specifier.contains(v, prereleases=True)]
    if not accepted:
        raise WheelhouseError(f"{requirement}: the index has no such package and kkb cannot stand in for it",
                              hint="use an index that has it (it is only read for its metadata), or relax the pin")
    return str(max(accepted))


def _from_sdist(requirement: Requirement, target: WheelTarget, index_args: Sequence[str], work: Path,
                extra: Path) -> LocalBuild:
    name = canonicalize_name(requirement.name)
    sdist_dir, built_dir = work / "sdists" / name, work / "built" / name
    # Only this package as source (":all:" would reach the isolated build and refuse setuptools' wheel).
    download = ["download", "--no-deps", f"--no-binary={name}", "--quiet", *target.pip_args(), *index_args,
                "-d", str(sdist_dir), str(requirement)]
    # pip reads the sdist's metadata to download it; kkb's own setuptools usually can, which saves
    # an isolated build environment. Another build backend needs one.
    pip_isolated_if_needed(download, f"downloading the sdist of {requirement}", WheelhouseError(
        f"{requirement}: no wheel for {target.describe()} and no source distribution either",
        hint="check the name and version on the index; missing packages are not on it"))
    sdist = next(iter(sorted(sdist_dir.iterdir())))
    build = ["wheel", "--no-deps", "--quiet", *index_args, "-w", str(built_dir), str(sdist)]
    # Without isolation first: a pure-Python result is the same either way, and a compiled one only
    # lends its metadata (the sdist is what ships). Isolation when kkb's environment cannot build it.
    pip_isolated_if_needed(build, f"building {sdist.name}", WheelhouseError(
        f"{requirement.name}: no wheel for {target.describe()}, and its sdist does not build here",
        hint="kkb wheels --on-kaggle builds it in Kaggle's own image"))
    wheel = next(iter(sorted(built_dir.glob("*.whl"))))
    meta = wheel_metadata(wheel)
    _, version, _, tags = parse_wheel_filename(wheel.name)
    requires = meta.get_all("Requires-Dist") or []
    requires_python = meta.get("Requires-Python")
    if all(tag.abi == "none" and tag.platform == "any" for tag in tags):
        shutil.copy2(wheel, extra / wheel.name)
        return LocalBuild(name, str(version), "built", extra / wheel.name, requires, requires_python)
    # Compiled for this machine, not for Kaggle: ship the sdist; resolve against a metadata-only stand-in.
    stand_in(extra, requirement.name, str(version), requires, requires_python)
    return LocalBuild(name, str(version), "sdist", sdist, requires, requires_python)


def select_packages(report: Mapping[str, Any], requirements: Sequence[str], target: WheelTarget, excluded: Sequence[str],
            explicit: AbstractSet[str]) -> _Selection:
    """Walk the dependency graph from the requirements, stopping at packages the image provides.

    What only an excluded package needs (torch's nvidia-* libraries) is never reached, so it is left
    out too. A package the kernel names itself is kept (``explicit``; the caller has refused one that
    is also in ``[install] exclude``). Markers are evaluated for the target, not for the Python running kkb.
    """
    items = {canonicalize_name(item["metadata"]["name"]): item for item in report.get("install", [])}
    env = target.marker_environment()
    selection = _Selection()
    seen: set[tuple[str, frozenset[str]]] = set()
    stack = [Requirement(r) for r in requirements if _applies(Requirement(r).marker, (), env)]
    while stack:
        requirement = stack.pop()
        key = canonicalize_name(requirement.name)
        if (key, frozenset(requirement.extras)) in seen:
            continue
        seen.add((key, frozenset(requirement.extras)))
        item = items.get(key)
        if key not in explicit and matches(key, excluded):
            selection.image[key] = item["metadata"]["version"] if item else "*"
            continue
        if item is None:
            selection.missing.append(requirement)
            continue
        if key in explicit and matches(key, preinstalled_patterns()) and key not in selection.replaces:
            selection.replaces.append(key)
        selection.keep[key] = item
        for text in item["metadata"].get("requires_dist") or []:
            dependency = Requirement(text)
            if _applies(dependency.marker, requirement.extras, env):
                stack.append(dependency)
    return selection


def _applies(marker: Marker | None, extras: Iterable[str], env: Mapping[str, str]) -> bool:
    if marker is None:
        return True
    return any(marker.evaluate({**env, "extra": extra}) for extra in (*extras, ""))


def pin(item: Mapping[str, Any]) -> str:
    name, version = item["metadata"]["name"], item["metadata"]["version"]
    url = (item.get("download_info") or {}).get("url")
    return f"{name} @ {url}" if item.get("is_direct") and url else f"{name}=={version}"
