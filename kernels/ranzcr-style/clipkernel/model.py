"""The user's own model, as RANZCR CLiP notebooks write it: a timm backbone inside an nn.Module, a custom head.

The kernel's card names ``clipkernel.model:build`` as its factory; kkb calls it with the card's
``model_kwargs`` and loads each fold's checkpoint into what it returns.
"""

from __future__ import annotations

from typing import Any

import timm
import torch
from torch import nn


class ClipNet(nn.Module):
    """ConvNeXt features, global pooling, then dropout and a linear layer per the training script."""

    def __init__(self, backbone: str = "test_convnext", out_dim: int = 11, hidden: int = 32, dropout: float = 0.2) -> None:
        super().__init__()
        # pretrained=False: the kernel has no internet; the fold checkpoints hold every weight.
        self.backbone = timm.create_model(backbone, pretrained=False, num_classes=0, global_pool="")
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Sequential(nn.Linear(self.backbone.num_features, hidden), nn.GELU(), nn.Dropout(dropout),
                                  nn.Linear(hidden, out_dim))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features = self.pool(self.backbone(images)).flatten(1)
        return self.head(features)


def build(**kwargs: Any) -> ClipNet:
    return ClipNet(**kwargs)
