"""Generate the tabular-style example: a 3-class table competition, LightGBM folds, a scikit-learn pipeline, a torch net.

    python kernels/tabular-style/make_assets.py [--force] [--out FOLDER]

Shaped like an atmaCup-style table notebook (seeded, offline, CPU, a few seconds):

    data/competition/   competition.toml (metric logloss), answers.csv, public/ (5 rows), hidden/ (200)
                        each split: sample_submission.csv (id, low, mid, high) and test.csv
                        (id, x1..x4, colour)
    weights/            lgbm_fold{0,1,2}.txt (LightGBM boosters, one per fold, on tabkernel.features.make)
                        logreg.joblib (a scikit-learn Pipeline: StandardScaler + LogisticRegression,
                        classes "high", "low", "mid" in sklearn's sorted order, not the columns')
                        net_folds.pt ({fold: state_dict} of tabkernel.net.make_net, one file for the three
                        folds), net_qt_map.pkl (a QuantileTransformer per continuous feature) and
                        net_scaler_map.pkl (a MinMaxScaler per net input): dicts feature → fitted transformer,
                        applied in that order, per column, as an Optiver notebook's loop does

The net trains deterministically (seeded, full-batch Adam, one thread, CPU). The class is the tertile of
x1 * x2 + the colour's offset + noise. Skipped when ``data/.stamp.json``
matches this script, the features and the library versions; ``--force`` regenerates.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # tabkernel, as the kernel imports it from the code dataset

from tabkernel.features import COLOURS, make  # noqa: E402

SEED = 20261202
SLUG = "kkb-tables"
TRAIN_ROWS, PUBLIC_ROWS, HIDDEN_ROWS = 900, 5, 200
FOLDS = 3
CLASSES = ["low", "mid", "high"]
OFFSETS = {"red": -0.6, "green": 0.0, "blue": 0.6}
VERSIONED = ("lightgbm", "scikit-learn", "numpy", "pandas", "torch")
# The net's inputs, in its training order (kernel.toml's feature_columns): not the feature function's order.
NET_COLUMNS = ["x1_x2", "x1", "x2", "x3", "x4", "x3_minus_x4", "colour_red", "colour_green", "colour_blue"]
NET_EPOCHS = 150


def table(count: int, rng: np.random.Generator) -> tuple[pd.DataFrame, np.ndarray]:
    frame = pd.DataFrame({f"x{k}": rng.normal(0, 1, count).round(4) for k in range(1, 5)})
    frame["colour"] = rng.choice(COLOURS, count)
    score = frame["x1"] * frame["x2"] + frame["colour"].map(OFFSETS) + 0.5 * frame["x3"] + rng.normal(0, 0.3, count)
    labels = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3]))
    return frame, labels


def write_split(folder: Path, frame: pd.DataFrame, ids: list[int]) -> None:
    folder.mkdir(parents=True)
    frame.insert(0, "id", ids)
    frame.to_csv(folder / "test.csv", index=False)
    (folder / "sample_submission.csv").write_text("id," + ",".join(CLASSES) + "\n"
                                                  + "".join(f"{i},0.333333,0.333333,0.333334\n" for i in ids))


def write_competition(root: Path, rng: np.random.Generator) -> None:
    public, _ = table(PUBLIC_ROWS, rng)
    hidden, labels = table(HIDDEN_ROWS, rng)
    ids = list(range(100000, 100000 + PUBLIC_ROWS + HIDDEN_ROWS))
    write_split(root / "public", public, ids[:PUBLIC_ROWS])
    write_split(root / "hidden", hidden, ids[PUBLIC_ROWS:])
    onehot = np.eye(len(CLASSES), dtype=int)[labels]
    (root / "answers.csv").write_text("id," + ",".join(CLASSES) + "\n" + "".join(
        f"{i}," + ",".join(map(str, row)) + "\n" for i, row in zip(ids[PUBLIC_ROWS:], onehot, strict=True)))
    (root / "competition.toml").write_text(
        f'slug = "{SLUG}"\ntitle = "kkb tables (tabular-style example)"\nmetric = "logloss"\nid_column = "id"\n'
        f'target_columns = {json.dumps(CLASSES)}\ndaily_submission_limit = 5\ntime_limit_hours = 9\n')


def train(weights: Path, rng: np.random.Generator) -> dict[str, float]:
    import joblib
    import lightgbm as lgb
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    frame, labels = table(TRAIN_ROWS, rng)
    features = make(frame)
    scores = {}
    for fold in range(FOLDS):
        keep = np.arange(len(frame)) % FOLDS != fold
        booster = lgb.train({"objective": "multiclass", "num_class": 3, "learning_rate": 0.1, "num_leaves": 8,
                             "min_data_in_leaf": 10, "seed": SEED + fold, "verbose": -1, "num_threads": 1},
                            lgb.Dataset(features[keep], labels[keep]), num_boost_round=40)
        booster.save_model(str(weights / f"lgbm_fold{fold}.txt"))
        held = booster.predict(features[~keep])
        scores[f"lgbm_fold{fold}"] = float((held.argmax(1) == labels[~keep]).mean())
    named = np.asarray(CLASSES)[labels]  # string classes: sklearn sorts them (high, low, mid)
    pipeline = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(features, named)
    joblib.dump(pipeline, weights / "logreg.joblib")
    scores.update(train_net(weights, features, labels))
    return scores


def net_preprocessors(features: pd.DataFrame) -> tuple[dict[str, object], dict[str, object]]:
    """As an Optiver notebook fits them: a QuantileTransformer per continuous feature, then a MinMaxScaler per net
    input, each a dict feature name → the transformer fitted on that one column (pickled as they are)."""
    from sklearn.preprocessing import MinMaxScaler, QuantileTransformer

    continuous = [column for column in NET_COLUMNS if not column.startswith("colour_")]
    quantiles = {column: QuantileTransformer(n_quantiles=100, output_distribution="normal", random_state=SEED)
                 .fit(features[[column]]) for column in continuous}
    scaled = net_inputs(features, quantiles, {})
    scalers = {column: MinMaxScaler().fit(scaled[[column]]) for column in NET_COLUMNS}
    return quantiles, scalers


def net_inputs(features: pd.DataFrame, *maps: dict[str, object]) -> pd.DataFrame:
    """The notebook's loop: the net's columns, each mapping's transformers applied column by column, in its order."""
    frame = features[NET_COLUMNS].copy()
    for mapping in maps:
        for column, transformer in mapping.items():
            frame[column] = transformer.transform(frame[[column]])[:, 0]  # type: ignore[attr-defined]
    return frame


