"""Generate the cassava-style example: a 5-class leaf competition and 2 architectures x 3 folds.

    python kernels/cassava-style/make_assets.py [--force] [--out FOLDER]

Shaped like the Cassava Leaf Disease inference notebooks (seeded, offline, CPU, a few seconds):

    data/competition/   competition.toml, answers.csv, public/ (3 images), hidden/ (40)
                        each split: sample_submission.csv (image_id,label; label 4, an integer)
                        and test_images/<image_id> where the id carries ".jpg"
    weights/            resnet_fold{0,1,2}.pth and effnet_fold{0,1,2}.pth, saved as training
                        scripts save them: {"model": state_dict, "preds": out-of-fold ndarray}
                        tta_random.json: the random TTA augmentations (A.to_dict)

The label is the hue of a leaf-shaped blob on a noisy background: tiny timm models learn it in a
few optimiser steps. Each architecture trains at its own image size (32 and 40 pixels), with timm's
normalisation, as the kernel's cards rebuild it. Skipped when ``data/.stamp.json`` matches this
script and the library versions; ``--force`` regenerates.
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
from PIL import Image, ImageDraw

HERE = Path(__file__).resolve().parent
SEED = 20261130
CLASSES = 5
SIZE = 48
TRAIN_ROWS, PUBLIC_ROWS, HIDDEN_ROWS = 300, 3, 40
FOLDS = 3
STEPS, BATCH, LR = 40, 32, 0.01
SLUG = "kkb-leaves"
# name: (timm architecture, the image size this architecture was trained at)
ARCHS = {"resnet": ("test_resnet", 32), "effnet": ("test_efficientnet", 40)}
HUES = [(200, 60, 40), (60, 200, 40), (40, 60, 200), (200, 200, 40), (200, 40, 200)]
VERSIONED = ("torch", "timm", "albumentations", "numpy", "pillow")


def leaf(label: int, rng: np.random.Generator) -> np.ndarray:
    image = Image.new("RGB", (SIZE, SIZE), tuple(int(v) for v in rng.integers(0, 80, 3)))
    colour = tuple(int(np.clip(c + rng.integers(-30, 30), 0, 255)) for c in HUES[label])
    cx, cy = (float(v) for v in rng.uniform(14, SIZE - 14, 2))
    rx, ry = (float(v) for v in rng.uniform(7, 13, 2))
    ImageDraw.Draw(image).ellipse([cx - rx, cy - ry, cx + rx, cy + ry], fill=colour)
    noisy = np.asarray(image, dtype=np.int16) + rng.normal(0, 15, (SIZE, SIZE, 3)).astype(np.int16)
    return np.clip(noisy, 0, 255).astype(np.uint8)


def images(count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.integers(0, CLASSES, count)
    return np.stack([leaf(int(label), rng) for label in labels]), labels


def unique_numbers(count: int, low: int, high: int, rng: np.random.Generator) -> list[int]:
    found: list[int] = []
    while len(found) < count:
        number = int(rng.integers(low, high))
        if number not in found:
            found.append(number)
    return found


def write_split(folder: Path, pictures: np.ndarray, rng: np.random.Generator) -> list[str]:
    ids = [f"{number}.jpg" for number in unique_numbers(len(pictures), 10**8, 10**9, rng)]
    (folder / "test_images").mkdir(parents=True)
    for image_id, picture in zip(ids, pictures, strict=True):
        Image.fromarray(picture).save(folder / "test_images" / image_id, quality=95)
    (folder / "sample_submission.csv").write_text("image_id,label\n" + "".join(f"{i},4\n" for i in ids))
    return ids


def write_competition(root: Path, rng: np.random.Generator) -> None:
    public, _ = images(PUBLIC_ROWS, rng)
    hidden, labels = images(HIDDEN_ROWS, rng)
    write_split(root / "public", public, rng)
    ids = write_split(root / "hidden", hidden, rng)
    (root / "answers.csv").write_text("image_id,label\n" + "".join(f"{i},{y}\n" for i, y in zip(ids, labels, strict=True)))
    (root / "competition.toml").write_text(
        f'slug = "{SLUG}"\ntitle = "kkb leaves (cassava-style example)"\nmetric = "accuracy"\n'
        'id_column = "image_id"\ntarget_columns = ["label"]\ndaily_submission_limit = 5\ntime_limit_hours = 9\n')


def to_batch(pictures: np.ndarray, size: int, model: Any) -> Any:
    """The kernel's default pipeline: resize to the card's size, timm's mean/std."""
    import torch

    mean, std = (np.asarray(model.pretrained_cfg[key], np.float32) for key in ("mean", "std"))
    resized = np.stack([np.asarray(Image.fromarray(p).resize((size, size), Image.BILINEAR)) for p in pictures])
    out = (resized.astype(np.float32) / 255.0 - mean) / std
    return torch.from_numpy(out.transpose(0, 3, 1, 2).copy())


def train_fold(arch: str, size: int, fold: int, pictures: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    import timm
    import torch

    torch.manual_seed(SEED + fold)
    model = timm.create_model(arch, pretrained=False, num_classes=CLASSES)
    held_out = np.arange(len(pictures)) % FOLDS == fold
    train_x, train_y = pictures[~held_out], labels[~held_out]
    optimiser = torch.optim.AdamW(model.parameters(), lr=LR)
    order = np.random.default_rng(SEED + fold)
    model.train()
    for _ in range(STEPS):
        index = order.integers(0, len(train_x), BATCH)
        loss = torch.nn.functional.cross_entropy(model(to_batch(train_x[index], size, model)),
                                                 torch.from_numpy(train_y[index]).long())
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    model.eval()
    with torch.inference_mode():
        oof = model(to_batch(pictures[held_out], size, model)).softmax(1).numpy()
    return {"model": model.state_dict(), "preds": oof}  # as the Cassava training notebooks save them


def write_tta(folder: Path) -> None:
    import albumentations as A

    pipeline = A.Compose([A.HorizontalFlip(p=0.5), A.VerticalFlip(p=0.5),
                          A.RandomBrightnessContrast(brightness_limit=0.1, contrast_limit=0.1, p=0.5)])
    (folder / "tta_random.json").write_text(json.dumps(A.to_dict(pipeline), indent=1) + "\n")


def fingerprint() -> str:
    digest = hashlib.sha256(Path(__file__).read_bytes())
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
    for name, (arch, size) in ARCHS.items():
        for fold in range(FOLDS):
            checkpoint = train_fold(arch, size, fold, pictures, labels)
            torch.save(checkpoint, scratch / "weights" / f"{name}_fold{fold}.pth")
            truth = labels[np.arange(len(labels)) % FOLDS == fold]
            scores[f"{name}_fold{fold}"] = float((checkpoint["preds"].argmax(1) == truth).mean())
    write_tta(scratch / "weights")
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
            print(f"cassava-style assets up to date in {out}")
            return 0
    except (OSError, ValueError, KeyError):
        pass
    started = time.perf_counter()
    (out / "data").mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    scores = generate(out)
    stamp.write_text(json.dumps({"fingerprint": fingerprint(), "oof_accuracy": scores}, indent=1) + "\n")
    print("out-of-fold accuracy: " + ", ".join(f"{name} {value:.2f}" for name, value in scores.items()))
    print(f"cassava-style assets written to {out} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
