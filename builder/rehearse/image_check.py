"""Whether Kaggle's image's version of a package has what a failed run missed: the evidence a skew verdict needs.

A run that fails on ``module 'cv2' has no attribute 'X'`` with a skewed OpenCV (another version here than on the
image) is "Not Rehearsed" only if the image's version has ``X``; where it lacks it too, Kaggle fails the same and the
verdict is Kaggle's. The image's version is asked where it is at hand: a ``kkb env`` environment that pins it
(:mod:`builder.run.image_env`'s cache), checked intact against its record first, its interpreter run in a sandbox
(:mod:`builder.run.process`: nothing of the cache runs on this machine outside one). Where none is, there is no
evidence (None) and the verdict says how to get it.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from builder.run.env_check import env_damage
from builder.run.image_env import STAMP, cache_root
from builder.run.process import run_in
from builder.run.sandbox import SandboxSpec, prepare_sandbox, remove_sandbox
from builder.run.skew import Skew

ASK_SECONDS = 60.0
# Imports the module by its name and says whether it has the name (or, without one, whether it imports at all).
_ASK = """
import importlib, importlib.util, sys
module, name = sys.argv[1], sys.argv[2]
try:
    found = importlib.import_module(module)
except ImportError:
    print("no-module")
    raise SystemExit(0)
has = not name or hasattr(found, name) or importlib.util.find_spec(f"{module}.{name}") is not None
print("has" if has else "lacks")
"""


@dataclass(frozen=True)
class ImageAnswer:
    """What the image's version said, and where it was asked."""

    has: bool
    where: Path  # the kkb env environment


def image_has(skew: Skew, module: str, name: str | None) -> ImageAnswer | None:
    """Whether the image's version of ``skew.distribution`` has ``module`` (and ``name`` in it); None: no evidence."""
    root = _environment_with(skew.distribution, skew.image)
    if root is None:
        return None
    work = Path(tempfile.mkdtemp(prefix="kkb-image-check-"))
    try:
        box = prepare_sandbox(SandboxSpec(mounts=(), rerun=False, python=root / "bin" / "python", visible=(root,)),
                              work / "kaggle")
        run = run_in(box, ["-c", _ASK, module, name or ""], call_seconds=ASK_SECONDS, run_seconds=ASK_SECONDS)
    finally:
        remove_sandbox(work)
    said = run.stdout.strip().splitlines()[-1:] if run.returncode == 0 else []
    if said == ["has"]:
        return ImageAnswer(True, root)
    if said in (["lacks"], ["no-module"]):
        return ImageAnswer(False, root)
    return None


def _environment_with(distribution: str, version: str) -> Path | None:
    """A kkb env environment pinning ``distribution==version`` (the image's), intact; None when there is none."""
    pin = f"{distribution}=={version.split('+')[0]}"
    folder = cache_root()
    if not folder.is_dir():
        return None
    for root in sorted(folder.iterdir()):
        try:
            pins = json.loads((root / STAMP).read_text()).get("pins") or []
        except (OSError, ValueError, AttributeError):
            continue
        if pin in pins and not env_damage(root, root / "bin" / "python", list(pins)):
            return root
    return None


__all__ = ["ImageAnswer", "image_has"]
