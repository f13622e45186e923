"""The build's warnings about what a text card feeds its model: tokens the tokenizer does not know.

A notebook's separator written into a card (``separator = " [SEP] "``) is text to the tokenizer: a
tokenizer saved lower-cased turns it into ``[sep]``, then into the unknown token, and the model sees
``[UNK]`` where it was trained on ``[SEP]``, silently. The build names each such token: the card's
separator, the special tokens kkb adds around the segments, and (a card with an encode function) an
unknown token in every row of the public test, where a per-row token or a separator the function adds
is the likely cause. A few unknown tokens in some rows are ordinary text and said nothing about.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from builder.bundle.cards.unit import public_test_rows
from builder.bundle.models import offline_environment, user_code_importable
from builder.bundle.user_code import user_code
from builder.kkb_runtime.cards import text as runtime_text
from builder.kkb_runtime.cards import text_inputs
from builder.kkb_runtime.cards.common.tables import TableError
from builder.kkb_runtime.submission import read_sample
from builder.project.cards import TextCard
from builder.project.spec import SPEC_FILE, KernelSpec

SHOWN_ROWS = 64  # the public test's rows an encode function is run on at build time


def text_notes(spec: KernelSpec, kernel_dir: Path, data: Path | None) -> tuple[str, ...]:
    """One warning per token a text card's input maps to the unknown token (``data``: the public data, or None)."""
    notes: list[str] = []
    for card in spec.models:
        if not isinstance(card, TextCard):
            continue
        with user_code_importable(kernel_dir), offline_environment():
            tokenizer = runtime_text.load_tokenizer(card.model_dump(mode="json"), kernel_dir)
            notes += _unknown_tokens(card, tokenizer, spec, kernel_dir, data)
    return tuple(notes)


def _unknown_tokens(card: TextCard, tokenizer: Any, spec: KernelSpec, kernel_dir: Path, data: Path | None) -> list[str]:
    unknown = getattr(tokenizer, "unk_token_id", None)
    if unknown is None:
        return []
    name = getattr(tokenizer, "unk_token", None) or "the unknown token"
    where = f"warning: models.{card.name}"
    found = []
    if card.encode_function is None:
        separator = tokenizer(card.separator, add_special_tokens=False)["input_ids"] if card.separator.strip() else []
        if unknown in separator:
            found.append(f"{where}: separator = {card.separator!r} becomes {name} ({_decoded(tokenizer, separator)}): the "
                         "model sees the unknown token where the notebook meant a separator")
        shape = runtime_text.special_tokens(tokenizer, card.model_dump(mode="json"), bool(card.text_pair_columns))
        added = [*shape.prefix[0], *shape.middle[0], *shape.suffix[0]]
        if unknown in added:
            found.append(f"{where}: the special tokens around the texts include {name} ({_decoded(tokenizer, added)})")
        return found
    rows = _public_rows(card, tokenizer, spec, kernel_dir, data)
    if rows and all(unknown in row for row in rows):
        found.append(f"{where}: {name} is in every row {card.encode_function} encodes on the public test "
                     f"({len(rows)} rows; the first: {_decoded(tokenizer, rows[0])[:300]}): a separator or a per-row "
                     "token the tokenizer does not know (a lower-cased tokenizer turns '[SEP]' into '[sep]')?")
    return found


def _public_rows(card: TextCard, tokenizer: Any, spec: KernelSpec, kernel_dir: Path, data: Path | None) -> list[list[int]]:
    """The encode function's token rows of the public test's first rows, handed to it as the kernel hands them."""
    if data is None:
        return []
    path = data / (spec.competition.test or "test.csv")
    sample_path = data / spec.competition.sample_submission
    if not path.is_file() or not sample_path.is_file():
        return []
    try:
        table = public_test_rows(spec, data, path, read_sample(sample_path, spec.submission.id_column), SHOWN_ROWS)
    except TableError:
        return []  # ids the test lacks: the card's own check (and the dry run) say it
    with user_code(f"{kernel_dir / SPEC_FILE}: models.{card.name}", "on the public test", [kernel_dir], card=card.name,
                   function=card.encode_function, hint="the encode function gets the test rows and the tokenizer and "
                                                       "returns the input ids per row"):
        return text_inputs.encode_rows(tokenizer, card.model_dump(mode="json"), table.reset_index(drop=True)).input_ids


def _decoded(tokenizer: Any, ids: list[int]) -> str:
    return " ".join(str(token) for token in tokenizer.convert_ids_to_tokens(ids))


__all__ = ["text_notes"]
