"""A writable root file system for the sandboxed kernel, as a Kaggle container has, never the host's.

On Kaggle the container's whole file system is writable: notebooks ``mkdir /kaggle/tmp``, write under
``/kaggle``, and ``pip install --no-index --find-links /kaggle/input/...`` into the image's Python. The
sandbox gives the same through an overlay per top-level folder (the host's folder the lower layer, an
upper layer inside the sandbox root, discarded with it), chosen per isolation, best first:

``overlay``
    overlayfs mounted by kkb's namespace launcher (root, or a user namespace on kernels >= 5.11).
``fuse-overlayfs``
    the FUSE implementation, where it is installed and the kernel's overlayfs cannot be mounted.
``bwrap-overlay``
    bubblewrap's ``--overlay-src``/``--tmp-overlay`` (bubblewrap >= 0.10), upper layers in memory.
``read-only``
    the fallback the report names: only ``/kaggle/working``, ``/kaggle/temp`` and ``/tmp`` writable.

The portable (``python``) isolation has no root of its own: the kernel runs on the host's file system,
which the report says. ``$KKB_SANDBOX_ROOT_FS`` forces one (e.g. ``read-only``, to rehearse the old way).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from builder.errors import DryRunError
from builder.kkb_runtime.vocabulary import RootFilesystem

GUEST_LAUNCH = Path(__file__).resolve().parent / "guest" / "launch.py"
RECORD = "root-filesystem"  # written by the launcher into the sandbox's private folder: what it really did
PROBE_SECONDS = 30
PORTABLE = "portable mode: the kernel runs on the host's own file system (no root of its own)"


@dataclass(frozen=True)
class RootChoice:
    """The root file system a run gets, and why better ones were not used."""

    kind: RootFilesystem | None  # None: the portable isolation (the host's file system)
    skipped: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.kind is None:
            return PORTABLE
        what = DESCRIPTIONS[self.kind]
        return what + ("" if not self.skipped else f" (not used: {'; '.join(self.skipped)})")


DESCRIPTIONS: dict[RootFilesystem, str] = {
    RootFilesystem.OVERLAY: "overlayfs: the whole file system writable, changes discarded after the run",
    RootFilesystem.FUSE_OVERLAY: "fuse-overlayfs: the whole file system writable, changes discarded after the run",
    RootFilesystem.BWRAP_OVERLAY: "bubblewrap overlays: the whole file system writable (in memory), discarded after the run",
    RootFilesystem.READ_ONLY: "read-only root: only /kaggle/working, /kaggle/temp and /tmp writable (Kaggle's is writable)",
}


@functools.cache
def launcher_probe(kind: str) -> str | None:
    """None when kkb's namespace launcher builds a root with ``kind`` here, else why not (one line)."""
    try:
        out = subprocess.run([sys.executable, str(GUEST_LAUNCH), "--probe-root", kind], capture_output=True,
                             text=True, timeout=PROBE_SECONDS)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if out.returncode == 0:
        return None
    lines = (out.stderr or out.stdout).strip().splitlines()
    return (lines[-1] if lines else f"probe exited with {out.returncode}").removeprefix("kkb sandbox probe: ")[:300]


@functools.cache
def bwrap_overlay_problem() -> str | None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bwrap is not installed"
    try:
        help_text = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    return None if "--tmp-overlay" in help_text else "this bubblewrap has no --tmp-overlay (needs 0.10 or later)"


def _overlay_problem(isolation: str) -> str | None:
    return "only kkb's namespace launcher mounts overlayfs" if isolation != "namespace" else launcher_probe("overlay")


def _fuse_problem(isolation: str) -> str | None:
    if isolation != "namespace":
        return "only kkb's namespace launcher runs fuse-overlayfs"
    if shutil.which("fuse-overlayfs") is None:
        return "fuse-overlayfs is not installed"
    return launcher_probe("fuse-overlayfs")


def _bwrap_problem(isolation: str) -> str | None:
    return "only with bubblewrap isolation" if isolation != "bwrap" else bwrap_overlay_problem()


# The one registry: per root file system, why it cannot be used with an isolation here (None: it can).
AVAILABLE: dict[RootFilesystem, Callable[[str], str | None]] = {
    RootFilesystem.OVERLAY: _overlay_problem,
    RootFilesystem.FUSE_OVERLAY: _fuse_problem,
    RootFilesystem.BWRAP_OVERLAY: _bwrap_problem,
    RootFilesystem.READ_ONLY: lambda isolation: None,
}


def choose_root_filesystem(isolation: str, requested: str | None = None) -> RootChoice:
    """The best root file system for ``isolation`` here; ``$KKB_SANDBOX_ROOT_FS`` (or ``requested``) forces one."""
    if isolation == "python":
        return RootChoice(None)
    requested = requested or os.environ.get("KKB_SANDBOX_ROOT_FS") or None
    if requested is not None and requested not in set(RootFilesystem):
        raise DryRunError(f"KKB_SANDBOX_ROOT_FS={requested!r} is not a root file system",
                          hint=f"use one of {', '.join(RootFilesystem)}, or unset it")
    skipped: list[str] = []
    relevant = [kind for kind in RootFilesystem if requested in (None, kind)]
    for kind in relevant:
        problem = AVAILABLE[kind](isolation)
        if problem is None:
            return RootChoice(kind, tuple(skipped))
        if kind == requested:
            raise DryRunError(f"the {kind} root file system cannot be used here: {problem}",
                              hint="unset KKB_SANDBOX_ROOT_FS to fall back")
        if not problem.startswith("only "):  # not a way of this isolation at all: nothing to explain
            skipped.append(f"{kind}: {problem}")
    return RootChoice(RootFilesystem.READ_ONLY, tuple(skipped))


def launcher_option(kind: RootFilesystem | None) -> list[str]:
    """The namespace launcher's ``--root-fs`` option for ``kind``."""
    if kind in (RootFilesystem.OVERLAY, RootFilesystem.FUSE_OVERLAY):
        return ["--root-fs", str(kind)]
    return []


def bwrap_folder_args(kind: RootFilesystem | None, path: str) -> list[str]:
    """bubblewrap's arguments for one top-level host folder: an overlay in memory, or a read-only bind."""
    if kind == RootFilesystem.BWRAP_OVERLAY:
        return ["--overlay-src", path, "--tmp-overlay", path]
    return ["--ro-bind", path, path]


def recorded(private_dir: Path, choice: RootChoice) -> str:
    """What the run really had: the launcher's record when it wrote one, else the choice in words."""
    try:
        text = (Path(private_dir) / RECORD).read_text(encoding="utf-8").strip()
    except OSError:
        return choice.describe()
    if choice.skipped:
        text += f" (not used: {'; '.join(choice.skipped)})"
    return text
