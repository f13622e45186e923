"""The image a kernel really ran on, recorded by the run itself: ``/kaggle/working/kkb_image.json``.

Kaggle's image moves every few months (Python, CUDA, torch); a wheelhouse built for the old one fails the next run.
Every kkb kernel writes this small capture when it starts, so ``kkb submit`` and ``kkb dry-run --on-kaggle`` learn
the image of the session they paid for, without a session of their own: the Python version, torch's version and the
CUDA it was built for (read from torch's ``version.py``: importing torch would cost seconds on the fast commit), the
GPU ``nvidia-smi`` names, and every installed distribution with its version (what ``kkb image --on-kaggle``
captures, less what needs torch imported). ``kkb image --on-kaggle``'s capture kernel runs :func:`describe` too.

Standard library only, and it never fails the run: a capture that cannot be written is skipped. In kkb's own sandbox
(the dry run, the local Kaggle) nothing is written: that environment is this machine's, not Kaggle's image.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import shutil
import subprocess
from importlib import metadata, util
from pathlib import Path
from typing import Any

CAPTURE_FILE = "kkb_image.json"
FORMAT = 1
SANDBOX_VARIABLE = "KKB_SANDBOX_NETLOG"  # set by kkb's sandbox: not Kaggle's image
_CUDA = re.compile(r"""^cuda\s*(?::\s*[\w.\[\]]+\s*)?=\s*['"]([^'"]+)['"]""", re.MULTILINE)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_packages() -> dict[str, str]:
    """Every installed distribution: canonical name -> version."""
    packages: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            packages[canonical(name)] = dist.version
    return dict(sorted(packages.items()))


def torch_cuda() -> str | None:
    """The CUDA version torch was built for (``torch.version.cuda``), read from its file without importing torch."""
    try:
        spec = util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        try:
            found = _CUDA.search((Path(folder) / "version.py").read_text(encoding="utf-8"))
        except OSError:
            continue
        return found.group(1) if found else None
    return None


def gpu() -> dict[str, Any] | None:
    """The first GPU's name and memory as ``nvidia-smi`` reports them, and how many there are."""
    command = shutil.which("nvidia-smi")
    if command is None:
        return None
    try:
        out = subprocess.run([command, "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    rows = [[part.strip() for part in line.split(",")] for line in out.splitlines() if line.strip()]
    if not rows or len(rows[0]) != 2 or not rows[0][1].isdigit():
        return None
    return {"name": rows[0][0], "memory_bytes": int(rows[0][1]) * 2**20, "count": len(rows)}


def describe() -> dict[str, Any]:
    """This image, as data: Python, CUDA (torch's build), GPU, docker image, every distribution with its version."""
    return {
        "format": FORMAT, "python": ".".join(platform.python_version_tuple()[:2]), "python_full": platform.python_version(),
        "cuda": torch_cuda(), "gpu": gpu(), "platform": platform.platform(),
        "docker_image": os.environ.get("KAGGLE_DOCKER_IMAGE"), "packages": installed_packages(),
        "captured": datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat(),
    }


def write_capture(working: Path, kernel_id: str) -> Path | None:
    """``working/kkb_image.json`` for ``kernel_id``'s run; None in kkb's sandbox or when it cannot be written."""
    if os.environ.get(SANDBOX_VARIABLE):
        return None
    try:
        target = Path(working) / CAPTURE_FILE
        target.write_text(json.dumps({**describe(), "kernel": kernel_id}, indent=1, sort_keys=True) + "\n")
    except Exception:  # a capture is evidence for kkb, never a reason for the run to fail
        return None
    return target


__all__ = ["CAPTURE_FILE", "describe", "installed_packages", "torch_cuda", "write_capture"]
