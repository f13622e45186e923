"""What every ``[[models]]`` card has, whatever its kind, and the keys every torch network card shares.

Each kind is one model (``image``, ``text``, ``tabular``), ``extra="forbid"``: a card takes only the keys
of its own kind. Where a value came from (written on the card, ``[model_defaults]``, ``base``, or the
default) is kept beside the card (:attr:`CardBase.origins`): the build writes it with the resolved card.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator
from pydantic.functional_validators import ModelWrapValidatorHandler

from builder.kkb_runtime.vocabulary import CardKind
from builder.project.spec_values import REFERENCE_RE, StrictModel, relative_path

# The key ``expand_models`` fills with where each written value came from (never a key of kernel.toml).
ORIGINS_KEY = "__origins__"
# Where a resolved value came from (``CardBase.origin``).
SET = "set"
DEFAULT = "default"
MODEL_DEFAULTS = "[model_defaults]"


def check_reference(value: str | None, what: str) -> str | None:
    if value is not None and not REFERENCE_RE.match(value):
        raise ValueError(f"'{value}' is not 'package.module:function' ({what})")
    return value


def check_module(value: str | None) -> str | None:
    """``pickle_main``: a module name (the module of the user's code that defines the pickled classes)."""
    if value is not None and not re.match(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$", value):
        raise ValueError(f"'{value}' is not a module name (the module of your code that defines the pickled classes)")
    return value


def check_arguments(card: CardBase, function: str, arguments: str) -> None:
    """A card's ``*_args`` only beside the function they are passed to (never ignored)."""
    if getattr(card, arguments) and getattr(card, function) is None:
        raise ValueError(f"[[models]] '{card.name}': {arguments} are passed to {function} as keyword arguments, and the "
                         f"card has no {function}: set it, or drop {arguments}")


class CardBase(StrictModel):
    """The keys of every kind: its name, its kind, its step, its columns, its checkpoints (folds), its width."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    kind: CardKind
    # false: no implicit `predict --model NAME` step for this card (a step of your own uses it).
    step: bool = True
    # The prediction columns this card writes, when not all of them (a column group: copied to its implicit step).
    columns: list[str] = Field(default_factory=list)
    # This card's weight in a blend of cards (copied to its implicit step): `combine` sums weight × prediction.
    weight: float | None = Field(default=None, gt=0)
    checkpoint: str | list[str]
    fold_weights: list[float] | None = None
    num_classes: int = Field(gt=0)
    _origins: dict[str, str] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_origins(cls, data: Any, handler: ModelWrapValidatorHandler[CardBase],
                      info: ValidationInfo) -> CardBase:
        if isinstance(data, CardBase):  # a card already read keeps where its values came from
            return handler(data)
        origins: Mapping[str, str] = {}
        if isinstance(data, Mapping) and ORIGINS_KEY in data:
            origins = data[ORIGINS_KEY]
            data = {key: value for key, value in data.items() if key != ORIGINS_KEY}
        card = handler(data)
        card._origins = {key: str(origins.get(key, SET)) for key in card.model_fields_set}
        return card

    def origin(self, key: str) -> str:
        """``set`` (on the card), ``[model_defaults]``, ``base 'NAME'``, or ``default`` (nobody wrote it)."""
        return self._origins.get(key, SET if key in self.model_fields_set else DEFAULT)

    @property
    def origins(self) -> dict[str, str]:
        return {key: self.origin(key) for key in type(self).model_fields}

    def unused_keys(self) -> dict[str, str]:
        """Keys this card's other settings make the kernel ignore, and why (``kkb build`` shows them as unused)."""
        return {}

    @field_validator("checkpoint")
    @classmethod
    def _checkpoints_inside(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list):
            if not value:
                raise ValueError("an empty list: name at least one checkpoint")
            return [relative_path(item) for item in value]
        return relative_path(value)

    @model_validator(mode="after")
    def _fold_weights_fit(self) -> CardBase:
        if self.fold_weights is not None:
            if isinstance(self.checkpoint, str) and not any(ch in self.checkpoint for ch in "*?["):
                raise ValueError(f"[[models]] '{self.name}': fold_weights needs several checkpoints (a list or a glob)")
            if isinstance(self.checkpoint, list) and len(self.fold_weights) != len(self.checkpoint):
                raise ValueError(f"[[models]] '{self.name}': {len(self.fold_weights)} fold_weights for "
                                 f"{len(self.checkpoint)} checkpoints")
            if any(weight < 0 for weight in self.fold_weights) or not sum(self.fold_weights) > 0:
                raise ValueError(f"[[models]] '{self.name}': fold_weights must be >= 0 with a positive sum")
        return self

    @property
    def checkpoint_patterns(self) -> list[str]:
        return list(self.checkpoint) if isinstance(self.checkpoint, list) else [self.checkpoint]


class NetworkCard(CardBase):
    """The keys of a torch network card (image, text): how it is built, loaded, and run."""

    # "package.module:function" in the code dataset, called with model_kwargs, returning the nn.Module.
    factory: str | None = None
    model_kwargs: dict[str, Any] = Field(default_factory=dict)
    batch_size: int = Field(default=32, gt=0)
    activation: Literal["softmax", "sigmoid", "none"] = "softmax"
    half: bool = False
    safetensors: bool = True
    # Which entry of a training checkpoint holds the weights; None: timm's order (EMA first).
    checkpoint_key: str | None = None
    # Checkpoints saved by another wrapper: applied in this order, after module./_orig_mod. are stripped.
    strip_prefix: str | None = None
    key_rename: list[tuple[str, str]] = Field(default_factory=list)
    add_prefix: str | None = None
    # false: load what fits, listing the missing and unexpected keys in the build output (never shapes).
    strict: bool = True
    # true: this card's checkpoints may run pickled code (torch.load weights_only=False); recorded in the build.
    allow_pickle: bool = False
    amp: bool = True

    @field_validator("factory")
    @classmethod
    def _factory_reference(cls, value: str | None) -> str | None:
        return check_reference(value, "a function of your code that returns the nn.Module")

    @field_validator("key_rename")
    @classmethod
    def _patterns_compile(cls, value: list[tuple[str, str]]) -> list[tuple[str, str]]:
        for pattern, _ in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"'{pattern}' is not a regular expression: {exc}") from None
        return value


__all__ = ["DEFAULT", "MODEL_DEFAULTS", "ORIGINS_KEY", "SET", "CardBase", "NetworkCard", "check_arguments", "check_module",
           "check_reference"]
