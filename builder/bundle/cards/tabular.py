"""Tabular cards at build time: the library is installed, every fold loads, and on the public test the features
and predictions have the shape and the class order of the step's columns.

Booster files and joblib pipelines ship as they are (one per fold, sha256 recorded). A library that is
not installed refuses the card naming the package; so does a joblib file without ``allow_joblib``.
With the public data, the card's feature function runs on the public test table and the first fold
predicts it, exactly as in the kernel (``builder.kkb_runtime.cards.tabular``). All of it runs in the build's
sandboxed run (``builder.bundle.card_run``): a file that crashes its loader (LightGBM aborts on a truncated
booster) ends that run, and the build names the file and the signal.
"""

from __future__ import annotations

import hashlib
import shutil
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from builder.bundle.cards.unit import Extra, build_card, public_test_rows, public_test_table
from builder.bundle.checkpoints import checkpoint_sources
from builder.bundle.models import offline_environment, user_code_importable
from builder.bundle.user_code import user_code
from builder.errors import BundleError, ModelError
from builder.kkb_runtime.cards import tabular as runtime_tabular
from builder.kkb_runtime.cards.common import checkpoints
from builder.kkb_runtime.cards.common import models as runtime
from builder.kkb_runtime.cards.common.tables import TableError
from builder.kkb_runtime.vocabulary import CardKind
from builder.project.cards import GbdtCard, SklearnCard, TabularCard
from builder.project.spec import SPEC_FILE, KernelSpec
from builder.run.calls import calling


def _card(card: TabularCard) -> dict[str, Any]:
    return card.model_dump(mode="json")


def library(card: TabularCard) -> str:
    return card.library if isinstance(card, GbdtCard) and card.library else "sklearn"


def _require_library(card: TabularCard) -> str:
    name = library(card)
    package = runtime_tabular.PACKAGES[name]
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        raise ModelError(f"[[models]] '{card.name}': {package} is not installed here, so kkb cannot check this card",
                         hint=f"pip install {package} (the Kaggle image has it), then build again") from None


def _load(card: TabularCard, path: Path) -> Any:
    try:
        if card.kind == CardKind.SKLEARN:
            return runtime_tabular.load_estimator(_card(card), path)
        return runtime_tabular.load_booster(_card(card), path)[0]
    except runtime.ModelLoadError as exc:
        raise ModelError(f"[[models]] '{card.name}': {exc}", hint=_load_hint(card)) from None
    except Exception as exc:
        raise ModelError(f"[[models]] '{card.name}': {path.name} does not load with {library(card)}: "
                         f"{type(exc).__name__}: {checkpoints.plain(str(exc))}", hint=_load_hint(card)) from None


def _load_hint(card: TabularCard) -> str:
    if card.kind == CardKind.SKLEARN:
        return ("save the fitted estimator with joblib.dump(model, path); a class defined in a notebook needs "
                "pickle_main = 'module' naming the module of your code that defines it")
    return f"save the booster with {library(card)}'s own save_model and set library to the one that wrote it"


def prepare(card: TabularCard, kernel_dir: Path, weights_stage: Path, written: dict[str, str]) -> dict[str, Any]:
    version = _require_library(card)
    folds = []
    with user_code_importable(kernel_dir), offline_environment():
        for source in checkpoint_sources(card, kernel_dir):
            with calling("loading", card=card.name, file=source, hint=_load_hint(card)):  # a crash names the file
                _load(card, kernel_dir / source)
            target = weights_stage / source
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(kernel_dir / source, target)
            written[source] = hashlib.sha256(target.read_bytes()).hexdigest()
            folds.append({"file": source, "sha256": written[source], "source": source,
                          "loaded_with": "joblib.load (allow_joblib = true)" if card.kind == CardKind.SKLEARN
                          else f"{library(card)} {version}"})
    return {**card.model_dump(mode="json"), "checkpoint": folds[0]["file"], "checkpoints": folds,
            "built_with": {runtime_tabular.PACKAGES[library(card)]: version}}


def extra_files(card: TabularCard, kernel_dir: Path) -> list[str]:
    return []


def check_public_data(spec: KernelSpec, kernel_dir: Path, data: Path, card: TabularCard, columns: list[str],
                      sample: pd.DataFrame) -> None:
    """The features of the public test, and the first fold's predictions on them: one row each, one value per column."""
    path = public_test_table(spec, kernel_dir, data, card)
    where = f"{kernel_dir / SPEC_FILE}: models.{card.name}"
    source = checkpoint_sources(card, kernel_dir)[0]
    with user_code_importable(kernel_dir), offline_environment():
        with calling("loading", card=card.name, file=source, hint=_load_hint(card)):  # a crash names the file
            _load(card, kernel_dir / source)
        try:
            rows = public_test_rows(spec, data, path, sample)
            with user_code(where, "on the public test", [kernel_dir], card=card.name, function=card.feature_function,
                           hint=_predict_hint(card)):
                frame = runtime_tabular.features(_card(card), rows, spec.submission.id_column)
            with user_code(where, "on the public test", [kernel_dir], card=card.name, file=source, hint=_predict_hint(card)):
                runtime_tabular.predict_fold(_card(card), kernel_dir / source, frame, columns)
        except (TableError, runtime.ModelLoadError) as exc:
            raise BundleError(f"{where}: on the public test: {exc}", hint=_predict_hint(card)) from None


def _predict_hint(card: TabularCard) -> str:
    return ("the feature function gets the test rows (the id column included) and returns the features the model "
            "was trained on; method = 'predict_proba' or 'predict', and num_classes the step's columns")


GBDT_BUILD = build_card(GbdtCard, Extra("tabular", ("lightgbm",)), prepare, extra_files, check_public_data)
SKLEARN_BUILD = build_card(SklearnCard, Extra("tabular", ("sklearn", "joblib")), prepare, extra_files, check_public_data)

__all__ = ["GBDT_BUILD", "SKLEARN_BUILD", "check_public_data", "extra_files", "prepare"]
