"""Batch inference for one model card: the body of ``python -m kkb_runtime predict``.

The test ids come from the competition's sample submission. Each id is found in the competition's
test folder (nested folders included) as ``<id>.<ext>``, as the file name itself when the id carries
its extension (``abc.jpg``), or as a relative path; or ``[competition] test`` names a CSV with the
id column and a column of file paths (relative to the CSV's folder). The output is a CSV of the id
column and one column per prediction column (the targets unless ``[submission] prediction_columns``
says otherwise; per feature for a ``features = true`` card), which the notebook combines.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ... import timing
from ...card import weighted_folds
from ...config import KernelConfig
from ...steps import write_step_meta
from ...submission import read_sample, write_submission
from ..common import device as devices
from ..common import models
from ..common.device import free_memory
from ..common.models import activation
from ..common.tables import PredictError, competition_dir, prediction_columns, row_limit, step_columns, weights_dir
from ..common.unit import ViewRows, runtime_card
from . import transforms, tta
from .card import ImageBuilt, ImageCard

if TYPE_CHECKING:  # imported where used: importing kkb_runtime stays free of them (kkb_runtime/__init__)
    import numpy as np


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".npy")
DEFAULT_TEST_DIR = "test"


@dataclass(frozen=True)
class Job:
    """Everything one ``predict`` run needs, resolved from the environment and ``kkb_kernel.json``."""

    card: ImageCard
    built: ImageBuilt
    ids: list[str]
    paths: list[Path]
    id_column: str
    targets: list[str]
    weights_dir: Path
    out: Path


# --- where things are --------------------------------------------------------------------------

TABLE_SUFFIXES = (".csv",)


def images_dir(config: KernelConfig, competition: Path) -> Path:
    """``[competition] test`` inside the competition data (a folder or a CSV of paths), else ``test/``, else
    the data folder itself."""
    configured = config.competition.test
    candidate = competition / (configured or DEFAULT_TEST_DIR)
    if configured and not (candidate.is_dir() or (candidate.is_file() and candidate.suffix in TABLE_SUFFIXES)):
        raise PredictError(f"test images folder or CSV not found: {candidate} ([competition] test = {configured!r})")
    return candidate if candidate.exists() else competition


def index_images(folder: Path) -> dict[str, Path]:
    """``{id: path}`` for every image under ``folder``: by file stem, by file name (ids that carry their
    extension) and by relative path with and without suffix (nested folders)."""
    found: dict[str, Path] = {}
    for path in sorted(folder.rglob("*")):
        if path.suffix.lower() in IMAGE_SUFFIXES and path.is_file():
            relative = path.relative_to(folder)
            for key in (path.stem, path.name, relative.with_suffix("").as_posix(), relative.as_posix()):
                found.setdefault(key, path)
    return found


def index_listing(table: Path, id_column: str) -> dict[str, Path]:
    """``{id: path}`` from a CSV that lists the test files: the id column and the first column of file paths."""
    import pandas as pd
    frame = pd.read_csv(table, dtype=str)
    if id_column not in frame.columns:
        raise PredictError(f"{table}: no id column '{id_column}' (it has: {', '.join(map(str, frame.columns))})")
    for column in frame.columns:
        values = frame[column].dropna()
        if column != id_column and len(values) and values.str.lower().str.endswith(IMAGE_SUFFIXES).all():
            return {row_id: table.parent / path for row_id, path in zip(frame[id_column], frame[column], strict=False)}
    raise PredictError(f"{table}: no column of image paths (values ending in one of {', '.join(IMAGE_SUFFIXES)})")


def image_paths(ids: Sequence[str], folder: Path, id_column: str = "id") -> list[Path]:
    index = index_listing(folder, id_column) if folder.is_file() else index_images(folder)
    missing = [image_id for image_id in ids if image_id not in index]
    missing += [image_id for image_id in ids if image_id in index and not index[image_id].is_file()]
    if missing:
        shown = ", ".join(repr(image_id) for image_id in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise PredictError(f"{len(missing)} of {len(ids)} ids have no image in {folder} ({shown}); "
                           f"looked for <id> with one of {', '.join(IMAGE_SUFFIXES)}")
    return [index[image_id] for image_id in ids]


def output_columns(card: ImageCard, targets: Sequence[str], width: int | None = None) -> list[str]:
    if card.features:
        return [f"feat_{index}" for index in range(int(width or 0))]
    if len(targets) != card.num_classes:
        raise PredictError(f"model '{card.name}' has num_classes = {card.num_classes} but the submission has "
                           f"{len(targets)} target column(s) ({', '.join(targets)})")
    return list(targets)


def make_job(card: ImageCard, built: ImageBuilt, out: Path, config: KernelConfig, environ: Mapping[str, str]) -> Job:

    competition = competition_dir(config, environ)
    id_column = config.submission.id_column
    sample = read_sample(competition / config.competition.sample_submission, id_column)
    targets = step_columns(config, environ, card, prediction_columns(config, sample))  # the step's column group, if any
    output_columns(card, targets)
    ids = sample[id_column].astype(str).tolist()[: row_limit(environ)]
    return Job(card, built, ids, image_paths(ids, images_dir(config, competition), id_column), id_column, targets,
               weights_dir(config, environ), out)


# --- data ---------------------------------------------------------------------------------------

def read_image(path: Path, in_chans: int = 3) -> np.ndarray:
    """HWC uint8 (or the array as stored, for ``.npy``): what albumentations expects."""
    import numpy as np
    if path.suffix.lower() == ".npy":
        return np.asarray(np.load(path))
    from PIL import Image

    mode = "L" if in_chans == 1 else "RGB"
    with Image.open(path) as image:
        # convert() copies even when the mode is already right; asarray of a loaded image reads it once.
        array = np.asarray(image if image.mode == mode else image.convert(mode))
    return array[:, :, None] if array.ndim == 2 else array


def _as_tensor(image: Any) -> Any:
    import numpy as np
    import torch

    if isinstance(image, torch.Tensor):  # the user's pipeline ended with ToTensorV2
        return image.float()
    return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1), dtype=np.float32))


class ImageDataset:
    """Map-style dataset (DataLoader takes any object with ``__len__``/``__getitem__``); picklable for workers.

    With ``random`` (an albumentations pipeline and a number of passes), an item is a stack of views,
    ``[plain, pass 1, ..., pass N]``: each pass is ``random`` then the card's pipeline, seeded from
    ``seed``, the item's index and the pass, so every run (and every worker split) sees the same views.
    """

    def __init__(self, paths: Sequence[Path], pipeline: Any, in_chans: int, random: Any = None,
                 passes: int = 0, seed: int = 0) -> None:
        self.paths = list(paths)
        self.pipeline = pipeline
        self.in_chans = in_chans
        self.random = random
        self.passes = passes if random is not None else 0
        self.seed = seed

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> Any:
        import torch

        image = read_image(self.paths[index], self.in_chans)
        plain = _as_tensor(self.pipeline(image=image)["image"])
        if not self.passes:
            return plain
        views = [plain]
        for k in range(self.passes):
            self.random.set_random_seed(self.seed * 1_000_003 + index * 131 + k)
            views.append(_as_tensor(self.pipeline(image=self.random(image=image)["image"])["image"]))
        return torch.stack(views)


def loader_workers(card: ImageCard, choice: devices.DeviceChoice, cpus: int | None = None,
                   torch_threads: int | None = None) -> int:
    """The card's ``num_workers``, except where they would only compete with the forward pass: on the CPU
    the model already uses ``torch_threads`` of the ``cpus`` cores, so only the cores left over decode in
    parallel (measured on 2 cores: 0 workers 1605 img/s, 2 workers 1390, a worker's start included).
    On an accelerator the cores are free for decoding: the card's number stands."""
    wanted = card.num_workers
    if choice.kind != "cpu":
        return wanted
    import torch

    cpus = cpus if cpus is not None else (os.cpu_count() or 1)
    threads = torch_threads if torch_threads is not None else torch.get_num_threads()
    return max(0, min(wanted, cpus - threads))


def data_loader(dataset: ImageDataset, card: ImageCard, choice: devices.DeviceChoice) -> Any:
    from torch.utils.data import DataLoader, Dataset

    workers = loader_workers(card, choice)
    # DataLoader takes any map-style object; ImageDataset is one without importing torch at module level.
    return DataLoader(cast("Dataset[Any]", dataset), batch_size=card.batch_size, shuffle=False, num_workers=workers,
                      pin_memory=choice.kind == "cuda", persistent_workers=False,
                      prefetch_factor=2 if workers else None)


# --- model --------------------------------------------------------------------------------------

def pooled_features(model: Any, batch: Any) -> Any:
    """``forward_features`` then timm's pre-logits pooling: one vector per image."""
    features = model.forward_features(batch)
    if hasattr(model, "forward_head"):
        return model.forward_head(features, pre_logits=True)
    return features.mean(dim=(-2, -1)) if features.ndim == 4 else features


def has_convolutions(model: Any) -> bool:
    import torch

    return any(isinstance(module, torch.nn.Conv2d) for module in model.modules())


def create_model(card: ImageCard) -> Any:
    """The card's ``factory(**model_kwargs)``, else ``timm.create_model(arch, pretrained=False, ...)``, on the CPU."""
    models.offline()
    if card.factory:
        return models.from_factory(card)
    import timm

    kwargs: dict[str, Any] = dict(card.model_kwargs)  # the card's, as JSON holds them
    return timm.create_model(str(card.arch), pretrained=False, num_classes=card.num_classes, in_chans=card.in_chans,
                             **kwargs)


def prepare_model(card: ImageCard, built: ImageBuilt, weights: Path, choice: devices.DeviceChoice, target: Any,
                  checkpoint: str) -> tuple[Any, bool]:
    """The loaded model (one fold: ``checkpoint``) on its device; returns (model, channels_last)."""
    import torch

    model = models.load_weights(create_model(card), card, weights, checkpoint, built.checkpoint_key)
    # channels_last pays off for convolutions under CUDA AMP (tensor cores); it does nothing for ViTs.
    channels_last = choice.kind == "cuda" and has_convolutions(model)
    model = model.to(target, memory_format=torch.channels_last) if channels_last else model.to(target)
    if choice.kind == "cuda" and choice.count > 1 and not card.features:
        model = torch.nn.DataParallel(model)  # Kaggle's "T4 x2": both GPUs, one process
    return model, channels_last


def make_forward(model: Any, card: ImageCard, choice: devices.DeviceChoice,
                 channels_last: bool = False) -> Callable[[Any], Any]:
    """The model's activated output (or pooled features) for one TTA view of a batch."""
    import contextlib

    import torch

    act = activation(card.activation)
    amp = choice.kind == "cuda" and card.amp

    def forward(batch: Any) -> Any:
        if channels_last:  # per view: a flipped or rotated batch comes back in the default layout
            batch = batch.contiguous(memory_format=torch.channels_last)
        # fp16 autocast only on CUDA (T4s have no fast bf16); elsewhere no autocast at all.
        with torch.autocast(device_type="cuda", dtype=torch.float16) if amp else contextlib.nullcontext():
            output = pooled_features(model, batch) if card.features else model(batch)
        return output.float() if card.features else act(output.float())

    return forward


def random_tta(built: ImageBuilt) -> tuple[Any, int, int]:
    """(pipeline, passes, seed) of the card's seeded random TTA, or (None, 0, 0)."""
    spec = built.tta_random
    if spec is None:
        return None, 0, 0
    return transforms.pipeline_from_dict(spec.transforms), spec.passes, spec.seed


def make_loader(job: Job, choice: devices.DeviceChoice) -> Any:
    random, passes, seed = random_tta(job.built)
    dataset = ImageDataset(job.paths, transforms.card_pipeline(job.built), job.card.in_chans, random, passes, seed)
    return data_loader(dataset, job.card, choice)


def run_fold(job: Job, choice: devices.DeviceChoice, checkpoint: str,
             timings: dict[str, Any] | None = None) -> np.ndarray:
    """One checkpoint's predictions (or features), one row per id, with the card's TTA averaged by weight.

    ``timings`` accumulates ``load_seconds`` (the model ready on its device), ``infer_seconds`` (all
    batches) and ``batch_seconds`` (each batch) over the folds: the dry run separates the fixed cost
    from the per-row cost when it projects a rerun.
    """
    import numpy as np
    import torch

    timings = {} if timings is None else timings
    fold = timing.timer_of(timings).fold()  # the phases apart (kkb_runtime.timing): what the projection reads
    started = time.perf_counter()
    target = devices.torch_device(choice)
    with fold.loading():
        model, channels_last = prepare_model(job.card, job.built, job.weights_dir, choice, target, checkpoint)
    timings["load_seconds"] = round(timings.get("load_seconds", 0.0) + time.perf_counter() - started, 4)
    forward = make_forward(model, job.card, choice, channels_last)
    views = tta.resolve(list(job.card.tta))
    weights = dict(job.card.tta_weights)
    outputs = []
    # inference_mode is not supported by every torch_xla release; no_grad is.
    context = torch.no_grad if choice.kind == "xla" else torch.inference_mode
    with context():
        inferring = batch_started = time.perf_counter()
        batch_seconds = timings.setdefault("batch_seconds", [])
        for batch in fold.timed(make_loader(job, choice)):
            batch = batch.to(target, non_blocking=choice.kind == "cuda")
            outputs.append(tta.averaged(forward, batch, views, weights).cpu().numpy())
            batch_seconds.append(round(time.perf_counter() - batch_started, 4))  # loading the batch included
            batch_started = time.perf_counter()
        timings["infer_seconds"] = round(timings.get("infer_seconds", 0.0) + time.perf_counter() - inferring, 4)
        probe_fold(job, choice, timing.timer_of(timings), fold, (forward, target, views, weights))
    del model, forward
    width = job.card.num_classes if not job.card.features else 0
    return np.concatenate(outputs) if outputs else np.zeros((0, width), dtype=np.float32)


def probe_fold(job: Job, choice: devices.DeviceChoice, timer: timing.StepTimer, fold: timing.FoldTimer,
               model: tuple[Callable[[Any], Any], Any, Any, Mapping[str, float]]) -> None:
    """Timing only, in the first fold, when the dry run asks (``$KKB_TIMING_PROBE``) and the test gave too few
    full batches after the warm-up: full batches of the test files repeated, through the same pipeline and
    model, their predictions dropped (see :mod:`kkb_runtime.timing`)."""
    missing = timer.probe_batches - fold.full_steady()
    if missing <= 0 or len(timer.folds) != 1 or not job.paths:
        return
    if not timer.probe_can_matter(fold, len(job.built.checkpoints)):
        print(f"[kkb] {job.card.name}: no timing probe: at {timer.hidden_rows} rows the warm-up batch's rate, an upper "
              "bound, weighs little beside the step's fixed time", flush=True)
        return
    rows = (missing + 1) * job.card.batch_size  # + 1: the probe loader's own first batch
    paths = [job.paths[index % len(job.paths)] for index in range(rows)]
    forward, target, views, weights = model
    for batch in fold.timed(make_loader(replace(job, paths=paths), choice), probe=True):
        tta.averaged(forward, batch.to(target, non_blocking=choice.kind == "cuda"), views, weights).cpu()


def run_model(job: Job, choice: devices.DeviceChoice, timings: dict[str, Any] | None = None) -> np.ndarray:
    """Every fold of the card, one after another in this process, averaged with ``fold_weights`` (default: mean)."""
    import numpy as np
    folds = weighted_folds(job.card, job.built.checkpoints)
    total: np.ndarray | None = None
    for index, (fold, weight) in enumerate(folds):
        started = time.perf_counter()
        values = run_fold(job, choice, fold.file, timings).astype(np.float64) * weight
        total = values if total is None else total + values
        if index + 1 < len(folds):  # a full collection costs ~0.2 s: only when another fold needs the memory
            free_memory(choice)
        if len(folds) > 1:
            print(f"[kkb] {job.card.name}: fold {index + 1}/{len(folds)} ({fold.file}) "
                  f"in {time.perf_counter() - started:.1f} s", flush=True)
    if total is None:  # the build writes one fold at least
        raise PredictError(f"{job.card.name}: the card names no checkpoint")
    return total / sum(weight for _, weight in folds)


# --- output -------------------------------------------------------------------------------------

def write_output(job: Job, values: np.ndarray) -> Path:
    import numpy as np
    import pandas as pd

    columns = output_columns(job.card, job.targets, values.shape[1] if values.ndim == 2 else 0)
    frame = pd.DataFrame(values.astype(np.float64), columns=columns)
    frame.insert(0, job.id_column, job.ids)
    return write_submission(frame, job.out)  # a step's output is written as atomically as the submission


def version_skew(built: ImageBuilt) -> list[str]:
    """Libraries whose installed major.minor differs from the build's: the first suspect for a changed score."""
    from importlib import metadata

    notes = []
    for package, version in built.built_with.items():
        try:
            installed = metadata.version(package)
        except metadata.PackageNotFoundError:
            installed = "not installed"
        if installed.split(".")[:2] != version.split(".")[:2]:
            notes.append(f"{package} {installed} here, {version} at build time")
    return notes


def run(card: ImageCard, built: ImageBuilt, out: Path, environ: Mapping[str, str], config: KernelConfig) -> Path:
    """Run one image card over the test ids and write its CSV to ``out``."""
    models.offline()  # before the user's code (TTA, transforms) can import timm or huggingface_hub
    timer = timing.StepTimer(probe_batches=timing.probe_batches(environ), hidden_rows=timing.hidden_rows(environ))
    with timer.phase("setup"):
        job = make_job(card, built, out, config, environ)
    with timer.phase("imports"):  # torch (and CUDA) for the device choice and its description
        choice = devices.choose_device(environ)
        device_line = devices.summary(choice)
    for note in version_skew(built):
        print(f"[kkb] warning: {note}", file=sys.stderr, flush=True)
    random = f" + {built.tta_random.passes} random pass(es)" if built.tta_random else ""
    print(f"[kkb] {card.name}: {card.arch or card.factory} on {device_line}; "
          f"{len(job.ids)} images, {len(built.checkpoints)} checkpoint(s), "
          f"TTA: {', '.join(name for name, _ in tta.resolve(list(card.tta)))}{random}", flush=True)
    started = time.perf_counter()
    timings: dict[str, Any] = {"rows": len(job.ids), timing.TIMER_KEY: timer}
    values = run_model(job, choice, timings)
    with timer.phase("write"):
        written = write_output(job, values)
    timings["timing"] = timing.finish(timings, len(job.ids), choice.kind, device_line)
    if choice.kind == "cuda":
        import torch

        timings["peak_gpu_bytes"] = int(max(torch.cuda.max_memory_allocated(index) for index in range(torch.cuda.device_count())))
    write_step_meta(written, **timings)
    print(f"[kkb] {card.name}: wrote {written} in {time.perf_counter() - started:.1f} s", flush=True)
    return written


def view(card: ImageCard, built: ImageBuilt, config: KernelConfig, weights: Path, data: Path, rows: int) -> ViewRows:
    """The tensor after the card's pipeline: shape, dtype, per-channel mean and std, value range."""

    id_column = config.submission.id_column
    ids = read_sample(data / config.competition.sample_submission, id_column)[id_column].astype(str).tolist()[:rows]
    paths = image_paths(ids, images_dir(config, data), id_column)
    dataset = ImageDataset(paths, transforms.card_pipeline(built), card.in_chans)
    out = []
    for index, path in enumerate(paths):
        tensor = dataset[index].numpy()
        flat = tensor.reshape(tensor.shape[0], -1)
        out.append({"image": path.name, "shape": list(tensor.shape), "dtype": str(tensor.dtype),
                    "mean": [round(float(v), 4) for v in flat.mean(axis=1)],
                    "std": [round(float(v), 4) for v in flat.std(axis=1)],
                    "range": [round(float(tensor.min()), 4), round(float(tensor.max()), 4)]})
    return out


UNIT = runtime_card(ImageCard, ImageBuilt, run, view)

__all__ = ["UNIT", "ImageDataset", "Job", "PredictError", "create_model", "image_paths", "index_images", "make_job",
           "read_image", "run", "run_model", "view"]
