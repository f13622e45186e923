"""``kind = "image"`` (the default): a timm architecture or the user's factory over test images."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from builder.kkb_runtime.vocabulary import CardKind
from builder.project.cards.base import NetworkCard
from builder.project.spec_values import REFERENCE_RE, StrictModel, check_tta_names, relative_path


class RandomTta(StrictModel):
    """N seeded random passes of an albumentations pipeline (``A.save``'d), before the card's own pipeline."""

    transforms: str
    passes: int = Field(gt=0, le=64)
    seed: int = 0

    @field_validator("transforms")
    @classmethod
    def _inside(cls, value: str) -> str:
        return relative_path(value)


class ImageCard(NetworkCard):
    """``arch`` (a timm architecture) or ``factory``; ``checkpoint`` is one file, a glob or a list: several are folds of
    one architecture, run one after another and averaged (``fold_weights``). Completed at build time by
    ``builder.bundle.cards.image`` (the input size and normalisation from timm's config where the card leaves them)."""

    kind: Literal[CardKind.IMAGE] = CardKind.IMAGE
    arch: str | None = None
    in_chans: int = Field(default=3, gt=0)
    input_size: tuple[int, int] | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    interpolation: str | None = None
    transforms: str | None = None
    tta: list[str] = Field(default_factory=list)
    tta_weights: dict[str, float] = Field(default_factory=dict)
    tta_random: RandomTta | None = None
    num_workers: int = Field(default=2, ge=0)
    features: bool = False

    @field_validator("transforms")
    @classmethod
    def _inside(cls, value: str | None) -> str | None:
        # An A.save'd JSON file, or "package.module:function" returning the pipeline (called in the kernel).
        if value is None or REFERENCE_RE.match(value):
            return value
        return relative_path(value)

    @field_validator("tta")
    @classmethod
    def _known_tta(cls, value: list[str]) -> list[str]:
        return check_tta_names(value)

    @model_validator(mode="after")
    def _consistent(self) -> ImageCard:
        if (self.arch is None) == (self.factory is None):
            raise ValueError(f"[[models]] '{self.name}': set exactly one of arch (a timm architecture) "
                             "or factory ('package.module:function' returning the nn.Module)")
        views = {"identity", *self.tta, *(["random"] if self.tta_random else [])}
        unknown = sorted(set(self.tta_weights) - views)
        if unknown:
            raise ValueError(f"[[models]] '{self.name}': tta_weights names {', '.join(unknown)}, which this card does not "
                             f"run; its views: {', '.join(sorted(views))}")
        if any(weight < 0 for weight in self.tta_weights.values()):
            raise ValueError(f"[[models]] '{self.name}': tta_weights must be >= 0")
        return self


__all__ = ["ImageCard", "RandomTta"]
