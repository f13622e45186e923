"""The card kinds' models: :data:`CARD_MODELS`, one entry per :class:`CardKind`, and the union built from it.

:data:`CARD_MODELS` is the only place a kind's model is named: the union :data:`ModelCard` (discriminated on
``kind``; a card without ``kind`` is an image card), the "a key of text cards" refusal and the did-you-mean
among a kind's own keys (``builder.project.spec_errors``), and ``[model_defaults]``'s check all read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import Discriminator, Tag

from builder.kkb_runtime.vocabulary import CardKind
from builder.project.cards.base import CardBase
from builder.project.cards.image import ImageCard
from builder.project.cards.tabular import GbdtCard, SklearnCard
from builder.project.cards.text import TextCard
from builder.project.cards.torch import TorchCard

# One model per kind (tests/test_vocabulary.py checks that it covers CardKind).
CARD_MODELS: dict[CardKind, type[CardBase]] = {
    CardKind.IMAGE: ImageCard,
    CardKind.TEXT: TextCard,
    CardKind.GBDT: GbdtCard,
    CardKind.SKLEARN: SklearnCard,
    CardKind.TORCH: TorchCard,
}
DEFAULT_KIND = CardKind.IMAGE
# The error type of a ``kind`` that is no CardKind (spec_errors reports it at the ``kind`` key).
UNKNOWN_KIND = "card_kind"


def kinds_words(kinds: tuple[str, ...] = CardKind.values()) -> str:
    """``'image', 'text', 'gbdt' or 'sklearn'``: the kinds, from the enum."""
    quoted = [f"'{kind}'" for kind in kinds]
    return ", ".join(quoted[:-1]) + f" or {quoted[-1]}" if len(quoted) > 1 else "".join(quoted)


def kind_of(raw: Any) -> str | None:
    """The tag of a raw card (its ``kind``, else the default kind), or of a card already built."""
    if isinstance(raw, Mapping):
        kind = raw.get("kind", DEFAULT_KIND)
        return str(kind) if isinstance(kind, str) else None
    kind = getattr(raw, "kind", None)
    return None if kind is None else str(kind)


def keys_of(kind: CardKind) -> list[str]:
    """The keys a card of ``kind`` takes."""
    return sorted(CARD_MODELS[kind].model_fields)


def kinds_taking(key: str) -> list[CardKind]:
    """The kinds whose cards take ``key``."""
    return [kind for kind, model in CARD_MODELS.items() if key in model.model_fields]


if TYPE_CHECKING:
    ModelCard = CardBase  # narrowed with isinstance where a kind's own keys are read
else:
    ModelCard = Annotated[
        Union[tuple(Annotated[model, Tag(kind.value)] for kind, model in CARD_MODELS.items())],  # noqa: UP007
        Discriminator(kind_of, custom_error_type=UNKNOWN_KIND, custom_error_message=f"Input should be {kinds_words()}"),
    ]

__all__ = ["CARD_MODELS", "DEFAULT_KIND", "UNKNOWN_KIND", "ModelCard", "kind_of", "keys_of", "kinds_taking", "kinds_words"]
