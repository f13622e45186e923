"""``kind = "torch"``: the user's ``nn.Module`` over float32 tensors of a feature table.

A network card (``factory`` + ``model_kwargs``, folds, the checkpoint remapping keys, ``activation``) whose
input is the feature function's table, as a tabular card's is: ``feature_function``, then ``feature_columns``
(the net's inputs in its training order) and a fitted ``preprocessor`` (a pickle: ``allow_joblib``,
``pickle_main``). Its own defaults differ from the image and text cards': no autocast (a table net's
outputs match a float32 notebook only without it) and batches of 1024 rows (its rows are cheap).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from builder.kkb_runtime.vocabulary import CardKind
from builder.project.cards.base import NetworkCard, check_arguments, check_module, check_reference
from builder.project.spec_values import relative_path


class TorchCard(NetworkCard):
    """``factory`` (required), the feature function's table, its columns and preprocessor."""

    kind: Literal[CardKind.TORCH]
    batch_size: int = Field(default=1024, gt=0)
    amp: bool = False
    # "module:function": called with the test table (a DataFrame), returns the feature table (shared with the
    # other cards naming the same function: computed once per run).
    feature_function: str | None = None
    # The feature function's own arguments, passed as keyword arguments.
    feature_args: dict[str, Any] = Field(default_factory=dict)
    # The feature table's columns the net reads, in the order it was trained on (default: every column
    # the feature function returns, in its order). Checked against the feature table at build and in the kernel.
    feature_columns: list[str] = Field(default_factory=list)
    # A fitted scaler / encoder / ColumnTransformer your training saved (joblib or pickle): its .transform runs
    # on the selected features before the net. One file for every fold, or a list / glob of one per fold.
    preprocessor: str | list[str] | None = None
    # The preprocessor is a pickle: it runs code when loaded. Loading one needs this opt-in.
    allow_joblib: bool = False
    # Pickles saved from a notebook name their classes under __main__: this module stands in for it.
    pickle_main: str | None = None

    @field_validator("feature_function")
    @classmethod
    def _reference(cls, value: str | None) -> str | None:
        return check_reference(value, "a function of your code: test table in, features out")

    @field_validator("pickle_main")
    @classmethod
    def _module(cls, value: str | None) -> str | None:
        return check_module(value)

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
        if isinstance(value, list) and not value:
            raise ValueError("an empty list: name the fitted preprocessor file(s) or remove the key")
        for path in value if isinstance(value, list) else [value] if value is not None else []:
            relative_path(path)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> TorchCard:
        if self.factory is None:
            raise ValueError(f"[[models]] '{self.name}': a torch card needs factory ('package.module:function' "
                             "returning the nn.Module that takes a (rows, features) float32 tensor)")
        check_arguments(self, "feature_function", "feature_args")
        if self.preprocessor is not None and not self.allow_joblib:
            raise ValueError(f"[[models]] '{self.name}': preprocessor is a pickle (joblib), which runs code when loaded: "
                             "set allow_joblib = true if you trust the file")
        if self.activation == "softmax" and self.num_classes == 1:
            raise ValueError(f"[[models]] '{self.name}': activation = 'softmax' over one output is always 1: set "
                             "activation = 'sigmoid' (a binary logit) or 'none' (a regression, or a net that ends in "
                             "its own activation)")
        return self

    @property
    def preprocessor_patterns(self) -> list[str]:
        if self.preprocessor is None:
            return []
        return list(self.preprocessor) if isinstance(self.preprocessor, list) else [self.preprocessor]


__all__ = ["TorchCard"]
