"""What the kernel will use that the user did not write: each card's resolved settings, and where each came from.

The build writes every card into ``kkb_kernel.json`` with all its keys resolved and their ``origins`` (``set``
on the card, ``[model_defaults]``, ``base 'NAME'``, ``default``); ``kkb build`` prints the ones not set on the
card, one line each, grouped by card, so that a user sees what the kernel will do before it runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, fields

from builder.kkb_runtime.card import BuiltCard
from builder.kkb_runtime.submission import COMBINERS
from builder.kkb_runtime.typed import write
from builder.kkb_runtime.vocabulary import CombineKind
from builder.project.cards import SET, CardBase
from builder.project.spec import KernelSpec


@dataclass(frozen=True)
class ResolvedSetting:
    card: str
    key: str
    value: str  # the value as the kernel reads it (JSON)
    origin: str  # default, [model_defaults], base 'NAME'
    unused: str | None = None  # why the kernel ignores it (an encode function does the tokenization), or None

    @property
    def unset(self) -> bool:
        """Nothing (None, an empty list or table): the feature is off, no value is used."""
        return self.value in ("null", "[]", "{}")


def kernel_value(card: BuiltCard, key: str) -> object:
    """A key of kernel.toml's card as the kernel reads it: the card's, or what the build resolved it to (its record)."""
    part = card.card if key in {field.name for field in fields(card.card)} else card.built
    return write(getattr(part, key))


def resolved_settings(cards: Sequence[BuiltCard], models: Sequence[CardBase]) -> tuple[ResolvedSetting, ...]:
    """Per card, each key the user did not set on it, with the value the kernel reads (the built card's, where the
    build resolved it further: an image card's input size and normalisation from timm's config)."""
    written = {card.name: card for card in cards}
    found = []
    for model in models:
        card = written.get(model.name)
        for key, origin in model.origins.items():
            if origin == SET:
                continue
            value = kernel_value(card, key) if card is not None else getattr(model, key)
            if isinstance(value, dict) and not isinstance(getattr(model, key), dict):
                value = getattr(model, key)  # a pipeline the build serialised: the card's own setting
            found.append(ResolvedSetting(model.name, key, json.dumps(value, default=str), origin,
                                         model.unused_keys().get(key)))
    return tuple(found)


def blend_note(spec: KernelSpec) -> str | None:
    """The blend the kernel computes, when its steps are weighted: ``blend: submission = 0.2 × lgbm + 0.4 × net
    (combine = weighted_sum)``; None for an unweighted combine."""
    combine = spec.submission.combine
    if not COMBINERS[combine].weighted or not spec.steps:
        return None
    terms = " + ".join(f"{step.weight:g} × {step.name}" for step in spec.steps)
    total = sum(step.weight for step in spec.steps)
    blend = terms if combine == CombineKind.WEIGHTED_SUM else f"({terms}) / {total:g}"
    origin = "from the cards' weights" if any(card.weight is not None for card in spec.models) else "from [[steps]] weight"
    return f"blend: submission = {blend} (combine = {combine}, {origin})"


__all__ = ["ResolvedSetting", "blend_note", "kernel_value", "resolved_settings"]
