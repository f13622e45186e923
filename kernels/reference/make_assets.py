"""Generate the reference kernel's competition and weights: deterministic, seeded, offline, CPU.

    python kernels/reference/make_assets.py [--force] [--out FOLDER]

Writes, under FOLDER (default: this kernel's folder):

    data/competition/   competition.toml, answers.csv, public/ (8 test images), hidden/ (300)
    weights/            effnet.pth, resnet.pth (training-style checkpoints), *_transforms.json

The competition: 48x48 images of a coloured shape (circle, square, triangle, cross) on a noisy
background; predict the probability of each shape; scored by multi-class log loss. Two tiny timm
models (random init, no download) are trained for a few seconds each, through the same
albumentations pipeline the kernel applies (custom ``BorderMask`` included).

Nothing is redone when the outputs exist and ``data/.stamp.json`` matches this script, the
``refkernel`` sources and the library versions; ``--force`` regenerates.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import fcntl
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")
os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np
from PIL import Image, ImageDraw

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # refkernel, as the kernel imports it from the code dataset

SEED = 20260607
CLASSES = ("circle", "square", "triangle", "cross")
SIZE = 48
TRAIN_ROWS, PUBLIC_ROWS, HIDDEN_ROWS = 1600, 8, 300
SLUG = "kkb-shapes"
MODELS: dict[str, dict[str, Any]] = {
    # name: architecture, optimiser steps, peak learning rate, whether the pipeline carries its own
    # Normalize, and how the checkpoint is saved (see save_weights)
    "effnet": {"arch": "test_efficientnet", "steps": 120, "lr": 0.01, "own_normalize": True, "style": "ddp"},
    "resnet": {"arch": "test_resnet", "steps": 120, "lr": 0.01, "own_normalize": False, "style": "compiled+ema"},
}
BATCH = 64
VERSIONED = ("torch", "timm", "albumentations", "numpy", "pillow")


# --- images -------------------------------------------------------------------------------------

def draw_shape(label: int, rng: np.random.Generator) -> np.ndarray:
    """One 48x48 RGB image of class ``label``: random colours, size, position and noise."""
    image = Image.new("RGB", (SIZE, SIZE), tuple(int(v) for v in rng.integers(0, 90, 3)))
    draw = ImageDraw.Draw(image)
    colour = tuple(int(v) for v in rng.integers(110, 256, 3))
    radius = float(rng.uniform(7, 15))
    cx, cy = (float(v) for v in rng.uniform(radius + 3, SIZE - radius - 3, 2))
    if label == 0:
        draw.ellipse([cx - radius, cy - radius, cx + radius, cy + radius], fill=colour)
    elif label == 1:
        side = radius * 0.85
        draw.rectangle([cx - side, cy - side, cx + side, cy + side], fill=colour)
    elif label == 2:
        draw.polygon([(cx, cy - radius), (cx - radius * 0.95, cy + radius * 0.8), (cx + radius * 0.95, cy + radius * 0.8)], fill=colour)
    else:
        arm = radius * 0.35
        draw.rectangle([cx - radius, cy - arm, cx + radius, cy + arm], fill=colour)
        draw.rectangle([cx - arm, cy - radius, cx + arm, cy + radius], fill=colour)
    noisy = np.asarray(image, dtype=np.int16) + rng.normal(0, 18, (SIZE, SIZE, 3)).astype(np.int16)
    return np.clip(noisy, 0, 255).astype(np.uint8)


def make_images(count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.integers(0, len(CLASSES), count)
    return np.stack([draw_shape(int(label), rng) for label in labels]), labels


def write_split(folder: Path, prefix: str, images: np.ndarray) -> list[str]:
    """``test/<id>.png`` and a sample submission with uniform probabilities."""
    ids = [f"{prefix}{index:04d}" for index in range(len(images))]
    (folder / "test").mkdir(parents=True)
    for image_id, image in zip(ids, images, strict=True):
        Image.fromarray(image).save(folder / "test" / f"{image_id}.png", optimize=False)
    rows = "".join(f"{image_id}," + ",".join(["0.25"] * len(CLASSES)) + "\n" for image_id in ids)
    (folder / "sample_submission.csv").write_text("id," + ",".join(CLASSES) + "\n" + rows)
    return ids


def write_competition(root: Path, rng: np.random.Generator) -> None:
    public, _ = make_images(PUBLIC_ROWS, rng)
    hidden, hidden_labels = make_images(HIDDEN_ROWS, rng)
    write_split(root / "public", "p", public)
    ids = write_split(root / "hidden", "h", hidden)
    answers = "".join(f"{i}," + ",".join("1" if c == y else "0" for c in range(len(CLASSES))) + "\n"
                      for i, y in zip(ids, hidden_labels, strict=True))
    (root / "answers.csv").write_text("id," + ",".join(CLASSES) + "\n" + answers)
    (root / "competition.toml").write_text(
        f'slug = "{SLUG}"\ntitle = "kkb shapes (reference competition)"\nmetric = "logloss"\n'
        f'id_column = "id"\ntarget_columns = {json.dumps(list(CLASSES))}\n'
        "daily_submission_limit = 5\ntime_limit_hours = 9\n"
    )


# --- training -----------------------------------------------------------------------------------

def normalisation(model: Any) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """timm's pretrained config: the same source kkb records in the card at build time."""
    return tuple(model.pretrained_cfg["mean"]), tuple(model.pretrained_cfg["std"])


