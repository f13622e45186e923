"""Generate the ranzcr-style example: an 11-label competition and 3 folds of a user model.

    python kernels/ranzcr-style/make_assets.py [--force] [--out FOLDER]

Shaped like the RANZCR CLiP inference notebooks (seeded, offline, CPU, a few seconds):

    data/competition/   competition.toml, answers.csv, public/ (3 images), hidden/ (40)
                        each split: sample_submission.csv (StudyInstanceUID + 11 label columns
                        holding integer 0s, as RANZCR's does, though probabilities are scored)
                        and test/<StudyInstanceUID>.jpg, the ids dotted UIDs
    weights/            fold{0,1,2}.pth as the training script saves them: {"model": state_dict
                        of DataParallel ("module."), "optimizer": ..., "scheduler": ..., "epoch": int,
                        "best_auc": numpy float64, "val_preds": ndarray}

The model is ``clipkernel.model.ClipNet`` (a timm ConvNeXt backbone, a head of its own); label k
is the presence of a bright mark in cell k of a grid, so a tiny model learns it in a few steps.
Skipped when ``data/.stamp.json`` matches this script, the model code and the library versions.
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
from typing import Any

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # clipkernel, as the kernel imports it from the code dataset

SEED = 20261131
LABELS = ["ETT - Abnormal", "ETT - Borderline", "ETT - Normal", "NGT - Abnormal", "NGT - Borderline",
          "NGT - Incompletely Imaged", "NGT - Normal", "CVC - Abnormal", "CVC - Borderline", "CVC - Normal",
          "Swan Ganz Catheter Present"]
SIZE, CELL = 48, 12  # a 4x4 grid of 12-pixel cells; the first 11 carry a label
TRAIN_ROWS, PUBLIC_ROWS, HIDDEN_ROWS = 300, 3, 40
FOLDS, STEPS, BATCH, LR = 3, 40, 32, 0.01
INPUT = 32
SLUG = "kkb-clip"
VERSIONED = ("torch", "timm", "albumentations", "numpy", "pillow")


def xray(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    image = rng.normal(60, 20, (SIZE, SIZE)).clip(0, 255)
    for k in np.flatnonzero(labels):
        top, left = divmod(int(k), 4)
        y, x = top * CELL + int(rng.integers(2, 5)), left * CELL + int(rng.integers(2, 5))
        image[y:y + 6, x:x + 6] += 140
    return np.repeat(image.clip(0, 255).astype(np.uint8)[:, :, None], 3, axis=2)


def images(count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    labels = (rng.random((count, len(LABELS))) < 0.3).astype(np.int64)
    return np.stack([xray(row, rng) for row in labels]), labels


def unique_numbers(count: int, low: int, high: int, rng: np.random.Generator) -> list[int]:
    found: list[int] = []
    while len(found) < count:
        number = int(rng.integers(low, high))
        if number not in found:
            found.append(number)
    return found


def write_split(folder: Path, pictures: np.ndarray, rng: np.random.Generator) -> list[str]:
    ids = [f"1.2.826.0.1.3680043.8.498.{int(n)}" for n in unique_numbers(len(pictures), 10**11, 10**12, rng)]
    (folder / "test").mkdir(parents=True)
    for uid, picture in zip(ids, pictures, strict=True):
        Image.fromarray(picture).save(folder / "test" / f"{uid}.jpg", quality=95)
    header = "StudyInstanceUID," + ",".join(LABELS) + "\n"
    (folder / "sample_submission.csv").write_text(header + "".join(f"{uid}," + ",".join(["0"] * len(LABELS)) + "\n"
                                                                    for uid in ids))
    return ids


def write_competition(root: Path, rng: np.random.Generator) -> None:
    public, _ = images(PUBLIC_ROWS, rng)
    hidden, labels = images(HIDDEN_ROWS, rng)
    write_split(root / "public", public, rng)
    ids = write_split(root / "hidden", hidden, rng)
    (root / "answers.csv").write_text("StudyInstanceUID," + ",".join(LABELS) + "\n" + "".join(
        f"{uid}," + ",".join(str(int(v)) for v in row) + "\n" for uid, row in zip(ids, labels, strict=True)))
    (root / "competition.toml").write_text(
        f'slug = "{SLUG}"\ntitle = "kkb clip (ranzcr-style example)"\nmetric = "auc"\n'
        f'id_column = "StudyInstanceUID"\ntarget_columns = {json.dumps(LABELS)}\n'
        'column_types = { "*" = "float" }\n'  # the sample's 0s are placeholders: probabilities are scored
        "daily_submission_limit = 5\ntime_limit_hours = 9\n")


def to_batch(pictures: np.ndarray, model: Any) -> Any:
    import torch

    cfg = model.backbone.pretrained_cfg
    mean, std = (np.asarray(cfg[key], np.float32) for key in ("mean", "std"))
    resized = np.stack([np.asarray(Image.fromarray(p).resize((INPUT, INPUT), Image.BILINEAR)) for p in pictures])
    return torch.from_numpy(((resized.astype(np.float32) / 255.0 - mean) / std).transpose(0, 3, 1, 2).copy())


def train_fold(fold: int, pictures: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    import torch
    from clipkernel.model import ClipNet

    torch.manual_seed(SEED + fold)
    model = ClipNet(out_dim=len(LABELS))
    held_out = np.arange(len(pictures)) % FOLDS == fold
    x, y = pictures[~held_out], labels[~held_out]
    optimiser = torch.optim.AdamW(model.parameters(), lr=LR)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, T_max=STEPS)
    order = np.random.default_rng(SEED + fold)
    model.train()
    for _ in range(STEPS):
        index = order.integers(0, len(x), BATCH)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(to_batch(x[index], model)),
                                                                    torch.from_numpy(y[index]).float())
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        scheduler.step()
    model.eval()
    with torch.inference_mode():
        preds = model(to_batch(pictures[held_out], model)).sigmoid().numpy()
    auc = float(np.mean([_auc(labels[held_out][:, j], preds[:, j]) for j in range(len(LABELS))]))
    return {"model": {f"module.{k}": v for k, v in model.state_dict().items()},  # trained under DataParallel
            "optimizer": optimiser.state_dict(), "scheduler": scheduler.state_dict(), "epoch": STEPS,
            "best_auc": np.float64(auc), "val_preds": preds}


def _auc(truth: np.ndarray, scores: np.ndarray) -> float:
    positive = truth == 1
    if positive.all() or not positive.any():
        return 0.5
    ranks = scores.argsort().argsort() + 1.0
    return float((ranks[positive].sum() - positive.sum() * (positive.sum() + 1) / 2) / (positive.sum() * (~positive).sum()))


def fingerprint() -> str:
    digest = hashlib.sha256(Path(__file__).read_bytes() + (HERE / "clipkernel" / "model.py").read_bytes())
    for package in VERSIONED:
        digest.update(f"{package}={metadata.version(package)}".encode())
    return digest.hexdigest()


def generate(out: Path) -> dict[str, float]:
    import torch

    torch.set_num_threads(min(4, os.cpu_count() or 1))
    scratch = out / "data" / f".tmp-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    (scratch / "weights").mkdir(parents=True)
    rng = np.random.default_rng(SEED)
    write_competition(scratch / "competition", rng)
    pictures, labels = images(TRAIN_ROWS, rng)
    scores = {}
    for fold in range(FOLDS):
        checkpoint = train_fold(fold, pictures, labels)
        torch.save(checkpoint, scratch / "weights" / f"fold{fold}.pth")
        scores[f"fold{fold}"] = float(checkpoint["best_auc"])
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
            print(f"ranzcr-style assets up to date in {out}")
            return 0
    except (OSError, ValueError, KeyError):
        pass
    started = time.perf_counter()
    (out / "data").mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    scores = generate(out)
    stamp.write_text(json.dumps({"fingerprint": fingerprint(), "oof_auc": scores}, indent=1) + "\n")
    print("out-of-fold AUC: " + ", ".join(f"{name} {value:.3f}" for name, value in scores.items()))
    print(f"ranzcr-style assets written to {out} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
