"""Tabular cards at build time: the library is installed, every fold loads, and on the public test the features
and predictions have the shape and the class order of the step's columns.

Booster files and joblib pipelines ship as they are (one per fold, sha256 recorded). A library that is
not installed refuses the card naming the package; so does a joblib file without ``allow_joblib``.
With the public data, the card's feature function runs on the public test table and the first fold
predicts it, exactly as in the kernel (``builder.kkb_runtime.cards.tabular``). All of it runs in the build's
sandboxed run (``builder.bundle.card_run``): a file that crashes its loader (LightGBM aborts on a truncated
booster) ends that run, and the build names the file and the signal.

No silent mapping: what kkb does between the feature function and the model, and between the model and the step's
columns, is said in the build's notes (:func:`notes`, on the public test): features reordered to a booster's
training order or left out, ``predict_proba``'s classes matched by label to the columns (or integer classes filling
them in order, or which class a binary model's one column is). A mismatch of labels is refused earlier, by the
public-data check (:func:`builder.kkb_runtime.cards.tabular.class_order`).
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.bundle.cards.unit import Extra, build_card, build_context, kernel_card, public_test_rows, public_test_table
from builder.bundle.checkpoints import checkpoint_sources
from builder.bundle.models import offline_environment, user_code_importable
from builder.bundle.user_code import user_code
from builder.errors import BundleError, ModelError
from builder.kkb_runtime.card import Built, Fold
from builder.kkb_runtime.cards import tabular as runtime_tabular
from builder.kkb_runtime.cards.common import checkpoints
from builder.kkb_runtime.cards.common import models as runtime
from builder.kkb_runtime.cards.common.tables import DEFAULT_TEST_TABLE, TableError
from builder.kkb_runtime.submission import read_sample, target_columns
from builder.kkb_runtime.vocabulary import CardKind, SubmissionKind
from builder.project.cards import GbdtCard, SklearnCard, TabularCard
from builder.project.spec import SPEC_FILE, KernelSpec
from builder.run.calls import calling

if TYPE_CHECKING:  # imported where used: the CLI starts without them (tests/test_dry_run_cost.py)
    import pandas as pd

SHOWN = 8  # names a note lists before it counts the rest


def to_kernel(card: TabularCard) -> runtime_tabular.TabularCard:
    """The kernel's card of a gbdt or sklearn card (kernel.toml's keys, resolved)."""
    if isinstance(card, GbdtCard):
        return kernel_card(runtime_tabular.GbdtCard, card)
    return kernel_card(runtime_tabular.SklearnCard, card)


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
    kernel = to_kernel(card)
    try:
        if isinstance(kernel, runtime_tabular.SklearnCard):
            return runtime_tabular.load_estimator(kernel, path)
        if isinstance(kernel, runtime_tabular.GbdtCard):
            return runtime_tabular.load_booster(kernel, path)[0]
        raise TypeError(f"card '{card.name}' is neither a gbdt nor an sklearn card")
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


def prepare(card: TabularCard, kernel_dir: Path, weights_stage: Path, written: dict[str, str]) -> Built:
    version = _require_library(card)
    folds: list[Fold] = []
    with user_code_importable(kernel_dir), offline_environment():
        for source in checkpoint_sources(card, kernel_dir):
            with calling("loading", card=card.name, file=source, hint=_load_hint(card)):  # a crash names the file
                _load(card, kernel_dir / source)
            target = weights_stage / source
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(kernel_dir / source, target)
            written[source] = hashlib.sha256(target.read_bytes()).hexdigest()
            folds.append(Fold(file=source, sha256=written[source], source=source,
                              loaded_with="joblib.load (allow_joblib = true)" if card.kind == CardKind.SKLEARN
                              else f"{library(card)} {version}"))
    return Built(checkpoint=folds[0].file, checkpoints=tuple(folds),
                 built_with={runtime_tabular.PACKAGES[library(card)]: version})


def extra_files(card: TabularCard, kernel_dir: Path) -> list[str]:
    return []


def check_public_data(spec: KernelSpec, kernel_dir: Path, data: Path, card: TabularCard, columns: list[str],
                      sample: pd.DataFrame) -> None:
    """The features of the public test, and the first fold's predictions on them: one row each, one value per column."""
    path = public_test_table(spec, kernel_dir, data, card)
    where = f"{kernel_dir / SPEC_FILE}: models.{card.name}"
    source = checkpoint_sources(card, kernel_dir)[0]
    kernel = to_kernel(card)
    with user_code_importable(kernel_dir), offline_environment():
        with calling("loading", card=card.name, file=source, hint=_load_hint(card)):  # a crash names the file
            _load(card, kernel_dir / source)
        try:
            rows = public_test_rows(spec, data, path, sample)
            with user_code(where, "on the public test", [kernel_dir], card=card.name, function=card.feature_function,
                           hint=_predict_hint(card)):
                frame = runtime_tabular.features(kernel, rows, spec.submission.id_column,
                                                 build_context(kernel, kernel_dir, data))
            with user_code(where, "on the public test", [kernel_dir], card=card.name, file=source, hint=_predict_hint(card)):
                runtime_tabular.predict_fold(kernel, kernel_dir / source, frame, columns)
        except (TableError, runtime.ModelLoadError) as exc:
            raise BundleError(f"{where}: on the public test: {exc}", hint=_predict_hint(card)) from None


