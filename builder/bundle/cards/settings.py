"""What the kernel will use that the user did not write: each card's resolved settings, and where each came from.

The build writes every card into ``kkb_kernel.json`` with all its keys resolved and their ``origins`` (``set``
on the card, ``[model_defaults]``, ``base 'NAME'``, ``default``); ``kkb build`` prints the ones not set on the
card, one line each, grouped by card, so that a user sees what the kernel will do before it runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from builder.project.cards import SET, CardBase


@dataclass(frozen=True)
class ResolvedSetting:
    card: str
    key: str
    value: str  # the value as the kernel reads it (JSON)
    origin: str  # default, [model_defaults], base 'NAME'

    @property
    def unset(self) -> bool:
        """Nothing (None, an empty list or table): the feature is off, no value is used."""
        return self.value in ("null", "[]", "{}")


def with_origins(cards: Sequence[Mapping[str, Any]], models: Sequence[CardBase]) -> list[dict[str, Any]]:
    """The prepared cards with where each key's value came from (``origins``), for ``kkb_kernel.json``."""
    origins = {model.name: model.origins for model in models}
    return [{**card, "origins": origins.get(str(card["name"]), {})} for card in cards]


def resolved_settings(cards: Sequence[Mapping[str, Any]], models: Sequence[CardBase]) -> tuple[ResolvedSetting, ...]:
    """Per card, each key the user did not set on it, with the value the kernel reads (the built card's, where the
    build resolved it further: an image card's input size and normalisation from timm's config)."""
    written = {str(card["name"]): card for card in cards}
    found = []
    for model in models:
        card = written.get(model.name, {})
        for key, origin in model.origins.items():
            if origin == SET:
                continue
            value = card.get(key, getattr(model, key))
            if isinstance(value, dict) and not isinstance(getattr(model, key), dict):
                value = getattr(model, key)  # a pipeline the build serialised: the card's own setting
            found.append(ResolvedSetting(model.name, key, json.dumps(value, default=str), origin))
    return tuple(found)


__all__ = ["ResolvedSetting", "resolved_settings", "with_origins"]
