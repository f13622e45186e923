"""``kind = "torch"``: the user's ``nn.Module`` over float32 tensors of a feature table.

The card's keys of its own (:class:`TorchCardFields`), the rule :data:`builder.project.cards.KIND_RULES`
runs for it (:func:`torch_rules`), the refusal of its keys on a card of another kind
(:func:`no_torch_keys`) and the values a torch card defaults to differently from the other kinds
(:func:`torch_defaults`, applied to the raw card before validation: no autocast unless asked, batches of
1024 rows).

The shared keys it reads: ``factory`` (+ ``model_kwargs``), ``feature_function``, ``checkpoint`` (files,
a glob, or one file of ``{fold: state_dict}``), ``fold_weights``, ``activation``, ``batch_size``,
``amp``, the checkpoint remapping keys, ``allow_joblib`` and ``pickle_main`` (for ``preprocessor``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from builder.project.spec_values import relative_path

# What a torch card takes when neither the card, its base nor [model_defaults] sets it (the other kinds' defaults suit images and text):
# a table net's outputs match a float32 notebook only without autocast, and its rows are cheap.
RESOLVED_DEFAULTS: dict[str, Any] = {"amp": False, "batch_size": 1024}
TORCH_KEYS = ("feature_columns", "preprocessor")


class TorchCardFields(BaseModel):
    """``kind = "torch"``: the keys only a torch card reads."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # The feature table's columns the net reads, in the order it was trained on (default: every column
    # the feature function returns, in its order). Checked against the feature table at build and in the kernel.
    feature_columns: list[str] = Field(default_factory=list)
    # A fitted scaler / encoder / ColumnTransformer your training saved (joblib or pickle): its .transform runs
    # on the selected features before the net. One file for every fold, or a list / glob of one per fold.
    # A pickle runs code when loaded: it needs allow_joblib = true (pickle_main for classes saved from a notebook).
    preprocessor: str | list[str] | None = None

    @field_validator("feature_columns")
    @classmethod
    def _feature_columns_unique(cls, value: list[str]) -> list[str]:
        repeated = sorted({column for column in value if value.count(column) > 1})
        if repeated:
            raise ValueError(f"feature_columns names {', '.join(repeated)} more than once")
        return value

    @field_validator("preprocessor")
    @classmethod
    def _preprocessor_inside(cls, value: str | list[str] | None) -> str | list[str] | None:
        paths = value if isinstance(value, list) else [value] if value is not None else []
        if isinstance(value, list) and not value:
            raise ValueError("an empty list: name the fitted preprocessor file(s) or remove the key")
        for path in paths:
            relative_path(path)
        return value

    @property
    def preprocessor_patterns(self) -> list[str]:
        if self.preprocessor is None:
            return []
        return list(self.preprocessor) if isinstance(self.preprocessor, list) else [self.preprocessor]


class TorchCardLike(Protocol):
    """The fields :func:`torch_rules` reads (a ``ModelCard``)."""

    name: str
    arch: str | None
    factory: str | None
    model_dir: str | None
    transforms: str | None
    tta: list[str]
    features: bool
    text_columns: list[str]
    allow_joblib: bool
    @property
    def activation(self) -> str: ...
    num_classes: int
    feature_columns: list[str]
    preprocessor: str | list[str] | None

    @property
    def library(self) -> str | None: ...


def torch_rules(card: TorchCardLike) -> None:
    """A torch card: a factory, none of the image/text/booster keys, the pickle opt-in for a preprocessor."""
    if card.factory is None:
        raise ValueError(f"[[models]] '{card.name}': a torch card needs factory ('package.module:function' "
                         "returning the nn.Module that takes a (rows, features) float32 tensor)")
    used = [key for key, value in (("arch", card.arch), ("model_dir", card.model_dir), ("transforms", card.transforms),
                                   ("tta", card.tta), ("features", card.features), ("text_columns", card.text_columns),
                                   ("library", card.library)) if value]
    if used:
        raise ValueError(f"[[models]] '{card.name}': {', '.join(used)} do not apply to a torch card "
                         "(a net over the feature function's table)")
    if card.preprocessor is not None and not card.allow_joblib:
        raise ValueError(f"[[models]] '{card.name}': preprocessor is a pickle (joblib), which runs code when loaded: "
                         "set allow_joblib = true if you trust the file")
    if card.activation == "softmax" and card.num_classes == 1:
        raise ValueError(f"[[models]] '{card.name}': activation = 'softmax' over one output is always 1: set activation "
                         "= 'sigmoid' (a binary logit) or 'none' (a regression, or a net that ends in its own activation)")


def no_torch_keys(card: Any) -> None:
    """``feature_columns`` and ``preprocessor`` on a card of another kind would be ignored: refused instead."""
    used = [key for key in TORCH_KEYS if getattr(card, key, None)]
    if used and str(card.kind) != "torch":
        raise ValueError(f"[[models]] '{card.name}': {', '.join(used)} {'is a key' if len(used) == 1 else 'are keys'} "
                         f"of torch cards; this card is kind = '{card.kind}'")


def torch_defaults(card: Mapping[str, Any]) -> Mapping[str, Any]:
    """A raw torch card (``[model_defaults]`` and ``base`` folded in) with the torch card's own defaults under it."""
    if card.get("kind") != "torch":
        return card
    return {**RESOLVED_DEFAULTS, **card}


__all__ = ["RESOLVED_DEFAULTS", "TORCH_KEYS", "TorchCardFields", "no_torch_keys", "torch_defaults", "torch_rules"]
