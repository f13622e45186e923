"""An image card as the kernel reads it: its keys (:class:`ImageCard`) and what the build recorded and resolved for it
(:class:`ImageBuilt`: the normalisation from timm's config where the card leaves it, the user's pipeline serialised,
the random TTA's pipeline embedded)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ...card import NetworkBuilt, NetworkCard, resolved
from ...typed import JsonValue, omitted


@dataclass(frozen=True)
class ImageCard(NetworkCard):
    arch: str | None  # a timm architecture (else factory)
    in_chans: int
    tta: tuple[str, ...]  # built-in views or "package.module:function"; the plain image always runs
    tta_weights: Mapping[str, float]
    num_workers: int
    features: bool  # pooled features (feat_0, ...) instead of predictions

    def describe(self) -> str:
        if self.factory:
            return super().describe()
        kwargs = {"num_classes": self.num_classes, "in_chans": self.in_chans, **dict(self.model_kwargs)}
        return f"{self.arch}(" + ", ".join(f"{key}={value!r}" for key, value in kwargs.items()) + ")"


@dataclass(frozen=True)
class RandomTtaBuilt:
    """``tta_random`` as the build embedded it: the pipeline itself (``A.to_dict``), its passes and seed."""

    transforms: Mapping[str, JsonValue]
    passes: int
    seed: int


@dataclass(frozen=True)
class ImageBuilt(NetworkBuilt):
    # The keys the build resolved: the card's, else timm's pretrained config (else the pipeline's Normalize).
    input_size: tuple[int, int] = field(metadata=resolved())
    mean: tuple[float, ...] = field(metadata=resolved())
    std: tuple[float, ...] = field(metadata=resolved())
    interpolation: str = field(metadata=resolved())
    # The A.save'd pipeline, serialised (None: kkb's resize + normalise, or a factory's: transforms_factory).
    transforms: Mapping[str, JsonValue] | None = field(metadata=resolved())
    tta_random: RandomTtaBuilt | None = field(metadata=resolved())
    stripped_prefix: str | None  # the first fold's
    transforms_source: str | None  # the card's own transforms setting (a file, or "module:function")
    transforms_factory: str | None = field(metadata=omitted())  # "module:function", called in the kernel
    custom_transforms: tuple[str, ...]  # the user's transform classes the pipeline names
    normalize_in_pipeline: bool
    preprocessing: Mapping[str, str]  # what the kernel does to each image before the model, in words


__all__ = ["ImageBuilt", "ImageCard", "RandomTtaBuilt"]
