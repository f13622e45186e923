"""Model cards at build time: one module per kind (``image``, ``text``, ``tabular``, ``torch``), one :data:`BUILD_CARDS`
table.

Each entry (:class:`~builder.bundle.cards.unit.BuildCard`) is the kind's whole build side: the pip extra its
build imports, the kernel's card it makes of the spec's, its preparation (what the build records), the files it
ships besides its checkpoints, its checks against the public data and its notes (``tests/test_vocabulary.py`` checks
that the table covers every :class:`CardKind`).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from builder.bundle.cards import image, tabular, text
from builder.bundle.cards import torch as torch_card
from builder.bundle.cards.unit import BuildCard, Extra, built_card
from builder.errors import BundleError
from builder.kkb_runtime.card import BuiltCard
from builder.kkb_runtime.vocabulary import CardKind
from builder.project.cards import CardBase
from builder.project.spec import SPEC_FILE, KernelSpec
from builder.run.calls import calling

BUILD_CARDS: dict[CardKind, BuildCard] = {
    CardKind.IMAGE: image.BUILD,
    CardKind.TEXT: text.BUILD,
    CardKind.GBDT: tabular.GBDT_BUILD,
    CardKind.SKLEARN: tabular.SKLEARN_BUILD,
    CardKind.TORCH: torch_card.BUILD,
}


def prepare_models(spec: KernelSpec, kernel_dir: Path, weights_stage: Path) -> list[BuiltCard]:
    """Every card prepared by its kind into ``weights_stage``: the cards for ``kkb_kernel.json``. Each card is a call
    of the user's code (its factory, its pickles), recorded where the build's sandboxed run watches it."""
    written: dict[str, str] = {}  # output path -> sha256, so cards sharing a checkpoint do not clobber each other
    prepared = []
    for card in spec.models:
        unit = BUILD_CARDS[card.kind]
        with calling("preparing the card", card=card.name, function=_factory(card)):
            prepared.append(built_card(unit, card, unit.prepare(card, kernel_dir, weights_stage, written)))
    return prepared


def card_notes(spec: KernelSpec, kernel_dir: Path, data: Path | None) -> list[str]:
    """Each card's notes on what kkb maps or cannot read in its input (on the public test, ``data``), card by card."""
    found: list[str] = []
    for card in spec.models:
        found += BUILD_CARDS[card.kind].notes(spec, kernel_dir, data, card)
    return found


def record_notes(cards: list[BuiltCard]) -> tuple[str, ...]:
    """What each card's preparation did that the user should know (opt-ins used, keys left out, the preprocessing)."""
    return tuple(note for card in cards for note in BUILD_CARDS[card.kind].record_notes(card.name, card.built))


def _factory(card: CardBase) -> str | None:
    factory = getattr(card, "factory", None)
    return str(factory) if factory else None


def card_files(card: CardBase, kernel_dir: Path) -> list[str]:
    """What the card ships in the weights besides its checkpoints (a text model's config and tokenizer)."""
    return BUILD_CARDS[card.kind].files(card, kernel_dir)


def require_card_extras(spec: KernelSpec, kernel_dir: Path) -> None:
    """Every card's libraries are installed here, else a refusal naming the card, the modules and the extra."""
    for card in spec.models:
        unit = BUILD_CARDS[card.kind]
        missing = [module for module in unit.modules(card) if not _installed(module)]
        if missing:
            raise BundleError(f"{kernel_dir / SPEC_FILE}: models.{card.name}: building {_article(card.kind)} card needs "
                              f"{', '.join(missing)}, not installed here",
                              hint=f'pip install "kkb[{unit.extra.name}]" (core kkb installs without them)')


def _article(kind: CardKind) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


__all__ = ["BUILD_CARDS", "BuildCard", "Extra", "card_files", "card_notes", "prepare_models", "record_notes",
           "require_card_extras"]
