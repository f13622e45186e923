"""The kernel's environment for the build's checks, and the user's own frames when one fails.

A card's feature function is the user's code, written for the kernel: it reads ``KKB_COMPETITION_DIR``,
``find_input("name")``, or ``../input/<slug>/...`` from Kaggle's working directory. The build runs it on
the public test, so it runs it the same way (:func:`kernel_environment`): kkb's variables set to the
local folders (the competition data, the kernel folder as the code and weights datasets), a temporary
``/kaggle`` (``KKB_KAGGLE_ROOT``) whose ``input/`` links the competition and each ``[[inputs]]`` stand-in at
Kaggle's paths (current and legacy layouts), and its ``working/`` as the current directory. Everything
is restored afterwards. :func:`user_frames` keeps the frames of a traceback that are the user's files.

Used by the build's model checks in this process (``builder.bundle.cards``) and by any check that runs
them in a child process: :func:`kernel_variables` is what such a child needs in its environment.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from builder.project.spec import KernelSpec

CONFIG_NAME = "kkb_kernel.json"  # the runtime's kernel config, as find_input reads it (names of [[inputs]] only)


@dataclass(frozen=True)
class KernelEnv:
    """Where a build check runs: the temporary ``/kaggle`` and the variables set for it."""

    root: Path
    variables: dict[str, str]
    slug: str

    def describe(self) -> str:
        """The environment in a hint: what the user's code saw."""
        shown = ", ".join(f"{name}={value}" for name, value in self.variables.items() if name != "KKB_KERNEL_CONFIG")
        return (f"the check ran as the kernel runs: {shown}; current directory {self.root / 'working'} "
                f"(../input/competitions/{self.slug} and ../input/{self.slug} are the public data)")


def kernel_variables(spec: KernelSpec, kernel_dir: Path, data: Path, root: Path) -> dict[str, str]:
    """kkb's variables as a step sees them, mapped to the local folders."""
    return {"KKB_COMPETITION_DIR": str(Path(data).resolve()), "KKB_CODE_DIR": str(Path(kernel_dir).resolve()),
            "KKB_WEIGHTS_DIR": str(Path(kernel_dir).resolve()), "KKB_KAGGLE_ROOT": str(root),
            "KKB_KERNEL_CONFIG": str(root / CONFIG_NAME)}


@contextmanager
def kernel_environment(spec: KernelSpec, kernel_dir: Path, data: Path) -> Iterator[KernelEnv]:
    """Run the body as a step runs in the kernel (see the module); everything is restored afterwards."""
    root = Path(tempfile.mkdtemp(prefix="kkb-build-kaggle-"))
    saved_env = {name: os.environ.get(name) for name in kernel_variables(spec, kernel_dir, data, root)}
    cwd = Path.cwd()
    try:
        _input_tree(spec, Path(kernel_dir), Path(data), root)
        variables = kernel_variables(spec, kernel_dir, data, root)
        os.environ.update(variables)
        os.chdir(root / "working")
        yield KernelEnv(root=root, variables=variables, slug=spec.competition.slug)
    finally:
        os.chdir(cwd)
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(root, ignore_errors=True)


def _input_tree(spec: KernelSpec, kernel_dir: Path, data: Path, root: Path) -> None:
    for name in ("working", "temp", "input/competitions"):
        (root / name).mkdir(parents=True, exist_ok=True)
    links: dict[str, Path] = {f"competitions/{spec.competition.slug}": data, spec.competition.slug: data}
    for item in spec.inputs:
        if item.path is not None:
            folder = kernel_dir / Path(item.path).expanduser()
            links[item.mount_target] = folder
            links.setdefault(item.mount_target.rsplit("/", 1)[-1], folder)  # the legacy layout: input/<slug>
    for target, source in links.items():
        link = root / "input" / target
        if source.is_dir() and not link.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(source.resolve(), target_is_directory=True)
    inputs = [{"name": item.input_name, "kind": item.kind, "ref": item.ref, "mount": item.mount_target} for item in spec.inputs]
    (root / CONFIG_NAME).write_text(json.dumps({"inputs": inputs}), encoding="utf-8")


def user_frames(error: BaseException, roots: Sequence[Path]) -> str:
    """The traceback's frames in files under ``roots`` (the user's code), innermost last, as Python prints them
    (``File "features.py", line 12, in make_features`` and the line); "" when none is the user's."""
    folders = [Path(root).resolve() for root in roots]
    lines = []
    for frame in traceback.extract_tb(error.__traceback__):
        path = Path(frame.filename).resolve()
        base = next((folder for folder in folders if path.is_relative_to(folder)), None)
        if base is None:
            continue
        lines.append(f'  File "{path.relative_to(base)}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    return "\n".join(lines)
