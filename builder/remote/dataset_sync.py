"""A dataset on Kaggle brought up to date with a folder: a version uploaded only when its content hash differs from
what Kaggle serves (the ``manifest.json``) or, where Kaggle cannot say, from the last push recorded in the history;
a version left by an interrupted push adopted, never uploaded twice."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from builder.errors import RemoteError
from builder.project.layout import MANIFEST_FILE
from builder.remote.history import DATASET, DATASET_INTENT
from builder.remote.kaggle_api import TransientRemoteError
from builder.remote.session import Session

DATASET_BAD = {"failed", "deleted"}


@dataclass(frozen=True)
class DatasetResult:
    """One dataset after a sync: its version and what was done to it."""

    ref: str
    content_hash: str
    version: int | None
    action: str  # "created" | "versioned" | "unchanged" | "adopted" | "attached" (a helper kernel's output)
    uploaded_bytes: int


def sync_dataset(ctx: Session, kind: str, folder: Path, ref: str, content_hash: str, notes: str) -> DatasetResult:
    """Make ``ref``'s latest ready version hold ``content_hash``, uploading only when it does not."""
    rounds = ctx.rounds()
    while True:
        status = ctx.adapter.dataset_status(ref)
        if status is not None:
            status = _settle_dataset(ctx, kind, ref, status)
            kept = _kept_version(ctx, kind, ref, status, content_hash)
            if kept is not None:
                return kept
        before = ctx.adapter.dataset_version(ref) if status is not None else None
        ctx.history.append(DATASET_INTENT, ref=ref, hash=content_hash, version_before=before)
        bytes_before = ctx.adapter.uploaded_bytes
        action = "versioned" if status is not None else "created"
        ctx.emit(kind, f"{'uploading a new version of' if status else 'creating'} {ref}")
        try:
            if status is None:
                ctx.adapter.create_dataset(folder)
            else:
                ctx.adapter.version_dataset(folder, notes)
        except TransientRemoteError as exc:
            ctx.retry_round(rounds, f"{'creating' if status is None else 'versioning'} {ref}", exc)
            continue  # the next round looks at Kaggle first: the call may have gone through
        version = _await_dataset(ctx, kind, ref, content_hash)
        uploaded = ctx.adapter.uploaded_bytes - bytes_before
        ctx.history.append(DATASET, ref=ref, hash=content_hash, version=version, action=action, uploaded_bytes=uploaded)
        return DatasetResult(ref, content_hash, version, action, uploaded)


def _kept_version(ctx: Session, kind: str, ref: str, status: str, content_hash: str) -> DatasetResult | None:
    """The existing latest version when it already holds ``content_hash`` (nothing to upload)."""
    if status in DATASET_BAD:
        return None
    remote = _remote_hash(ctx, ref)
    intent = ctx.history.open_intent(DATASET_INTENT, DATASET, "ref", ref)
    if remote is not None:
        same = remote == content_hash
    else:  # the server cannot show the manifest: trust what we recorded
        last = ctx.history.last(DATASET, ref=ref)
        same = bool(last and last.get("hash") == content_hash)
    version = ctx.adapter.dataset_version(ref)
    adopted = (
        remote is None
        and intent is not None
        and intent.get("hash") == content_hash
        and version is not None
        and (intent.get("version_before") is None or version > intent["version_before"])
    )
    if not (same or adopted):
        return None
    action = "adopted" if (intent is not None and intent.get("hash") == content_hash) else "unchanged"
    ctx.emit(kind, f"{ref} unchanged ({content_hash[:19]}…)" if action == "unchanged" else f"{ref}: adopting v{version}")
    if action == "adopted":
        ctx.history.append(DATASET, ref=ref, hash=content_hash, version=version, action=action, uploaded_bytes=0)
    return DatasetResult(ref, content_hash, version, action, 0)


def _remote_hash(ctx: Session, ref: str) -> str | None:
    raw = ctx.adapter.dataset_file(ref, MANIFEST_FILE)
    if raw is None:
        return None
    try:
        value = json.loads(raw.decode("utf-8")).get("content_hash")
    except (ValueError, UnicodeDecodeError, AttributeError):
        return None
    return str(value) if value else None


def _settle_dataset(ctx: Session, kind: str, ref: str, status: str) -> str:
    """Wait out a version still being processed (e.g. left by an interrupted push)."""
    if status == "ready" or status in DATASET_BAD:
        return status
    return _wait_dataset_status(ctx, kind, ref)


def _wait_dataset_status(ctx: Session, kind: str, ref: str) -> str:
    def probe() -> tuple[str, bool]:
        state = ctx.adapter.dataset_status(ref) or "not found"
        return state, state == "ready" or state in DATASET_BAD

    return ctx.wait(
        kind,
        f"dataset {ref}",
        probe,
        ctx.settings.waits.dataset_s,
        hint="Kaggle is still processing the upload; run the same command again later (nothing is uploaded twice)",
    )


def _await_dataset(ctx: Session, kind: str, ref: str, content_hash: str) -> int | None:
    """Wait until the new version is ready and is the one Kaggle serves; return its number."""

    def probe() -> tuple[str, bool]:
        state = ctx.adapter.dataset_status(ref) or "not found"
        if state in DATASET_BAD:
            return state, True
        if state != "ready":
            return state, False
        remote = _remote_hash(ctx, ref)
        # "ready" may still describe the previous version for a moment; the manifest tells which one.
        if remote is not None and remote != content_hash:
            return "ready (previous version)", False
        return state, True

    state = ctx.wait(
        kind,
        f"dataset {ref}",
        probe,
        ctx.settings.waits.dataset_s,
        hint="Kaggle is still processing the upload; run the same command again later (nothing is uploaded twice)",
    )
    if state in DATASET_BAD:
        raise RemoteError(
            f"Kaggle could not process the new version of {ref} (status: {state})",
            hint="run the push again; if it fails again, look at the dataset page on Kaggle",
        )
    return ctx.adapter.dataset_version(ref)
