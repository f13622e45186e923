"""Each kernel form in the sandbox: a notebook's cells on a Jupyter kernel, a script by ``python`` as Kaggle runs it.

``EXECUTORS`` has one entry per :class:`~builder.kkb_runtime.vocabulary.KernelForm`; the dry run and the local Kaggle
run every kernel through :func:`execute_kernel`, so both forms get the same sandbox, limits and measurements.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from builder.kkb_runtime.vocabulary import KernelForm
from builder.run.execute import ExecutionResult, execute_notebook
from builder.run.sandbox import SandboxSpec
from builder.run.script_run import execute_script

Executor = Callable[[Path, SandboxSpec, Path, Callable[[str], None] | None], ExecutionResult]

EXECUTORS: dict[KernelForm, Executor] = {
    KernelForm.NOTEBOOK: execute_notebook,
    KernelForm.SCRIPT: execute_script,
}


def execute_kernel(code: Path, form: KernelForm | str, sandbox: SandboxSpec, root: Path,
                   progress: Callable[[str], None] | None = None) -> ExecutionResult:
    """Run the kernel's code file (``form``: kernel-metadata's ``kernel_type``) in a new sandbox at ``root``."""
    return EXECUTORS[KernelForm(form)](Path(code), sandbox, root, progress)


__all__ = ["EXECUTORS", "execute_kernel"]
