"""Offline installs inside the kernel: wheels from a wheelhouse, and source packages that compile.

``pip --global-option`` was removed in pip 25.3; ``--config-settings`` exists since pip 23.1. The
kernel asks its own pip which form it accepts instead of guessing at build time, because the image
can move between the commit and a later resubmission.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from . import preload

CONFIG_SETTINGS_SINCE = (23, 1)
GLOBAL_OPTION_REMOVED_IN = (25, 3)


class InstallFailed(RuntimeError):
    """pip could not install a package offline: the message names what was missing."""


def pip_version() -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", metadata.version("pip"))
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


SDIST_SUFFIXES = (".tar.gz", ".zip")


def has_sdists(wheel_dir: Path) -> bool:
    """A wheelhouse may hold source archives for packages that publish no wheel (kkb wheels flags them)."""
    return Path(wheel_dir).is_dir() and any(p.name.endswith(SDIST_SUFFIXES) for p in Path(wheel_dir).iterdir())


def wheel_install_command(wheel_dir: Path, requirements: Sequence[str], no_deps: bool = False) -> list[str]:
    argv = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(wheel_dir),
            "--no-cache-dir", "--disable-pip-version-check", "--progress-bar", "off"]
    if no_deps:
        argv.append("--no-deps")
    if has_sdists(wheel_dir):
        # Offline, an isolated build would look for setuptools in the wheelhouse: build with the image's.
        argv.append("--no-build-isolation")
    return [*argv, *requirements]


def build_flag_options(flags: Sequence[str], version: tuple[int, int] | None = None) -> list[str]:
    """pip's form for build flags such as ``--cpp_ext --cuda_ext`` (NVIDIA apex), for this pip."""
    version = version or pip_version()
    options: list[str] = []
    for flag in flags:
        if version >= CONFIG_SETTINGS_SINCE:
            options += ["--config-settings", f"--build-option={flag}"]
        else:
            options += [f"--global-option={flag}"]
    return options


def source_install_command(path: Path, flags: Sequence[str], version: tuple[int, int] | None = None) -> list[str]:
    """Compile and install a source tree offline, with its build flags in the form this pip accepts."""
    base = [sys.executable, "-m", "pip", "install", "-v", "--no-index", "--no-deps", "--no-build-isolation",
            "--no-cache-dir", "--disable-pip-version-check"]
    return [*base, *build_flag_options(flags, version), str(path)]


def source_wheel_command(path: Path, flags: Sequence[str], wheel_dir: Path,
                         version: tuple[int, int] | None = None) -> list[str]:
    """Compile a source tree into a wheel (the kkb wheels helper kernel), flags as for an install."""
    base = [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation", "--no-cache-dir",
            "--disable-pip-version-check", "-w", str(wheel_dir)]
    return [*base, *build_flag_options(flags, version), str(path)]


def source_install_env(package: Mapping[str, Any], cuda_arch_list: str | None) -> dict[str, str]:
    """apex reads APEX_CPP_EXT/APEX_CUDA_EXT (its current form); other packages read their own extra_env."""
    env = dict(os.environ)
    if package.get("cpp_ext"):
        env["APEX_CPP_EXT"] = "1"
    if package.get("cuda_ext"):
        env["APEX_CUDA_EXT"] = "1"
        if cuda_arch_list:
            env["TORCH_CUDA_ARCH_LIST"] = cuda_arch_list
    env.update({str(k): str(v) for k, v in dict(package.get("extra_env", {})).items()})
    return env


def source_flags(package: Mapping[str, Any]) -> list[str]:
    return [flag for flag, wanted in (("--cpp_ext", package.get("cpp_ext")), ("--cuda_ext", package.get("cuda_ext"))) if wanted]


def run_pip(argv: Sequence[str], env: Mapping[str, str] | None = None) -> None:
    preload.settle()  # no import in flight while pip rewrites site-packages
    print("[kkb] $ " + " ".join(argv), flush=True)
    layered = _sandbox_venv() if "pip" in argv and "install" in argv else None
    if layered is not None:
        print(f"[kkb] (kkb's local sandbox: installing into {layered}, layered over this Python)", flush=True)
        index = list(argv).index("pip") + 1
        argv = [*argv[:index], "--python", str(layered / "bin" / "python"), *argv[index:]]
    result = subprocess.run(list(argv), env=dict(env) if env is not None else None, capture_output=True, text=True)
    sys.stdout.write(result.stdout[-4000:])
    if result.returncode != 0:
        missing = re.findall(r"No matching distribution found for (\S+)", result.stderr)
        what = f"missing from the wheelhouse: {', '.join(missing)}" if missing else result.stderr[-3000:]
        raise InstallFailed(f"offline install failed ({what})")
    if layered is not None:
        _activate(_site_packages(layered))


# kkb's local sandbox (dry run, local Kaggle) sets this; Kaggle never does.
SANDBOX_MARKER = "KKB_SANDBOX_NETLOG"


def _sandbox_venv() -> Path | None:
    """In kkb's sandbox the kernel's Python is kkb's own: pip installs into a venv layered over it instead.

    The venv sees every package of this interpreter (a ``.pth``), so what is installed stays
    satisfied, and pip never uninstalls outside its own environment: kkb's venv is left untouched.
    """
    root = os.environ.get("KKB_KAGGLE_ROOT")
    if not os.environ.get(SANDBOX_MARKER) or not root:
        return None
    venv = Path(root) / ".sandbox" / "pip-venv"
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
        visible = [entry for entry in sys.path if entry and Path(entry).is_dir()]
        (_site_packages(venv) / "kkb-kernel-python.pth").write_text("\n".join(visible) + "\n")
    return venv


def _site_packages(venv: Path) -> Path:
    return venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def _activate(site_dir: Path) -> None:
    """Put the layered venv first for this kernel and for its steps (they inherit PYTHONPATH)."""
    import importlib

    if str(site_dir) not in sys.path:
        sys.path.insert(0, str(site_dir))
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(site_dir) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(site_dir), *filter(None, paths)])
    importlib.invalidate_caches()
