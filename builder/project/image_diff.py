"""``kkb image --diff``: two images side by side (Python, CUDA, torch, the date, every package that differs).

An image is named (:func:`load_view`) as one of:

- ``described``: the description kkb uses (``$KKB_KAGGLE_IMAGE``, captured, refreshed, or shipped);
- ``shipped``: the one shipped with kkb; ``captured``: the one ``kkb image --on-kaggle`` or ``--refresh`` stored;
- ``newest``: the newest image a run recorded on the server kkb talks to;
- ``OWNER/SLUG``: the image that kernel's newest recorded run had;
- a file: a description or a capture (``kkb_image.json`` from a run's output).

Without names, ``described`` against ``newest`` (else ``shipped``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from builder.errors import KkbError
from builder.project.image import IMAGE_RESOURCE, load_image
from builder.project.image_facts import ImageFacts
from builder.project.image_store import captured_image_path, run_captures, server_of

NAMES = ("described", "shipped", "captured", "newest")


@dataclass(frozen=True)
class ImageView:
    label: str
    facts: ImageFacts
    packages: dict[str, str]


@dataclass(frozen=True)
class ImageDiff:
    left: ImageView
    right: ImageView
    rows: list[tuple[str, str, str]]          # (what, left, right): the facts, then every package whose version differs
    only_left: list[str] = field(default_factory=list)
    only_right: list[str] = field(default_factory=list)
    same: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"left": self.left.label, "right": self.right.label, "rows": [list(row) for row in self.rows],
                "only_left": self.only_left, "only_right": self.only_right, "same": self.same}


def _view(label: str, data: dict[str, Any]) -> ImageView:
    if not isinstance(data.get("python"), str) or not isinstance(data.get("packages"), dict):
        raise KkbError(f"{label}: not an image description or capture (it needs 'python' and 'packages')",
                       hint="name a description, a run's kkb_image.json, or one of: " + ", ".join(NAMES))
    packages = {str(canonicalize_name(str(name))): str(version) for name, version in data["packages"].items()}
    return ImageView(label, ImageFacts.of_capture({**data, "packages": packages}), packages)


def load_view(name: str, server: str | None = None) -> ImageView:
    """The image named ``name`` (see the module docstring)."""
    if name == "described":
        image = load_image()
        return _view(f"{image.path} ({image.captured})", {"python": image.python, "cuda": image.cuda,
                                                          "packages": image.packages, "captured": image.captured})
    if name == "shipped":
        text = resources.files("builder").joinpath("data", IMAGE_RESOURCE).read_text(encoding="utf-8")
        return _view(f"shipped builder/data/{IMAGE_RESOURCE}", json.loads(text))
    if name == "captured":
        return _file_view(captured_image_path(), "no description was captured or refreshed (kkb image --on-kaggle)")
    captures = run_captures(server_of(server))
    if name == "newest" or ("/" in name and not Path(name).exists()):
        chosen = [c for c in captures if name == "newest" or c.get("kernel") == name]
        if not chosen:
            raise KkbError(f"{name}: no run recorded an image on {server_of(server)}",
                           hint="kkb submit and kkb dry-run --on-kaggle record the image each run had")
        data = max(chosen, key=lambda c: str(c.get("captured") or ""))
        return _view(f"the run of {data.get('kernel')} v{data.get('version')} ({str(data.get('captured'))[:10]})", data)
    return _file_view(Path(name), f"{name}: no such file, and not one of {', '.join(NAMES)} or OWNER/SLUG")


def _file_view(path: Path, missing: str) -> ImageView:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise KkbError(missing, hint="kkb image --diff [A [B]] names images: " + ", ".join(NAMES) + ", OWNER/SLUG or a file") from None
    except (OSError, ValueError) as exc:
        raise KkbError(f"{path}: not a readable image description: {exc}", hint="name another file") from None
    return _view(str(path), data if isinstance(data, dict) else {})


def diff_images(left: ImageView, right: ImageView) -> ImageDiff:
    """The facts of both, then each package in both whose version differs, and what only one of them has."""
    a, b = left.facts, right.facts
    rows = [("captured", a.captured, b.captured), ("python", a.python, b.python), ("cuda", a.cuda or "-", b.cuda or "-"),
            ("torch", a.torch or "-", b.torch or "-"), ("packages", str(len(left.packages)), str(len(right.packages)))]
    both = sorted(set(left.packages) & set(right.packages) - {"torch"})  # torch is a fact above (without its build label)
    rows += [(name, left.packages[name], right.packages[name]) for name in both if left.packages[name] != right.packages[name]]
    return ImageDiff(left, right, rows, sorted(set(left.packages) - set(right.packages)),
                     sorted(set(right.packages) - set(left.packages)),
                     sum(1 for name in both if left.packages[name] == right.packages[name]))


def default_pair(server: str | None = None) -> tuple[str, str]:
    return ("described", "newest") if run_captures(server_of(server)) else ("described", "shipped")


__all__ = ["NAMES", "ImageDiff", "ImageView", "default_pair", "diff_images", "load_view"]
