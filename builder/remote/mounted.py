"""After a run, before submitting: did Kaggle mount what kkb pushed? (``kkb_mounted.json``, ``project/mounted.py``)

The run's output holds what its notebook found mounted for the code, weights and wheelhouse; kkb compares it with
what it pushed (the push's result, or the history's record of that version) and records the answer (a ``mounted``
record), so a second ``kkb submit`` of the same version does not download again, and a version that read other
inputs is never submitted: the next push makes a new version of the same content (``push._current_is``). Versions
are named from the history's dataset records (a digest kkb uploaded as version 3 is version 3).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from builder.errors import InputsDiffer
from builder.project.mounted import MOUNTED_FILE, Difference, Expected, MountedCheck, MountedInput, model_version, read_mounted
from builder.remote.dataset_sync import DatasetResult
from builder.remote.history import DATASET, MOUNTED, PUSH
from builder.remote.push import PushResult
from builder.remote.session import Session

ROLES = ("code", "weights", "wheels")


def expected_inputs(ctx: Session, kernel_id: str, version: int, pushed: PushResult | None) -> list[Expected]:
    """What this version was pushed to read: from ``pushed``, else the history's push record of the version."""
    if pushed is not None:
        return expected_from(pushed.code, pushed.weights, pushed.wheels, pushed.pins)
    record = ctx.history.last(PUSH, kernel=kernel_id, kernel_version=version) or {}
    pins = tuple(str(pin) for pin in record.get("pins") or [])
    return [_expected(role, str(record[f"{role}_dataset"]), str(record[f"{role}_hash"]), record.get(f"{role}_version"),
                      pins)
            for role in ROLES if record.get(f"{role}_dataset") and record.get(f"{role}_hash")]


def expected_from(code: DatasetResult, weights: DatasetResult | None, wheels: DatasetResult | None,
                  pins: tuple[str, ...] = ()) -> list[Expected]:
    """What a run of datasets just synced should read (the rehearsal on Kaggle's, which pins nothing)."""
    items = [("code", code), ("weights", weights), ("wheels", wheels)]
    return [_expected(role, item.ref, item.content_hash, item.version, pins)
            for role, item in items if item is not None]


def verify_mounted(ctx: Session, kernel_id: str, version: int, output: Path, expected: list[Expected]) -> dict[str, Any]:
    """Compare the run's ``kkb_mounted.json`` (in ``output``) with ``expected``; record and return the answer (the
    ``mounted`` record: ``ok``, ``inputs``, ``differences``, as a report's ``mounted`` has them, and ``found``)."""
    found = next((read_mounted(path) for path in sorted(Path(output).rglob(MOUNTED_FILE))), None)
    check = MountedCheck.of(found, expected, lambda item: _version_of(ctx, item))
    if found is None:
        ctx.emit("inputs", f"{kernel_id} v{version} recorded no {MOUNTED_FILE}: kkb cannot tell which versions it read")
        return ctx.history.append(MOUNTED, kernel=kernel_id, kernel_version=version, **check.to_json())
    record = ctx.history.append(MOUNTED, kernel=kernel_id, kernel_version=version, **check.to_json(),
                                found=[{"ref": item.ref, "digest": item.digest, "path": item.path} for item in found])
    if check.ok:
        versions = ", ".join(f"{e.role} v{e.version}" if e.version else e.role for e in expected)
        ctx.emit("inputs", f"{kernel_id} v{version} read what kkb pushed ({versions or 'nothing of kkb'})")
    return record


AGAIN = ("Kaggle mounted its latest complete version instead of the pinned one; once the new version is ready on "
         "Kaggle (kaggle datasets status REF), run the same command again: it pushes a new version of the same content "
         "(nothing is uploaded again) and checks again")


def raise_if_differs(record: dict[str, Any] | None, kernel_id: str, version: int, hint: str = AGAIN) -> None:
    if record is None or record.get("ok") is not False:
        return
    told = "; ".join(str(text) for text in record.get("differences") or [])
    raise InputsDiffer(f"{kernel_id} v{version} ran on other inputs than kkb pushed: {told}. Nothing was submitted",
                       hint=hint)


def read_other_inputs(ctx: Session, kernel_id: str, version: int | None) -> bool:
    """Whether the run of this version is known to have read other inputs than kkb pushed."""
    record = ctx.history.last(MOUNTED, kernel=kernel_id, kernel_version=version)
    return record is not None and record.get("ok") is False


def _expected(role: str, ref: str, digest: str, version: Any, pins: tuple[str, ...]) -> Expected:
    if digest.partition("@v")[2].isdigit():  # a helper kernel's wheelhouse: "key@vN", the run sees the key
        digest, _, number = digest.partition("@v")
        version = int(number)
    pin = next((p for p in pins if p.rpartition("/")[0] == ref), None)
    return Expected(role="wheelhouse" if role == "wheels" else role, ref=ref, digest=digest,
                    version=int(version) if isinstance(version, int) else None, pin=pin)


def _version_of(ctx: Session, item: MountedInput) -> int | None:
    """The version a mounted digest is: a Model's from its path, a dataset's from kkb's own upload records."""
    if item.kind == "model":
        return model_version(item)
    record = ctx.history.last(DATASET, ref=item.ref, hash=item.digest)
    version = record.get("version") if record is not None else None
    return int(version) if isinstance(version, int) else None


__all__ = ["AGAIN", "Difference", "expected_from", "expected_inputs", "raise_if_differs", "read_other_inputs",
           "verify_mounted"]
