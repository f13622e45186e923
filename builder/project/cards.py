"""``[[models]]`` settings per card kind, and the shorthands that keep a spec short.

``ModelCard`` (``builder.project.spec``) is one table for every kind; the keys only one kind reads
live here, in one mixin per kind, and :data:`KIND_RULES` (one entry per :class:`CardKind`) checks a
card's keys against its kind: an image card needs ``arch`` or ``factory``, a text card ``model_dir``
or ``factory`` and its ``text_columns``, a booster its ``library``, a scikit-learn card the pickle
opt-in. :func:`expand_models` runs on the raw TOML before validation: ``[model_defaults]`` under
every card, ``base = "NAME"`` inheritance, and an implicit ``predict --model NAME`` step for each
card no step runs (in spec order).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import PurePosixPath
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from builder.kkb_runtime.vocabulary import CardKind
from builder.project.text_inputs import TextInputCard, TextInputFields, check_text_inputs

REFERENCE_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
# kkb_runtime.cards.tabular.LIBRARIES: the file formats each booster library reads.
BOOSTER_SUFFIXES = {"lightgbm": (".txt", ".json", ".lgb"), "xgboost": (".json", ".ubj"), "catboost": (".cbm",)}
PREDICT_STEP = "python -m kkb_runtime predict --model {name} --out {{out}}"


class _Fields(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _inside(value: str) -> str:
    path = PurePosixPath(value)
    if not value or path.is_absolute() or ".." in path.parts or "\\" in value:
        raise ValueError(f"'{value}' must be a relative path inside the kernel folder (no '..', no absolute path)")
    return value


class TextCardFields(TextInputFields):
    """``kind = "text"``: a transformers model over the test table's text columns (with the notebook-parity keys of
    :mod:`builder.project.text_inputs`)."""

    # A folder in the kernel folder with config.json (and the tokenizer's files): shipped in the weights.
    model_dir: str | None = None
    # The tokenizer's folder, when it is not model_dir.
    tokenizer: str | None = None
    text_columns: list[str] = Field(default_factory=list)
    # A second segment (the tokenizer's pair: [SEP] between, token_type_ids 1), e.g. the answer.
    text_pair_columns: list[str] = Field(default_factory=list)
    separator: str = " "
    max_len: int = Field(default=512, gt=4)
    truncation: Literal["head_tail", "head", "tail"] = "head_tail"
    # head_tail: how many tokens of the start are kept (default: half of what fits).
    head_tokens: int | None = Field(default=None, ge=0)
    # What forward() returns, when it is not the logits: an index of a tuple or a key of a dict.
    output: int | str | None = None

    @field_validator("model_dir", "tokenizer")
    @classmethod
    def _folders_inside(cls, value: str | None) -> str | None:
        return None if value is None else _inside(value)


class TabularCardFields(_Fields):
    """``kind = "gbdt"`` / ``"sklearn"``: a booster or an estimator over the user's features of the test table."""

    # "module:function": called with the test table (a DataFrame), returns the feature table.
    feature_function: str | None = None
    library: Literal["lightgbm", "xgboost", "catboost"] | None = None
    # predict_proba (classifiers: the positive class or every class) or predict (regressors, raw scores).
    method: Literal["auto", "predict_proba", "predict"] = "auto"
    # scikit-learn pipelines are pickles: they run code when loaded. Loading one needs this opt-in.
    allow_joblib: bool = False
    # Pickles saved from a notebook name their classes under __main__: this module stands in for it.
    pickle_main: str | None = None

    @field_validator("feature_function")
    @classmethod
    def _reference(cls, value: str | None) -> str | None:
        if value is not None and not REFERENCE_RE.match(value):
            raise ValueError(f"'{value}' is not 'package.module:function' (a function of your code: test table in, features out)")
        return value

    @field_validator("pickle_main")
    @classmethod
    def _module(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$", value):
            raise ValueError(f"'{value}' is not a module name (the module of your code that defines the pickled classes)")
        return value


class CardLike(TextInputCard, Protocol):
    """The fields :data:`KIND_RULES` reads (a ``ModelCard``; the text input keys' in ``TextInputCard``)."""

    arch: str | None
    factory: str | None
    model_dir: str | None
    @property
    def library(self) -> str | None: ...
    allow_joblib: bool
    transforms: str | None
    tta: list[str]
    features: bool

    @property
    def checkpoint_patterns(self) -> list[str]: ...


def _image_rules(card: CardLike) -> None:
    if (card.arch is None) == (card.factory is None):
        raise ValueError(f"[[models]] '{card.name}': set exactly one of arch (a timm architecture) "
                         "or factory ('package.module:function' returning the nn.Module)")


def _text_rules(card: CardLike) -> None:
    if card.model_dir is None and card.factory is None:  # both: the factory gets the folder (model_dir=)
        raise ValueError(f"[[models]] '{card.name}': a text card needs model_dir (a folder with the transformers "
                         "config.json) or factory ('package.module:function' returning the nn.Module), or both")
    if card.arch is not None:
        raise ValueError(f"[[models]] '{card.name}': arch is a timm architecture; a text card names model_dir")
    check_text_inputs(card)  # encode_function, or text_columns (and column_max_len naming them)
    _no_image_keys(card)


def _gbdt_rules(card: CardLike) -> None:
    if card.library is None:
        raise ValueError(f"[[models]] '{card.name}': a gbdt card needs library = 'lightgbm', 'xgboost' or 'catboost'")
    suffixes = BOOSTER_SUFFIXES[card.library]
    for pattern in card.checkpoint_patterns:
        if not pattern.endswith(suffixes) and not pattern.endswith("*"):
            raise ValueError(f"[[models]] '{card.name}': {pattern} is not a {card.library} model file "
                             f"({', '.join(suffixes)})")
    _no_network_keys(card)


def _sklearn_rules(card: CardLike) -> None:
    if not card.allow_joblib:
        raise ValueError(f"[[models]] '{card.name}': a scikit-learn card loads a pickle (joblib), which runs code: "
                         "set allow_joblib = true if you trust the file")
    _no_network_keys(card)


def _no_image_keys(card: CardLike) -> None:
    used = [key for key, value in (("transforms", card.transforms), ("tta", card.tta)) if value]
    if used:
        raise ValueError(f"[[models]] '{card.name}': {', '.join(used)} apply to image cards only")


def _no_network_keys(card: CardLike) -> None:
    used = [key for key, value in (("arch", card.arch), ("factory", card.factory), ("model_dir", card.model_dir),
                                   ("transforms", card.transforms), ("tta", card.tta), ("features", card.features)) if value]
    if used:
        raise ValueError(f"[[models]] '{card.name}': {', '.join(used)} do not apply to a tabular card")


# One rule per kind (tests/test_card_kinds.py checks it covers CardKind).
KIND_RULES: dict[CardKind, Callable[[CardLike], None]] = {
    CardKind.IMAGE: _image_rules,
    CardKind.TEXT: _text_rules,
    CardKind.GBDT: _gbdt_rules,
    CardKind.SKLEARN: _sklearn_rules,
}


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
    expanded = []
    for index, card in enumerate(cards):
        if not isinstance(card, Mapping):
            expanded.append(card)
            continue
        merged = {**defaults, **_inherited(card, by_name, index), **{k: v for k, v in card.items() if k != "base"}}
        by_name[str(merged.get("name"))] = merged
        expanded.append(merged)
    out["models"] = expanded
    if out.get("evaluation_api") is None:
        out["steps"] = implicit_steps(out.get("steps"), expanded)
    return out


def _inherited(card: Mapping[str, Any], known: Mapping[str, Mapping[str, Any]], index: int) -> Mapping[str, Any]:
    base = card.get("base")
    if base is None:
        return {}
    if base not in known:
        names = ", ".join(known) or "none before it"
        raise ValueError(f"models[{index}].base: '{base}' is no [[models]] card above this one (cards: {names})")
    return {key: value for key, value in known[base].items() if key != "name"}


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


__all__ = ["KIND_RULES", "TabularCardFields", "TextCardFields", "expand_models", "implicit_steps"]
