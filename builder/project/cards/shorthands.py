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

from builder.kkb_runtime.submission import COMBINERS
from builder.kkb_runtime.vocabulary import CardKind, CombineKind
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
        check_blend_written(out.get("steps"), expanded)
        out["steps"] = implicit_steps(out.get("steps"), expanded)
        out["submission"] = blend_combine(out.get("submission"), out["steps"], expanded)
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
        if any(_runs_card(run, name) for run in named):
            continue
        step = {"name": name, "run": PREDICT_STEP.format(name=name)}
        if card.get("columns"):
            step["columns"] = card["columns"]
        if card.get("weight") is not None:
            step["weight"] = card["weight"]
        written.append(step)
    return written


def _runs_card(run: str, name: str) -> bool:
    """Whether a step's command runs the card ``name`` (``--model NAME`` or ``--model=NAME``)."""
    return re.search(rf"--model(=|\s+){re.escape(name)}(\s|$)", run) is not None


# --- a blend of cards: each card's weight weighs its implicit step ---------------------------------------------------
# One weight per step, and only one place that gives it: a card's `weight` goes to the step kkb adds for the card; a
# step written in [[steps]] that runs a weighted card would have two (the card's and its own `weight`, default 1), so
# it is refused by name, and so is any step without a weight in a blend (a silent 1.0 beside 0.2 and 0.4).


def _weighted(cards: list[Any]) -> dict[str, Any]:
    return {str(card.get("name")): card["weight"] for card in cards
            if isinstance(card, Mapping) and card.get("weight") is not None}


def check_blend_written(steps: Any, cards: list[Any]) -> None:
    """No step of ``[[steps]]`` runs a card that has a weight: the weight would be the card's or the step's."""
    weighted = _weighted(cards)
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, Mapping):
            continue
        for name, weight in weighted.items():
            if _own_step(step, name, weight):
                continue  # the card's step as kkb added it (a spec read back from what the build wrote)
            if _runs_card(str(step.get("run", "")), name):
                raise ValueError(f"[[steps]] '{step.get('name')}' runs models.{name}, which has weight = {weight}: a "
                                 "card's weight weighs the step kkb adds for it, and this step has its own (weight, "
                                 f"default 1.0): give the step its weight and drop the card's, or drop the step")


def _own_step(step: Mapping[str, Any], name: str, weight: Any) -> bool:
    return (step.get("name") == name and step.get("run") == PREDICT_STEP.format(name=name)
            and step.get("weight") == weight)


def blend_combine(submission: Any, steps: Any, cards: list[Any]) -> Any:
    """With cards' weights, every step has a weight and ``combine`` uses them: ``weighted_sum`` unless written."""
    weighted = _weighted(cards)
    if not weighted or not isinstance(steps, list) or (submission is not None and not isinstance(submission, Mapping)):
        return submission
    given = ", ".join(f"models.{name}.weight = {weight}" for name, weight in weighted.items())
    unweighted = [str(step.get("name")) for step in steps if isinstance(step, Mapping) and step.get("weight") is None]
    if unweighted:
        raise ValueError(f"a blend of cards ({given}) weighs every step, and step(s) {', '.join(unweighted)} have no "
                         "weight: give each its weight (on its card, or on the [[steps]] entry)")
    out = dict(submission or {})
    combine = out.setdefault("combine", CombineKind.WEIGHTED_SUM.value)
    if combine not in CombineKind.values() or not COMBINERS[CombineKind(combine)].weighted:
        raise ValueError(f"[submission] combine = '{combine}' ignores weights, and the cards have them ({given}): "
                         "leave combine out (or 'weighted_sum': Σ weight × prediction, as a notebook's blend line), "
                         "or 'weighted_mean' (divided by the weights' sum)")
    return out


__all__ = ["PREDICT_STEP", "blend_combine", "check_blend_written", "check_defaults_taken", "expand_models",
           "implicit_steps"]
