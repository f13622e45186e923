"""What a wheel depends on in Kaggle's image (the Python ABI, CUDA, torch), and which image a push will get.

Kaggle's image moves every one to three months. A wheelhouse holds what was resolved for one image: a Python ABI
(``cp312`` wheels never install on Python 3.13), and for compiled extensions such as NVIDIA apex a torch build and
its CUDA. :class:`ImageFacts` is that much of an image, with when and where it was seen; :meth:`ImageFacts.changes`
says, in words, what differs between two of them.

Which image a kernel gets (:func:`image_for_kernel`): the newest known one, of the description kkb uses
(``builder.project.image``: shipped, refreshed or captured with ``kkb image --on-kaggle``) and of the images runs
recorded on that server (``builder.project.image_store``); except that a kernel pinned to its image
(``docker_image_pinning = "original"``, the default, or a ``docker_image``) that recorded its own run keeps the image
that run had: a newer image seen elsewhere does not reach it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import date
from typing import Any

from packaging.version import InvalidVersion, Version

from builder.project.image import KaggleImage, load_image
from builder.project.image_store import run_captures, server_of
from builder.project.spec import KernelSpec

STALE_AFTER_DAYS = 90  # a description older than this says so in the dry run (the image moves every 1-3 months)


@dataclass(frozen=True)
class ImageFacts:
    python: str                 # "3.12"
    cuda: str | None            # "12.8": the CUDA torch is built for
    torch: str | None           # "2.10.0" (without a build label)
    captured: str               # an ISO date, or date and time
    source: str                 # where these facts come from, in words
    kernel: str | None = None   # the kernel whose run recorded them (None: a description)

    @classmethod
    def of_image(cls, image: KaggleImage) -> ImageFacts:
        return cls(image.python, image.cuda, _release(image.torch), image.captured, f"{image.path} ({image.describe()})")

    @classmethod
    def of_capture(cls, data: Mapping[str, Any]) -> ImageFacts:
        """A run's ``kkb_image.json`` as ``builder.project.image_store`` kept it."""
        raw = data.get("packages")
        packages: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        kernel, version, server = data.get("kernel"), data.get("version"), data.get("server")
        where = f"the run of {kernel}" + (f" v{version}" if version is not None else "") + (f" on {server}" if server else "")
        return cls(str(data["python"]), str(data["cuda"]) if data.get("cuda") else None,
                   _release(str(packages["torch"]) if packages.get("torch") else None), str(data.get("captured") or ""),
                   where, str(kernel) if kernel else None)

    @classmethod
    def from_json(cls, data: Any) -> ImageFacts | None:
        """The facts a wheelhouse record keeps (:meth:`to_json`), or None (a wheelhouse from an older kkb)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("python"), str):
            return None
        return cls(str(data["python"]), data.get("cuda"), data.get("torch"), str(data.get("captured") or "unknown"),
                   str(data.get("source") or "unknown"), data.get("kernel"))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def abi(self) -> str:
        return "cp" + self.python.replace(".", "")

    def describe(self) -> str:
        return f"Python {self.python}, CUDA {self.cuda or '-'}, torch {self.torch or '-'}"

    def changes(self, now: ImageFacts) -> list[str]:
        """What moved from these facts to ``now``, in words: the Python ABI, CUDA (major.minor) and torch (its series,
        major.minor: torch keeps its C++ ABI within one). A fact one side does not know is no change."""
        moved = []
        if self.python != now.python:
            moved.append(f"Python ABI {self.abi} → {now.abi}")
        if self.cuda and now.cuda and _series(self.cuda) != _series(now.cuda):
            moved.append(f"CUDA {self.cuda} → {now.cuda}")
        if self.torch and now.torch and _series(self.torch) != _series(now.torch):
            moved.append(f"torch {self.torch} → {now.torch}")
        return moved

    def age_days(self, today: date | None = None) -> int | None:
        try:
            seen = date.fromisoformat(self.captured[:10])
        except ValueError:
            return None
        return ((today or date.today()) - seen).days


def _release(version: str | None) -> str | None:
    """``2.10.0+cu128`` → ``2.10.0``: the build label says CUDA, which is a fact of its own."""
    return version.split("+")[0] if version else None


def _series(version: str) -> tuple[int, ...]:
    try:
        return Version(version).release[:2]
    except InvalidVersion:
        return tuple(int(part) for part in version.split(".")[:2] if part.isdigit())


def described_image() -> ImageFacts:
    """The facts of the image description kkb uses (``$KKB_KAGGLE_IMAGE``, captured, or shipped)."""
    return ImageFacts.of_image(load_image())


def known_images(server: str | None = None) -> list[ImageFacts]:
    """The description kkb uses and every image a run recorded on ``server`` (default: the one kkb talks to)."""
    return [described_image(), *(ImageFacts.of_capture(data) for data in run_captures(server_of(server)))]


def newest(images: list[ImageFacts]) -> ImageFacts:
    """The most recently seen: a run's capture (date and time) wins over a description of the same day."""
    return max(images, key=lambda facts: facts.captured)


def image_for_kernel(kernel_id: str | None, pinned: bool, server: str | None = None) -> ImageFacts:
    """The image a push of ``kernel_id`` will run on (see the module docstring)."""
    images = known_images(server)
    own = [facts for facts in images if kernel_id is not None and facts.kernel == kernel_id]
    return newest(own) if pinned and own else newest(images)


def kernel_image(spec: KernelSpec, owner: str, server: str | None = None) -> ImageFacts:
    """:func:`image_for_kernel` for the kernel ``owner/<slug>`` of ``spec``, pinned as its ``[kernel]`` says."""
    return image_for_kernel(f"{owner}/{spec.kernel.kernel_slug}", spec.kernel.pinned_image, server)


__all__ = ["STALE_AFTER_DAYS", "ImageFacts", "described_image", "image_for_kernel", "kernel_image", "known_images", "newest"]
