"""Cards as the build makes them: the kernel's card of a ``kernel.toml`` card (every key resolved by the spec's model of
its kind, read as the kernel reads it), a record of its preparation, the two as ``kkb_kernel.json`` holds them, and
``[[postprocess]]`` stages as the kernel reads them."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from builder.bundle.cards import BUILD_CARDS
from builder.kkb_runtime.card import Built, BuiltCard, Card, LeftOut, NetworkFold
from builder.kkb_runtime.cards.image.card import ImageBuilt
from builder.kkb_runtime.config import PostprocessStage
from builder.kkb_runtime.postprocess import read_stage
from builder.project.cards import CardBase, ModelCard
from builder.project.spec import PostprocessStage as SpecStage

_CARDS: TypeAdapter[Any] = TypeAdapter(ModelCard)


def spec_card(keys: dict[str, Any]) -> CardBase:
    """``keys`` (a kernel.toml card) validated by its kind's model."""
    card: CardBase = _CARDS.validate_python(keys)
    return card


def kernel_card(keys: dict[str, Any]) -> Card:
    """The kernel's card of ``keys``, as the build makes it (its kind's ``to_kernel``)."""
    card = spec_card(keys)
    return BUILD_CARDS[card.kind].to_kernel(card)


def fold(file: str, source: str | None = None, **recorded: Any) -> NetworkFold:
    """A network fold the build wrote at ``file`` (what it records besides the file: placeholders, or ``recorded``)."""
    values: dict[str, Any] = {"sha256": "0" * 64, "source": source or file, "loaded_with": "weights_only",
                              "source_key": None, "stripped_prefix": None, "left_out": LeftOut((), ())}
    return NetworkFold(file=file, **{**values, **recorded})


def image_built(*files: str, input_size: tuple[int, int] = (32, 32), mean: tuple[float, ...] = (0.5,) * 3,
                std: tuple[float, ...] = (0.25,) * 3, interpolation: str = "bilinear", **recorded: Any) -> ImageBuilt:
    """What the build records for an image card whose folds it wrote at ``files`` (its normalisation as given; the rest
    placeholders, or ``recorded``)."""
    values: dict[str, Any] = {
        "checkpoint": files[0], "checkpoints": tuple(fold(file) for file in files), "built_with": {}, "checkpoint_key": None,
        "checkpoint_sha256": "0" * 64, "checkpoint_source": files[0], "source_key": None, "dtype": "float32",
        "num_params": 0, "transforms": None, "tta_random": None, "stripped_prefix": None, "transforms_source": None,
        "transforms_factory": None, "custom_transforms": (), "normalize_in_pipeline": False, "preprocessing": {}}
    return ImageBuilt(input_size=input_size, mean=mean, std=std, interpolation=interpolation, **{**values, **recorded})


def built_card(keys: dict[str, Any], built: Built) -> BuiltCard:
    """``keys`` (a kernel.toml card) as ``kkb_kernel.json`` holds it once the build recorded ``built`` for it."""
    card = spec_card(keys)
    return BuiltCard(BUILD_CARDS[card.kind].to_kernel(card), built, card.origins)


def kernel_stages(*stages: dict[str, Any]) -> list[PostprocessStage]:
    """``[[postprocess]]`` stages as the kernel reads them (every key of the kind resolved by the spec)."""
    return [read_stage(SpecStage.model_validate(stage).resolved()) for stage in stages]


__all__ = ["built_card", "fold", "image_built", "kernel_card", "kernel_stages", "spec_card"]
