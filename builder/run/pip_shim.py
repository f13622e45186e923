"""The sandbox's ``pip``: Kaggle's image already has most of what a notebook pip-installs.

:func:`install_pip_shim` writes ``pip`` and ``pip3`` into the sandbox's ``.sandbox/bin`` (first on the
kernel's ``PATH``) and the image's package table next to them; the shim itself is
:mod:`builder.run.guest.pip_shim`, which runs inside the kernel's environment.
"""

from __future__ import annotations

import json
import shlex
import shutil
import stat
import sys
from pathlib import Path

from builder.project.image import load_image
from builder.run.isolation import GUEST_DIR

SHIM = GUEST_DIR / "pip_shim.py"
BIN = "bin"
PACKAGES = "image-packages.json"
COMMANDS = ("pip", "pip3")


def install_pip_shim(private_dir: Path, python: Path | None = None) -> Path:
    """Write the shim into ``private_dir/bin`` and the image's packages into ``private_dir``; the bin folder.
    ``python``: the kernel's interpreter (default: this one)."""
    folder = Path(private_dir) / BIN
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SHIM, folder / SHIM.name)
    (Path(private_dir) / PACKAGES).write_text(json.dumps(load_image().packages, sort_keys=True), encoding="utf-8")
    for name in COMMANDS:
        command = folder / name
        interpreter = str(python or sys.executable)
        command.write_text(f"#!/bin/sh\nexec {shlex.quote(interpreter)} {shlex.quote(str(folder / SHIM.name))} \"$@\"\n")
        command.chmod(command.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder
