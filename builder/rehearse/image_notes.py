"""What the dry run says about Kaggle's image: how old kkb's description is, a newer image a run recorded, and the
Python the kernel ran on here against the image's (the offline install check is for the image's Python)."""

from __future__ import annotations

import sys
from datetime import date

from builder.project.image_facts import STALE_AFTER_DAYS, described_image, kernel_image
from builder.project.spec import KernelSpec


def image_notes(spec: KernelSpec, owner: str, today: date | None = None) -> tuple[str, ...]:
    """One line per thing worth knowing about the image the kernel's push gets (none when all is current)."""
    described = described_image()
    image = kernel_image(spec, owner)
    notes = []
    age = described.age_days(today)
    if age is not None and age > STALE_AFTER_DAYS:
        notes.append(f"kkb's image description is {age} days old (as of {described.captured[:10]}; {described.source}), "
                     f"over {STALE_AFTER_DAYS}: Kaggle's image moves every 1-3 months; capture it with kkb image --on-kaggle "
                     "or refresh it with kkb image --refresh DOCKER_PYTHON")
    changes = described.changes(image)
    if image.kernel is not None and changes:
        notes.append(f"{image.source} recorded {image.describe()} on {image.captured[:10]}, newer than kkb's description "
                     f"({described.describe()}: {'; '.join(changes)}): the dry run checks packages against the description")
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"  # the kernel's Python here (kkb env's venv is over this one)
    if here != image.python:
        notes.append(f"the kernel ran on Python {here} here; Kaggle's image has Python {image.python}: the wheelhouse is "
                     f"checked for {image.abi}, code or packages only one of them accepts is not rehearsed")
    return tuple(notes)


__all__ = ["image_notes"]
