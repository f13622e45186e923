"""Tabular cards: the user's features of the test table, then boosters or a scikit-learn estimator per fold.

* ``feature_function = "module:function"`` (the code dataset) is called with the test rows (a
  DataFrame in the sample's order, the id column included) and returns the feature table; without
  one, every column but the id is a feature (``common.features``: computed once per run for every card
  naming the same function). A booster that recorded its feature names gets exactly those columns, in
  its order.
* ``kind = "gbdt"``: LightGBM (``.txt``/``.json``), XGBoost (``.json``/``.ubj``), CatBoost (``.cbm``),
  ``library`` says which. ``kind = "sklearn"``: ``joblib.load`` of a pipeline, only with the card's
  ``allow_joblib`` (a pickle runs code); ``pickle_main`` names the module that stands in for the
  notebook's ``__main__`` while it loads.
* ``method``: ``predict_proba`` (a classifier's probabilities; one column: the positive class) or
  ``predict``; ``auto`` takes probabilities where the model has them. A classifier's columns follow
  its ``classes_`` when the prediction columns are the class labels (any order).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..card import Built, Card, Fold
from ..config import KernelConfig
from ..steps import write_step_meta
from ..typed import JsonValue
from .common import checkpoints, models
from .common.estimators import load_estimator
from .common.features import feature_table, features, shown_features
from .common.tables import card_context, first_rows, table_job, write_table_output
from .common.unit import ViewRows, runtime_card

if TYPE_CHECKING:  # imported where used: importing kkb_runtime stays free of them (kkb_runtime/__init__)
    import numpy as np
    import pandas as pd


@dataclass(frozen=True)
class TabularCard(Card):
    """What both tabular kinds read: the feature function and the prediction method."""

    feature_function: str | None
    feature_args: Mapping[str, JsonValue]  # the feature function's keyword arguments
    method: Literal["auto", "predict_proba", "predict"]


@dataclass(frozen=True)
class GbdtCard(TabularCard):
    library: Literal["lightgbm", "xgboost", "catboost"]


@dataclass(frozen=True)
class SklearnCard(TabularCard):
    allow_joblib: bool
    pickle_main: str | None


# A tabular card's record is what every kind's is: its folds (booster files or pickles, as they are) and versions.
TabularBuilt = Built

# The package each library needs, for the message when it is not installed.
PACKAGES = {"lightgbm": "lightgbm", "xgboost": "xgboost", "catboost": "catboost", "sklearn": "scikit-learn"}


def import_library(name: str, card: Card) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise models.ModelLoadError(f"model '{card.name}': {name} is not installed here: install {PACKAGES[name]} "
                                    "(or add it to [install] requirements)") from None


def in_model_order(frame: pd.DataFrame, names: Sequence[str] | None, card: Card) -> pd.DataFrame:
    if not names:
        return frame
    missing = [name for name in names if name not in frame.columns]
    if missing:
        raise models.ModelLoadError(f"model '{card.name}': the features lack {len(missing)} column(s) the model was "
                                    f"trained on: {', '.join(map(str, missing[:8]))}")
    return frame[list(names)]


# --- boosters -----------------------------------------------------------------------------------

def _lightgbm(card: GbdtCard, path: Path) -> tuple[Any, list[str] | None]:
    lgb = import_library("lightgbm", card)
    booster = lgb.Booster(model_file=str(path))
    return booster, list(booster.feature_name())


def _xgboost(card: GbdtCard, path: Path) -> tuple[Any, list[str] | None]:
    xgb = import_library("xgboost", card)
    booster = xgb.Booster()
    booster.load_model(str(path))
    return booster, list(booster.feature_names or []) or None


def _catboost(card: GbdtCard, path: Path) -> tuple[Any, list[str] | None]:
    catboost = import_library("catboost", card)
    model = catboost.CatBoost()
    model.load_model(str(path))
    return model, list(model.feature_names_ or []) or None


LOADERS: dict[str, Callable[[GbdtCard, Path], tuple[Any, list[str] | None]]] = {
    "lightgbm": _lightgbm, "xgboost": _xgboost, "catboost": _catboost,
}


def booster_predict(card: GbdtCard, model: Any, frame: pd.DataFrame) -> np.ndarray:
    import numpy as np
    if card.library == "xgboost":
        xgb = import_library("xgboost", card)
        return np.asarray(model.predict(xgb.DMatrix(frame)))
    if card.library == "catboost":
        kind = "RawFormulaVal" if card.method == "predict" else "Probability"
        values = np.asarray(model.predict(frame, prediction_type=kind))
        return values[:, 1] if kind == "Probability" and values.ndim == 2 and values.shape[1] == 2 \
            and card.num_classes == 1 else values
    return np.asarray(model.predict(frame))


def load_booster(card: GbdtCard, path: Path) -> tuple[Any, list[str] | None]:
    return LOADERS[card.library](card, path)


# --- scikit-learn --------------------------------------------------------------------------------

def uses_proba(card: TabularCard, model: Any) -> bool:
    return card.method == "predict_proba" or (card.method == "auto" and hasattr(model, "predict_proba"))


def estimator_predict(card: SklearnCard, model: Any, frame: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    import numpy as np
    if not uses_proba(card, model):
        return np.asarray(model.predict(frame), dtype=np.float64)
    values = np.asarray(model.predict_proba(frame), dtype=np.float64)
    if len(columns) == 1 and values.ndim == 2 and values.shape[1] == 2:
        return values[:, 1]  # a binary classifier: the positive class
    return values[:, class_order(getattr(model, "classes_", None), columns, card.name)]


def class_order(classes: Any, columns: Sequence[str], name: str) -> list[int]:
    """Which probability column feeds each prediction column: by exact label, never by position, but for a model
    without labels or with the integer classes 0..k-1 (column i is class i; the build prints it). Labels that
    differ from the columns (in case, a class missing or extra) are refused naming both lists."""
    labels = [str(label) for label in (list(classes) if classes is not None else range(len(columns)))]
    if len(labels) != len(columns):
        raise models.ModelLoadError(f"model '{name}': predict_proba gives {len(labels)} classes "
                                    f"({', '.join(labels)}) for {len(columns)} column(s) ({', '.join(columns)})")
    if set(labels) == set(columns):
        return [labels.index(column) for column in columns]
    if classes is None or labels == [str(index) for index in range(len(labels))]:
        return list(range(len(columns)))
    raise models.ModelLoadError(class_mismatch(name, labels, list(columns)))


def class_mismatch(name: str, labels: Sequence[str], columns: Sequence[str]) -> str:
    """Why a classifier's labels are not the step's columns, naming both lists."""
    folded = {label.casefold(): label for label in labels}
    case = [f"'{folded[column.casefold()]}' vs '{column}'" for column in columns
            if column not in labels and column.casefold() in folded]
    why = (f"they differ in case ({', '.join(case)})" if case else
           f"classes without a column: {', '.join(sorted(set(labels) - set(columns))) or 'none'}; "
           f"columns without a class: {', '.join(sorted(set(columns) - set(labels))) or 'none'}")
    return (f"model '{name}': its classes ({', '.join(labels)}) are not the step's columns ({', '.join(columns)}): {why}. "
            "kkb matches classes to columns by exact label, never by position: rename the columns (the step's "
            "columns, [submission] prediction_columns) or the classes to match")


# --- one fold -----------------------------------------------------------------------------------

def predict_fold(card: TabularCard, path: Path, frame: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    import numpy as np
    if isinstance(card, SklearnCard):
        values = estimator_predict(card, load_estimator(card, path), frame, columns)
    elif isinstance(card, GbdtCard):
        booster, names = load_booster(card, path)
        values = booster_predict(card, booster, in_model_order(frame, names, card))
    else:
        raise TypeError(f"card '{card.name}' is {type(card).__name__}, neither a gbdt nor an sklearn card")
    values = np.asarray(values, dtype=np.float64)
    values = values.reshape(len(frame), -1) if values.size == len(frame) * len(columns) else values
    if values.ndim != 2 or values.shape != (len(frame), len(columns)):
        raise models.ModelLoadError(f"model '{card.name}': {path.name} predicts shape {tuple(values.shape)} for "
                                    f"{len(frame)} rows and {len(columns)} column(s) ({', '.join(columns)})")
    return values


def run(card: TabularCard, built: TabularBuilt, out: Path, environ: Mapping[str, str], config: KernelConfig) -> Path:
    job = table_job(card, out, environ, config)
    started = time.perf_counter()
    frame, shared = feature_table(card, job, environ, job.context(card, config))  # computed once per run for the cards sharing the function
    library = card.library if isinstance(card, GbdtCard) else "scikit-learn"
    print(f"[kkb] {card.name}: {library} on {len(job.ids)} rows x {frame.shape[1]} features, "
          f"{len(built.checkpoints)} fold(s)", flush=True)

    def fold(entry: Fold) -> np.ndarray:
        return predict_fold(card, job.weights_dir / entry.file, frame, job.columns)

    written = write_table_output(job, checkpoints.averaged_folds(card, built, fold))
    write_step_meta(written, rows=len(job.ids), load_seconds=0.0, infer_seconds=round(time.perf_counter() - started, 4),
                    features=shared)
    return written


def view(card: TabularCard, built: TabularBuilt, config: KernelConfig, weights: Path, data: Path, rows: int) -> ViewRows:
    """The feature row in the order the model receives it, after any reorder (name, dtype, value)."""
    frame = features(card, first_rows(config, data, rows), config.submission.id_column,
                     card_context(card, config, weights, data))
    if isinstance(card, GbdtCard):
        _, names = load_booster(card, weights / built.checkpoints[0].file)
        frame = in_model_order(frame, names, card)
    return [{"features": row} for row in shown_features(frame)]


GBDT = runtime_card(GbdtCard, TabularBuilt, run, view)
SKLEARN = runtime_card(SklearnCard, TabularBuilt, run, view)

__all__ = ["GBDT", "LOADERS", "SKLEARN", "GbdtCard", "SklearnCard", "TabularBuilt", "TabularCard", "class_mismatch",
           "class_order", "features", "load_booster", "load_estimator", "predict_fold", "run", "uses_proba", "view"]
