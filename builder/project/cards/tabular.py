"""``kind = "gbdt"`` / ``"sklearn"``: a booster or a scikit-learn estimator over the user's features of the test table."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from builder.kkb_runtime.vocabulary import CardKind
from builder.project.cards.base import CardBase, check_arguments, check_module, check_reference

# kkb_runtime.cards.tabular.LIBRARIES: the file formats each booster library reads.
BOOSTER_SUFFIXES = {"lightgbm": (".txt", ".json", ".lgb"), "xgboost": (".json", ".ubj"), "catboost": (".cbm",)}


class TabularCard(CardBase):
    """What both tabular kinds take: the feature function and the prediction method."""

    # "module:function": called with the test table (a DataFrame), returns the feature table.
    feature_function: str | None = None
    # The feature function's own arguments, passed as keyword arguments.
    feature_args: dict[str, Any] = Field(default_factory=dict)
    # predict_proba (classifiers: the positive class or every class) or predict (regressors, raw scores).
    method: Literal["auto", "predict_proba", "predict"] = "auto"

    @field_validator("feature_function")
    @classmethod
    def _reference(cls, value: str | None) -> str | None:
        return check_reference(value, "a function of your code: test table in, features out")

    @model_validator(mode="after")
    def _arguments(self) -> TabularCard:
        check_arguments(self, "feature_function", "feature_args")
        return self


class GbdtCard(TabularCard):
    """A LightGBM, XGBoost or CatBoost booster file per fold."""

    kind: Literal[CardKind.GBDT]
    library: Literal["lightgbm", "xgboost", "catboost"] | None = None

    @model_validator(mode="after")
    def _model_files(self) -> GbdtCard:
        if self.library is None:
            raise ValueError(f"[[models]] '{self.name}': a gbdt card needs library = 'lightgbm', 'xgboost' or 'catboost'")
        suffixes = BOOSTER_SUFFIXES[self.library]
        for pattern in self.checkpoint_patterns:
            if not pattern.endswith(suffixes) and not pattern.endswith("*"):
                raise ValueError(f"[[models]] '{self.name}': {pattern} is not a {self.library} model file "
                                 f"({', '.join(suffixes)})")
        return self


class SklearnCard(TabularCard):
    """A joblib pickle of a fitted estimator or pipeline per fold: loading one runs code, so it needs the opt-in."""

    kind: Literal[CardKind.SKLEARN]
    # scikit-learn pipelines are pickles: they run code when loaded. Loading one needs this opt-in.
    allow_joblib: bool = False
    # Pickles saved from a notebook name their classes under __main__: this module stands in for it.
    pickle_main: str | None = None

    @field_validator("pickle_main")
    @classmethod
    def _module(cls, value: str | None) -> str | None:
        return check_module(value)

    @model_validator(mode="after")
    def _opted_in(self) -> SklearnCard:
        if not self.allow_joblib:
            raise ValueError(f"[[models]] '{self.name}': a scikit-learn card loads a pickle (joblib), which runs code: "
                             "set allow_joblib = true if you trust the file")
        return self


__all__ = ["BOOSTER_SUFFIXES", "GbdtCard", "SklearnCard", "TabularCard"]
