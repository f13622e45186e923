"""Image cards at build time: ``builder.bundle.models`` prepares them; a transforms factory is proven to run; the
preprocessing the kernel will apply is stated with where each value came from; the public test's ids must
resolve to images."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from builder.bundle.cards.unit import Extra, build_card
from builder.bundle.models import offline_environment, prepare_model, user_code_importable
from builder.errors import BundleError, ModelError
from builder.kkb_runtime.cards.image import predict as runtime_predict
from builder.kkb_runtime.cards.image import transforms as pipelines
from builder.kkb_runtime.vocabulary import CardKind
from builder.project.cards import ImageCard, kinds_words
from builder.project.spec import SPEC_FILE, KernelSpec


def prepare(card: ImageCard, kernel_dir: Path, weights_stage: Path, written: dict[str, str]) -> dict[str, Any]:
    prepared = prepare_model(card, kernel_dir, weights_stage, written)
    if card.transforms and ":" in card.transforms:
        prepared.update(check_transforms_factory(card, kernel_dir, prepared))
    prepared["preprocessing"] = preprocessing(card, prepared)
    return prepared


def check_transforms_factory(card: ImageCard, kernel_dir: Path, prepared: dict[str, Any]) -> dict[str, Any]:
    """``transforms = "module:function"``: called here as the kernel will call it, run on a test image."""
    reference = str(card.transforms)
    height, width = prepared["input_size"]
    try:
        with user_code_importable(kernel_dir), offline_environment():
            own = pipelines.pipeline_from_factory(reference)
            names = pipelines.class_names(own)
            pipeline = pipelines.inference_pipeline({**prepared, "transforms": None, "transforms_factory": reference})
            image = np.random.default_rng(0).integers(0, 256, (2 * height, 2 * width, card.in_chans), dtype=np.uint8)
            pipeline(image=image)
    except pipelines.TransformsError as exc:
        raise ModelError(f"[[models]] '{card.name}': transforms {reference}: {exc}",
                         hint="the factory lives in the code dataset and returns the inference A.Compose") from None
    except Exception as exc:
        raise ModelError(f"[[models]] '{card.name}': transforms {reference} fails on a {2 * height}x{2 * width} test image: "
                         f"{type(exc).__name__}: {exc}", hint="check the pipeline against the card's in_chans") from None
    recorded: dict[str, Any] = {"transforms_factory": reference, "transforms": None,
                                "normalize_in_pipeline": pipelines.NORMALIZE in names}
    normalize = next((node for node in _nodes(own) if type(node).__name__ == pipelines.NORMALIZE), None)
    if normalize is not None:
        recorded.update({field: [float(value) for value in np.ravel(getattr(normalize, field))] for field in ("mean", "std")})
    return recorded


def _nodes(pipeline: Any) -> list[Any]:
    found, stack = [], [pipeline]
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(getattr(node, "transforms", None) or [])
    return found


def preprocessing(card: ImageCard, prepared: dict[str, Any]) -> dict[str, str]:
    """What the kernel does to each image before the model, and where each value came from."""
    own = card.transforms is not None
    from_pipeline = bool(prepared.get("normalize_in_pipeline"))

    def source(field: str) -> str:
        if from_pipeline and field in ("mean", "std"):
            return "the pipeline's Normalize"
        return "the card" if getattr(card, field) is not None else "timm's pretrained config"

    height, width = prepared["input_size"]
    resize = ("the pipeline's own (kkb adds no Resize)" if own else
              f"{height}x{width} ({source('input_size')}), {prepared['interpolation']} ({source('interpolation')})")
    return {
        "resize": resize,
        "normalize": f"mean {prepared['mean']}, std {prepared['std']} ({source('mean')}), "
                     f"{'in the pipeline' if from_pipeline else 'added by kkb after the pipeline'}",
        "channels": "grayscale (PIL 'L')" if card.in_chans == 1 else "RGB (PIL), HWC uint8 into the pipeline, CHW float "
                                                                     "into the model",
    }


def extra_files(card: ImageCard, kernel_dir: Path) -> list[str]:
    return []  # the pipelines travel inside the card (kkb_kernel.json)


def check_public_data(spec: KernelSpec, kernel_dir: Path, data: Path, card: ImageCard, columns: list[str],
                      sample: pd.DataFrame) -> None:
    """Every id of the public sample resolves to a test image the way the runtime resolves it."""
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


VISION = Extra("vision", ("torch", "timm", "safetensors"))
BUILD = build_card(ImageCard, VISION, prepare, extra_files, check_public_data, modules)
