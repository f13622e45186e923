"""Image cards at build time: the network built as the kernel builds it and its normalisation resolved
(``image_checks``), every fold normalised and loaded back (``builder.bundle.models``), each pipeline proven to run; the
preprocessing the kernel will apply is stated with where each value came from; the public test's ids must
resolve to images."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from builder.bundle.cards.image_checks import (
    Normalisation,
    build_model,
    check_output_width,
    check_random_tta,
    check_transforms,
    check_transforms_factory,
    pipeline_normalisation,
    resolve_normalisation,
)
from builder.bundle.cards.unit import Extra, build_card, built_as, fold_notes, kernel_card
from builder.bundle.checkpoints import checkpoint_sources
from builder.bundle.models import prepare_source, user_code_importable
from builder.errors import BundleError
from builder.kkb_runtime.card import Built
from builder.kkb_runtime.cards.image import predict as runtime_predict
from builder.kkb_runtime.cards.image import transforms as pipelines
from builder.kkb_runtime.cards.image.card import ImageBuilt
from builder.kkb_runtime.cards.image.card import ImageCard as KernelImageCard
from builder.kkb_runtime.vocabulary import CardKind
from builder.project.cards import ImageCard, kinds_words
from builder.project.spec import SPEC_FILE, KernelSpec

if TYPE_CHECKING:  # imported where used: the CLI starts without them (tests/test_dry_run_cost.py)
    import pandas as pd

RECORDED_VERSIONS = ("torch", "timm", "albumentations")


def to_kernel(card: ImageCard) -> KernelImageCard:
    """The kernel's card of an image card (kernel.toml's keys; the normalisation, the pipelines and the checkpoint are
    what its preparation resolves: :class:`ImageBuilt`)."""
    return kernel_card(KernelImageCard, card)


def prepare(card: ImageCard, kernel_dir: Path, weights_stage: Path, written: dict[str, str]) -> ImageBuilt:
    """The network built as the kernel builds it, its normalisation resolved, every fold normalised into the weights
    and loaded back, the pipelines proven to run: what the kernel needs. The user's code is importable throughout, as
    the code dataset is in the kernel: a factory lives there, and so do the classes an ``allow_pickle`` checkpoint
    names."""
    kernel = to_kernel(card)
    with user_code_importable(kernel_dir):
        model = build_model(card, kernel)
        normalisation = resolve_normalisation(card, model)
        check_output_width(card, model, normalisation)
        folds = [fold for source in checkpoint_sources(card, kernel_dir, must_exist=False)
                 for fold in prepare_source(kernel, card.checkpoint_key, model, kernel_dir, source, weights_stage, written)]
        serialized = check_transforms(card, kernel_dir, normalisation)
        normalisation = pipeline_normalisation(serialized, normalisation)
        tta_random = check_random_tta(card, kernel_dir, normalisation)
    factory = card.transforms if card.transforms and ":" in card.transforms else None
    if factory is not None:
        normalisation = check_transforms_factory(card, kernel_dir, normalisation)
    first = folds[0]
    return ImageBuilt(
        checkpoint=first.file, checkpoint_sha256=first.sha256, checkpoint_source=first.source,
        checkpoints=tuple(folds),  # one entry per fold, run one after another and averaged
        checkpoint_key=None,  # the written files are plain state dicts
        source_key=first.source_key, stripped_prefix=first.stripped_prefix, dtype="float16" if card.half else "float32",
        input_size=normalisation.input_size, mean=normalisation.mean, std=normalisation.std,
        interpolation=normalisation.interpolation, normalize_in_pipeline=normalisation.in_pipeline,
        transforms=serialized, transforms_source=card.transforms, transforms_factory=factory,
        custom_transforms=tuple(pipelines.custom_classes(serialized)) if serialized else (), tta_random=tta_random,
        num_params=sum(int(parameter.numel()) for parameter in model.parameters()),
        built_with={package: metadata.version(package) for package in RECORDED_VERSIONS},
        preprocessing=preprocessing(card, normalisation))


def preprocessing(card: ImageCard, normalisation: Normalisation) -> dict[str, str]:
    """What the kernel does to each image before the model, and where each value came from."""
    own = card.transforms is not None

    def source(field: str) -> str:
        if normalisation.in_pipeline and field in ("mean", "std"):
            return "the pipeline's Normalize"
        return "the card" if getattr(card, field) is not None else "timm's pretrained config"

    height, width = normalisation.input_size
    resize = ("the pipeline's own (kkb adds no Resize)" if own else
              f"{height}x{width} ({source('input_size')}), {normalisation.interpolation} ({source('interpolation')})")
    return {
        "resize": resize,
        "normalize": f"mean {list(normalisation.mean)}, std {list(normalisation.std)} ({source('mean')}), "
                     f"{'in the pipeline' if normalisation.in_pipeline else 'added by kkb after the pipeline'}",
        "channels": "grayscale (PIL 'L')" if card.in_chans == 1 else "RGB (PIL), HWC uint8 into the pipeline, CHW float "
                                                                     "into the model",
    }


def extra_files(card: ImageCard, kernel_dir: Path) -> list[str]:
    return []  # the pipelines travel inside the card (kkb_kernel.json)


def check_public_data(spec: KernelSpec, kernel_dir: Path, data: Path, card: ImageCard, columns: list[str],
                      sample: pd.DataFrame) -> None:
    """Every id of the public sample resolves to a test image the way the runtime resolves it."""
    import pandas as pd
    configured = spec.competition.test
    folder = data / (configured or runtime_predict.DEFAULT_TEST_DIR)
    if not folder.exists():
        if configured:
            raise BundleError(f"{kernel_dir / SPEC_FILE}: competition.test: {folder} does not exist in the public data",
                              hint="name the test images folder (or the CSV listing them) relative to [competition] data")
        folder = data
    ids = sample[spec.submission.id_column].astype(str).tolist()
    try:
        runtime_predict.image_paths(ids, folder, spec.submission.id_column)
    except (runtime_predict.PredictError, pd.errors.ParserError, OSError) as exc:
        raise BundleError(f"{kernel_dir / SPEC_FILE}: the public test's ids do not resolve to images: {exc}",
                          hint="set [competition] test to the folder of test images or to a CSV with the id column "
                               "and a column of image paths; a card over a table of text or features is kind = "
                               f"{TABLE_KINDS}") from None


# The kinds that read the test table instead of images: every kind but this one, from the enum.
TABLE_KINDS = kinds_words(tuple(kind for kind in CardKind.values() if kind != CardKind.IMAGE))


def modules(card: ImageCard) -> tuple[str, ...]:
    """timm and torch; albumentations too when the card names its own pipeline."""
    return (*VISION.modules, *(("albumentations",) if card.transforms else ()))


def record_notes(name: str, built: Built) -> list[str]:
    """What the kernel does to each image before the model, then the folds' opt-ins."""
    record = built_as(built, ImageBuilt)
    return [f"models.{name}: {what}: {how}" for what, how in record.preprocessing.items()] + fold_notes(name, built)


VISION = Extra("vision", ("torch", "timm", "safetensors"))
BUILD = build_card(ImageCard, VISION, to_kernel, prepare, extra_files, check_public_data, modules,
                   record_notes=record_notes)

__all__ = ["BUILD", "check_public_data", "extra_files", "prepare", "preprocessing", "to_kernel"]
