"""A model card as the kernel reads it: the card's keys (:class:`Card`), what the build recorded for it
(:class:`Built`), and where each key's value came from, together one :class:`BuiltCard`.

Each kind's runtime unit (``kkb_runtime.cards.<kind>``) subclasses the two: its card holds the keys of
``kernel.toml``'s card of that kind, every one resolved by the build (what the user set, ``[model_defaults]``,
``base``, or the spec's default; the kernel holds no default of its own); its record holds what the build did with
it (the folds written, the libraries it loaded them with) and the keys whose value the build resolved further
(:func:`resolved`: an image card's normalisation from timm's config, the checkpoint it wrote). In
``kkb_kernel.json`` the three are one object (``kkb_runtime.typed``: the card and its record are flat parts of it).

The build constructs the card from the spec's card (``builder.bundle.cards.<kind>.to_kernel``) before it prepares
anything, and hands it to every kernel helper it calls; the record is what preparing the card returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Literal, TypeVar

from .typed import JsonValue, flat, keys_of
from .vocabulary import CardKind

RESOLVED = "kkb_resolved"  # a record's field that holds a key of kernel.toml's card, as the build resolved it


def resolved() -> dict[str, object]:
    """Field metadata: a record's value written under the name of a key of ``kernel.toml``'s card."""
    return {RESOLVED: True}


@dataclass(frozen=True)
class Card:
    """The keys every kind has."""

    name: str
    kind: CardKind
    step: bool
    columns: tuple[str, ...]
    weight: float | None  # its weight in a blend of cards (its implicit step's weight)
    fold_weights: tuple[float, ...] | None
    num_classes: int


@dataclass(frozen=True)
class NetworkCard(Card):
    """The keys of a torch network card (image, text, torch): how it is built, loaded and run."""

    factory: str | None
    model_kwargs: Mapping[str, JsonValue]
    batch_size: int
    activation: Literal["softmax", "sigmoid", "none"]
    half: bool
    safetensors: bool
    strip_prefix: str | None
    key_rename: tuple[tuple[str, str], ...]
    add_prefix: str | None
    strict: bool
    allow_pickle: bool
    amp: bool

    def describe(self) -> str:
        """The call that makes the card's network, for messages: ``pkg.models:make(width=64)``."""
        return f"{self.factory}(" + ", ".join(f"{key}={value!r}" for key, value in self.model_kwargs.items()) + ")"


@dataclass(frozen=True)
class Fold:
    """One checkpoint the build wrote into the weights (a fold): its file there, its hash, where it came from."""

    file: str
    sha256: str
    source: str
    loaded_with: str


@dataclass(frozen=True)
class LeftOut:
    """The keys ``strict = false`` let a checkpoint load without."""

    missing: tuple[str, ...]
    unexpected: tuple[str, ...]


@dataclass(frozen=True)
class NetworkFold(Fold):
    """A network's fold: the training checkpoint's entry it came from, the prefix stripped, the keys left out."""

    source_key: str | None
    stripped_prefix: str | None
    left_out: LeftOut


@dataclass(frozen=True)
class Built:
    """What the build recorded for every kind: the folds it wrote (the first one's file as ``checkpoint``) and the
    versions of the libraries it loaded them with."""

    checkpoint: str = field(metadata=resolved())
    checkpoints: tuple[Fold, ...]
    built_with: Mapping[str, str]


@dataclass(frozen=True)
class NetworkBuilt(Built):
    """A network's record: plain state dicts (``checkpoint_key`` resolved to none), the first fold's provenance."""

    checkpoint_key: str | None = field(metadata=resolved())
    checkpoints: tuple[NetworkFold, ...]
    checkpoint_sha256: str
    checkpoint_source: str
    source_key: str | None
    dtype: str
    num_params: int


@dataclass(frozen=True)
class BuiltCard:
    """One card of ``kkb_kernel.json``: its keys, what the build recorded, and where each key came from (``set``,
    ``[model_defaults]``, ``base 'NAME'``, ``default``)."""

    card: Card = field(metadata=flat())
    built: Built = field(metadata=flat())
    origins: Mapping[str, str]

    @property
    def name(self) -> str:
        return self.card.name

    @property
    def kind(self) -> CardKind:
        return self.card.kind


F = TypeVar("F", bound=Fold)


def weighted_folds(card: Card, folds: Sequence[F]) -> list[tuple[F, float]]:
    """Every fold the build wrote (a record's ``checkpoints``), with its weight (``fold_weights``, else 1 each)."""
    weights = card.fold_weights or (1.0,) * len(folds)
    return list(zip(folds, weights, strict=True))


def resolved_keys(built: type[Built]) -> list[str]:
    """The keys of ``kernel.toml``'s card a kind's record holds, as the build resolved them."""
    return sorted(entry.name for entry in fields(built) if entry.metadata.get(RESOLVED))


def card_keys(card: type[Card], built: type[Built]) -> list[str]:
    """The keys of ``kernel.toml``'s card of a kind, as the kernel reads them: its card's and its record's resolved ones."""
    return sorted([*keys_of(card), *resolved_keys(built)])


__all__ = ["RESOLVED", "Built", "BuiltCard", "Card", "Fold", "LeftOut", "NetworkBuilt", "NetworkCard", "NetworkFold",
           "card_keys", "resolved", "resolved_keys", "weighted_folds"]
