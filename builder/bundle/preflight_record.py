"""What the last build's public-data checks passed with, and for what inputs: an unchanged rebuild (every dry run
starts with one) checks again only when the spec or the sample submission changed.

The checks (:func:`builder.bundle.preflight.check_against_public_data`) read the spec and the sample and nothing
else; the key is kkb's version, the whole spec and the sample's size, modification time and inode, as the models
record keys the cards' run (``builder.bundle.card_run``). Only a pass is recorded: a failing build raises before
it writes anything.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from builder import __version__
from builder.bundle.preflight import CardCheck
from builder.project.jsonfile import read_object
from builder.project.spec import KernelSpec

SCHEMA = "kkb.preflight/1"


def preflight_key(spec: KernelSpec, kernel_dir: Path) -> str:
    sample = spec.competition.public_sample(kernel_dir)
    try:
        found = os.stat(sample) if sample is not None else None
    except OSError:
        found = None
    inputs = {"schema": SCHEMA, "kkb": __version__, "spec": spec.model_dump(mode="json"), "sample": str(sample),
              "stat": [found.st_size, found.st_mtime_ns, found.st_ino] if found is not None else None}
    return "sha256:" + hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()


def recorded_checks(record: Path, key: str) -> tuple[CardCheck, ...] | None:
    """The checks the last build passed with this key, else None (no record, another key, an unreadable one)."""
    data = read_object(record)
    if data.get("key") != key:
        return None
    try:
        return tuple(CardCheck(str(check["step"]), str(check["card"]), tuple(str(c) for c in check["columns"]))
                     for check in data["checks"])
    except (KeyError, TypeError):
        return None


def write_record(record: Path, key: str, checks: tuple[CardCheck, ...]) -> None:
    entries = [{"step": check.step, "card": check.card, "columns": list(check.columns)} for check in checks]
    record.write_text(json.dumps({"key": key, "checks": entries}, sort_keys=True))
