"""The card as the build resolved it: one frozen dataclass per kind, read from ``kkb_kernel.json``.

The build writes every key of a card with its value resolved (``builder.bundle.cards``: what the user set,
``[model_defaults]``, ``base``, or the spec's default; where each came from under ``origins``). The kernel
holds no default of its own for a card key: :func:`read_card` takes every field of the kind's dataclass from
the written card, and a key the build did not write is an error naming it (an old build: build again), never a
guess. ``tests/test_card_kinds.py`` checks that no field here has a default and that each kind's fields are
the keys ``kernel.toml``'s card of that kind takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ...vocabulary import CardKind


class CardMalformed(ValueError):
    """``kkb_kernel.json`` lacks a resolved key of a card (built by another kkb), or names an unknown kind."""


@dataclass(frozen=True)
class Card:
    """What every kind has; ``built`` is what the build recorded besides the keys (folds, versions, pipelines)."""

    name: str
    kind: CardKind
    step: bool
    columns: list[str]
    checkpoint: str
    fold_weights: list[float] | None
    num_classes: int
    built: Mapping[str, Any]
    origins: Mapping[str, str]


@dataclass(frozen=True)
class NetworkCard(Card):
    factory: str | None
    model_kwargs: dict[str, Any]
    batch_size: int
    activation: str
    half: bool
    safetensors: bool
    checkpoint_key: str | None
    strip_prefix: str | None
    key_rename: list[list[str]]
    add_prefix: str | None
    strict: bool
    allow_pickle: bool
    amp: bool


@dataclass(frozen=True)
class ImageCard(NetworkCard):
    arch: str | None
    in_chans: int
    # Resolved at build (the card's, else timm's pretrained config): never None in a built card.
    input_size: list[int] | None
    mean: list[float] | None
    std: list[float] | None
    interpolation: str | None
    # The A.save'd pipeline as the build serialised it (None: kkb's resize + normalise only).
    transforms: dict[str, Any] | None
    tta: list[str]
    tta_weights: dict[str, float]
    tta_random: dict[str, Any] | None
    num_workers: int
    features: bool


@dataclass(frozen=True)
class TextCard(NetworkCard):
    model_dir: str | None
    tokenizer: str | None
    text_columns: list[str]
    text_pair_columns: list[str]
    separator: str
    max_len: int
    truncation: str
    head_tokens: int | None
    output: int | str | None
    encode_function: str | None
    padding: str
    column_max_len: dict[str, int]


@dataclass(frozen=True)
class TabularCard(Card):
    feature_function: str | None
    method: str


@dataclass(frozen=True)
class GbdtCard(TabularCard):
    library: str


@dataclass(frozen=True)
class SklearnCard(TabularCard):
    allow_joblib: bool
    pickle_main: str | None


@dataclass(frozen=True)
class TorchCard(NetworkCard):
    feature_function: str | None
    feature_columns: list[str]
    preprocessor: str | list[str] | None
    allow_joblib: bool
    pickle_main: str | None


# One dataclass per kind (tests/test_vocabulary.py checks that it covers CardKind).
CARD_TYPES: dict[CardKind, type[Card]] = {
    CardKind.IMAGE: ImageCard,
    CardKind.TEXT: TextCard,
    CardKind.GBDT: GbdtCard,
    CardKind.SKLEARN: SklearnCard,
    CardKind.TORCH: TorchCard,
}
RECORDS = ("built", "origins")  # the fields that are no key of kernel.toml's card


def keys_of(kind: CardKind) -> list[str]:
    """The card keys a kind's dataclass reads from ``kkb_kernel.json``."""
    return sorted(field.name for field in fields(CARD_TYPES[kind]) if field.name not in RECORDS)


def read_card(raw: Mapping[str, Any]) -> Card:
    """The written card as its kind's dataclass: every key from ``raw``, none defaulted here."""
    name = raw.get("name", "?")
    kind = raw.get("kind")
    if kind not in CardKind.values():
        raise CardMalformed(f"card '{name}' in kkb_kernel.json has kind {kind!r}, not one of {', '.join(CardKind.values())}")
    keys = keys_of(CardKind(str(kind)))
    missing = [key for key in keys if key not in raw]
    if missing:
        raise CardMalformed(f"card '{name}' in kkb_kernel.json lacks {', '.join(missing)}: it was built by another kkb; "
                            "build the kernel again")
    values = {key: raw[key] for key in keys}
    values["kind"] = CardKind(str(kind))
    built = {key: value for key, value in raw.items() if key not in keys and key != "origins"}
    return CARD_TYPES[CardKind(str(kind))](**values, built=built, origins=dict(raw.get("origins") or {}))


__all__ = ["CARD_TYPES", "Card", "CardMalformed", "GbdtCard", "ImageCard", "NetworkCard", "SklearnCard", "TabularCard",
           "TextCard", "TorchCard", "keys_of", "read_card"]