def _predict_hint(card: TabularCard) -> str:
    return ("the feature function gets the test rows (the id column included) and returns the features the model "
            "was trained on; method = 'predict_proba' or 'predict', and num_classes the step's columns")


# --- the build's notes: no silent mapping ---------------------------------------------------------------------


def notes(spec: KernelSpec, kernel_dir: Path, data: Path | None, card: TabularCard) -> list[str]:
    """For each step that runs the card: the feature function on the public test and the first fold loaded, as in the
    kernel, and what kkb then maps (needs the public data, ``data``); a card two steps use says it once."""
    if data is None or spec.submission.kind != SubmissionKind.CSV or not (data / spec.competition.sample_submission).is_file():
        return []
    test = data / (spec.competition.test or DEFAULT_TEST_TABLE)
    steps = [step for step in spec.steps if step.predict_model == card.name]
    if not test.is_file() or not steps:
        return []
    id_column = spec.submission.id_column
    sample = read_sample(data / spec.competition.sample_submission, id_column)
    predictions = list(spec.submission.prediction_columns) or target_columns(sample, id_column, spec.submission.target_columns)
    kernel = to_kernel(card)
    found: list[str] = []
    with user_code_importable(kernel_dir), offline_environment():
        for step in steps:
            with user_code(f"{kernel_dir / SPEC_FILE}: models.{card.name}", "on the public test", [kernel_dir],
                           card=card.name, function=card.feature_function, hint="the feature function gets the test rows"):
                frame = runtime_tabular.features(kernel, public_test_rows(spec, data, test, sample), id_column,
                                                 build_context(kernel, kernel_dir, data))
            found += _mapped(kernel, kernel_dir / checkpoint_sources(card, kernel_dir)[0], frame,
                             list(step.columns or card.columns) or predictions)
    return list(dict.fromkeys(found))


def _mapped(card: runtime_tabular.TabularCard, path: Path, frame: pd.DataFrame, columns: list[str]) -> list[str]:
    given = [str(column) for column in frame.columns]
    if isinstance(card, runtime_tabular.SklearnCard):
        model = runtime_tabular.load_estimator(card, path)
        if not runtime_tabular.uses_proba(card, model):
            return []
        classes = getattr(model, "classes_", None)
        return class_notes(card.name, classes, columns, len(classes) if classes is not None else len(columns))
    if isinstance(card, runtime_tabular.GbdtCard):
        return feature_notes(card.name, given, runtime_tabular.load_booster(card, path)[1])
    return []


def _names(values: Sequence[str]) -> str:
    shown = ", ".join(values[:SHOWN])
    return shown + (f", … ({len(values)} in all)" if len(values) > SHOWN else "")


def feature_notes(card: str, given: Sequence[str], trained: Sequence[str] | None) -> list[str]:
    """The feature function's columns against the model's recorded training columns: a booster that recorded its
    feature names gets exactly those columns, in its order."""
    if not trained:
        return []
    found = []
    kept = [column for column in given if column in trained]
    if kept != list(trained) and set(kept) == set(trained):
        moved = [column for column, expected in zip(kept, trained, strict=True) if column != expected]
        found.append(f"models.{card}: features reordered to the model's training order ({_names(list(trained))}); "
                     f"the feature function returns them as {_names(kept)} ({len(moved)} column(s) moved)")
    extra = [column for column in given if column not in trained]
    if extra:
        found.append(f"models.{card}: {len(extra)} feature column(s) the model was not trained on are left out: "
                     f"{_names(extra)}")
    return found


def class_notes(card: str, classes: Any, columns: Sequence[str], width: int) -> list[str]:
    """How ``predict_proba``'s ``width`` columns (labelled ``classes``, or None) become the step's ``columns``."""
    labels = [str(label) for label in classes] if classes is not None else None
    if len(columns) == 1 and width == 2:
        positive = f"'{labels[1]}'" if labels else "the second"
        return [f"models.{card}: a binary classifier: its positive class {positive} (of predict_proba's two) is column "
                f"{columns[0]}"]
    order = runtime_tabular.class_order(classes, columns, card)
    if labels is None:
        return [f"models.{card}: the model names no classes: predict_proba's columns fill {_names(list(columns))} in order"]
    if labels == list(columns):
        return []
    if set(labels) == set(columns):
        return [f"models.{card}: predict_proba's classes ({_names(labels)}) matched by label to the columns "
                f"({_names(list(columns))})"]
    pairs = [f"{column} = class {labels[index]}" for column, index in zip(columns, order, strict=True)]
    return [f"models.{card}: integer classes 0..{len(labels) - 1} fill the columns in order: {_names(pairs)}"]


GBDT_BUILD = build_card(GbdtCard, Extra("tabular", ("lightgbm",)), to_kernel, prepare, extra_files, check_public_data,
                        notes=notes)
SKLEARN_BUILD = build_card(SklearnCard, Extra("tabular", ("sklearn", "joblib")), to_kernel, prepare, extra_files,
                           check_public_data, notes=notes)

__all__ = ["GBDT_BUILD", "SKLEARN_BUILD", "check_public_data", "class_notes", "extra_files", "feature_notes", "notes",
           "prepare", "to_kernel"]
