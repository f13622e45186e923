"""Torch cards at build time: the net built by the kernel's own code, each fold fitted strictly, the preprocessor
loaded, and on the public test the features, the columns and the output exactly as the kernel computes them.

The net comes from the card's ``factory(**model_kwargs)`` (``builder.kkb_runtime.cards.common.models``); each fold (a file,
a glob, or several state dicts in one file) is remapped, fitted strictly and written as safetensors
(``builder.bundle.models.prepare_source``). With ``feature_columns`` the net is run on a zero batch of that
width here; with the public data, the feature function runs on the public test table, the columns are
selected, the preprocessor transforms them and the first fold predicts them (``builder.kkb_runtime.cards.torch``).
A ``preprocessor`` is one file for every fold or one per fold (sorted, paired with the folds in order: the
pairing is written in each checkpoint entry); it ships in the weights as it is.
"""

from __future__ import annotations

import glob
import re
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.bundle.cards.unit import Extra, build_card, build_context, built_as, fold_notes, kernel_card, public_test_rows, public_test_table
from builder.bundle.checkpoints import GLOB_CHARACTERS, checkpoint_sources
from builder.bundle.models import offline_environment, prepare_source, user_code_importable
from builder.bundle.user_code import user_code
from builder.errors import BundleError, ModelError
from builder.kkb_runtime.card import Built, NetworkFold
from builder.kkb_runtime.cards import torch as runtime_torch
from builder.kkb_runtime.cards.common import checkpoints
from builder.kkb_runtime.cards.common import device as devices
from builder.kkb_runtime.cards.common import models as runtime
from builder.kkb_runtime.cards.common.estimators import load_estimator
from builder.kkb_runtime.cards.common.features import features
from builder.kkb_runtime.cards.common.tables import DEFAULT_TEST_TABLE, TableError
from builder.kkb_runtime.submission import read_sample
from builder.project.cards import TorchCard
from builder.project.spec import SPEC_FILE, KernelSpec
from builder.run.calls import calling

if TYPE_CHECKING:  # imported where used: the CLI starts without them (tests/test_dry_run_cost.py)
    import pandas as pd

RECORDED_VERSIONS = ("torch", "safetensors")
CPU = devices.DeviceChoice("cpu", "the build runs the net on the CPU")


def to_kernel(card: TorchCard) -> runtime_torch.TorchCard:
    """The kernel's card of a torch card (kernel.toml's keys, resolved)."""
    return kernel_card(runtime_torch.TorchCard, card)


def build(card: TorchCard, kernel_dir: Path) -> Any:
    """The net as the kernel builds it (the factory, from the kernel folder), fresh weights, on the CPU."""
    with user_code_importable(kernel_dir), offline_environment():
        try:
            with user_code(f"[[models]] '{card.name}'", f"the factory {card.factory} fails", [kernel_dir], card=card.name,
                           function=card.factory, hint="model_kwargs are passed to it as keyword arguments", error=ModelError):
                return runtime.from_factory(to_kernel(card))
        except runtime.ModelLoadError as exc:
            raise ModelError(f"[[models]] '{card.name}': {exc}",
                             hint="factory is 'package.module:function' in your code, returning the nn.Module") from None


def check_width(card: TorchCard, model: Any) -> None:
    """With ``feature_columns`` (names, no glob): two rows of zeros of that width give (2, num_classes)."""
    if not card.feature_columns or any(runtime_torch.is_pattern(entry) for entry in card.feature_columns):
        return  # a glob's width is known on the feature table: the public test's check runs the net on it
    import numpy as np

    zeros = np.zeros((2, len(card.feature_columns)), dtype=np.float32)
    try:
        runtime_torch.predict_array(to_kernel(card), model.eval(), zeros, CPU, "cpu")
    except runtime.ModelLoadError as exc:
        raise ModelError(f"[[models]] '{card.name}': {str(exc).removeprefix(f'model {card.name!r}: ')}",
                         hint="set num_classes to the net's output width, or fix model_kwargs") from None
    except Exception as exc:
        raise ModelError(f"[[models]] '{card.name}': the net fails on a (2, {len(card.feature_columns)}) float32 batch "
                         f"(one value per feature_columns entry): {type(exc).__name__}: {checkpoints.plain(str(exc))}",
                         hint="feature_columns lists the net's inputs in its training order; model_kwargs its sizes") from None


