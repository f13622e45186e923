"""``kernels/tabular-style``'s models run by hand, as its original notebook runs them: the LightGBM folds averaged, and
the torch net over its columns after the notebook's loop (a QuantileTransformer per feature, then a MinMaxScaler per
feature), its folds averaged. What a dry run of the example (or of a port of it) must equal."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np
import pandas as pd


def tabular_style_assets() -> Path:
    """``kernels/tabular-style`` with its generated assets (skipped without lightgbm or torch)."""
    import pytest

    from tests.support.assets import make_assets
    from tests.support.files import KERNELS

    pytest.importorskip("lightgbm")
    pytest.importorskip("torch")
    made = make_assets(KERNELS / "tabular-style")
    assert made.returncode == 0, made.stdout + made.stderr
    return KERNELS / "tabular-style"


NET_COLUMNS = ["x1_x2", "x1", "x2", "x3", "x4", "x3_minus_x4", "colour_red", "colour_green", "colour_blue"]


def features_by_hand(kernel: Path, table: pd.DataFrame) -> pd.DataFrame:
    sys.path.insert(0, str(kernel))
    try:
        from tabkernel.features import make  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(kernel))
    return make(table)


def lgbm_by_hand(kernel: Path, features: pd.DataFrame) -> np.ndarray:
    import lightgbm as lgb

    boosters = [lgb.Booster(model_file=str(path)) for path in sorted((kernel / "weights").glob("lgbm_fold*.txt"))]
    return np.mean([booster.predict(features) for booster in boosters], axis=0)


def net_by_hand(kernel: Path, features: pd.DataFrame) -> np.ndarray:
    """The notebook's loop over its two pickled dicts, then the net's folds (softmax), averaged."""
    import torch

    sys.path.insert(0, str(kernel))
    try:
        from tabkernel.net import make_net  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(kernel))
    frame = features[NET_COLUMNS].copy()
    for name in ("net_qt_map.pkl", "net_scaler_map.pkl"):
        for column, transformer in pickle.loads((kernel / "weights" / name).read_bytes()).items():
            frame[column] = transformer.transform(frame[[column]])[:, 0]
    inputs = torch.tensor(frame.to_numpy(), dtype=torch.float32)
    nets = []
    for state in torch.load(kernel / "weights" / "net_folds.pt", weights_only=True).values():
        net = make_net(len(NET_COLUMNS))
        net.load_state_dict(state)
        with torch.no_grad():
            nets.append(torch.softmax(net.eval()(inputs), dim=1).numpy())
    return np.mean(nets, axis=0)


__all__ = ["NET_COLUMNS", "features_by_hand", "lgbm_by_hand", "net_by_hand", "tabular_style_assets"]
