"""pip, wheels and stand-ins: the commands ``kkb wheels`` and the offline check run, and the interpreters they use."""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from email.message import Message
from email.parser import Parser
from pathlib import Path

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)

from builder.bundle.wheels.target import WheelTarget
from builder.errors import WheelhouseError

NO_WHEEL = re.compile(r"No matching distribution found for (\S+)")


def pip_command(target: WheelTarget) -> list[str]:
    """pip, run by the target Python when one is installed so markers are evaluated for it."""
    python = find_python(target.python_version)
    base = [sys.executable, "-m", "pip"]
    if python is not None and Path(python) != Path(sys.executable):
        base += ["--python", str(python)]
    return base


def pip_isolated_if_needed(args: Sequence[str], action: str, failure: WheelhouseError) -> None:
    """``pip args`` without build isolation (kkb's own setuptools), then with it; ``failure`` if neither works."""
    try:
        run_pip([*args, "--no-build-isolation"], action)
    except WheelhouseError:
        try:
            run_pip(args, action)
        except WheelhouseError as exc:
            raise failure from exc


def run_pip(args: Sequence[str], action: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True,
                            env=dict(env) if env is not None else None)
    if result.returncode != 0:
        raise WheelhouseError(f"pip failed {action}:\n{tail(result.stderr or result.stdout)}")
    return result


def tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def wheel_metadata(wheel: Path) -> Message:
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
