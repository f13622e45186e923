"""Bench 5: images/s of the runtime's batch predict against a plain per-image loop (and, on CUDA, the ceiling).

The reference kernel is built once (its normalised checkpoints and model cards, ``kkb_kernel.json``);
the images are its hidden test (300 PNGs, 48x48), cycled to ``images``. For each model card, with TTA
off, each repetition runs side by side:

* the runtime's batch predict: ``kkb_runtime.cards.image.predict.run_model`` (the card's DataLoader: batch size
  and workers; on CUDA also AMP fp16 and channels_last, which the runtime enables only there), model
  loading included;
* a plain per-image loop over the same model and images: load the model the same way, then for each
  image read it, apply the same albumentations pipeline, forward a batch of one, softmax;
* on CUDA only, the ceiling: the model's forward alone on synthetic tensors already on the device
  (same AMP and memory format as the runtime, batches of the card's size), no data loading at all;
* on every device, the decoded ceiling: the same images decoded and transformed beforehand, held in
  memory as batches of the card's size, and only the forward pass (and activation) timed: what the
  runtime would reach if decoding, transforms and loading cost nothing (runtime / ceiling, goal 0.8x);
* the fold case: N folds of one card (the same checkpoint N times) as one ``kkb_runtime predict``
  process, against N processes of one fold each, as N cards and N steps would run them; both are
  subprocesses with the kernel's environment, interpreter and torch import included.

Images/s is images / wall seconds of the whole call, so the model load (the same for both) is inside.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.common import Row
from bench.reference import OWNER, copy_reference, ensure_assets
from builder.build import BuildSettings, build_kernel


def _seconds(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _model(card: Any, built: Any, weights: Path) -> Any:
    """The card's network with its first fold, on the CPU, as the runtime loads it."""
    from builder.kkb_runtime.cards.common import models
    from builder.kkb_runtime.cards.image.predict import create_model

    return models.load_weights(create_model(card), card, weights, built.checkpoint, built.checkpoint_key)


def per_image_loop(card: Any, built: Any, weights: Path, paths: list[Path], target: Any) -> Any:
    """What one writes without a runtime: one image at a time through the same model and pipeline."""
    import numpy as np
    import torch

    from builder.kkb_runtime.cards.image import transforms
    from builder.kkb_runtime.cards.image.predict import read_image

    model = _model(card, built, weights).to(target)
    pipeline = transforms.card_pipeline(built)
    outputs = []
    with torch.inference_mode():
        for path in paths:
            image = pipeline(image=read_image(path, card.in_chans))["image"]
            tensor = torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1), dtype=np.float32))[None].to(target)
            outputs.append(torch.softmax(model(tensor).float(), dim=1).cpu().numpy())
    return np.concatenate(outputs)


def forward_ceiling(card: Any, built: Any, weights: Path, target: Any, batches: int) -> tuple[int, float]:
    """CUDA only: the forward pass alone on synthetic on-device batches (AMP fp16, channels_last as the runtime)."""
    import torch

    from builder.kkb_runtime.cards.image.predict import has_convolutions

    model = _model(card, built, weights)
    channels_last = has_convolutions(model)
    model = model.to(target, memory_format=torch.channels_last) if channels_last else model.to(target)
    height, width = built.input_size
    batch = torch.randn(card.batch_size, card.in_chans, int(height), int(width), device=target)
    if channels_last:
        batch = batch.contiguous(memory_format=torch.channels_last)
    with torch.inference_mode(), torch.autocast(device_type="cuda", dtype=torch.float16):
        for _ in range(5):
            model(batch)
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(batches):
            model(batch)
        torch.cuda.synchronize()
    return batch.shape[0] * batches, time.perf_counter() - started


def decoded_ceiling(card: Any, built: Any, weights: Path, paths: list[Path], choice: Any) -> tuple[int, float]:
    """The forward pass alone (activation included) on batches decoded and transformed beforehand, in memory.

    The model is the runtime's (``prepare_model``/``make_forward``: AMP and channels_last where the
    runtime uses them), so the only difference from ``run_model`` is the data pipeline and the load.
    """
    import torch

    from builder.kkb_runtime.cards.common import device as devices
    from builder.kkb_runtime.cards.image import transforms
    from builder.kkb_runtime.cards.image.predict import ImageDataset, make_forward, prepare_model

    target = devices.torch_device(choice)
    dataset = ImageDataset(paths, transforms.card_pipeline(built), card.in_chans)
    size = card.batch_size
    decoded = torch.stack([dataset[index] for index in range(len(dataset))])
    batches = [decoded[start:start + size].to(target) for start in range(0, len(decoded), size)]
    model, channels_last = prepare_model(card, built, weights, choice, target, built.checkpoint)
    forward = make_forward(model, card, choice, channels_last)
    with torch.inference_mode():
        forward(batches[0])  # warm-up: first-call allocations are not the steady state
        if choice.kind == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        for batch in batches:
            forward(batch).cpu()
        if choice.kind == "cuda":
            torch.cuda.synchronize()
    return len(decoded), time.perf_counter() - started


