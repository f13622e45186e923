"""The ``kkb wheels --on-kaggle`` helper kernel: every wheel the inference kernel needs, built in Kaggle's image.

The helper runs with internet on, in the same image as the inference kernel, so it resolves the
requirements against what the image really has (``pip install --dry-run --report`` without
``--ignore-installed``: only what is missing is reported), turns each missing package into a wheel
(``pip wheel --no-deps``: downloaded as is, or built here when PyPI has no wheel), compiles the source
packages (apex) into wheels with their extension flags, checks with ``--no-index`` that the folder is
complete, and leaves it all in ``/kaggle/working/wheels`` (the kernel's output, which the inference
kernel attaches through ``kernel_sources``).

Standard library only: the helper kernel embeds this module, ``install``, ``inputs`` and ``config``.
"""

from __future__ import annotations

import fnmatch
import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from .inputs import WHEELHOUSE_FILE, WHEELHOUSE_SUBDIR, find_dataset, working_dir
from .install import InstallFailed, run_pip, source_flags, source_install_env, source_wheel_command


class WheelhouseFailed(RuntimeError):
    """The helper could not produce a complete wheelhouse; the message names the package."""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if not match:
        raise WheelhouseFailed(f"'{requirement}' is not a pip requirement")
    return canonical(match.group(1))


def build_in_image(config: Mapping[str, Any]) -> Path:
    """Build the wheelhouse described by ``config`` (written by ``builder.bundle.wheels``) and return its folder."""
    out = Path(config.get("out") or working_dir() / WHEELHOUSE_SUBDIR)
    out.mkdir(parents=True, exist_ok=True)
    pip_args = [str(arg) for arg in config.get("pip_args", [])]
    requirements = list(config.get("requirements", []))
    pins = missing_from_image(requirements, config.get("exclude", []), pip_args)
    if pins:
        run_pip([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-w", str(out),
                 *pip_args, *pins])
    sources = {package["name"]: build_source(package, config, out) for package in config.get("sources", [])}
    verify(out, requirements, sorted(sources))
    record = {
        "id": config["id"], "key": config.get("key"), "built_in": "kaggle",
        "python": platform.python_version(), "requirements": requirements, "pins": pins, "sources": sources,
        "wheels": sorted(p.name for p in out.iterdir() if p.name != WHEELHOUSE_FILE),
        "image": {name: _installed(name) for name in ("torch", "pip", "setuptools") if _installed(name)},
    }
    (out / WHEELHOUSE_FILE).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"[kkb] wheelhouse ready in {out}: {', '.join(record['wheels']) or '(empty)'}", flush=True)
    return out


def missing_from_image(requirements: Sequence[str], exclude: Sequence[str], pip_args: Sequence[str]) -> list[str]:
    """``name==version`` for every package pip would install into this image; refuse to replace one it has."""
    if not requirements:
        return []
    with tempfile.TemporaryDirectory() as scratch:
        report_path = Path(scratch) / "report.json"
        argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--disable-pip-version-check",
                "--report", str(report_path), *pip_args, *requirements]
        result = subprocess.run(argv, capture_output=True, text=True)
        if result.returncode != 0:
            raise WheelhouseFailed(f"pip cannot resolve {' '.join(requirements)} in this image:\n{result.stderr[-3000:]}")
        report = json.loads(report_path.read_text())
    explicit = {requirement_name(r) for r in requirements}
    pins: list[str] = []
    for item in report.get("install", []):
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        key = canonical(name)
        if key not in explicit and any(fnmatch.fnmatchcase(key, canonical(p)) for p in exclude):
            continue  # excluded on purpose: the image (or the user) provides it
        installed = _installed(key)
        if installed is not None and key not in explicit:
            raise WheelhouseFailed(
                f"installing {', '.join(requirements)} would replace the image's {name} {installed} with {version}; "
                f"add {name} to [install] requirements to replace it on purpose, or pin an older requirement"
            )
        url = (item.get("download_info") or {}).get("url")
        pins.append(f"{name} @ {url}" if item.get("is_direct") and url else f"{name}=={version}")
    return pins


def build_source(package: Mapping[str, Any], config: Mapping[str, Any], out: Path) -> str:
    """Compile one source package (apex) into a wheel in ``out``; returns the wheel's file name."""
    code = find_dataset(str(config["code_dataset"]))
    source = code / str(package["path"])
    if not source.is_dir():
        raise WheelhouseFailed(f"source package {package['name']}: {source} is not in the code dataset")
    before = set(out.iterdir())
    with tempfile.TemporaryDirectory() as scratch:
        # Inputs are read-only and setup.py builds in its own tree: compile a copy.
        tree = Path(shutil.copytree(source, Path(scratch) / Path(str(package["path"])).name))
        run_pip(source_wheel_command(tree, source_flags(package), out),
                env=source_install_env(package, config.get("cuda_arch_list")))
    made = sorted(p.name for p in set(out.iterdir()) - before if p.name.endswith(".whl"))
    if not made:
        raise WheelhouseFailed(f"source package {package['name']}: pip wheel made no wheel in {out}")
    return made[0]


def verify(out: Path, requirements: Sequence[str], sources: Sequence[str]) -> None:
    """What the inference kernel will run, as a dry run: every name must resolve from ``out`` alone."""
    wanted = [*requirements, *sources]
    if not wanted:
        return
    argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-index", "--find-links", str(out),
            "--disable-pip-version-check", *wanted]
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        missing = re.findall(r"No matching distribution found for (\S+)", result.stderr)
        what = f"missing: {', '.join(missing)}" if missing else result.stderr[-3000:]
        raise WheelhouseFailed(f"the wheelhouse in {out} cannot install offline ({what})")


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


__all__ = ["InstallFailed", "WheelhouseFailed", "build_in_image", "missing_from_image", "verify"]