def preprocessor_sources(card: TorchCard, kernel_dir: Path) -> list[list[str]]:
    """Each preprocessor of the chain, in order: its file, or (a glob) its files, one per fold, sorted."""
    found: list[list[str]] = []
    for pattern in card.preprocessor_patterns:
        if any(character in pattern for character in GLOB_CHARACTERS):
            matches = sorted(Path(path).relative_to(kernel_dir).as_posix()
                             for path in glob.glob(str(kernel_dir / pattern), recursive=True) if Path(path).is_file())
        else:
            matches = [pattern] if (kernel_dir / pattern).is_file() else []
        if not matches:
            raise BundleError(f"{kernel_dir / SPEC_FILE}: models.{card.name}.preprocessor: '{pattern}' matches no file in "
                              f"{kernel_dir}", hint="save the fitted scaler/encoder there with joblib.dump, or fix the path")
        found.append(matches)
    return found


def pair_preprocessors(card: TorchCard, kernel_dir: Path,
                       folds: list[NetworkFold]) -> tuple[list[runtime_torch.TorchFold], list[str]]:
    """Each fold's chain of preprocessors (each entry one file for all folds, or one per fold in sorted order), each
    file loaded once as the kernel loads it; and what each entry is, in words."""
    stages = preprocessor_sources(card, kernel_dir)
    _refuse_folds_as_a_chain(card, kernel_dir, stages, folds)
    described = []
    for index, files in enumerate(stages):
        if len(files) not in (1, len(folds)):
            raise BundleError(f"{kernel_dir / SPEC_FILE}: models.{card.name}.preprocessor: '{card.preprocessor_patterns[index]}'"
                              f" matches {len(files)} files ({', '.join(files)}) for {len(folds)} folds "
                              f"({', '.join(fold.source for fold in folds)})",
                              hint="each preprocessor entry is one file for every fold, or a glob of one per fold (sorted "
                                   "in the folds' order); a list is applied in order")
        with user_code_importable(kernel_dir), offline_environment():
            for name in files:
                with calling("loading the preprocessor", card=card.name, file=name):  # a crash names the file
                    loaded = _load_preprocessor(card, kernel_dir / name)
        described.append(_described(files, loaded))
    chains = [tuple(files[0] if len(files) == 1 else files[index] for files in stages) for index in range(len(folds))]
    return [runtime_torch.TorchFold(**vars(fold), preprocessors=chain) for fold, chain in zip(folds, chains, strict=True)], \
        described


def _refuse_folds_as_a_chain(card: TorchCard, kernel_dir: Path, stages: list[list[str]], folds: list[NetworkFold]) -> None:
    """A list is a chain (each file applied after the one before, on every fold). Files that differ only by a number,
    as many as the folds, read as one per fold: applying each after the other would change every prediction
    silently, so the build asks which was meant."""
    names = [files[0] for files in stages if len(files) == 1]
    if len(folds) < 2 or len(names) != len(stages) or len(names) != len(folds):
        return
    if len({re.sub(r"\d+", "#", name) for name in names}) == 1:
        raise BundleError(f"{kernel_dir / SPEC_FILE}: models.{card.name}.preprocessor: {names} lists {len(names)} files "
                          f"that differ only by a number, one per fold ({len(folds)} folds), but a list is a chain: "
                          "each file would be applied after the one before, on every fold",
                          hint=f"one per fold: a glob, preprocessor = \"{re.sub(r'[0-9]+', '*', names[0])}\" (sorted in the "
                               "folds' order); a chain: name its files by what each does")


def _described(files: list[str], loaded: Any) -> str:
    which = f"{files[0]} for every fold" if len(files) == 1 else f"one per fold: {', '.join(files)}"
    if runtime_torch.per_column(loaded):
        kinds = sorted({type(transformer).__name__ for transformer in loaded.values()})
        return f"{which}: a {'/'.join(kinds)} per column for {len(loaded)} column(s), in the mapping's order"
    return f"{which}: {type(loaded).__name__} on the selected columns"


