"""The shorthands that keep a spec short, folded into each card before validation.

:func:`expand_models` runs on the raw TOML: ``[model_defaults]`` under every card whose kind takes the key
(a default no card takes is refused, naming the kinds that do), ``base = "NAME"`` inheritance, and an
implicit ``predict --model NAME`` step for each card no step runs (in spec order). Each card carries where
its values came from (``ORIGINS_KEY``: ``[model_defaults]``, ``base 'NAME'``), kept by the card model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from builder.kkb_runtime.vocabulary import CardKind
from builder.project.cards.base import MODEL_DEFAULTS, ORIGINS_KEY, SET
from builder.project.cards.kinds import DEFAULT_KIND, keys_of, kinds_taking
from builder.project.spec_values import did_you_mean

PREDICT_STEP = "python -m kkb_runtime predict --model {name} --out {{out}}"


def expand_models(raw: Any) -> Any:
    """The raw spec with ``[model_defaults]`` and ``base`` folded into each card and the implicit steps added."""
    if not isinstance(raw, Mapping):
        return raw
    out = dict(raw)
    defaults = out.pop("model_defaults", None) or {}
    cards = out.get("models")
    if not isinstance(cards, list) or not isinstance(defaults, Mapping):
        if defaults:
            out["model_defaults"] = defaults  # let validation report it
        return out
    by_name: dict[str, Mapping[str, Any]] = {}
    expanded: list[Any] = []
    kinds: list[CardKind] = []
    for index, card in enumerate(cards):
        if not isinstance(card, Mapping):
            expanded.append(card)
            continue
        merged = _merged(card, defaults, _inherited(card, by_name, index))
        kind = merged.get("kind", DEFAULT_KIND)
        if kind in CardKind.values():
            kinds.append(CardKind(kind))
        by_name[str(merged.get("name"))] = merged
        expanded.append(merged)
    if len(kinds) == len(expanded):  # a card of an unknown kind is reported on its own
        check_defaults_taken(defaults, kinds)
    out["models"] = expanded
    if out.get("evaluation_api") is None:
        out["steps"] = implicit_steps(out.get("steps"), expanded)
    return out


def _merged(card: Mapping[str, Any], defaults: Mapping[str, Any], inherited: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults (the keys the card's kind takes), then the base's values, then the card's own; where each came from."""
    own = {key: value for key, value in card.items() if key not in ("base", ORIGINS_KEY)}
    kind = own.get("kind", inherited.get("kind", defaults.get("kind", DEFAULT_KIND)))
    takes = set(keys_of(CardKind(kind))) if kind in CardKind.values() else set(defaults)
    taken = {key: value for key, value in defaults.items() if key in takes}
    origins = {**dict.fromkeys(taken, MODEL_DEFAULTS), **dict(inherited.get(ORIGINS_KEY) or {})}
    merged = {**taken, **{key: value for key, value in inherited.items() if key != ORIGINS_KEY}, **own}
    origins.update(dict.fromkeys(own, SET))
    return {**merged, ORIGINS_KEY: origins}


def check_defaults_taken(defaults: Mapping[str, Any], kinds: list[CardKind]) -> None:
    """Every key of ``[model_defaults]`` is taken by one card at least (a default nobody reads is a silent typo)."""
    taken = {key for kind in kinds for key in keys_of(kind)}
    for key in defaults:
        if key in taken:
            continue
        cards = ", ".join(sorted({str(kind) for kind in kinds})) or "none"
        owners = kinds_taking(str(key))
        why = (f"a key of {' and '.join(map(str, owners))} cards" if owners else
               f"no card's key{did_you_mean(str(key), sorted(taken))}")
        raise ValueError(f"model_defaults.{key}: no card takes it: {key} is {why}; the cards here are kind {cards}")


def _inherited(card: Mapping[str, Any], known: Mapping[str, Mapping[str, Any]], index: int) -> dict[str, Any]:
    base = card.get("base")
    if base is None:
        return {}
    if base not in known:
        names = ", ".join(known) or "none before it"
        raise ValueError(f"models[{index}].base: '{base}' is no [[models]] card above this one (cards: {names})")
    values = {key: value for key, value in known[base].items() if key != "name"}
    origins = dict(values.get(ORIGINS_KEY) or {})
    values[ORIGINS_KEY] = {key: f"base '{base}'" if origin == SET else origin
                           for key, origin in origins.items() if key != "name"}
    return values


def implicit_steps(steps: Any, cards: list[Any]) -> Any:
    """A ``predict --model NAME`` step for every card no step names, after the written steps, in card order."""
    if steps is not None and not isinstance(steps, list):
        return steps
    written = list(steps or [])
    named = {str(step.get("run", "")) for step in written if isinstance(step, Mapping)}
    taken = {step.get("name") for step in written if isinstance(step, Mapping)}
    for card in cards:
        name = card.get("name") if isinstance(card, Mapping) else None
        if not isinstance(name, str) or name in taken or card.get("step") is False:
            continue
        if any(re.search(rf"--model(=|\s+){re.escape(name)}(\s|$)", run) for run in named):
            continue
        step = {"name": name, "run": PREDICT_STEP.format(name=name)}
        if card.get("columns"):
            step["columns"] = card["columns"]
        written.append(step)
    return written


__all__ = ["PREDICT_STEP", "check_defaults_taken", "expand_models", "implicit_steps"]