def train_net(weights: Path, features: pd.DataFrame, labels: np.ndarray) -> dict[str, float]:
    """The torch net's folds on the per-feature transformed NET_COLUMNS, in one {fold: state_dict} file, and the two
    per-feature preprocessors (net_qt_map.pkl, net_scaler_map.pkl)."""
    import pickle

    import torch
    from tabkernel.net import make_net

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    quantiles, scalers = net_preprocessors(features)
    for name, mapping in (("net_qt_map.pkl", quantiles), ("net_scaler_map.pkl", scalers)):
        (weights / name).write_bytes(pickle.dumps(mapping))
    inputs = torch.tensor(net_inputs(features, quantiles, scalers).to_numpy(), dtype=torch.float32)
    targets = torch.tensor(labels, dtype=torch.long)
    folds, scores = {}, {}
    for fold in range(FOLDS):
        keep = torch.from_numpy(np.arange(len(features)) % FOLDS != fold)
        torch.manual_seed(SEED + fold)
        net = make_net(len(NET_COLUMNS))
        optimiser = torch.optim.Adam(net.parameters(), lr=0.03)
        for _ in range(NET_EPOCHS):
            optimiser.zero_grad()
            torch.nn.functional.cross_entropy(net(inputs[keep]), targets[keep]).backward()
            optimiser.step()
        with torch.no_grad():
            held = net.eval()(inputs[~keep]).argmax(1)
        scores[f"net_fold{fold}"] = float((held == targets[~keep]).float().mean())
        folds[fold] = net.state_dict()
    torch.save(folds, weights / "net_folds.pt")
    return scores


def fingerprint() -> str:
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update((HERE / "tabkernel" / "features.py").read_bytes())
    digest.update((HERE / "tabkernel" / "net.py").read_bytes())
    for package in VERSIONED:
        digest.update(f"{package}={metadata.version(package)}".encode())
    return digest.hexdigest()


def generate(out: Path) -> dict[str, float]:
    scratch = out / "data" / f".tmp-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    (scratch / "weights").mkdir(parents=True)
    rng = np.random.default_rng(SEED)
    write_competition(scratch / "competition", rng)
    scores = train(scratch / "weights", rng)
    for part, target in (("competition", out / "data" / "competition"), ("weights", out / "weights")):
        if target.exists():
            shutil.rmtree(target)
        os.replace(scratch / part, target)
    shutil.rmtree(scratch, ignore_errors=True)
    return scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args(argv)
    out = args.out.resolve()
    stamp = out / "data" / ".stamp.json"
    try:
        if not args.force and json.loads(stamp.read_text())["fingerprint"] == fingerprint() and (out / "weights").is_dir():
            print(f"tabular-style assets up to date in {out}")
            return 0
    except (OSError, ValueError, KeyError):
        pass
    started = time.perf_counter()
    (out / "data").mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    scores = generate(out)
    stamp.write_text(json.dumps({"fingerprint": fingerprint(), "oof_accuracy": scores}, indent=1) + "\n")
    print("out-of-fold accuracy: " + ", ".join(f"{name} {value:.2f}" for name, value in scores.items()))
    print(f"tabular-style assets written to {out} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
