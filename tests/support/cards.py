"""A card as the build writes it into ``kkb_kernel.json``: every key resolved by the spec's card model of its kind."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from builder.project.cards import ModelCard
from builder.project.spec import PostprocessStage

_CARDS: TypeAdapter[Any] = TypeAdapter(ModelCard)


def resolved_card(keys: dict[str, Any], **built: Any) -> dict[str, Any]:
    """``keys`` (a kernel.toml card) validated and dumped with every default, then what the build records (``built``)."""
    return {**_CARDS.validate_python(keys).model_dump(mode="json"), **built}


def resolved_stages(*stages: dict[str, Any]) -> list[dict[str, Any]]:
    """``[[postprocess]]`` stages as the build writes them (every key of the kind resolved)."""
    return [PostprocessStage.model_validate(stage).resolved() for stage in stages]
