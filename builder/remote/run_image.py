"""The image each run on Kaggle really had, recorded where the drift guard finds it, at no extra session.

Every kkb kernel writes ``kkb_image.json`` into its output when it starts (``builder.kkb_runtime.image_capture``).
kkb keeps it (``builder.project.image_store.record_run_capture``, the newest per kernel and server) whenever it has a
run's output anyway: ``kkb submit`` once the run completed, ``kkb dry-run --on-kaggle`` with the rehearsal's report,
and ``kkb push`` for the version it pushed before (only that one small file, once). A run that wrote none (an older
kkb, a failed start) is simply not recorded; recording never fails a command.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from builder.errors import KkbError, RemoteError
from builder.kkb_runtime.image_capture import CAPTURE_FILE
from builder.project.image_facts import ImageFacts, described_image
from builder.project.image_store import record_run_capture, server_of
from builder.project.jsonfile import read_object
from builder.remote.history import PUSH
from builder.remote.session import Session

IMAGE = "image"  # history event: the image a run recorded was kept


def record_run_image(ctx: Session, kernel_id: str, version: int | None, output: Path) -> ImageFacts | None:
    """Keep the ``kkb_image.json`` found under ``output`` (a run's downloaded output) as ``kernel_id``'s image."""
    found = sorted(Path(output).rglob(CAPTURE_FILE))
    data = read_object(found[0]) if found else {}
    server = server_of(ctx.adapter.endpoint)
    try:
        kept = record_run_capture(data, server=server, kernel=kernel_id, version=version) if data else None
    except KkbError as exc:
        ctx.emit("image", f"the image of {kernel_id} v{version} was not recorded ({exc.message})")
        return None
    if kept is None:
        return None
    facts = ImageFacts.of_capture({**data, "kernel": kernel_id, "version": version, "server": server})
    ctx.history.append(IMAGE, kernel=kernel_id, kernel_version=version, python=facts.python, cuda=facts.cuda,
                       torch=facts.torch, captured=facts.captured)
    ctx.emit("image", f"{kernel_id} v{version} ran on {facts.describe()}" + _moved(facts))
    return facts


def _moved(facts: ImageFacts) -> str:
    described = described_image()
    changes = described.changes(facts)
    return f" (kkb's image description has {described.describe()}: {', '.join(changes)})" if changes else ""


def record_last_push_image(ctx: Session, kernel_id: str) -> ImageFacts | None:
    """Before a push: the image the version kkb pushed last ran on, when its run completed and it is not kept yet."""
    last = ctx.history.last(PUSH, kernel=kernel_id)
    version = last.get("kernel_version") if last else None
    if not isinstance(version, int) or ctx.history.last(IMAGE, kernel=kernel_id, kernel_version=version) is not None:
        return None
    try:
        if ctx.adapter.kernel_status(kernel_id, version).status != "complete":
            return None
        with tempfile.TemporaryDirectory(prefix="kkb-image-") as scratch:
            ctx.adapter.kernel_output(kernel_id, version, Path(scratch), file_pattern=rf"(^|/){CAPTURE_FILE}$")
            facts = record_run_image(ctx, kernel_id, version, Path(scratch))
        if facts is None:  # a run of an older kkb, or one that failed to start: not asked again
            ctx.history.append(IMAGE, kernel=kernel_id, kernel_version=version, python=None)
        return facts
    except RemoteError as exc:  # the push goes on: the image is evidence, not a step of the push
        ctx.emit("image", f"the image of {kernel_id} v{version} was not read ({exc.message})")
        return None


__all__ = ["IMAGE", "record_last_push_image", "record_run_image"]
