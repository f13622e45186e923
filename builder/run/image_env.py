"""``kkb env``: a virtual environment with Kaggle's image's versions of what a kernel imports.

The dry run runs the kernel on the local interpreter; where its packages differ from the image's
(:mod:`builder.run.skew`), or the image has one this environment lacks, a failure says nothing about Kaggle.
:func:`build_image_env` builds, once per set of pins, a venv in which those packages are the image's versions and
everything else
falls through to kkb's own environment (a ``.pth`` line after the venv's own site-packages), so the
kernel, ipykernel and kkb's runtime keep working. The dry run uses it with ``--image-env``.

What the kernel imports comes from its code (every ``import`` of its ``.py`` files, statically, and
the packages those distributions need, one level) mapped to distributions the image has. torch,
torchvision and torchaudio stay the local build (the image's CPU/GPU builds need their own index);
the difference is reported. Pins come from PyPI through pip, or with ``find_links`` from a local
folder of wheels, offline. A second call with the same pins finds the stamp, checks the environment
against its record (:mod:`builder.run.env_check`: files against their RECORD hashes, ``pip check``)
and installs nothing; a damaged one is rebuilt, or refused naming the damage where it cannot be.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from builder.errors import DryRunError
from builder.project.image import KaggleImage, image_package_for_module, load_image
from builder.run.env_check import PTH_FILE, env_damage
from builder.run.skew import differs, local_version, module_distributions

CACHE_ENV = "KKB_IMAGE_ENV_CACHE"
STAMP = "kkb-image-env.json"
KEPT_LOCAL = ("torch", "torchvision", "torchaudio")
SKIPPED_FOLDERS = frozenset({"data", "weights", "build", ".kkb", "__pycache__", ".venv"})
PIP_SECONDS = 1800
FORMAT = 2  # part of the cache key: a change in how environments are built builds them again


@dataclass(frozen=True)
class ImageEnv:
    """A built environment: its interpreter, what it pins, what stays local, and whether this call built it."""

    root: Path
    python: Path
    pins: tuple[str, ...]  # "dist==version", the image's
    kept_local: tuple[str, ...]  # "torch 2.14.1 here (the image has 2.10.0)"
    built: bool
    repaired: tuple[str, ...] = ()  # what was damaged in the cached environment this call rebuilt

    def lines(self) -> list[str]:
        action = "built" if self.built else "reused (nothing to install; checked against its record)"
        if self.repaired:
            action = f"rebuilt, the cached one was damaged ({_shown(self.repaired)})"
        lines = [f"{self.root}: {action}, {len(self.pins)} pins from Kaggle's image", *(f"  {pin}" for pin in self.pins)]
        lines += [f"  kept local: {what}" for what in self.kept_local]
        return lines


def image_env_note(used: bool) -> str:
    """The dry run's summary line for ``--image-env``: the kernel ran with the image's versions (else nothing)."""
    return ("kkb env's environment: the image's versions of what the kernel imports (torch stays the local build)"
            if used else "")


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "kkb" / "image-envs")


def kernel_modules(kernel_dir: Path) -> set[str]:
    """The top-level modules the kernel's ``.py`` files import (its own folders' data and weights skipped)."""
    modules: set[str] = set()
    for path in Path(kernel_dir).rglob("*.py"):
        if SKIPPED_FOLDERS & set(path.relative_to(kernel_dir).parts[:-1]):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.add(node.module.split(".")[0])
    return modules


def _requires(distribution: str) -> set[str]:
    try:
        texts = metadata.requires(distribution) or []
    except metadata.PackageNotFoundError:
        return set()
    names: set[str] = set()
    for text in texts:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            names.add(canonicalize_name(requirement.name))
    return names


def image_pins(modules: set[str], image: KaggleImage) -> tuple[list[str], list[str]]:
    """``(pins, kept local)``: the image's version of each distribution behind ``modules`` (and what they need)
    whose local version differs from the image's, or that the image has and this environment lacks."""
    local = module_distributions()
    direct = {canonicalize_name(dist) for module in modules for dist in local.get(module, ())}
    absent = {canonicalize_name(found[0]) for module in modules - set(local) - set(sys.stdlib_module_names)
              if (found := image_package_for_module(module, image)) is not None}
    wanted = direct | absent | {need for dist in direct for need in _requires(dist)}
    pins, kept = [], []
    for dist in sorted(wanted):
        there, here = image.packages.get(dist), local_version(dist)
        if there is None or (here is not None and not differs(here, there, dist)):
            continue
        if dist in KEPT_LOCAL:
            kept.append(f"{dist} {here} here (the image has {there}; its CPU/GPU builds need their own index)")
        else:
            pins.append(f"{dist}=={there.split('+')[0]}")
    return pins, kept


