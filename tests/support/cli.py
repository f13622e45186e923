"""kkb as people call it: the ``kkb`` command in a subprocess, from a folder of their choice, with relative paths.

:func:`ways` lists the five ways people reach a kernel folder (from inside it, from its parent, by its absolute path,
through a path with a space, through a symlink); :func:`build_every_way` builds a kernel each way into one build
folder, each way's ``--out`` as typed from its own folder (none where the default is that folder), so all but the
first build find nothing changed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The console script pip installs next to the interpreter (what people type); `python -m builder` where there is none.
_SCRIPT = Path(sys.executable).parent / "kkb"
COMMAND = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "builder"]


def kkb(*args: str | Path, cwd: Path, env: Mapping[str, str] | None = None,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``kkb ARGS`` started in ``cwd``, with this process's (isolated) environment plus ``env``."""
    return subprocess.run([*COMMAND, *map(str, args)], cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, errors="replace", timeout=timeout)


def said(run: subprocess.CompletedProcess[str]) -> str:
    """What a run printed, for an assertion's message."""
    return f"exit {run.returncode}\n--- stdout\n{run.stdout[-3000:]}\n--- stderr\n{run.stderr[-3000:]}"


@dataclass(frozen=True)
class Way:
    """One way to name a kernel folder: the folder the command starts in and the argument as typed there."""

    name: str
    cwd: Path
    kernel: str

    def out(self, build: Path) -> list[str]:
        """``--out`` naming ``build`` from this way's folder, as typed there; none where it is the default."""
        default = self.cwd / "build" / Path(self.cwd / self.kernel).resolve().name
        if os.path.abspath(build) == os.path.abspath(default):
            return []
        return ["--out", str(build) if self.name == "absolute" else os.path.relpath(build, self.cwd)]


WAYS = ("inside", "parent", "absolute", "space", "symlink")


def ways(kernel: Path, work: Path) -> dict[str, Way]:
    """The five ways to ``kernel``: ``.`` from inside it, its name from its parent, its absolute path from ``work``'s
    ``elsewhere/``, ``my kernels/NAME`` (a copy) and ``linked-NAME`` (a symlink to it) from ``work``."""
    spaced = work / "my kernels" / kernel.name
    if not spaced.exists():
        shutil.copytree(kernel, spaced, symlinks=True, ignore=shutil.ignore_patterns("build", ".kkb"))
    link = work / f"linked-{kernel.name}"
    if not link.exists():
        link.symlink_to(kernel, target_is_directory=True)
    (work / "elsewhere").mkdir(exist_ok=True)
    return {"inside": Way("inside", kernel, "."), "parent": Way("parent", kernel.parent, kernel.name),
            "absolute": Way("absolute", work / "elsewhere", str(kernel.absolute())),
            "space": Way("space", work, f"my kernels/{kernel.name}"), "symlink": Way("symlink", work, link.name)}


def dry_run(way: Way, *args: str | Path, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``kkb dry-run`` as typed from ``way``'s folder; it must pass, and its report.json (in the default build folder
    there, or the ``--out`` given) is returned."""
    run = kkb("dry-run", way.kernel, *args, cwd=way.cwd, env=env)
    assert run.returncode == 0, f"{way.name}: {said(run)}"
    given = [str(args[index + 1]) for index, arg in enumerate(args[:-1]) if arg in ("--out", "-o")]
    out = way.cwd / given[-1] if given else way.cwd / "build" / Path(way.cwd / way.kernel).resolve().name
    report: dict[str, Any] = json.loads((out / "dryrun" / "report.json").read_text())
    return report


def build_every_way(kernel: Path, work: Path, build: Path, env: Mapping[str, str] | None = None) -> None:
    """``kkb build`` of ``kernel`` each way into ``build``: every one succeeds and names ``build``."""
    for way in ways(kernel, work).values():
        run = kkb("build", way.kernel, *way.out(build), cwd=way.cwd, env=env)
        assert run.returncode == 0, f"{way.name}: {said(run)}"
        assert f"→ {build}\n" in run.stdout, f"{way.name}: {said(run)}"
