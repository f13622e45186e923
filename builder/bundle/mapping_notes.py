"""The build's lines about what kkb maps between a tabular card's features, its model and the step's columns.

With the public data at hand, each tabular card's feature function runs on the public test and its first
fold loads, as in the kernel; :mod:`builder.kkb_runtime.mapping` words what kkb then does: features
reordered to the booster's training order or left out, ``predict_proba``'s classes matched by label (or
integer classes filling the columns in order, or a binary model's positive class). ``kkb build`` prints
each as a note. A mismatch of labels is refused earlier, by the public-data check
(:func:`builder.kkb_runtime.cards.tabular.class_order`). Like every run of the user's code at build, this runs in the
build's sandboxed run (``builder.bundle.card_run``), where ``data`` is the public data as the kernel sees it.
"""

from __future__ import annotations

from pathlib import Path

from builder.bundle.cards.unit import public_test_rows
from builder.bundle.checkpoints import checkpoint_sources
from builder.bundle.models import offline_environment, user_code_importable
from builder.bundle.text_notes import text_notes
from builder.bundle.user_code import user_code
from builder.kkb_runtime.cards import tabular as runtime_tabular
from builder.kkb_runtime.mapping import class_notes, feature_notes
from builder.kkb_runtime.submission import read_sample, target_columns
from builder.kkb_runtime.vocabulary import CardKind, SubmissionKind
from builder.project.cards import TabularCard
from builder.project.spec import SPEC_FILE, KernelSpec


def mapping_notes(spec: KernelSpec, kernel_dir: Path, data: Path | None) -> tuple[str, ...]:
    """One line per reorder or mapping kkb applies to a tabular card's input or output (needs the public data,
    ``data``), and the text cards' tokens the tokenizer does not know (:mod:`builder.bundle.text_notes`)."""
    return _tabular_notes(spec, kernel_dir, data) + text_notes(spec, kernel_dir, data)


def _tabular_notes(spec: KernelSpec, kernel_dir: Path, data: Path | None) -> tuple[str, ...]:
    if data is None or spec.submission.kind != SubmissionKind.CSV or not (data / spec.competition.sample_submission).is_file():
        return ()
    id_column = spec.submission.id_column
    sample = read_sample(data / spec.competition.sample_submission, id_column)
    predictions = list(spec.submission.prediction_columns) or target_columns(sample, id_column, spec.submission.target_columns)
    cards = {card.name: card for card in spec.models}
    notes: list[str] = []
    for step in spec.steps:
        card = cards.get(step.predict_model or "")
        test = data / (spec.competition.test or "test.csv")
        if not isinstance(card, TabularCard) or not test.is_file():
            continue
        columns = list(step.columns or card.columns) or predictions
        with user_code_importable(kernel_dir), offline_environment():
            with user_code(f"{kernel_dir / SPEC_FILE}: models.{card.name}", "on the public test", [kernel_dir],
                           card=card.name, function=card.feature_function, hint="the feature function gets the test rows"):
                frame = runtime_tabular.features(card.model_dump(mode="json"), public_test_rows(spec, data, test, sample),
                                                 id_column)
            notes += _card_notes(card, kernel_dir, frame, columns)
    return tuple(dict.fromkeys(notes))  # a card two steps use says it once


def _card_notes(card: TabularCard, kernel_dir: Path, frame: object, columns: list[str]) -> list[str]:
    plain = card.model_dump(mode="json")
    path = kernel_dir / checkpoint_sources(card, kernel_dir)[0]
    given = [str(column) for column in getattr(frame, "columns", [])]
    if card.kind == CardKind.SKLEARN:
        model = runtime_tabular.load_estimator(plain, path)
        if not runtime_tabular.uses_proba(plain, model):
            return []
        classes = getattr(model, "classes_", None)
        return class_notes(card.name, classes, columns, len(classes) if classes is not None else len(columns))
    _, trained = runtime_tabular.load_booster(plain, path)
    return feature_notes(card.name, given, trained)


__all__ = ["mapping_notes"]