def build_image_env(kernel_dir: Path, *, find_links: Path | None = None, image: KaggleImage | None = None) -> ImageEnv:
    """Build (or find in the cache) the kernel's image environment; see the module docstring."""
    image = image or load_image()
    pins, kept = image_pins(kernel_modules(Path(kernel_dir)), image)
    key = hashlib.sha256(json.dumps([FORMAT, sys.executable, sys.version, pins]).encode()).hexdigest()[:16]
    root = cache_root() / key
    python = root / "bin" / "python"
    stamp = root / STAMP
    damage: list[str] = []
    if stamp.is_file() and python.exists() and json.loads(stamp.read_text()).get("pins") == pins:
        damage = env_damage(root, python, pins)
        if not damage:
            return ImageEnv(root, python, tuple(pins), tuple(kept), built=False)
    _create(root)  # --clear: the stamp goes first, so a rebuild that fails is never trusted
    if pins:
        try:
            _pip_install(python, pins, find_links)
        except DryRunError as exc:
            if not damage:
                raise
            raise DryRunError(f"kkb env: the cached environment {root} was damaged ({_shown(damage)}) and could not be "
                              f"rebuilt: {exc.message}", hint=exc.hint) from None
    stamp.write_text(json.dumps({"pins": pins, "image": image.captured, "kept_local": kept}, indent=1))
    return ImageEnv(root, python, tuple(pins), tuple(kept), built=True, repaired=tuple(damage))


def _shown(damage: list[str] | tuple[str, ...]) -> str:
    return "; ".join(damage[:3]) + (f"; and {len(damage) - 3} more" if len(damage) > 3 else "")


def _create(root: Path) -> None:
    """A venv whose own site-packages come first and kkb's environment after it (a ``.pth`` line)."""
    _run([sys.executable, "-m", "venv", "--clear", "--without-pip", str(root)], "create the environment")
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = root / "lib" / version / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    # addsitedir, not a bare path: the .pth files there (editable installs, namespace packages) count too.
    (site / PTH_FILE).write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")


def _pip_install(python: Path, pins: list[str], find_links: Path | None) -> None:
    # This interpreter's pip, installing into the new environment (it has none of its own). Dependencies too: what kkb's
    # environment already satisfies stays there (pip sees it through the .pth line), the rest (pandas 2's pytz) lands here.
    source = ["--no-index", "--find-links", str(find_links)] if find_links is not None else []
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--disable-pip-version-check",
          *source, *pins], "install the image's versions")


def _run(argv: list[str], what: str) -> None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_SECONDS)
    except (OSError, subprocess.SubprocessError) as exc:
        raise DryRunError(f"kkb env: could not {what}: {exc}") from None
    if out.returncode != 0:
        tail = "\n".join((out.stderr or out.stdout).strip().splitlines()[-8:])
        raise DryRunError(f"kkb env: could not {what} ({' '.join(argv[3:8])} ...):\n{tail}",
                          hint="check the network (pip reaches PyPI), or pass --find-links with the image's wheels")
