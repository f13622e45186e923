"""What happens before the kernel's own code runs: the image it runs on is recorded (``image_capture``), and in kkb's
sandbox, Kaggle's pre-run step is rehearsed: the Dependency Manager's packages installed offline from its input.

On Kaggle the Dependency Manager installs the ``pip install`` lines of a ``pm-*`` input before the kernel starts;
kkb's runtime does nothing there. In kkb's sandbox (the dry run, the local Kaggle) nobody else would: the runtime
installs what ``kkb_kernel.json``'s ``dependency_manager`` lists (the build left out what Kaggle's image already has)
from the input's wheels, offline, into the sandbox's layered environment, and fails the run naming what did not
install, where Kaggle's pre-run step would have failed it. Standard library only.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import image_capture, install
from .config import KernelConfig
from .inputs import InputNotFound, find_input


class DependencyManagerFailed(RuntimeError):
    """Kaggle's Dependency Manager could not install its packages offline: the message names them."""


def before_the_kernel(config: KernelConfig, working: Path) -> None:
    image_capture.write_capture(working, config.kernel.id)  # the image this run really has
    rehearse_dependency_manager(config)


def rehearse_dependency_manager(config: KernelConfig) -> None:
    """In kkb's sandbox only: the Dependency Manager's pre-run install, offline from its input."""
    section = config.dependency_manager
    if section is None or not os.environ.get(install.SANDBOX_MARKER):
        return
    requirements, image = list(section.requirements), list(section.from_image)
    where = f"Kaggle's Dependency Manager ({section.ref})"
    if not requirements:
        print(f"[kkb] {where}: nothing to install before the kernel ({', '.join(image) or 'no package'} in the image)",
              flush=True)
        return
    try:
        folder = find_input(section.input, config=config)
    except InputNotFound as exc:
        raise DependencyManagerFailed(f"{where} is not attached, so nothing installs {', '.join(requirements)}: "
                                      f"{exc}") from None
    print(f"[kkb] {where} installs {', '.join(requirements)} before the kernel, offline from {folder} "
          f"(rehearsed here; on Kaggle it runs before the notebook)", flush=True)
    links = sorted({str(wheel.parent) for wheel in folder.rglob("*.whl")}) or [str(folder)]
    argv = [sys.executable, "-m", "pip", "install", "--no-index", "--no-cache-dir", "--disable-pip-version-check",
            "--progress-bar", "off", *(arg for link in links for arg in ("--find-links", link)), *requirements]
    try:
        install.run_pip(argv)
    except install.InstallFailed as exc:
        raise DependencyManagerFailed(f"{where} could not install {', '.join(requirements)} offline from its input: "
                                      f"{exc}") from None


__all__ = ["DependencyManagerFailed", "before_the_kernel", "rehearse_dependency_manager"]
