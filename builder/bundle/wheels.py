"""``kkb wheels``: the packages an internet-off kernel installs, resolved and checked before anything is pushed.

Two ways to get a wheelhouse, chosen by ``[install] on_kaggle`` (see ``InstallSection``'s docstring):

* **here** (default): ``pip`` resolves the requirements for the image's Python and platform
  (``--python-version/--platform/--implementation cp --only-binary=:all:``), every transitive
  dependency included, and the packages the Kaggle image already has are left out together with what
  only they need. What remains is downloaded into ``build/NAME/wheels/``, a dataset folder
  (``dataset-metadata.json`` + ``manifest.json`` with the *resolution key*) that the inference kernel
  attaches and installs from with ``pip install --no-index --find-links``. A package with no wheel is
  built here from its sdist: a pure-Python result is shipped as a wheel, anything else as the sdist
  (flagged: it compiles in the kernel).
* **on Kaggle** (recommended for compiled packages): a helper kernel with internet on builds every
  wheel, source packages such as apex included, inside Kaggle's own image and keeps them as its
  output; the inference kernel attaches it through ``kernel_sources``.

The resolution key is a hash of what decides the result (requirements, target, exclusions, for the
helper also the source trees and the script): unchanged, nothing is resolved, built or uploaded again.

:func:`check_offline_install` is the dry run's check: a fresh virtual environment of the target
Python, ``pip install --no-index`` from the wheelhouse alone and no network, with metadata-only
stand-ins for the packages the image provides. A wheel the target cannot install is refused by name.
"""

from __future__ import annotations

import base64
import contextlib
import fnmatch
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from email.message import Message
from email.parser import Parser
from pathlib import Path
from typing import Any

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from builder.bundle.files import HashCache, Manifest, hash_file, manifest_for, select_files, swap_into_place, write_metadata
from builder.errors import BundleError, WheelhouseError
from builder.project.ids import kernel_slug
from builder.project.image import pin_conflicts, preinstalled_patterns
from builder.project.jsonfile import read_object
from builder.project.layout import CARRIED, HELPER_DIR, MANIFEST_FILE, WHEEL_HASH_CACHE, WHEELS_DIR, out_dir_of
from builder.project.spec import SPEC_FILE, KernelSpec, load_spec

HELPER_RECORD = "kkb_wheels.json"   # in HELPER_DIR: the helper version that built the current key
WHEELHOUSE_FILE = "kkb_wheelhouse.json"  # in every wheelhouse; the runtime finds it by its "id"
FORMAT = 1

# Any network use by pip during the offline check goes to a closed local port and fails at once.
_NO_NETWORK = "http://127.0.0.1:9"
# pip names the requirement, then maybe "(from parent)": the requirement has no spaces.
_NO_WHEEL = re.compile(r"No matching distribution found for (\S+)")
_MANYLINUX = re.compile(r"^manylinux_(\d+)_(\d+)_(\w+)$")
_LEGACY_MANYLINUX = {"manylinux2014": (2, 17), "manylinux2010": (2, 12), "manylinux1": (2, 5)}
MAX_SDIST_FALLBACKS = 25


# --------------------------------------------------------------------------------------------
# The target: which Python and platform the wheels must install on
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WheelTarget:
    python_version: str = "3.12"
    platform: str = "manylinux_2_35_x86_64"
    implementation: str = "cp"

    @classmethod
    def of(cls, spec: KernelSpec) -> WheelTarget:
        return cls(spec.install.python_version, spec.install.platform)

    @property
    def version_tuple(self) -> tuple[int, int]:
        major, minor = self.python_version.split(".")[:2]
        return int(major), int(minor)

    @property
    def arch(self) -> str:
        for prefix in ("manylinux_", "manylinux2014_", "manylinux2010_", "manylinux1_", "linux_"):
            if self.platform.startswith(prefix):
                rest = self.platform[len(prefix):]
                return rest.split("_", 2)[2] if prefix == "manylinux_" else rest
        return "x86_64"

    def platforms(self) -> list[str]:
        """The platform and every older one its machine also runs (pip itself does not widen manylinux_X_Y)."""
        name = self.platform
        for legacy, (major, minor) in _LEGACY_MANYLINUX.items():
            if name.startswith(legacy + "_"):
                name = f"manylinux_{major}_{minor}_{name[len(legacy) + 1:]}"
        match = _MANYLINUX.match(name)
        if not match:
            return [self.platform]
        major, minor, arch = int(match.group(1)), int(match.group(2)), match.group(3)
        result: list[str] = []
        for glibc in range(minor, 4, -1):
            result.append(f"manylinux_{major}_{glibc}_{arch}")
            for legacy, version in _LEGACY_MANYLINUX.items():
                if version == (major, glibc) and (legacy == "manylinux2014" or arch in ("x86_64", "i686")):
                    result.append(f"{legacy}_{arch}")
        return result

    def supported_tags(self) -> frozenset[Tag]:
        platforms = self.platforms()
        interpreter = f"{self.implementation}{self.version_tuple[0]}{self.version_tuple[1]}"
        return frozenset([*cpython_tags(self.version_tuple, platforms=platforms),
                          *compatible_tags(self.version_tuple, interpreter, platforms)])

    def pip_args(self) -> list[str]:
        args = ["--python-version", self.python_version, "--implementation", self.implementation]
        for name in self.platforms():
            args += ["--platform", name]
        return args

    def marker_environment(self) -> dict[str, str]:
        """PEP 508 marker values of the kernel's interpreter (pip evaluates markers for the running one)."""
        return {
            "implementation_name": "cpython", "implementation_version": f"{self.python_version}.0",
            "os_name": "posix", "platform_machine": self.arch, "platform_python_implementation": "CPython",
            "platform_release": "", "platform_system": "Linux", "platform_version": "",
            "python_full_version": f"{self.python_version}.0", "python_version": self.python_version,
            "sys_platform": "linux",
        }

    def describe(self) -> str:
        return f"{self.implementation}{self.python_version.replace('.', '')} {self.platform}"

    def to_json(self) -> dict[str, str]:
        return {"python_version": self.python_version, "platform": self.platform, "implementation": self.implementation}


# --------------------------------------------------------------------------------------------
# What a kernel asks for
# --------------------------------------------------------------------------------------------


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
            _requirement(text, f"{path}:{number}")
            requirements.append(text)
    return requirements


def _requirement(text: str, where: str) -> Requirement:
    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        raise WheelhouseError(f"{where}: '{text}' is not a pip requirement: {exc}", hint="write it as pip would take it") from None


def _matches(name: str, patterns: Iterable[str]) -> bool:
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


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OfflineCheck:
    python: str                   # version of the interpreter that installed
    exact: bool                   # True: a venv of the target Python; False: pip --target with target tags
    installed: tuple[str, ...]    # name-version pip installed
    stand_ins: tuple[str, ...]    # image packages (and sdists) stood in for by metadata-only wheels
    seconds: float


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


# --------------------------------------------------------------------------------------------
# Building here: the wheelhouse dataset
# --------------------------------------------------------------------------------------------


def resolution_key(requirements: Sequence[str], target: WheelTarget, exclude: Sequence[str]) -> str:
    """What decides a wheelhouse's content; index options do not (they say where, not what)."""
    payload = {"format": FORMAT, "requirements": [str(Requirement(r)) for r in requirements],
               "target": target.to_json(), "exclude": sorted(set(exclude))}
    return "sha256:" + hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


@dataclass
class _Local:
    """A package with no wheel on the index, built here from its sdist."""

    name: str
    version: str
    kind: str                 # "built": pure wheel shipped | "sdist": sdist shipped, stand-in resolved
                              # | "image": the image provides it, the index lacks it: stand-in only
    file: Path                # what goes into the wheelhouse
    requires_dist: list[str]
    requires_python: str | None


@dataclass
class _Selection:
    keep: dict[str, dict[str, Any]] = field(default_factory=dict)     # canonical name -> report item
    image: dict[str, str] = field(default_factory=dict)              # canonical name -> version
    replaces: list[str] = field(default_factory=list)


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
    manifest = _unchanged(folder, source.ref, key, cache)
    if manifest is None:
        state = "is out of date" if (folder / MANIFEST_FILE).is_file() else "has not been built"
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