def batch_tensor(images: np.ndarray, pipeline: Any, mean: Any, std: Any) -> Any:
    import torch

    out = np.stack([pipeline(image=image)["image"] for image in images]).astype(np.float32) / 255.0
    out = (out - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    return torch.from_numpy(out.transpose(0, 3, 1, 2).copy())


def train(name: str, images: np.ndarray, labels: np.ndarray) -> tuple[Any, Any, Any]:
    """Train one model from scratch; returns (model, EMA copy, optimiser)."""
    import timm
    import torch
    from refkernel.transforms import training_pipeline

    settings = MODELS[name]
    torch.manual_seed(SEED)
    model = timm.create_model(settings["arch"], pretrained=False, num_classes=len(CLASSES))
    ema = copy.deepcopy(model).eval()
    mean, std = normalisation(model)
    pipeline = training_pipeline(SIZE, seed=SEED)
    optimiser = torch.optim.AdamW(model.parameters(), lr=settings["lr"], weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=settings["lr"], total_steps=settings["steps"])
    order = np.random.default_rng(SEED)
    model.train()
    for _ in range(settings["steps"]):
        index = order.integers(0, len(images), BATCH)
        loss = torch.nn.functional.cross_entropy(model(batch_tensor(images[index], pipeline, mean, std)),
                                                 torch.from_numpy(labels[index]).long())
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        update_ema(ema, model, decay=0.9)
    return model.eval(), ema, optimiser


def update_ema(ema: Any, model: Any, decay: float) -> None:
    import torch

    with torch.no_grad():
        for averaged, current in zip(ema.state_dict().values(), model.state_dict().values(), strict=True):
            if averaged.is_floating_point():
                averaged.mul_(decay).add_(current, alpha=1 - decay)
            else:
                averaged.copy_(current)


def evaluate(model: Any, images: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Hidden-set accuracy and log loss without TTA: the score the kernel should at least match."""
    import torch
    from refkernel.transforms import inference_pipeline

    mean, std = normalisation(model)
    with torch.inference_mode():
        probs = model(batch_tensor(images, inference_pipeline(SIZE), mean, std)).softmax(1).numpy()
    picked = np.clip(probs[np.arange(len(labels)), labels], 1e-15, 1.0)
    return {"accuracy": float((probs.argmax(1) == labels).mean()), "logloss": float(-np.log(picked).mean())}


# --- checkpoints --------------------------------------------------------------------------------

def save_weights(folder: Path, name: str, model: Any, ema: Any, optimiser: Any) -> None:
    """Save as training scripts do, so kkb's normalisation has real work to do."""
    import torch
    from refkernel.transforms import inference_pipeline

    if MODELS[name]["style"] == "ddp":
        # DataParallel/DDP style: every key under "module.", next to the optimiser state and the epoch.
        state = {f"module.{key}": value for key, value in model.state_dict().items()}
        torch.save({"epoch": 3, "arch": MODELS[name]["arch"], "state_dict": state, "optimizer": optimiser.state_dict()},
                   folder / f"{name}.pth")
    else:
        # torch.compile'd training with an EMA (timm's order picks "model_ema" first).
        torch.save({"epoch": 3, "model": {f"_orig_mod.{k}": v for k, v in model.state_dict().items()},
                    "model_ema": {f"module.{k}": v for k, v in ema.state_dict().items()}}, folder / f"{name}.pth")
    normalize = normalisation(model) if MODELS[name]["own_normalize"] else None
    pipeline = inference_pipeline(SIZE, normalize)
    (folder / f"{name}_transforms.json").write_text(json.dumps(pipeline.to_dict(), indent=1) + "\n")


# --- up to date? --------------------------------------------------------------------------------

def fingerprint() -> str:
    """This script, the refkernel sources and the library versions: what the outputs depend on."""
    digest = hashlib.sha256()
    for path in [Path(__file__).resolve(), *sorted((HERE / "refkernel").glob("*.py"))]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    for package in VERSIONED:
        digest.update(f"{package}={metadata.version(package)}".encode())
    return digest.hexdigest()


def expected_outputs(out: Path) -> list[Path]:
    competition = out / "data" / "competition"
    files = [competition / "competition.toml", competition / "answers.csv",
             competition / "public" / "sample_submission.csv", competition / "hidden" / "sample_submission.csv"]
    for name in MODELS:
        files += [out / "weights" / f"{name}.pth", out / "weights" / f"{name}_transforms.json"]
    return files


def up_to_date(out: Path) -> bool:
    stamp = out / "data" / ".stamp.json"
    try:
        recorded = json.loads(stamp.read_text())["fingerprint"]
    except (OSError, ValueError, KeyError):
        return False
    return recorded == fingerprint() and all(path.is_file() for path in expected_outputs(out))


@contextlib.contextmanager
def locked(out: Path) -> Iterator[None]:
    """One generator at a time (parallel test sessions share these folders)."""
    (out / "data").mkdir(parents=True, exist_ok=True)
    with open(out / "data" / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --- main ---------------------------------------------------------------------------------------

def generate(out: Path) -> dict[str, Any]:
    """Build everything in a scratch folder, then move it into place: readers never see half of it."""
    import torch

    torch.set_num_threads(min(4, os.cpu_count() or 1))
    scratch = out / "data" / f".tmp-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    (scratch / "weights").mkdir(parents=True)
    rng = np.random.default_rng(SEED)
    write_competition(scratch / "competition", rng)
    images, labels = make_images(TRAIN_ROWS, rng)
    hidden = np.stack([np.asarray(Image.open(p).convert("RGB")) for p in sorted((scratch / "competition/hidden/test").glob("*.png"))])
    answers = np.loadtxt(scratch / "competition" / "answers.csv", delimiter=",", skiprows=1, usecols=range(1, 5)).argmax(1)
    scores = {}
    for name, settings in MODELS.items():
        model, ema, optimiser = train(name, images, labels)
        save_weights(scratch / "weights", name, model, ema, optimiser)
        kept = model if settings["style"] == "ddp" else ema  # what kkb will pick from the checkpoint
        scores[name] = evaluate(kept, hidden, answers)
    for part, target in (("competition", out / "data" / "competition"), ("weights", out / "weights")):
        if target.exists():  # rename, then swap: the window without a folder is two renames long
            os.replace(target, scratch / f"old-{part}")
        os.replace(scratch / part, target)
    shutil.rmtree(scratch, ignore_errors=True)
    return scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="regenerate even when the outputs are up to date")
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write data/ and weights/ into")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    with locked(out):
        if not args.force and up_to_date(out):
            print(f"reference assets up to date in {out}")
            return 0
        started = time.perf_counter()
        (out / "data" / ".stamp.json").unlink(missing_ok=True)
        scores = generate(out)
        (out / "data" / ".stamp.json").write_text(json.dumps({"fingerprint": fingerprint(), "scores": scores}, indent=1) + "\n")
    for name, score in scores.items():
        print(f"{name}: hidden accuracy {score['accuracy']:.3f}, log loss {score['logloss']:.4f} (no TTA)")
    print(f"reference assets written to {out} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
