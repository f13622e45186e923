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

CONFIG_SETTINGS_SINCE = (23, 1)
GLOBAL_OPTION_REMOVED_IN = (25, 3)


class InstallFailed(RuntimeError):
    """pip could not install a package offline: the message names what was missing."""


def pip_version() -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", metadata.version("pip"))
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def wheel_install_command(wheel_dir: Path, requirements: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(wheel_dir),
            "--no-cache-dir", "--disable-pip-version-check", *requirements]


def source_install_command(path: Path, flags: Sequence[str], version: tuple[int, int] | None = None) -> list[str]:
    """pip's form for build flags such as ``--cpp_ext --cuda_ext`` (NVIDIA apex), for this pip."""
    version = version or pip_version()
    base = [sys.executable, "-m", "pip", "install", "-v", "--no-index", "--no-deps", "--no-build-isolation",
            "--no-cache-dir", "--disable-pip-version-check"]
    options: list[str] = []
    for flag in flags:
        if version >= CONFIG_SETTINGS_SINCE:
            options += ["--config-settings", f"--build-option={flag}"]
        else:
            options += [f"--global-option={flag}"]
    return [*base, *options, str(path)]


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
    print("[kkb] $ " + " ".join(argv), flush=True)
    result = subprocess.run(list(argv), env=dict(env) if env is not None else None, capture_output=True, text=True)
    sys.stdout.write(result.stdout[-4000:])
    if result.returncode != 0:
        missing = re.findall(r"No matching distribution found for (\S+)", result.stderr)
        what = f"missing from the wheelhouse: {', '.join(missing)}" if missing else result.stderr[-3000:]
        raise InstallFailed(f"offline install failed ({what})")