@dataclass(frozen=True)
class WheelhouseOptions:
    """How ``kkb wheels`` builds a wheelhouse here (the helper kernel has its own, see ``builder.remote.wheels``)."""

    force: bool = False                      # resolve and download again even when the key is unchanged
    check: bool = True                       # run the offline install check after the build
    index_args: tuple[str, ...] = ()         # pip index options (--index-url, --find-links ...)


def build_wheelhouse(spec: KernelSpec, kernel_dir: Path, out_dir: Path, ref: str,
                     settings: WheelhouseOptions) -> WheelsResult:
    """Resolve, download and check the wheelhouse dataset ``ref`` into ``out_dir/wheels`` (or keep it: same key)."""
    requirements = kernel_requirements(spec, kernel_dir)
    target = WheelTarget.of(spec)
    key = resolution_key(requirements, target, spec.install.exclude)
    folder = out_dir / WHEELS_DIR
    cache = HashCache(out_dir / WHEEL_HASH_CACHE)
    name = kernel_dir.resolve().name
    previous = None if settings.force else _unchanged(folder, ref, key, cache)
    if previous is not None:
        cache.save()
        check = check_offline_install(folder, requirements, target=target) if settings.check else None
        return _image_notes(_result(name, ref, "unchanged", key, folder, previous, check), requirements)
    out_dir.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=out_dir, prefix=f".{WHEELS_DIR}-staging-"))
    try:
        with tempfile.TemporaryDirectory(prefix="kkb-wheels-") as work:
            record = _populate(stage, Path(work), requirements, target, spec, settings.index_args)
        record.update({"id": ref, "key": key})
        (stage / WHEELHOUSE_FILE).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        refuse_incompatible_wheels(stage, target)
        manifest = manifest_for(stage, ref)
        write_metadata(stage, ref, f"{spec.kernel.title[:43].rstrip()} wheels", manifest)
        _add_key(stage / MANIFEST_FILE, key)
        check = check_offline_install(stage, requirements, target=target) if settings.check else None
        swap_into_place(stage, folder)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    for entry in manifest.files:  # hashed once now; the next unchanged run reads stat data only
        cache.store(folder / entry.path, entry.sha256)
    cache.save()
    return _image_notes(_result(name, ref, "built", key, folder, manifest, check), requirements)


def _image_notes(result: WheelsResult, requirements: list[str]) -> WheelsResult:
    """Warn about pins the image does not satisfy (builder.project.image, the image as data)."""
    return replace(result, notes=(*result.notes, *(f"warning: {note}" for note in pin_conflicts(requirements))))


