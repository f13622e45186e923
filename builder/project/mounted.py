"""What a run found mounted for each input kkb built, against what kkb meant it to read.

The notebook's inputs cell (``templates/notebook/20_inputs.py.j2``) writes ``kkb_mounted.json`` into the working
folder: for the code dataset, the weights (dataset or Model) and the wheelhouse (dataset or helper kernel), the
digest of what it found mounted (a manifest's ``content_hash``, a wheelhouse's resolution ``key``) and where::

    {"format": 1, "inputs": [{"role": "weights", "ref": "me/x-weights", "kind": "dataset",
                              "digest": "sha256:…", "path": "datasets/me/x-weights"}]}

Kaggle was seen to drop version pins and mount its latest complete version instead (kaggle-runtime.md §9.3), so a
run can read other code or weights than the ones just pushed, and nothing says so but this file. The dry run
(equal by construction), ``kkb submit`` (before submitting) and ``kkb dry-run --on-kaggle`` compare it with
what they built or pushed; this module is that comparison, and the words for a difference.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

MOUNTED_FILE = "kkb_mounted.json"


@dataclass(frozen=True)
class MountedInput:
    """One input as the run found it (``digest`` None: not mounted at all)."""

    role: str  # code | weights | wheelhouse
    ref: str
    kind: str  # dataset | model | kernel
    digest: str | None
    path: str | None  # under /kaggle/input


@dataclass(frozen=True)
class Expected:
    """What kkb meant the run to read: the digest and Kaggle's version number, and the pin it wrote (if any)."""

    role: str
    ref: str
    digest: str
    version: int | None = None
    pin: str | None = None  # owner/slug/N in the kernel's sources


@dataclass(frozen=True)
class Difference:
    expected: Expected
    found: MountedInput | None
    found_version: int | None

    def sentence(self) -> str:
        """``the weights Kaggle mounted are version 3, kkb pushed version 4 (me/x-weights; the pin me/x-weights/4
        was dropped)``."""
        want = self.expected
        verb, was = ("are", "were") if want.role == "weights" else ("is", "was")
        pushed = f"version {want.version}" if want.version else f"{want.digest[:19]}…"
        if self.found is None or self.found.digest is None:
            told = f"the {want.role} ({want.ref}) {was} not mounted, kkb pushed {pushed}"
        else:
            got = f"version {self.found_version}" if self.found_version else f"another version ({self.found.digest[:19]}…)"
            told = f"the {want.role} Kaggle mounted {verb} {got}, kkb pushed {pushed}"
        pin = f"the pin {want.pin} was dropped" if want.pin else "the kernel did not pin a version"
        return f"{told} ({want.ref}; {pin})"


@dataclass(frozen=True)
class MountedCheck:
    """The comparison of one run: ``ok`` None when the run recorded nothing (a notebook older than the file)."""

    ok: bool | None
    inputs: tuple[str, ...]  # what was compared: "weights me/x-weights v4"
    differences: tuple[str, ...]  # each difference's sentence

    @classmethod
    def of(cls, found: Sequence[MountedInput] | None, expected: Sequence[Expected],
           version_of: Callable[[MountedInput], int | None] = lambda item: None) -> MountedCheck:
        inputs = tuple(f"{want.role} {want.ref}" + (f" v{want.version}" if want.version else "") for want in expected)
        if found is None:
            return cls(None, inputs, ())
        diffs = differences(found, expected, version_of)
        return cls(not diffs, inputs, tuple(diff.sentence() for diff in diffs))

    def to_json(self) -> dict[str, object]:
        """The report's ``mounted``: ``{"ok": true, "inputs": [...], "differences": []}``."""
        return {"ok": self.ok, "inputs": list(self.inputs), "differences": list(self.differences)}


def read_mounted(path: Path) -> list[MountedInput] | None:
    """The inputs ``kkb_mounted.json`` lists; None when the run wrote none (a notebook older than the file)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    items = data.get("inputs") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return None
    return [MountedInput(role=str(item.get("role", "")), ref=str(item.get("ref", "")), kind=str(item.get("kind", "")),
                         digest=str(item["digest"]) if item.get("digest") else None,
                         path=str(item["path"]) if item.get("path") else None)
            for item in items if isinstance(item, dict)]


def differences(found: Sequence[MountedInput], expected: Sequence[Expected],
                version_of: Callable[[MountedInput], int | None] = lambda item: None) -> list[Difference]:
    """Each expected input whose mounted digest is another (or that was not mounted), with the version it was."""
    by_ref = {item.ref: item for item in found}
    result = []
    for want in expected:
        got = by_ref.get(want.ref)
        if got is not None and got.digest == want.digest:
            continue
        result.append(Difference(want, got, version_of(got) if got is not None and got.digest else None))
    return result


def model_version(item: MountedInput) -> int | None:
    """A Kaggle Model's version is the last folder of its mount (``models/owner/model/framework/variation/3``)."""
    last = (item.path or "").rstrip("/").rpartition("/")[2]
    return int(last) if item.kind == "model" and last.isdigit() else None
