"""The small net trained next to the boosters: the features (scaled) in, three class logits out."""

from __future__ import annotations

from torch import nn


def make_net(n_features: int = 9, hidden: int = 16, num_classes: int = 3) -> nn.Module:
    return nn.Sequential(nn.Linear(n_features, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))