def _load_preprocessor(card: TorchCard, path: Path) -> Any:
    hint = ("save the fitted scaler/encoder with joblib.dump(scaler, path) (or pickle a dict column → fitted "
            "transformer); a class defined in a notebook needs pickle_main = 'module' naming the module of your code "
            "that defines it")
    try:
        loaded = load_estimator(to_kernel(card), path)
    except runtime.ModelLoadError as exc:
        raise ModelError(f"[[models]] '{card.name}': preprocessor {exc}".replace(f"model '{card.name}': ", ""),
                         hint=hint) from None
    except Exception as exc:
        raise ModelError(f"[[models]] '{card.name}': preprocessor {path.name} does not load: {type(exc).__name__}: "
                         f"{checkpoints.plain(str(exc))}", hint=hint) from None
    if runtime_torch.per_column(loaded):
        bad = [str(column) for column, transformer in loaded.items()
               if not isinstance(column, str) or not callable(getattr(transformer, "transform", None))]
        if bad:
            raise ModelError(f"[[models]] '{card.name}': preprocessor {path.name} is a mapping, and its entries "
                             f"{', '.join(bad[:8])} are not a column name → a fitted transformer (with transform())",
                             hint="a per-column preprocessor maps each feature's name to the transformer fitted on it")
    elif not callable(getattr(loaded, "transform", None)):
        raise ModelError(f"[[models]] '{card.name}': preprocessor {path.name} holds {type(loaded).__name__}, which has "
                         "no transform()", hint="save the fitted scaler/encoder itself (an object with transform), or a "
                                                "dict column → fitted transformer")
    return loaded


def prepare(card: TorchCard, kernel_dir: Path, weights_stage: Path, written: dict[str, str]) -> runtime_torch.TorchBuilt:
    model = build(card, kernel_dir)
    check_width(card, model)
    kernel = to_kernel(card)
    with user_code_importable(kernel_dir):  # the classes an allow_pickle checkpoint names
        written_folds = [fold for source in checkpoint_sources(card, kernel_dir, must_exist=False)
                         for fold in prepare_source(kernel, card.checkpoint_key, model, kernel_dir, source, weights_stage,
                                                    written)]
    folds, described = pair_preprocessors(card, kernel_dir, written_folds)
    first = folds[0]
    return runtime_torch.TorchBuilt(
        checkpoint=first.file, checkpoint_sha256=first.sha256, checkpoint_source=first.source, checkpoints=tuple(folds),
        checkpoint_key=None, source_key=first.source_key, dtype="float16" if card.half else "float32",
        num_params=sum(int(parameter.numel()) for parameter in model.parameters()),
        built_with={package: metadata.version(package) for package in RECORDED_VERSIONS},
        preprocessing=preprocessing(card, described))


def preprocessing(card: TorchCard, described: list[str]) -> dict[str, str]:
    """What the kernel does to the feature table before the net (the build's notes show it)."""
    shown_columns = card.feature_columns[:6]
    columns = (f"feature_columns, in that order ({len(card.feature_columns)}: {', '.join(shown_columns)}"
               f"{', ...' if len(card.feature_columns) > 6 else ''})" if card.feature_columns
               else "every column the feature function returns, in its order")
    shown = {"features": f"{card.feature_function or 'the test table without the id column'}: {columns}",
             "net": f"float32 batches of {card.batch_size} rows, activation {card.activation}, "
                    f"{'autocast on CUDA (amp = true)' if card.amp else 'no autocast (amp = false)'}"}
    for index, line in enumerate(described):
        key = "preprocessor" if len(described) == 1 else f"preprocessor {index + 1} of {len(described)}"
        shown[key] = line + " (joblib.load: allow_joblib = true)"
    return shown


def extra_files(card: TorchCard, kernel_dir: Path) -> list[str]:
    """The preprocessor files: shipped in the weights as they are (the kernel loads them with joblib)."""
    return [name for files in preprocessor_sources(card, kernel_dir) for name in files]


