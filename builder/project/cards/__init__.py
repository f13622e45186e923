"""``[[models]]``: one pydantic model per card kind (``base``, ``image``, ``text``, ``tabular``, ``torch``), the union of them
discriminated on ``kind`` (``kinds``), and the shorthands that keep a spec short (``shorthands``)."""

from __future__ import annotations

from builder.project.cards.base import DEFAULT, MODEL_DEFAULTS, ORIGINS_KEY, SET, CardBase, NetworkCard
from builder.project.cards.image import ImageCard, RandomTta
from builder.project.cards.kinds import (
    CARD_MODELS,
    DEFAULT_KIND,
    UNKNOWN_KIND,
    ModelCard,
    keys_of,
    kind_of,
    kinds_taking,
    kinds_words,
)
from builder.project.cards.shorthands import expand_models, implicit_steps
from builder.project.cards.tabular import BOOSTER_SUFFIXES, GbdtCard, SklearnCard, TabularCard
from builder.project.cards.text import TextCard
from builder.project.cards.torch import TorchCard

__all__ = [
    "BOOSTER_SUFFIXES", "CARD_MODELS", "DEFAULT", "DEFAULT_KIND", "MODEL_DEFAULTS", "ORIGINS_KEY", "SET", "UNKNOWN_KIND",
    "CardBase", "GbdtCard", "ImageCard", "ModelCard", "NetworkCard", "RandomTta", "SklearnCard", "TabularCard", "TextCard",
    "TorchCard", "expand_models", "implicit_steps", "keys_of", "kind_of", "kinds_taking", "kinds_words",
]
