"""The options of every command that pushes a kernel to run (``push``, ``submit``, ``dry-run --on-kaggle``,
``image --on-kaggle``, ``wheels --on-kaggle``): what to do when Kaggle's limits stop the run
(``builder.remote.preflight``). By default a limit refuses the push before anything is uploaded."""

from __future__ import annotations

import typer

WAIT_FOR_SLOT = typer.Option(False, "--wait-for-slot", help="When a limit of Kaggle's stops the run (a GPU session "
                             "slot, this kernel's version still running, no submission left today), wait for it instead.")
FORCE = typer.Option(False, "--force", help="Push even when Kaggle's limits say the run cannot end in a submission "
                     "(it bills; Kaggle may refuse or queue it).")
REPLACE = typer.Option(False, "--replace", help="Stop this kernel's version still running on Kaggle first (its "
                       "API can only delete the kernel: every version goes).")


def refuse_without(action: str, **given: bool) -> None:
    """A usage error when an option of Kaggle's limits is given to a command run that pushes nothing."""
    named = [f"--{name.replace('_', '-')}" for name, value in given.items() if value]
    if named:
        raise typer.BadParameter(f"{' and '.join(named)} go{'es' if len(named) == 1 else ''} with {action}: "
                                 "only a kernel pushed to run meets Kaggle's limits")
