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
from typing import Any, cast

import numpy as np
import pandas as pd

from ... import timing
from ...config import KernelConfig, load_config
from ...steps import write_step_meta
from ...submission import read_sample, target_columns, write_submission
from ..common import checkpoints, models
from ..common import device as devices
from ..common.device import free_memory
from ..common.models import activation
from ..common.tables import PredictError, competition_dir, row_limit, step_columns, weights_dir
from . import transforms, tta

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".npy")
DEFAULT_TEST_DIR = "test"


@dataclass(frozen=True)
class Job:
    """Everything one ``predict`` run needs, resolved from the environment and ``kkb_kernel.json``."""

    card: Mapping[str, Any]
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
    configured = config.raw.get("competition", {}).get("test")
    candidate = competition / str(configured or DEFAULT_TEST_DIR)
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


def output_columns(card: Mapping[str, Any], targets: Sequence[str], width: int | None = None) -> list[str]:
    if card.get("features"):
        return [f"feat_{index}" for index in range(int(width or 0))]
    if len(targets) != int(card["num_classes"]):
        raise PredictError(f"model '{card['name']}' has num_classes = {card['num_classes']} but the submission has "
                           f"{len(targets)} target column(s) ({', '.join(targets)})")
    return list(targets)


def make_job(model_name: str, out: Path, config: KernelConfig, environ: Mapping[str, str]) -> Job:
    try:
        card = config.model(model_name)
    except KeyError as exc:
        raise PredictError(str(exc.args[0])) from None
    competition = competition_dir(config, environ)
    id_column = str(config.submission.get("id_column", "id"))
    sample = read_sample(competition / config.sample_submission, id_column)
    targets = list(config.submission.get("prediction_columns") or ()) or target_columns(
        sample, id_column, config.submission.get("target_columns") or ())
    targets = step_columns(config, environ, card, targets)  # the step's column group, if it declares one
    output_columns(card, targets)
    ids = sample[id_column].astype(str).tolist()[: row_limit(environ)]
    return Job(card, ids, image_paths(ids, images_dir(config, competition), id_column), id_column, targets,
               weights_dir(config, environ), out)


# --- data ---------------------------------------------------------------------------------------

def read_image(path: Path, in_chans: int = 3) -> np.ndarray:
    """HWC uint8 (or the array as stored, for ``.npy``): what albumentations expects."""
    if path.suffix.lower() == ".npy":
        return np.asarray(np.load(path))
    from PIL import Image

    mode = "L" if in_chans == 1 else "RGB"
    with Image.open(path) as image:
        # convert() copies even when the mode is already right; asarray of a loaded image reads it once.
        array = np.asarray(image if image.mode == mode else image.convert(mode))
    return array[:, :, None] if array.ndim == 2 else array


def _as_tensor(image: Any) -> Any:
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


def loader_workers(card: Mapping[str, Any], choice: devices.DeviceChoice, cpus: int | None = None,
                   torch_threads: int | None = None) -> int:
    """The card's ``num_workers``, except where they would only compete with the forward pass: on the CPU
    the model already uses ``torch_threads`` of the ``cpus`` cores, so only the cores left over decode in
    parallel (measured on 2 cores: 0 workers 1605 img/s, 2 workers 1390, a worker's start included).
    On an accelerator the cores are free for decoding: the card's number stands."""
    wanted = int(card["num_workers"])
    if choice.kind != "cpu":
        return wanted
    import torch

    cpus = cpus if cpus is not None else (os.cpu_count() or 1)
    threads = torch_threads if torch_threads is not None else torch.get_num_threads()
    return max(0, min(wanted, cpus - threads))


