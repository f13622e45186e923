"""Custom albumentations transforms, and the pipelines the reference models train and infer with.

``BorderMask`` is part of the inference pipeline: it is serialised by name
(``refkernel.transforms.BorderMask``) and rebuilt inside the kernel from this module.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")  # no PyPI version check at import (offline kernels)
import albumentations as A
from albumentations.core.transforms_interface import ImageOnlyTransform


class BorderMask(ImageOnlyTransform):
    """Paint a frame of ``width`` pixels with ``fill``: the generator's noise is strongest at the edges."""

    def __init__(self, width: int = 2, fill: int = 0, p: float = 1.0) -> None:
        super().__init__(p=p)
        self.width = width
        self.fill = fill

    def apply(self, img: np.ndarray, **params: Any) -> np.ndarray:
        if self.width <= 0:
            return img
        out = img.copy()
        out[: self.width], out[-self.width :] = self.fill, self.fill
        out[:, : self.width], out[:, -self.width :] = self.fill, self.fill
        return out

    def get_transform_init_args_names(self) -> tuple[str, ...]:
        return ("width", "fill")


class RandomErase(ImageOnlyTransform):
    """Erase one random rectangle (training only), like torchvision's RandomErasing."""

    def __init__(self, max_fraction: float = 0.3, fill: int = 0, p: float = 0.5) -> None:
        super().__init__(p=p)
        self.max_fraction = max_fraction
        self.fill = fill

    def get_params_dependent_on_data(self, params: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
        height, width = params["shape"][:2]
        box_h = max(1, int(height * self.py_random.uniform(0.1, self.max_fraction)))
        box_w = max(1, int(width * self.py_random.uniform(0.1, self.max_fraction)))
        top = self.py_random.randint(0, height - box_h)
        left = self.py_random.randint(0, width - box_w)
        return {"box": (top, left, top + box_h, left + box_w)}

    def apply(self, img: np.ndarray, box: tuple[int, int, int, int] = (0, 0, 0, 0), **params: Any) -> np.ndarray:
        top, left, bottom, right = box
        out = img.copy()
        out[top:bottom, left:right] = self.fill
        return out

    def get_transform_init_args_names(self) -> tuple[str, ...]:
        return ("max_fraction", "fill")


def inference_pipeline(size: int, normalize: tuple[tuple[float, ...], tuple[float, ...]] | None = None) -> A.Compose:
    """What the kernel applies to a test image (kkb appends Normalize from the card when ``normalize`` is None)."""
    steps: list[Any] = [A.Resize(size, size, p=1.0), BorderMask(width=2, fill=0, p=1.0)]
    if normalize is not None:
        steps.append(A.Normalize(mean=normalize[0], std=normalize[1], max_pixel_value=255.0, p=1.0))
    return A.Compose(steps)


def training_pipeline(size: int, seed: int) -> A.Compose:
    """Augmentations, then exactly the inference pipeline (minus Normalize, which training adds from timm's config)."""
    return A.Compose([A.HorizontalFlip(p=0.5), A.VerticalFlip(p=0.5), RandomErase(p=0.3),
                      *inference_pipeline(size).transforms], seed=seed)