def _populate(stage: Path, work: Path, requirements: list[str], target: WheelTarget, spec: KernelSpec,
              index_args: Sequence[str]) -> dict[str, Any]:
    """Resolve, select and download into ``stage``; returns the wheelhouse record (kkb_wheelhouse.json)."""
    explicit = {canonicalize_name(_requirement(r, "[install] requirements").name) for r in requirements}
    contradictions = sorted(n for n in explicit if _matches(n, spec.install.exclude))
    if contradictions:
        raise WheelhouseError(f"{', '.join(contradictions)}: both required and excluded in [install]",
                              hint="remove it from [install] exclude, or from the requirements")
    excluded = [*preinstalled_patterns(), *spec.install.exclude]
    report, local = _resolve(requirements, target, index_args, work, lambda key: key not in explicit and _matches(key, excluded))
    selection = _select(report, requirements, target, excluded, explicit)
    pins = [_pin(item) for key, item in selection.keep.items() if key not in local]
    if pins:
        _pip(["download", "--no-deps", "--only-binary=:all:", "--quiet", *target.pip_args(), *index_args,
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


def _resolve(requirements: Sequence[str], target: WheelTarget, index_args: Sequence[str], work: Path,
             provided: Callable[[str], bool]) -> tuple[dict[str, Any], dict[str, _Local]]:
    """pip's resolution for the target (a dry run), building what has no wheel from its sdist.

    A package the image provides (``provided``) that the index does not have (an offline or private
    index without torch) is stood in for by metadata at a version its requirement accepts.
    """
    extra = work / "local"
    extra.mkdir(parents=True, exist_ok=True)
    local: dict[str, _Local] = {}
    report_path = work / "report.json"
    for _ in range(MAX_SDIST_FALLBACKS + 1):
        argv = [*_pip_command(target), "install", "--dry-run", "--ignore-installed", "--quiet",
                "--disable-pip-version-check", "--report", str(report_path), "--only-binary=:all:",
                *target.pip_args(), *index_args, "--find-links", str(extra), *requirements]
        result = subprocess.run(argv, capture_output=True, text=True)
        if result.returncode == 0:
            return json.loads(report_path.read_text()), local
        missing = _NO_WHEEL.search(result.stderr)
        if missing is None:
            raise WheelhouseError(f"pip cannot resolve the requirements for {target.describe()}:\n{_tail(result.stderr)}",
                                  hint="relax a pin that conflicts, or exclude a package the image provides")
        requirement = _requirement(missing.group(1).strip(), "pip")
        key = canonicalize_name(requirement.name)
        if provided(key) and key not in local:
            version = _version_accepted_by(requirement)
            local[key] = _Local(key, version, "image", stand_in(extra, requirement.name, version), [], None)
            continue
        if key in local:
            raise WheelhouseError(f"{requirement.name}: built from its sdist, but pip still finds no match for "
                                  f"{requirement}:\n{_tail(result.stderr)}")
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
                extra: Path) -> _Local:
    name = canonicalize_name(requirement.name)
    sdist_dir, built_dir = work / "sdists" / name, work / "built" / name
    # Only this package as source (":all:" would reach the isolated build and refuse setuptools' wheel).
    download = ["download", "--no-deps", f"--no-binary={name}", "--quiet", *target.pip_args(), *index_args,
                "-d", str(sdist_dir), str(requirement)]
    # pip reads the sdist's metadata to download it; kkb's own setuptools usually can, which saves
    # an isolated build environment. Another build backend needs one.
    _pip_isolated_if_needed(download, f"downloading the sdist of {requirement}", WheelhouseError(
        f"{requirement}: no wheel for {target.describe()} and no source distribution either",
        hint="check the name and version on the index; missing packages are not on it"))
    sdist = next(iter(sorted(sdist_dir.iterdir())))
    build = ["wheel", "--no-deps", "--quiet", *index_args, "-w", str(built_dir), str(sdist)]
    # Without isolation first: a pure-Python result is the same either way, and a compiled one only
    # lends its metadata (the sdist is what ships). Isolation when kkb's environment cannot build it.
    _pip_isolated_if_needed(build, f"building {sdist.name}", WheelhouseError(
        f"{requirement.name}: no wheel for {target.describe()}, and its sdist does not build here",
        hint="kkb wheels --on-kaggle builds it in Kaggle's own image"))
    wheel = next(iter(sorted(built_dir.glob("*.whl"))))
    meta = _wheel_metadata(wheel)
    _, version, _, tags = parse_wheel_filename(wheel.name)
    requires = meta.get_all("Requires-Dist") or []
    requires_python = meta.get("Requires-Python")
    if all(tag.abi == "none" and tag.platform == "any" for tag in tags):
        shutil.copy2(wheel, extra / wheel.name)
        return _Local(name, str(version), "built", extra / wheel.name, requires, requires_python)
    # Compiled for this machine, not for Kaggle: ship the sdist; resolve against a metadata-only stand-in.
    stand_in(extra, requirement.name, str(version), requires, requires_python)
    return _Local(name, str(version), "sdist", sdist, requires, requires_python)


def _select(report: Mapping[str, Any], requirements: Sequence[str], target: WheelTarget, excluded: Sequence[str],
            explicit: set[str]) -> _Selection:
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
        if key not in explicit and _matches(key, excluded):
            selection.image[key] = item["metadata"]["version"] if item else "*"
            continue
        if item is None:
            raise WheelhouseError(f"{requirement.name} is needed on Python {target.python_version}, but pip's resolution "
                                  "(made with the Python running kkb) left it out",
                                  hint=f"run kkb wheels with Python {target.python_version} installed (kkb uses it when found)")
        if key in explicit and _matches(key, preinstalled_patterns()) and key not in selection.replaces:
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


def _pin(item: Mapping[str, Any]) -> str:
    name, version = item["metadata"]["name"], item["metadata"]["version"]
    url = (item.get("download_info") or {}).get("url")
    return f"{name} @ {url}" if item.get("is_direct") and url else f"{name}=={version}"


def _require_all(stage: Path, keep: Mapping[str, Mapping[str, Any]]) -> None:
    present = {distribution_name(p) for p in stage.iterdir()} - {None}
    missing = sorted(item["metadata"]["name"] for key, item in keep.items() if key not in present)
    if missing:
        raise WheelhouseError(f"pip download did not produce {', '.join(missing)}",
                              hint="run kkb wheels --force; if it persists, the index changed under the resolution")


def distribution_name(path: Path) -> str | None:
    """Canonical project name of a wheel or sdist file name, None for anything else."""
    try:
        if path.name.endswith(".whl"):
            return str(parse_wheel_filename(path.name)[0])
        if path.name.endswith((".tar.gz", ".zip")):
            return str(parse_sdist_filename(path.name)[0])
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
    return None


def _unchanged(folder: Path, ref: str, key: str, cache: HashCache) -> Manifest | None:
    """The existing wheelhouse when it was built as ``ref`` for ``key`` and its files are intact."""
    try:
        if json.loads((folder / MANIFEST_FILE).read_text()).get("resolution_key") != key:
            return None
    except (OSError, ValueError):
        return None
    manifest = Manifest.read(folder / MANIFEST_FILE)
    if manifest is None or manifest.dataset != ref:
        return None
    for entry in manifest.files:
        path = folder / entry.path
        if not path.is_file() or path.stat().st_size != entry.size:
            return None
        sha = cache.lookup(path) or hash_file(path)
        cache.store(path, sha)
        if sha != entry.sha256:
            return None
    return manifest


def _add_key(manifest_path: Path, key: str) -> None:
    """manifest.json keeps bundle's shape; the resolution key rides along (readers ignore unknown keys)."""
    raw = json.loads(manifest_path.read_text())
    raw["resolution_key"] = key
    manifest_path.write_text(json.dumps(raw, indent=1, sort_keys=True) + "\n")


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


def read_record(folder: Path) -> dict[str, Any]:
    return read_object(Path(folder) / WHEELHOUSE_FILE)


# --------------------------------------------------------------------------------------------
# pip, wheels and stand-ins
# --------------------------------------------------------------------------------------------


def _pip_command(target: WheelTarget) -> list[str]:
    """pip, run by the target Python when one is installed so markers are evaluated for it."""
    python = find_python(target.python_version)
    base = [sys.executable, "-m", "pip"]
    if python is not None and Path(python) != Path(sys.executable):
        base += ["--python", str(python)]
    return base


def _pip_isolated_if_needed(args: Sequence[str], action: str, failure: WheelhouseError) -> None:
    """``pip args`` without build isolation (kkb's own setuptools), then with it; ``failure`` if neither works."""
    try:
        _pip([*args, "--no-build-isolation"], action)
    except WheelhouseError:
        try:
            _pip(args, action)
        except WheelhouseError as exc:
            raise failure from exc


def _pip(args: Sequence[str], action: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True,
                            env=dict(env) if env is not None else None)
    if result.returncode != 0:
        raise WheelhouseError(f"pip failed {action}:\n{_tail(result.stderr or result.stdout)}")
    return result


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _wheel_metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        return Parser().parsestr(archive.read(name).decode("utf-8"))


def stand_in(folder: Path, name: str, version: str, requires_dist: Sequence[str] = (),
             requires_python: str | None = None) -> Path:
    """A metadata-only ``py3-none-any`` wheel: pip sees ``name==version`` with its dependencies, nothing else.

    The offline check stands these in for what the Kaggle image provides (torch) and for sdists it
    cannot build; the resolution stands them in for sdists compiled for this machine only.
    """
    folder.mkdir(parents=True, exist_ok=True)
    dist = re.sub(r"[-_.]+", "_", name)
    info = f"{dist}-{version}.dist-info"
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
             "Summary: kkb stand-in (metadata only)", *(f"Requires-Dist: {r}" for r in requires_dist)]
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    files = {f"{info}/METADATA": "\n".join(lines) + "\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: kkb\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [f"{path},sha256={_urlsafe_sha(text.encode())},{len(text.encode())}" for path, text in files.items()]
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    wheel = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def _urlsafe_sha(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@functools.lru_cache(maxsize=8)
def find_python(version: str) -> Path | None:
    """An interpreter of ``version`` ("3.12") on this machine: this one, PATH, pyenv, uv; None if absent."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == version:
        return Path(sys.executable)
    for candidate in _python_candidates(version):
        if _reports_version(candidate, version):
            return candidate
    return None


def _python_candidates(version: str) -> Iterable[Path]:
    found = shutil.which(f"python{version}")
    if found:
        yield Path(found)
    roots = [os.environ.get("PYENV_ROOT"), str(Path.home() / ".pyenv"), "/root/.pyenv", "/usr/local/pyenv"]
    for root in dict.fromkeys(r for r in roots if r):
        yield from sorted(Path(root).glob(f"versions/{version}.*/bin/python{version}"), reverse=True)
    if shutil.which("uv"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            found = subprocess.run(["uv", "python", "find", version], capture_output=True, text=True, timeout=20).stdout.strip()
            if found:
                yield Path(found)


def _reports_version(python: Path, version: str) -> bool:
    try:
        result = subprocess.run([str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0 and result.stdout.strip() == version


# --------------------------------------------------------------------------------------------
# The offline install check (dry run)
# --------------------------------------------------------------------------------------------


def incompatible_wheels(folder: Path, target: WheelTarget) -> list[tuple[str, str]]:
    """(file name, its tags) of every wheel in ``folder`` the target interpreter cannot install."""
    supported = target.supported_tags()
    refused: list[tuple[str, str]] = []
    for path in sorted(Path(folder).glob("*.whl")):
        try:
            tags = parse_wheel_filename(path.name)[3]
        except InvalidWheelFilename:
            refused.append((path.name, "not a valid wheel file name"))
            continue
        if not tags & supported:
            refused.append((path.name, ", ".join(sorted(str(t) for t in tags))))
    return refused


def refuse_incompatible_wheels(folder: Path, target: WheelTarget) -> None:
    refused = incompatible_wheels(folder, target)
    if refused:
        listing = "\n".join(f"  {name}  ({tags})" for name, tags in refused)
        raise WheelhouseError(
            f"{len(refused)} wheel(s) in {folder} cannot install on {target.describe()}:\n{listing}",
            hint=f"rebuild them for Python {target.python_version} (kkb wheels --force), or build them in Kaggle's "
                 "image with [install] on_kaggle = true; a cp311 wheel never installs on Python 3.12",
        )


def check_offline_install(wheelhouse_dir: Path, requirements: Sequence[str], *, target: WheelTarget | None = None,
                          image: Mapping[str, str] | None = None, python: Path | None = None,
                          scratch: Path | None = None) -> OfflineCheck:
    """Install ``requirements`` from ``wheelhouse_dir`` alone into a fresh virtual environment, offline.

    The venv is a plain one (no ``--system-site-packages``: the builder's own packages would hide a
    missing dependency). What the Kaggle image provides is stood in for by metadata-only wheels
    (``image``, default: the wheelhouse record's), so only what the wheelhouse itself lacks fails.
    Without an interpreter of the target Python, pip installs into a folder with the target's tags
    instead (``exact=False``). Raises :class:`WheelhouseError` naming what is missing or refused.
    """
    started = time.monotonic()
    target = target or WheelTarget()
    folder = Path(wheelhouse_dir)
    if not folder.is_dir():
        raise WheelhouseError(f"{folder}: no wheelhouse there", hint="run kkb wheels kernels/NAME first")
    refuse_incompatible_wheels(folder, target)
    record = read_record(folder)
    image = dict(record.get("image", {})) if image is None else dict(image)
    interpreter = python or find_python(target.python_version)
    with tempfile.TemporaryDirectory(prefix="kkb-offline-", dir=scratch) as tmp:
        stand_ins = _stand_ins(Path(tmp) / "image", image, record.get("sdists", {}))
        common = ["install", "--isolated", "--no-index", "--find-links", str(folder), "--find-links",
                  str(Path(tmp) / "image"), "--no-cache-dir", "--disable-pip-version-check",
                  "--only-binary=:all:", *requirements]
        if interpreter is not None:
            venv = Path(tmp) / "venv"
            subprocess.run([str(interpreter), "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
            argv = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), *common]
        else:
            argv = [sys.executable, "-m", "pip", *common, *target.pip_args(), "--target", str(Path(tmp) / "site")]
        result = subprocess.run(argv, capture_output=True, text=True, env=_offline_env())
    if result.returncode != 0:
        raise _install_error(folder, requirements, result.stderr, record)
    installed = re.findall(r"Successfully installed (.+)", result.stdout)
    return OfflineCheck(python=_python_version(interpreter) if interpreter else target.python_version,
                        exact=interpreter is not None, installed=tuple(installed[-1].split()) if installed else (),
                        stand_ins=tuple(stand_ins), seconds=time.monotonic() - started)


def _stand_ins(folder: Path, image: Mapping[str, str], sdists: Mapping[str, Mapping[str, Any]]) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    made: list[str] = []
    for name, version in image.items():
        stand_in(folder, name, version if version != "*" else "0")
        made.append(f"{name}=={version}")
    for name, info in sdists.items():  # the venv has no compiler setup: check the sdist's dependencies only
        stand_in(folder, name, str(info["version"]), info.get("requires_dist") or [], info.get("requires_python"))
        made.append(f"{name}=={info['version']} (sdist)")
    return made


def _offline_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("PIP_")}
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        env[name] = _NO_NETWORK
    env.pop("no_proxy", None)
    env.pop("NO_PROXY", None)
    return env


def _install_error(folder: Path, requirements: Sequence[str], stderr: str, record: Mapping[str, Any]) -> WheelhouseError:
    missing = sorted(set(m.strip() for m in _NO_WHEEL.findall(stderr)))
    if missing:
        return WheelhouseError(
            f"offline install from {folder} failed: missing from the wheelhouse: {', '.join(missing)}",
            hint="add it to [install] requirements (or remove it from [install] exclude) and run kkb wheels again"
                 if record else "the wheelhouse lacks a dependency; rebuild it with kkb wheels",
        )
    return WheelhouseError(f"offline install of {' '.join(requirements)} from {folder} failed:\n{_tail(stderr)}",
                           hint="run kkb wheels --force to rebuild the wheelhouse")


def _python_version(python: Path) -> str:
    result = subprocess.run([str(python), "-c", "import platform; print(platform.python_version())"],
                            capture_output=True, text=True)
    return result.stdout.strip() or "?"


def check_kernel_wheels(kernel_dir: Path, out_dir: Path | None = None) -> OfflineCheck | None:
    """The dry run's check: the kernel's local wheelhouse is current and installs offline.

    None when the kernel installs nothing from a local wheelhouse (no requirements, or the wheels are
    built on Kaggle by the helper kernel, which checks them there).
    """
    kernel_dir = Path(kernel_dir)
    spec = load_spec(kernel_dir)
    if not (spec.install.requirements or spec.install.requirements_file) or spec.install.on_kaggle:
        return None
    requirements = kernel_requirements(spec, kernel_dir)
    target = WheelTarget.of(spec)
    folder = out_dir_of(kernel_dir, out_dir) / WHEELS_DIR
    try:
        built_for = json.loads((folder / MANIFEST_FILE).read_text()).get("resolution_key")
    except (OSError, ValueError):
        raise WheelhouseError(f"{folder}: the kernel has [install] requirements but no wheelhouse was built",
                              hint=f"run kkb wheels {kernel_dir}") from None
    if built_for != resolution_key(requirements, target, spec.install.exclude):
        raise WheelhouseError(f"{folder} was built for other requirements, target or exclusions than kernel.toml's",
                              hint=f"run kkb wheels {kernel_dir}")
    return check_offline_install(folder, requirements, target=target)


# --------------------------------------------------------------------------------------------
