"""Checks at build time, before any run: what would otherwise fail minutes into the kernel.

With the public competition data at hand (``[competition] data``), :func:`check_against_public_data`
proves, for every ``python -m kkb_runtime predict --model NAME`` step:

* the card's output width (``num_classes``) equals the prediction columns (``[submission]
  prediction_columns``, else the targets), and the ``[[postprocess]]`` chain turns those into
  exactly the sample submission's target columns;
* every id of the public sample submission resolves to a test image the way the runtime resolves it
  (``<id>.<ext>``, ids with their extension, nested folders, a CSV listing paths).

Without the data there is nothing to compare with, and nothing is checked here (the dry run still
runs everything). Factories are imported when the models are prepared (``builder.bundle.models``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from builder.bundle.submission_checks import check_column_types
from builder.errors import BundleError
from builder.kkb_runtime import postprocess
from builder.kkb_runtime import predict as runtime_predict
from builder.kkb_runtime.submission import read_sample, target_columns
from builder.project.spec import SPEC_FILE, KernelSpec


def check_against_public_data(spec: KernelSpec, kernel_dir: Path) -> None:
    if spec.competition.data is None or spec.submission.kind != "csv":
        return
    data = kernel_dir / spec.competition.data
    sample_path = data / spec.competition.sample_submission
    if not sample_path.is_file():
        return
    id_column = spec.submission.id_column
    sample = read_sample(sample_path, id_column)
    check_column_types(spec, kernel_dir, sample_path, sample)
    targets = target_columns(sample, id_column, spec.submission.target_columns)
    predictions = list(spec.submission.prediction_columns) or targets
    _check_postprocess(spec, kernel_dir, sample_path, predictions, targets)
    cards = {card.name: card for card in spec.models}
    predicting = [(step.name, cards[step.predict_model]) for step in spec.steps if step.predict_model in cards]
    for step_name, card in predicting:
        if not card.features and card.num_classes != len(predictions):
            what = "prediction_columns" if spec.submission.prediction_columns else "target columns of the sample submission"
            raise BundleError(f"{kernel_dir / SPEC_FILE}: models.{card.name}.num_classes: the model outputs {card.num_classes} "
                              f"values per image, step '{step_name}' must write {len(predictions)} ({what}: "
                              f"{', '.join(predictions)})",
                              hint="set num_classes to the model's output width, or [submission] prediction_columns "
                                   "to what it outputs and a [[postprocess]] stage (argmax, threshold) to the targets")
    if predicting:
        _check_ids_resolve(spec, kernel_dir, data, sample[id_column].astype(str).tolist())


def _check_postprocess(spec: KernelSpec, kernel_dir: Path, sample_path: Path, predictions: list[str],
                       targets: list[str]) -> None:
    stages = [stage.model_dump(exclude_unset=True) for stage in spec.postprocess]
    result = postprocess.output_columns(stages, predictions)
    if result is None or sorted(result) == sorted(targets):
        return
    chain = " -> ".join(stage["kind"] for stage in stages) or "no [[postprocess]]"
    raise BundleError(f"{kernel_dir / SPEC_FILE}: submission: the prediction columns ({', '.join(predictions)}) after "
                      f"{chain} are {', '.join(result) or 'none'}, but {sample_path.name} holds {', '.join(targets)}",
                      hint="make [submission] prediction_columns and [[postprocess]] (argmax into = ...) produce "
                           "exactly the sample submission's target columns")


def _check_ids_resolve(spec: KernelSpec, kernel_dir: Path, data: Path, ids: list[str]) -> None:
    configured = spec.competition.test
    folder = data / (configured or runtime_predict.DEFAULT_TEST_DIR)
    if not folder.exists():
        if configured:
            raise BundleError(f"{kernel_dir / SPEC_FILE}: competition.test: {folder} does not exist in the public data",
                              hint="name the test images folder (or the CSV listing them) relative to [competition] data")
        folder = data
    try:
        runtime_predict.image_paths(ids, folder, spec.submission.id_column)
    except (runtime_predict.PredictError, pd.errors.ParserError, OSError) as exc:
        raise BundleError(f"{kernel_dir / SPEC_FILE}: the public test's ids do not resolve to images: {exc}",
                          hint="set [competition] test to the folder of test images or to a CSV with the id column "
                               "and a column of image paths") from None


__all__ = ["check_against_public_data"]
