"""Helpers for the benches that run the reference kernel (fast commit, dry run, inference)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from builder.run.execute import execute_notebook
from builder.run.sandbox import Mount, SandboxSpec, remove_sandbox

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO / "kernels" / "reference"
OWNER = "bench"


def ensure_assets() -> None:
    """The reference kernel's data and weights (``make_assets.py`` is a no-op when they are current)."""
    subprocess.run([sys.executable, str(REFERENCE / "make_assets.py")], check=True, cwd=REPO,
                   stdout=subprocess.DEVNULL)


def copy_reference(dest: Path, *, fast_commit: bool = True) -> Path:
    """A private copy of the reference kernel (history and builds stay out of the repository)."""
    kernel = Path(shutil.copytree(REFERENCE, dest, ignore=shutil.ignore_patterns(".kkb", "__pycache__")))
    if not fast_commit:
        toml = kernel / "kernel.toml"
        text, count = re.subn(r"(\[fast_commit\]\s*\nenabled\s*=\s*)true", r"\1false", toml.read_text())
        if count != 1:
            raise RuntimeError(f"{toml}: could not find [fast_commit] enabled = true to turn it off")
        toml.write_text(text)
    return kernel


def clean_environ() -> dict[str, str]:
    """This environment without Kaggle credentials or kkb overrides (a bench must not read the developer's),
    except the sandbox isolation, which a bench run may set on purpose to compare the isolations."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("KAGGLE_", "KKB_")) or k == "KKB_SANDBOX_ISOLATION"}


def empty_notebook_seconds(mounts: tuple[Mount, ...] = (), rerun: bool = False) -> float:
    """The executor's constant: a one-cell notebook (``pass``) in the same kind of sandbox, start to finish."""
    with tempfile.TemporaryDirectory(prefix="kkb-bench-empty-") as tmp:
        notebook = Path(tmp) / "empty.ipynb"
        nbformat.write(nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_code_cell("pass")],
            metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}), notebook)
        root = Path(tmp) / "kaggle"
        try:
            result = execute_notebook(notebook, SandboxSpec(mounts=mounts, rerun=rerun, timeout_seconds=600), root)
        finally:
            remove_sandbox(root)
        if not result.ok:
            raise RuntimeError(f"the empty notebook failed: {result.ename}: {result.evalue}")
        return result.wall_seconds
