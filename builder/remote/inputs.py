"""``kkb push`` checks every ``[[inputs]]`` before it uploads anything.

Kaggle attaches what it can and lists the rest in ``invalid*Sources`` only after the kernel push,
when the datasets already went up; and a source the user cannot read is simply left out. So each
input is looked up first, through the API (the user's own credentials decide what is readable),
and all that cannot be read are named together.
"""

from __future__ import annotations

from pathlib import Path

from builder.build import BuildResult
from builder.errors import RemoteError
from builder.project.spec import INPUT_SOURCES, SPEC_FILE
from builder.project.spec_inputs import InputSection
from builder.remote.session import Session


def check_inputs(ctx: Session, build: BuildResult) -> None:
    """Raise :class:`RemoteError` naming each input that does not exist or that this user cannot read."""
    missing = [(index, item) for index, item in enumerate(build.spec.inputs) if not _readable(ctx, item)]
    if not missing:
        return
    spec_path = Path(ctx.settings.kernel_dir) / SPEC_FILE
    listing = "; ".join(f"inputs[{index}] {item.kind} '{item.ref}'" for index, item in missing)
    raise RemoteError(
        f"{spec_path}: Kaggle has no input you can read at {listing} (nothing was uploaded)",
        hint="check each reference on its Kaggle page (a version must exist); an input of another user must be public "
             "or shared with you; or remove it from [[inputs]]")


def _readable(ctx: Session, item: InputSection) -> bool:
    ctx.emit("inputs", f"checking {INPUT_SOURCES[item.kind]} {item.ref}")
    if item.kind == "model":
        return ctx.adapter.model_version_readable(item.ref)
    if item.kind == "notebook":
        return ctx.adapter.kernel_output_readable(item.ref)
    return ctx.adapter.dataset_readable(item.ref)
