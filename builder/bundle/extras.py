"""Which ``pip install "kkb[...]"`` extra a kernel needs here, refused at build time by name when it is missing.

Core kkb (build, push, submit, the dry run, the local Kaggle) installs without torch: a pandas-only kernel needs
nothing more. A ``[[models]]`` card is built here (its checkpoint normalised and loaded once), so the card's
libraries must be installed where ``kkb build`` runs; without them the build stops before anything is
staged, naming the extra, instead of an ``ImportError`` deep in the card's preparation.

One registry, keyed by :class:`CardKind`: the extra and the modules its build imports.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from builder.errors import BundleError
from builder.kkb_runtime.vocabulary import CardKind
from builder.project.spec import SPEC_FILE, KernelSpec


@dataclass(frozen=True)
class Extra:
    name: str  # pip install "kkb[name]"
    modules: tuple[str, ...]  # what building a card of this kind imports


CARD_EXTRAS: dict[CardKind, Extra] = {
    CardKind.IMAGE: Extra("vision", ("torch", "timm", "safetensors")),
    CardKind.TEXT: Extra("text", ("torch", "transformers", "safetensors")),
    CardKind.GBDT: Extra("tabular", ("lightgbm",)),
    CardKind.SKLEARN: Extra("tabular", ("sklearn", "joblib")),
    CardKind.TORCH: Extra("torch", ("torch", "safetensors", "joblib")),
}


def card_kind(card: object) -> CardKind:
    """A card's kind (``kind`` in kernel.toml where the spec has it; an image card otherwise)."""
    return CardKind(getattr(card, "kind", None) or CardKind.IMAGE)


def require_card_extras(spec: KernelSpec, kernel_dir: Path) -> None:
    """Every card's libraries are installed here, else a refusal naming the card, the modules and the extra."""
    for card in spec.models:
        extra = CARD_EXTRAS[card_kind(card)]
        missing = [module for module in extra.modules if not _installed(module)]
        if card.transforms and not _installed("albumentations"):
            missing.append("albumentations")
        if missing:
            raise BundleError(f"{kernel_dir / SPEC_FILE}: models.{card.name}: building {_article(card_kind(card))} card needs "
                              f"{', '.join(missing)}, not installed here",
                              hint=f'pip install "kkb[{extra.name}]" (core kkb installs without them)')


def _article(kind: CardKind) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


__all__ = ["CARD_EXTRAS", "Extra", "card_kind", "require_card_extras"]
