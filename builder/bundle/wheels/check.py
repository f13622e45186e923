"""The offline install check (dry run): the wheelhouse alone, a fresh environment of the target Python, no network."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import (
    InvalidWheelFilename,
    parse_wheel_filename,
)

from builder.bundle.wheels.commands import NO_WHEEL, find_python, stand_in, tail
from builder.bundle.wheels.key import read_record, resolution_key
from builder.bundle.wheels.sources import kernel_requirements
from builder.bundle.wheels.target import WheelTarget
from builder.errors import WheelhouseError
from builder.project.image_facts import ImageFacts
from builder.project.layout import MANIFEST_FILE, WHEELS_DIR, out_dir_of
from builder.project.spec import KernelSpec

_NO_NETWORK = "http://127.0.0.1:9"


@dataclass(frozen=True)
class OfflineCheck:
    python: str                   # version of the interpreter that installed
    exact: bool                   # True: a venv of the target Python; False: pip --target with target tags
    installed: tuple[str, ...]    # name-version pip installed
    stand_ins: tuple[str, ...]    # image packages (and sdists) stood in for by metadata-only wheels
    seconds: float


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
    missing = sorted(set(m.strip() for m in NO_WHEEL.findall(stderr)))
    if missing:
        return WheelhouseError(
            f"offline install from {folder} failed: missing from the wheelhouse: {', '.join(missing)}",
            hint="add it to [install] requirements (or remove it from [install] exclude) and run kkb wheels again"
                 if record else "the wheelhouse lacks a dependency; rebuild it with kkb wheels",
        )
    return WheelhouseError(f"offline install of {' '.join(requirements)} from {folder} failed:\n{tail(stderr)}",
                           hint="run kkb wheels --force to rebuild the wheelhouse")


def _python_version(python: Path) -> str:
    result = subprocess.run([str(python), "-c", "import platform; print(platform.python_version())"],
                            capture_output=True, text=True)
    return result.stdout.strip() or "?"


def check_kernel_wheels(spec: KernelSpec, kernel_dir: Path, image: ImageFacts, out_dir: Path | None = None) -> OfflineCheck | None:
    """The dry run's check: the kernel's local wheelhouse is current and installs offline on ``image``'s Python.

    None when the kernel installs nothing from a local wheelhouse (no requirements, or the wheels are
    built on Kaggle by the helper kernel, which checks them there).
    """
    kernel_dir = Path(kernel_dir)
    if not (spec.install.requirements or spec.install.requirements_file) or spec.install.on_kaggle:
        return None
    requirements = kernel_requirements(spec, kernel_dir)
    target = WheelTarget.of(spec, image)
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