def check_public_data(spec: KernelSpec, kernel_dir: Path, data: Path, card: TorchCard, columns: list[str],
                      sample: pd.DataFrame) -> None:
    """The public test's features, columns, preprocessor and the first fold's output, as in the kernel."""
    id_column = spec.submission.id_column
    path = public_test_table(spec, kernel_dir, data, card)
    where = f"{kernel_dir / SPEC_FILE}: models.{card.name}"
    resolved = to_kernel(card)
    scalers = [files[0] for files in preprocessor_sources(card, kernel_dir)]  # the first fold's (prepare paired them)
    if card.num_classes != len(columns):
        raise BundleError(f"{where}: num_classes = {card.num_classes} but its step writes {len(columns)} column(s) "
                          f"({', '.join(columns)})", hint="set num_classes to the number of columns the step writes")
    model = build(card, kernel_dir)
    with user_code_importable(kernel_dir), offline_environment():
        try:
            rows = public_test_rows(spec, data, path, sample)
            with user_code(where, "on the public test", [kernel_dir], card=card.name, function=card.feature_function,
                           hint=_predict_hint()):
                frame = runtime_torch.select_columns(resolved, features(resolved, rows, id_column,
                                                                        build_context(resolved, kernel_dir, data)))
            with user_code(where, "on the public test", [kernel_dir], card=card.name, file=scalers[0] if scalers else None,
                           hint=_predict_hint()):
                stages = [(name, load_estimator(resolved, kernel_dir / name)) for name in scalers]
                inputs = runtime_torch.as_inputs(resolved, frame, stages)
                # the folds were fitted strictly by prepare: the fresh net proves the widths in and out
                runtime_torch.predict_array(resolved, model.eval(), inputs, CPU, "cpu")
        except (TableError, runtime.ModelLoadError) as exc:
            raise BundleError(f"{where}: on the public test: {exc}", hint=_predict_hint()) from None


def notes(spec: KernelSpec, kernel_dir: Path, data: Path | None, card: TorchCard) -> list[str]:
    """With a glob in ``feature_columns``: the columns it resolves to on the public test's feature table, in the net's
    order (the kernel resolves them the same way on the hidden test's)."""
    if data is None or not any(runtime_torch.is_pattern(entry) for entry in card.feature_columns):
        return []
    path = data / (spec.competition.test or DEFAULT_TEST_TABLE)
    sample_path = data / spec.competition.sample_submission
    if not path.is_file() or not sample_path.is_file():
        return []
    resolved = to_kernel(card)
    id_column = spec.submission.id_column
    with user_code_importable(kernel_dir), offline_environment():
        rows = public_test_rows(spec, data, path, read_sample(sample_path, id_column))
        with user_code(f"{kernel_dir / SPEC_FILE}: models.{card.name}", "on the public test", [kernel_dir], card=card.name,
                       function=card.feature_function, hint=_predict_hint()):
            frame = features(resolved, rows, id_column, build_context(resolved, kernel_dir, data))
    columns = runtime_torch.resolve_columns(resolved, frame.columns)
    return [f"models.{card.name}: feature_columns {', '.join(map(repr, card.feature_columns))} resolve on the public "
            f"test's feature table to {len(columns)} column(s), in the net's order: {', '.join(columns)}"]


def _predict_hint() -> str:
    return ("the feature function gets the test rows (the id column included) and returns the features the net was "
            "trained on; feature_columns picks and orders the net's inputs; num_classes is the step's columns")


def modules(card: TorchCard) -> tuple[str, ...]:
    """torch and safetensors; joblib too for a preprocessor (a pickle)."""
    return TORCH_EXTRA.modules + (("joblib",) if card.preprocessor is not None else ())


def record_notes(name: str, built: Built) -> list[str]:
    """What the kernel does to the feature table before the net, then the folds' opt-ins."""
    record = built_as(built, runtime_torch.TorchBuilt)
    return [f"models.{name}: {what}: {how}" for what, how in record.preprocessing.items()] + fold_notes(name, built)


TORCH_EXTRA = Extra("torch", ("torch", "safetensors"))
BUILD = build_card(TorchCard, TORCH_EXTRA, to_kernel, prepare, extra_files, check_public_data, modules, notes=notes,
                   record_notes=record_notes)

__all__ = ["BUILD", "check_public_data", "extra_files", "prepare", "preprocessor_sources", "to_kernel"]
