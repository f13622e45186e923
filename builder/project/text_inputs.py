"""A text card's input as a notebook builds it: the card keys that let a port feed its model what the
original notebook fed it (``docs/parity.md``).

* ``encode_function = "module:function"``: the notebook's own tokenization, called in the kernel with
  the test table (a DataFrame in the sample's order) and the loaded tokenizer; it returns the input ids
  per row (and, optionally, the attention masks and token type ids). kkb batches, pads and puts the
  predictions back in the rows' order. kkb's own joining and truncation keys then do not apply.
* ``padding = "max_length"``: every batch padded to ``max_len`` (a model that pools over the padding,
  as one trained on fixed-length batches may, needs it); the default ``"dynamic"`` pads each
  length-sorted batch to its own longest row.
* ``column_max_len = {column = tokens}``: where kkb's own truncation is used, each text column is cut
  to its own budget (``truncation`` decides which end is kept) before the columns are joined.

The keys are fields of the text card's model (``builder.project.cards.text``); this module holds their rules.
"""

from __future__ import annotations

import re
from typing import Protocol

REFERENCE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
# kkb's own tokenization keys: with an encode_function they would be silently ignored, so they are refused.
OWN_TOKENIZATION = ("text_pair_columns", "separator", "truncation", "head_tokens", "column_max_len")


class TextInputCard(Protocol):
    name: str
    text_columns: list[str]
    text_pair_columns: list[str]
    encode_function: str | None
    column_max_len: dict[str, int]
    @property
    def model_fields_set(self) -> set[str]: ...


def check_text_inputs(card: TextInputCard) -> None:
    """An encode_function replaces kkb's tokenization (its keys are refused, never ignored); otherwise the card
    needs text_columns, and column_max_len names only the columns it joins."""
    if card.encode_function is not None:
        ignored = [key for key in OWN_TOKENIZATION if key in card.model_fields_set]
        if ignored:
            raise ValueError(f"[[models]] '{card.name}': encode_function does the tokenization, so {', '.join(ignored)} "
                             "would be ignored: drop them (your function cuts and joins the texts)")
        return
    if not card.text_columns:
        raise ValueError(f"[[models]] '{card.name}': a text card needs text_columns (the test table's columns it reads), "
                         "or encode_function (your own tokenization)")
    joined = [*card.text_columns, *card.text_pair_columns]
    unknown = [column for column in card.column_max_len if column not in joined]
    if unknown:
        raise ValueError(f"[[models]] '{card.name}': column_max_len names {', '.join(unknown)}, which the card does not "
                         f"read (its text columns: {', '.join(joined)})")


__all__ = ["OWN_TOKENIZATION", "TextInputCard", "check_text_inputs"]
