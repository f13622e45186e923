"""Checks at build time, before any run: what would otherwise fail minutes into the kernel.

With the public competition data at hand (``[competition] data``), :func:`check_against_public_data`
proves, for every ``python -m kkb_runtime predict --model NAME`` step:

* the card's output width (``num_classes``) equals the prediction columns (``[submission]
  prediction_columns``, else the targets), and the ``[[postprocess]]`` chain turns those into
  exactly the sample submission's target columns;
* each step's column group (``columns``) names prediction columns, and the steps together write them all;
* the card's kind's own check (``builder.bundle.cards``): an image card's ids resolve to test images the
  way the runtime resolves them; a text card's columns are in the test table; a tabular card's features
  and first fold predict the public test in the step's shape.

The first three read only the spec and the sample, here; the cards' own checks run the user's code, so
:func:`check_against_public_data` returns them (:class:`CardCheck`) for the build's sandboxed run
(``builder.bundle.card_run``), which runs them where the kernel runs. Without the data there is nothing to
compare with, and nothing is checked (the dry run still runs everything).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from builder.bundle.submission_checks import check_column_types
from builder.bundle.target_checks import check_named_columns
from builder.errors import BundleError
from builder.kkb_runtime import postprocess
from builder.kkb_runtime.submission import read_sample, target_columns
from builder.kkb_runtime.vocabulary import CardKind, SubmissionKind
from builder.project.cards import ImageCard, ModelCard
from builder.project.spec import SPEC_FILE, KernelSpec


@dataclass(frozen=True)
class CardCheck:
    """A card's own check against the public test, for the step that runs it: run in the build's sandboxed run."""

    step: str
    card: str
    columns: tuple[str, ...]  # what the step writes


def check_against_public_data(spec: KernelSpec, kernel_dir: Path) -> tuple[CardCheck, ...]:
    """The checks that read the spec and the sample (raised here); the cards' own checks, to run where the kernel runs."""
    return PREFLIGHTS[spec.submission.kind](spec, kernel_dir)


def _check_csv_kernel(spec: KernelSpec, kernel_dir: Path) -> tuple[CardCheck, ...]:
    sample_path = spec.competition.public_sample(kernel_dir)
    if sample_path is None or not sample_path.is_file():
        return ()
    id_column = spec.submission.id_column
    sample = read_sample(sample_path, id_column)
    check_column_types(spec, kernel_dir, sample_path, sample)
    targets = target_columns(sample, id_column, spec.submission.target_columns)
    predictions = list(spec.submission.prediction_columns) or targets
    check_named_columns(spec, kernel_dir, predictions, targets)  # stage columns, unrounded: no silent no-op
    _check_postprocess(spec, kernel_dir, sample_path, predictions, targets)
    cards = {card.name: card for card in spec.models}
    _check_column_groups(spec, kernel_dir, predictions, cards)
    checks = []
    for step in spec.steps:
        card = cards.get(step.predict_model or "")
        if card is None:
            continue
        columns = list(step.columns or card.columns) or predictions
        if not (isinstance(card, ImageCard) and card.features) and card.num_classes != len(columns):
            what = ("the step's columns" if step.columns or card.columns else "prediction_columns"
                    if spec.submission.prediction_columns else "target columns of the sample submission")
            per = "image" if card.kind == CardKind.IMAGE else "row"
            raise BundleError(f"{kernel_dir / SPEC_FILE}: models.{card.name}.num_classes: the model outputs {card.num_classes} "
                              f"values per {per}, step '{step.name}' must write {len(columns)} ({what}: "
                              f"{', '.join(columns)})",
                              hint="set num_classes to the model's output width, or [submission] prediction_columns "
                                   "to what it outputs and a [[postprocess]] stage (argmax, threshold) to the targets")
        checks.append(CardCheck(step.name, card.name, tuple(columns)))
    return tuple(checks)


def _check_column_groups(spec: KernelSpec, kernel_dir: Path, predictions: list[str], cards: dict[str, ModelCard]) -> None:
    """Each step's columns are prediction columns, and together the steps write every prediction column."""
    covered: set[str] = set()
    for index, step in enumerate(spec.steps):
        card = cards.get(step.predict_model or "")
        own = list(step.columns or (card.columns if card else []))
        unknown = [column for column in own if column not in predictions]
        if unknown:
            key = f"steps[{index}].columns" if step.columns else f"models.{card.name if card else step.name}.columns"
            raise BundleError(f"{kernel_dir / SPEC_FILE}: {key}: step '{step.name}' declares {', '.join(unknown)}, "
                              f"which are no prediction column ({', '.join(predictions)})",
                              hint="a column group lists prediction columns: the sample's targets, or [submission] "
                                   "prediction_columns")
        covered.update(own or predictions)
    uncovered = [column for column in predictions if column not in covered]
    if uncovered:
        raise BundleError(f"{kernel_dir / SPEC_FILE}: steps: no step writes {', '.join(uncovered)} "
                          f"(the steps' columns: {', '.join(sorted(covered)) or 'none'})",
                          hint="add the missing columns to a step's columns (or a card's), or leave columns out "
                               "of a step that writes them all")


def _check_postprocess(spec: KernelSpec, kernel_dir: Path, sample_path: Path, predictions: list[str],
                       targets: list[str]) -> None:
    stages = [postprocess.read_stage(stage.resolved()) for stage in spec.postprocess]
    result = postprocess.output_columns(stages, predictions)
    if result is None or sorted(result) == sorted(targets):
        return
    chain = " -> ".join(stage.kind for stage in stages) or "no [[postprocess]]"
    raise BundleError(f"{kernel_dir / SPEC_FILE}: submission: the prediction columns ({', '.join(predictions)}) after "
                      f"{chain} are {', '.join(result) or 'none'}, but {sample_path.name} holds {', '.join(targets)}",
                      hint="make [submission] prediction_columns and [[postprocess]] (argmax into = ...) produce "
                           "exactly the sample submission's target columns")


def _nothing_to_check(spec: KernelSpec, kernel_dir: Path) -> tuple[CardCheck, ...]:
    """An evaluation-API kernel writes no file the build could compare with the sample: its dry run checks it."""
    return ()


# The build-time checks of each submission kind.
PREFLIGHTS: dict[SubmissionKind, Callable[[KernelSpec, Path], tuple[CardCheck, ...]]] = {
    SubmissionKind.CSV: _check_csv_kernel,
    SubmissionKind.EVALUATION_API: _nothing_to_check,
}


__all__ = ["CardCheck", "check_against_public_data"]