def fold_processes(build: Any, competition: Path, card: Any, folds: int, rows: int, tmp: Path) -> tuple[float, float]:
    """(one process with N folds, N processes of one fold): seconds, each a ``kkb_runtime predict`` subprocess."""
    from builder.kkb_runtime.config import config_text
    from builder.kkb_runtime.config_reader import load_config

    config = load_config(build.code_dir)
    built = replace(card.built, checkpoints=(card.built.checkpoints[0],) * folds)
    folded = replace(card, card=replace(card.card, name="folds", fold_weights=None), built=built)
    config_path = tmp / "kkb_kernel_folds.json"
    config_path.write_text(config_text(replace(config, models=(*config.models, folded))))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAGGLE_", "KKB_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(build.code_dir), env.get("PYTHONPATH", "")]),
               KKB_KERNEL_CONFIG=str(config_path), KKB_WEIGHTS_DIR=str(build.weights_dir),
               KKB_COMPETITION_DIR=str(competition), KKB_ROW_LIMIT=str(rows))

    def predict(model: str) -> None:
        subprocess.run([sys.executable, "-m", "kkb_runtime", "predict", "--model", model, "--out", str(tmp / f"{model}.csv")],
                       env=env, cwd=tmp, check=True, stdout=subprocess.DEVNULL, timeout=1800)

    one = _seconds(lambda: predict("folds"))
    many = _seconds(lambda: [predict(card.name) for _ in range(folds)])
    return one, many


QUICK = {"images": 128, "repeat": 1, "warmup": 0, "models": ("effnet",), "folds": 3}


def run(images: int = 1200, repeat: int = 3, warmup: int = 1, models: tuple[str, ...] = ("effnet", "resnet"),
        folds: int = 5) -> list[Row]:
    import torch

    from builder.kkb_runtime.cards.common import device as devices
    from builder.kkb_runtime.cards.image.predict import Job, run_model
    from builder.kkb_runtime.config_reader import load_config

    ensure_assets()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="kkb-bench-inference-") as tmp:
        kernel = copy_reference(Path(tmp) / "reference")
        build = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=Path(tmp) / "build", owner=OWNER))
        sys.path.insert(0, str(build.code_dir))  # the card's custom transforms (refkernel.*), as in the kernel
        try:
            config = load_config(build.code_dir)
            test = sorted((kernel / "data" / "competition" / "hidden" / "test").glob("*.png"))
            paths = [test[index % len(test)] for index in range(images)]
            choice = devices.choose_device({})
            target = devices.torch_device(choice)
            for name in models:
                entry = config.model(name)
                card, built = replace(entry.card, tta=()), entry.built  # TTA off: one view, as the per-image loop
                job = Job(card, built, [p.stem for p in paths], paths, "id",  # type: ignore[arg-type]
                          list(config.submission.target_columns), build.weights_dir, Path(tmp) / f"{name}.csv")
                batch_s, loop_s = [], []
                for _ in range(warmup + repeat):  # interleaved, so drift hits both alike
                    batch_s.append(_seconds(lambda: run_model(job, choice)))
                    loop_s.append(_seconds(lambda: per_image_loop(card, built, build.weights_dir, paths, target)))
                batch, loop = statistics.median(batch_s[warmup:]), statistics.median(loop_s[warmup:])
                detail = {"images": images, "repeat": repeat, "device": choice.kind, "arch": card.arch,
                          "batch_size": card.batch_size, "num_workers": card.num_workers,
                          "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
                          "amp_channels_last": choice.kind == "cuda",
                          "batch_s": batch_s[warmup:], "loop_s": loop_s[warmup:]}
                rows.append(Row("inference", f"{name} ({choice.kind}): batch predict", images / batch, "/s",
                                "per-image loop", images / loop, loop / batch, "> 1x", detail))
                done, seconds = decoded_ceiling(card, built, build.weights_dir, paths, choice)
                rows.append(Row("inference", f"{name} ({choice.kind}): batch predict vs decoded ceiling", images / batch,
                                "/s", "forward only, pre-decoded", done / seconds, (images / batch) / (done / seconds),
                                ">= 0.8x", {"images": done, "seconds": seconds, "note": "runtime time includes the model load"}))
                if choice.kind == "cuda":
                    done, seconds = forward_ceiling(card, built, build.weights_dir, target, batches=max(20, images // 64))
                    ceiling = done / seconds
                    rows.append(Row("inference", f"{name} (cuda): batch predict vs ceiling", images / batch, "/s",
                                    "forward only, on device", ceiling, (images / batch) / ceiling, "close to 1x",
                                    {"images": done, "seconds": seconds, "gpu": torch.cuda.get_device_name(0)}))
                else:
                    rows.append(Row("inference", f"{name}: vs forward ceiling (CUDA)", None, "/s", "", None, None,
                                    f"skipped: no CUDA here ({choice.reason})", {"device": choice.kind}))
            if folds > 1:
                first = config.model(models[0])
                competition = kernel / "data" / "competition" / "hidden"
                rows_limit = min(images, len(test))
                one_s, many_s = [], []
                for _ in range(warmup + repeat):
                    one, many = fold_processes(build, competition, first, folds, rows_limit, Path(tmp))
                    one_s.append(one)
                    many_s.append(many)
                one, many = statistics.median(one_s[warmup:]), statistics.median(many_s[warmup:])
                rows.append(Row("inference", f"{models[0]}: {folds} folds, one process", one, " s",
                                f"{folds} processes", many, many / one, "> 1x (less time)",
                                {"folds": folds, "images": rows_limit, "one_s": one_s[warmup:], "many_s": many_s[warmup:]}))
        finally:
            sys.path.remove(str(build.code_dir))
    return rows
