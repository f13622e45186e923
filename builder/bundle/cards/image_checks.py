"""An image card's checks and resolutions at build: the network built offline (timm's architecture or the user's
factory), its normalisation resolved (the card's values, else timm's pretrained config, else the pipeline's own
``Normalize``), and each pipeline the card names (its inference transforms, its random TTA, a transforms factory)
proven to deserialise and to run on an image, as the kernel will run it.

Every kernel helper is called with the kernel's card (``builder.bundle.cards.image.to_kernel``); the spec's card is
read for what only ``kernel.toml`` says (the files a pipeline is in, the values the user stated).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from builder.bundle.models import offline_environment, user_code_importable
from builder.errors import ModelError
from builder.kkb_runtime.cards.common import checkpoints
from builder.kkb_runtime.cards.common import models as runtime
from builder.kkb_runtime.cards.image import predict as runtime_predict
from builder.kkb_runtime.cards.image import transforms as pipelines
from builder.kkb_runtime.cards.image.card import ImageCard as KernelImageCard
from builder.kkb_runtime.cards.image.card import RandomTtaBuilt
from builder.project.cards import ImageCard


@dataclass(frozen=True)
class Normalisation:
    """What the kernel resizes and normalises each image to, as the build resolved it."""

    input_size: tuple[int, int]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    interpolation: str
    in_pipeline: bool = False  # the user's pipeline normalises (its mean and std are these)


def build_model(card: ImageCard, kernel: KernelImageCard) -> Any:
    """The network the kernel builds (``kernel``: the kernel's card), fresh, on the CPU."""
    with offline_environment():
        if card.factory:
            return _build_with_factory(kernel)
        return _build_from_timm(kernel)


def _build_from_timm(card: KernelImageCard) -> Any:
    import timm

    arch = str(card.arch)  # the spec requires arch where there is no factory
    if not timm.is_model(arch):
        close = difflib.get_close_matches(arch, timm.list_models(), n=3, cutoff=0.6)
        guess = f"did you mean {' or '.join(repr(name) for name in close)}? " if close else ""
        raise ModelError(f"[[models]] '{card.name}': timm {timm.__version__} has no architecture '{card.arch}'",
                         hint=f"{guess}list them with timm.list_models('{arch.split('_')[0]}*')")
    try:
        return runtime_predict.create_model(card)
    except (TypeError, ValueError, RuntimeError, AssertionError) as exc:
        raise ModelError(f"[[models]] '{card.name}': timm.create_model failed for {card.describe()}: {exc}",
                         hint="check num_classes, in_chans and model_kwargs against the training config") from None


def _build_with_factory(card: KernelImageCard) -> Any:
    try:
        return runtime_predict.create_model(card)
    except runtime.ModelLoadError as exc:
        raise ModelError(f"[[models]] '{card.name}': {exc}",
                         hint="factory names a function of the code dataset: 'package.module:function', "
                              "with the package under [code] include") from None
    except Exception as exc:
        text = checkpoints.plain(str(exc))
        downloads = any(word in text.lower() for word in ("offline", "hugging", "hf_hub", "connection", "download"))
        hint = ("build the model with pretrained=False (pass it in model_kwargs): the kernel has no internet, and "
                "the checkpoint holds every weight") if downloads else \
            f"check model_kwargs in [[models]] '{card.name}' against the factory's parameters"
        raise ModelError(f"[[models]] '{card.name}': {card.describe()} failed: {type(exc).__name__}: {text}",
                         hint=hint) from None


def check_output_width(card: ImageCard, model: Any, normalisation: Normalisation) -> None:
    """A factory's model, run once on zeros: its output width must be num_classes (timm's is by construction)."""
    if card.factory is None or card.features:
        return
    import torch

    height, width = normalisation.input_size
    with torch.no_grad():
        try:
            output = model.eval()(torch.zeros(2, card.in_chans, int(height), int(width)))
        except Exception as exc:
            raise ModelError(f"[[models]] '{card.name}': the model fails on a batch of 2x{card.in_chans}x{height}x{width}: "
                             f"{type(exc).__name__}: {checkpoints.plain(str(exc))}",
                             hint="check input_size and in_chans in the card") from None
    if not isinstance(output, torch.Tensor) or output.ndim != 2:
        shape = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
        raise ModelError(f"[[models]] '{card.name}': the model returns {shape}, not a (batch, num_classes) tensor",
                         hint="make forward() return the logits as one 2-D tensor")
    if output.shape[1] != card.num_classes:
        raise ModelError(f"[[models]] '{card.name}': the model outputs {output.shape[1]} values per image, "
                         f"num_classes = {card.num_classes}",
                         hint=f"set num_classes = {output.shape[1]} or fix the factory's model_kwargs")


# --- normalisation --------------------------------------------------------------------------------

def resolve_normalisation(card: ImageCard, model: Any) -> Normalisation:
    """mean/std/input size/interpolation: the card's values, else timm's pretrained config (of the
    first timm module inside a factory's model)."""
    cfg = dict(getattr(model, "pretrained_cfg", None) or {})
    if not cfg and hasattr(model, "modules"):
        cfg = next((dict(module.pretrained_cfg) for module in model.modules() if getattr(module, "pretrained_cfg", None)), {})
    size = card.input_size or tuple(cfg.get("input_size", (3, 224, 224))[-2:])
    interpolation = card.interpolation or str(cfg.get("interpolation") or "bilinear")
    if interpolation not in pipelines.INTERPOLATIONS:
        raise ModelError(f"[[models]] '{card.name}': interpolation '{interpolation}' is not one of "
                         f"{', '.join(pipelines.INTERPOLATIONS)}", hint="use timm's names, e.g. bilinear or bicubic")
    return Normalisation(
        input_size=(int(size[0]), int(size[1])),
        mean=_per_channel(card, "mean", card.mean or cfg.get("mean") or (0.485, 0.456, 0.406), card.mean is not None),
        std=_per_channel(card, "std", card.std or cfg.get("std") or (0.229, 0.224, 0.225), card.std is not None),
        interpolation=interpolation)


def _per_channel(card: ImageCard, field: str, values: Any, from_card: bool) -> tuple[float, ...]:
    import numpy as np
    numbers = tuple(float(value) for value in values)
    if len(numbers) == card.in_chans:
        return numbers
    if len(numbers) == 1:
        return numbers * card.in_chans
    if not from_card and card.in_chans == 1:
        return (float(np.mean(values)),)  # a grayscale model fine-tuned from an RGB config
    raise ModelError(f"[[models]] '{card.name}': {field} has {len(values)} values for in_chans = {card.in_chans}",
                     hint=f"set {field} in [[models]] '{card.name}' with one value per input channel")


def pipeline_normalisation(serialized: Mapping[str, Any] | None, normalisation: Normalisation) -> Normalisation:
    """When the user's pipeline normalises, its values: the ones the kernel applies (the build records them)."""
    own = pipelines.normalize_params(serialized) if serialized else None
    if own is None:
        return normalisation
    mean, std = (tuple(float(value) for value in own[field]) if isinstance(own.get(field), (list, tuple)) else None
                 for field in ("mean", "std"))
    return replace(normalisation, in_pipeline=True, mean=mean or normalisation.mean, std=std or normalisation.std)


# --- transforms -----------------------------------------------------------------------------------

def check_transforms(card: ImageCard, kernel_dir: Path, normalisation: Normalisation) -> dict[str, Any] | None:
    """The card's serialised pipeline, proven to deserialise and to run on an image (None: kkb's default, or a
    factory, which :func:`check_transforms_factory` checks)."""
    if card.transforms is None or ":" in card.transforms:
        return None
    path = _pipeline_file(card, kernel_dir, card.transforms, "transforms", "the inference pipeline")
    try:
        serialized = pipelines.read_pipeline_file(path)
        with user_code_importable(kernel_dir):
            pipeline = _inference(pipelines.pipeline_from_dict(serialized), normalisation)
            _check_runs(card, pipeline, normalisation.input_size)
    except pipelines.TransformsError as exc:
        raise ModelError(f"[[models]] '{card.name}': {card.transforms}: {exc}",
                         hint="custom transforms must live in a module of the code bundle (importable from the kernel folder)") from None
    _check_normalize(card, serialized)
    return serialized


def _pipeline_file(card: ImageCard, kernel_dir: Path, where: str, key: str, what: str) -> Path:
    """A pipeline file the card names (``key``: which), there in the kernel folder."""
    path = kernel_dir / where
    if not path.is_file():
        raise ModelError(f"[[models]] '{card.name}': {key} file {where} not found in {kernel_dir}",
                         hint=f"save {what} with A.save(pipeline, path) or json.dump(A.to_dict(pipeline), f)")
    return path


def _inference(own: Any, normalisation: Normalisation) -> Any:
    return pipelines.inference_pipeline(own, normalisation.input_size, normalisation.interpolation, normalisation.mean,
                                        normalisation.std)


def _check_runs(card: ImageCard, pipeline: Any, input_size: tuple[int, int]) -> None:
    import numpy as np
    height, width = input_size
    # Twice the input size: a pipeline that crops must still find enough pixels.
    image = np.random.default_rng(0).integers(0, 256, (2 * height, 2 * width, card.in_chans), dtype=np.uint8)
    try:
        output = pipeline(image=image)["image"]
    except Exception as exc:
        raise pipelines.TransformsError(f"the pipeline fails on a {2 * height}x{2 * width} test image: "
                                        f"{type(exc).__name__}: {exc}") from None
    channels = output.shape[0] if type(output).__module__.startswith("torch") else output.shape[-1]
    if output.ndim != 3 or channels != card.in_chans:
        raise pipelines.TransformsError(f"the pipeline outputs an image of shape {tuple(output.shape)}, "
                                        f"not {card.in_chans} channel(s)")


def check_random_tta(card: ImageCard, kernel_dir: Path, normalisation: Normalisation) -> RandomTtaBuilt | None:
    """The random TTA pipeline, proven to deserialise and run before the card's own, embedded in the card."""
    if card.tta_random is None:
        return None
    where = card.tta_random.transforms
    path = _pipeline_file(card, kernel_dir, where, "tta_random.transforms", "the augmentations")
    try:
        serialized = pipelines.read_pipeline_file(path)
        with user_code_importable(kernel_dir):
            augment = pipelines.pipeline_from_dict(serialized)
            height, width = normalisation.input_size
            _check_runs(card, augment, (max(8, height // 2), max(8, width // 2)))
    except pipelines.TransformsError as exc:
        raise ModelError(f"[[models]] '{card.name}': tta_random.transforms {where}: {exc}",
                         hint="custom transforms must live in a module of the code bundle") from None
    return RandomTtaBuilt(transforms=serialized, passes=card.tta_random.passes, seed=card.tta_random.seed)


def _check_normalize(card: ImageCard, serialized: Mapping[str, Any]) -> None:
    """A Normalize in the pipeline that contradicts the card's mean/std means two sources of truth."""
    import numpy as np
    own = pipelines.normalize_params(serialized)
    if own is None:
        return
    for field in ("mean", "std"):
        stated = getattr(card, field)
        if stated is not None and not np.allclose(np.ravel(own.get(field, ())), np.ravel(stated)):
            raise ModelError(f"[[models]] '{card.name}': {field} = {list(stated)} but the pipeline's Normalize "
                             f"has {field} = {own.get(field)}",
                             hint=f"remove {field} from the card or the Normalize from the pipeline: the kernel uses the pipeline's")


def check_transforms_factory(card: ImageCard, kernel_dir: Path, normalisation: Normalisation) -> Normalisation:
    """``transforms = "module:function"``: called here as the kernel will call it, run on a test image; the
    normalisation it applies (its own ``Normalize``'s, when it has one)."""
    import numpy as np
    reference = str(card.transforms)
    height, width = normalisation.input_size
    try:
        with user_code_importable(kernel_dir), offline_environment():
            own = pipelines.pipeline_from_factory(reference)
            names = pipelines.class_names(own)
            pipeline = _inference(own, normalisation)
            image = np.random.default_rng(0).integers(0, 256, (2 * height, 2 * width, card.in_chans), dtype=np.uint8)
            pipeline(image=image)
    except pipelines.TransformsError as exc:
        raise ModelError(f"[[models]] '{card.name}': transforms {reference}: {exc}",
                         hint="the factory lives in the code dataset and returns the inference A.Compose") from None
    except Exception as exc:
        raise ModelError(f"[[models]] '{card.name}': transforms {reference} fails on a {2 * height}x{2 * width} test image: "
                         f"{type(exc).__name__}: {exc}", hint="check the pipeline against the card's in_chans") from None
    found = replace(normalisation, in_pipeline=pipelines.NORMALIZE in names)
    normalize = next((node for node in _nodes(own) if type(node).__name__ == pipelines.NORMALIZE), None)
    if normalize is None:
        return found
    return replace(found, mean=tuple(float(value) for value in np.ravel(normalize.mean)),
                   std=tuple(float(value) for value in np.ravel(normalize.std)))


def _nodes(pipeline: Any) -> list[Any]:
    found, stack = [], [pipeline]
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(getattr(node, "transforms", None) or [])
    return found


__all__ = ["Normalisation", "build_model", "check_output_width", "check_random_tta", "check_transforms",
           "check_transforms_factory", "pipeline_normalisation", "resolve_normalisation"]