def data_loader(dataset: ImageDataset, card: Mapping[str, Any], choice: devices.DeviceChoice) -> Any:
    from torch.utils.data import DataLoader, Dataset

    workers = loader_workers(card, choice)
    # DataLoader takes any map-style object; ImageDataset is one without importing torch at module level.
    return DataLoader(cast("Dataset[Any]", dataset), batch_size=int(card["batch_size"]), shuffle=False, num_workers=workers,
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


def prepare_model(card: Mapping[str, Any], weights: Path, choice: devices.DeviceChoice, target: Any,
                  checkpoint: str | None = None) -> tuple[Any, bool]:
    """The loaded model (one fold: ``checkpoint``) on its device; returns (model, channels_last)."""
    import torch

    model = models.load_model(card, weights, checkpoint)
    # channels_last pays off for convolutions under CUDA AMP (tensor cores); it does nothing for ViTs.
    channels_last = choice.kind == "cuda" and has_convolutions(model)
    model = model.to(target, memory_format=torch.channels_last) if channels_last else model.to(target)
    if choice.kind == "cuda" and choice.count > 1 and not card.get("features"):
        model = torch.nn.DataParallel(model)  # Kaggle's "T4 x2": both GPUs, one process
    return model, channels_last


def make_forward(model: Any, card: Mapping[str, Any], choice: devices.DeviceChoice,
                 channels_last: bool = False) -> Callable[[Any], Any]:
    """The model's activated output (or pooled features) for one TTA view of a batch."""
    import contextlib

    import torch

    act = activation(str(card["activation"]))
    amp = choice.kind == "cuda" and bool(card["amp"])

    def forward(batch: Any) -> Any:
        if channels_last:  # per view: a flipped or rotated batch comes back in the default layout
            batch = batch.contiguous(memory_format=torch.channels_last)
        # fp16 autocast only on CUDA (T4s have no fast bf16); elsewhere no autocast at all.
        with torch.autocast(device_type="cuda", dtype=torch.float16) if amp else contextlib.nullcontext():
            output = pooled_features(model, batch) if card.get("features") else model(batch)
        return output.float() if card.get("features") else act(output.float())

    return forward


def random_tta(card: Mapping[str, Any]) -> tuple[Any, int, int]:
    """(pipeline, passes, seed) of the card's seeded random TTA, or (None, 0, 0)."""
    spec = card.get("tta_random")
    if not spec:
        return None, 0, 0
    return transforms.pipeline_from_dict(spec["transforms"]), int(spec["passes"]), int(spec["seed"])


def make_loader(job: Job, choice: devices.DeviceChoice) -> Any:
    random, passes, seed = random_tta(job.card)
    dataset = ImageDataset(job.paths, transforms.inference_pipeline(job.card), int(job.card["in_chans"]),
                           random, passes, seed)
    return data_loader(dataset, job.card, choice)


def run_fold(job: Job, choice: devices.DeviceChoice, checkpoint: str | None = None,
             timings: dict[str, Any] | None = None) -> np.ndarray:
    """One checkpoint's predictions (or features), one row per id, with the card's TTA averaged by weight.

    ``timings`` accumulates ``load_seconds`` (the model ready on its device), ``infer_seconds`` (all
    batches) and ``batch_seconds`` (each batch) over the folds: the dry run separates the fixed cost
    from the per-row cost when it projects a rerun.
    """
    import torch

    timings = {} if timings is None else timings
    fold = timing.timer_of(timings).fold()  # the phases apart (kkb_runtime.timing): what the projection reads
    started = time.perf_counter()
    target = devices.torch_device(choice)
    with fold.loading():
        model, channels_last = prepare_model(job.card, job.weights_dir, choice, target, checkpoint)
    timings["load_seconds"] = round(timings.get("load_seconds", 0.0) + time.perf_counter() - started, 4)
    forward = make_forward(model, job.card, choice, channels_last)
    views = tta.resolve(list(job.card.get("tta") or ()))
    weights = dict(job.card.get("tta_weights") or {})
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
    width = int(job.card["num_classes"]) if not job.card.get("features") else 0
    return np.concatenate(outputs) if outputs else np.zeros((0, width), dtype=np.float32)


def probe_fold(job: Job, choice: devices.DeviceChoice, timer: timing.StepTimer, fold: timing.FoldTimer,
               model: tuple[Callable[[Any], Any], Any, Any, Mapping[str, float]]) -> None:
    """Timing only, in the first fold, when the dry run asks (``$KKB_TIMING_PROBE``) and the test gave too few
    full batches after the warm-up: full batches of the test files repeated, through the same pipeline and
    model, their predictions dropped (see :mod:`kkb_runtime.timing`)."""
    missing = timer.probe_batches - fold.full_steady()
    if missing <= 0 or len(timer.folds) != 1 or not job.paths:
        return
    rows = (missing + 1) * int(job.card["batch_size"])  # + 1: the probe loader's own first batch
    paths = [job.paths[index % len(job.paths)] for index in range(rows)]
    forward, target, views, weights = model
    for batch in fold.timed(make_loader(replace(job, paths=paths), choice), probe=True):
        tta.averaged(forward, batch.to(target, non_blocking=choice.kind == "cuda"), views, weights).cpu()


def run_model(job: Job, choice: devices.DeviceChoice, timings: dict[str, Any] | None = None) -> np.ndarray:
    """Every fold of the card, one after another in this process, averaged with ``fold_weights`` (default: mean)."""
    entries = checkpoints.checkpoint_entries(job.card)
    total: np.ndarray | None = None
    for index, entry in enumerate(entries):
        started = time.perf_counter()
        values = run_fold(job, choice, str(entry["file"]), timings).astype(np.float64) * float(entry["weight"])
        total = values if total is None else total + values
        if index + 1 < len(entries):  # a full collection costs ~0.2 s: only when another fold needs the memory
            free_memory(choice)
        if len(entries) > 1:
            print(f"[kkb] {job.card['name']}: fold {index + 1}/{len(entries)} ({entry['file']}) "
                  f"in {time.perf_counter() - started:.1f} s", flush=True)
    if total is None:  # checkpoint_entries always names one at least
        raise PredictError(f"{job.card['name']}: the card names no checkpoint")
    return total / sum(float(entry["weight"]) for entry in entries)


# --- output -------------------------------------------------------------------------------------

def write_output(job: Job, values: np.ndarray) -> Path:
    columns = output_columns(job.card, job.targets, values.shape[1] if values.ndim == 2 else 0)
    frame = pd.DataFrame(values.astype(np.float64), columns=columns)
    frame.insert(0, job.id_column, job.ids)
    return write_submission(frame, job.out)  # a step's output is written as atomically as the submission


def version_skew(card: Mapping[str, Any]) -> list[str]:
    """Libraries whose installed major.minor differs from the build's: the first suspect for a changed score."""
    from importlib import metadata

    notes = []
    for package, built in dict(card.get("built_with") or {}).items():
        try:
            installed = metadata.version(package)
        except metadata.PackageNotFoundError:
            installed = "not installed"
        if installed.split(".")[:2] != str(built).split(".")[:2]:
            notes.append(f"{package} {installed} here, {built} at build time")
    return notes


def predict(model_name: str, out: Path | None = None, environ: Mapping[str, str] | None = None,
            config: KernelConfig | None = None) -> Path:
    """Run one model over the test ids and write its CSV to ``out`` (default ``$KKB_STEP_OUT``)."""
    models.offline()  # before the user's code (TTA, transforms) can import timm or huggingface_hub
    environ = os.environ if environ is None else environ
    target = out or (Path(environ["KKB_STEP_OUT"]) if environ.get("KKB_STEP_OUT") else None)
    if target is None:
        raise PredictError("no output file: pass --out FILE or set KKB_STEP_OUT")
    timer = timing.StepTimer(probe_batches=timing.probe_batches(environ))
    with timer.phase("setup"):
        job = make_job(model_name, target, config or load_config(environ.get("KKB_KERNEL_CONFIG") or None), environ)
    with timer.phase("imports"):  # torch (and CUDA) for the device choice and its description
        choice = devices.choose_device(environ)
        device_line = devices.summary(choice)
    for note in version_skew(job.card):
        print(f"[kkb] warning: {note}", file=sys.stderr, flush=True)
    folds = len(checkpoints.checkpoint_entries(job.card))
    random = job.card.get("tta_random") or {}
    print(f"[kkb] {model_name}: {job.card.get('arch') or job.card.get('factory')} on {device_line}; "
          f"{len(job.ids)} images, {folds} checkpoint(s), "
          f"TTA: {', '.join(name for name, _ in tta.resolve(list(job.card.get('tta') or ())))}"
          + (f" + {random['passes']} random pass(es)" if random else ""), flush=True)
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
    print(f"[kkb] {model_name}: wrote {written} in {time.perf_counter() - started:.1f} s", flush=True)
    return written


__all__ = ["ImageDataset", "Job", "PredictError", "index_images", "make_job", "predict", "read_image", "run_model"]
