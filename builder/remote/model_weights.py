"""``kkb push`` for ``[weights] publish = "model"``: the weights as versions of a Kaggle Model variation.

The same rule as datasets: a new version only when the content hash differs from the newest ready
version's ``manifest.json`` (which travels in every version). The Model and its variation are created on
the first push (the variation's creation uploads version 1); later pushes add versions. Each upload is
awaited until Kaggle serves it as the newest ready version with the expected manifest, and its number
goes into kernel-metadata's ``model_sources`` (Kaggle attaches one model *version*, so a new version of
the weights means a new kernel version too).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from builder.build import BuildResult
from builder.bundle.model_weights import model_source
from builder.project.layout import KERNEL_METADATA, MANIFEST_FILE
from builder.remote.kaggle_api import TransientRemoteError
from builder.remote.session import Session


@dataclass(frozen=True)
class ModelSynced:
    instance: str
    version: int
    action: str  # "created" | "versioned" | "unchanged"
    uploaded_bytes: int


HINT = "Kaggle is still processing the model version; run the same command again later (nothing is uploaded twice)"


def sync_model_weights(ctx: Session, build: BuildResult, notes: str) -> ModelSynced:
    """Make the variation's newest ready version hold ``build.weights_hash``, uploading only when it does not."""
    instance, folder, content_hash = str(build.weights_model), Path(build.weights_dir), str(build.weights_hash)
    rounds = ctx.rounds()
    while True:
        current = ctx.adapter.model_instance_version(instance)
        if current == 0:  # a first version still processing (an interrupted push): wait for it, then look again
            current = _await_version(ctx, instance, 0, None)
        if current is not None and _remote_hash(ctx, instance, current) == content_hash:
            ctx.emit("weights", f"model {instance} v{current} unchanged ({content_hash[:19]}…)")
            return ModelSynced(instance, current, "unchanged", 0)
        bytes_before = ctx.adapter.uploaded_bytes
        try:
            action = _upload(ctx, instance, folder, current, notes)
        except TransientRemoteError as exc:
            ctx.retry_round(rounds, f"{'versioning' if current is not None else 'creating'} model {instance}", exc)
            continue  # the next round looks at Kaggle first: the call may have gone through
        version = _await_version(ctx, instance, current or 0, content_hash)
        return ModelSynced(instance, version, action, ctx.adapter.uploaded_bytes - bytes_before)


def _upload(ctx: Session, instance: str, folder: Path, current: int | None, notes: str) -> str:
    if current is not None:
        ctx.emit("weights", f"uploading a new version of model {instance}")
        ctx.adapter.version_model_instance(instance, folder, notes)
        return "versioned"
    model = "/".join(instance.split("/")[:2])
    if not ctx.adapter.model_exists(model):
        ctx.emit("weights", f"creating model {model}")
        ctx.adapter.create_model(folder)
    ctx.emit("weights", f"creating model variation {instance}")
    ctx.adapter.create_model_instance(folder)
    return "created"


def _await_version(ctx: Session, instance: str, before: int, content_hash: str | None) -> int:
    """Wait until a version newer than ``before`` is ready (and holds ``content_hash`` when given)."""
    def probe() -> tuple[str, bool]:
        version = ctx.adapter.model_instance_version(instance) or 0
        if version <= before:
            return "processing", False
        if content_hash is not None and _remote_hash(ctx, instance, version) != content_hash:
            return f"ready (v{version} is not the new content yet)", False
        return f"v{version} ready", True

    ctx.wait("weights", f"model {instance}", probe, ctx.settings.waits.dataset_s, hint=HINT)
    return int(ctx.adapter.model_instance_version(instance) or 0)


def _remote_hash(ctx: Session, instance: str, version: int) -> str | None:
    raw = ctx.adapter.model_file(instance, version, MANIFEST_FILE)
    try:
        value = json.loads(raw.decode("utf-8")).get("content_hash") if raw else None
    except (ValueError, UnicodeDecodeError, AttributeError):
        return None
    return str(value) if value else None


def attach_model_weights(kernel_dir: Path, instance: str, version: int) -> None:
    """Put ``instance/version`` into the built kernel-metadata's ``model_sources`` (replacing an older version)."""
    path = kernel_dir / KERNEL_METADATA
    meta = json.loads(path.read_text(encoding="utf-8"))
    sources = [source for source in meta.get("model_sources") or [] if not source.startswith(instance + "/")]
    meta["model_sources"] = [*sources, model_source(instance, version)]
    path.write_text(json.dumps(meta, indent=1) + "\n")
