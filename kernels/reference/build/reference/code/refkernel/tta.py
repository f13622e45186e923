"""A user-defined TTA: any ``f(batch NCHW tensor) -> batch`` named in a card as ``refkernel.tta:shift``."""

from __future__ import annotations

from typing import Any


def shift(batch: Any) -> Any:
    """Translate by two pixels (wrapping around): the shapes are placed anywhere in the image."""
    import torch

    return torch.roll(batch, shifts=(2, 2), dims=(-2, -1))
