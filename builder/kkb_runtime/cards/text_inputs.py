"""A text card's input rows as the notebook built them (the card keys of ``builder.project.text_inputs``).

* ``encode_function``: the notebook's own tokenization, ``function(test_table, tokenizer)``, returning the
  input ids per row: a mapping (``input_ids``, optionally ``attention_mask`` and ``token_type_ids``, a
  transformers ``BatchEncoding`` included) or a tuple in that order; rows as lists, arrays or tensors.
  kkb batches the rows by length, pads them and puts the predictions back in the rows' order.
* ``column_max_len``: each text column cut to its own budget of tokens before the columns are joined
  (``separator``'s tokens between them), then the pair cut to ``max_len`` as usual.
* ``padding = "max_length"``: every batch padded to ``max_len`` (:func:`padding_length`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..context import Context
from ..user_calls import ArgumentsRefused, call_with
from . import text
from .common import models
from .text import TextCard

if TYPE_CHECKING:  # imported where used: importing kkb_runtime stays free of them (kkb_runtime/__init__)
    import pandas as pd

PARTS = ("input_ids", "attention_mask", "token_type_ids")


def padding_length(card: TextCard) -> int | None:
    """What every batch is padded to: ``max_len`` with ``padding = "max_length"``, else None (its longest row)."""
    return card.max_len if card.padding == "max_length" else None


def encode_rows(tokenizer: Any, card: TextCard, table: pd.DataFrame, context: Context | None = None) -> text.Encoded:
    """The card's token rows for ``table``: its encode function's (``context``: what it gets as ``ctx``), kkb's with
    per-column budgets, or kkb's own."""
    if card.encode_function:
        encoded = encode_with_function(tokenizer, card, card.encode_function, table, context)
    elif card.column_max_len:
        encoded = encode_with_budgets(tokenizer, card, table)
    else:
        encoded = text.encode(tokenizer, card, table)
    length = padding_length(card)
    longest = max((len(row) for row in encoded.input_ids), default=0)
    if length is not None and longest > length:
        raise models.ModelLoadError(f"model '{card.name}': a row has {longest} tokens, more than max_len = {length} "
                                    "that padding = 'max_length' pads to (kkb never cuts what the encode function "
                                    "returned): raise max_len or cut in the function")
    return encoded


def probe_rows(tokenizer: Any, card: TextCard, sentences: Sequence[str]) -> text.Encoded:
    """Rows to check a model's output on: the card's own encoding of ``sentences`` in every text column, or (a card
    with an encode function, whose columns kkb does not know) the tokenizer's own encoding of them."""
    import pandas as pd
    if card.encode_function:
        batch = tokenizer(list(sentences), add_special_tokens=True)
        ids = [list(row) for row in batch["input_ids"]]
        return text.Encoded(ids, [[0] * len(row) for row in ids])
    columns = [*card.text_columns, *card.text_pair_columns]
    return encode_rows(tokenizer, card, pd.DataFrame({column: list(sentences) for column in columns}))


def encode_with_function(tokenizer: Any, card: TextCard, reference: str, table: pd.DataFrame,
                         context: Context | None = None) -> text.Encoded:
    """``reference`` (the card's encode function: the notebook's tokenization, from the code dataset) on the rows, with
    the card's ``encode_args`` as keyword arguments (and ``context`` to a parameter named ``ctx``)."""
    function = models.load_factory(reference)
    try:
        result = call_with(function, reference, {"table": table.copy(), "tokenizer": tokenizer}, card.encode_args,
                           "encode_args", context)
    except ArgumentsRefused as exc:
        raise models.ModelLoadError(f"model '{card.name}': encode_args: {exc}") from None
    where = f"model '{card.name}': {reference}"
    parts = _parts(result)
    if parts is None or "input_ids" not in parts:
        raise models.ModelLoadError(f"{where} returned {type(result).__name__}: return the input ids per row "
                                    "({'input_ids': [...], 'attention_mask': [...]} or a tuple in that order)")
    ids = _rows(parts["input_ids"], where, "input_ids", len(table))
    masks = _rows(parts["attention_mask"], where, "attention_mask", len(table)) if parts.get("attention_mask") is not None \
        else None
    types = _rows(parts["token_type_ids"], where, "token_type_ids", len(table)) \
        if parts.get("token_type_ids") is not None else [[0] * len(row) for row in ids]
    for name, rows in (("attention_mask", masks), ("token_type_ids", types)):
        bad = next((index for index, row in enumerate(rows or ids) if len(row) != len(ids[index])), None)
        if bad is not None:
            raise models.ModelLoadError(f"{where}: row {bad} has {len(ids[bad])} input ids but "
                                        f"{len((rows or ids)[bad])} {name}")
    return text.Encoded(ids, types, masks)


def _parts(result: Any) -> dict[str, Any] | None:
    """A mapping as it is; a tuple as (input_ids, attention_mask, token_type_ids); a list as the input ids alone."""
    if isinstance(result, Mapping):
        return {str(key): value for key, value in result.items()}
    if isinstance(result, tuple):
        return dict(zip(PARTS, result, strict=False))
    return {"input_ids": result} if isinstance(result, list) or hasattr(result, "tolist") else None


def _rows(value: Any, where: str, name: str, count: int) -> list[list[int]]:
    rows = value.tolist() if hasattr(value, "tolist") else list(value)
    if len(rows) != count:
        raise models.ModelLoadError(f"{where}: {len(rows)} rows of {name} for {count} test rows (one per row, in order)")
    try:
        return [[int(token) for token in (row.tolist() if hasattr(row, "tolist") else row)] for row in rows]
    except (TypeError, ValueError):
        raise models.ModelLoadError(f"{where}: {name} must hold a list of integer token ids per row") from None


def encode_with_budgets(tokenizer: Any, card: TextCard, table: pd.DataFrame) -> text.Encoded:
    """kkb's tokenization, each column cut to its ``column_max_len`` budget first, joined by the separator's tokens."""
    separator = card.separator
    joiner = list(tokenizer(separator, add_special_tokens=False)["input_ids"]) if separator.strip() else []
    mode, head = card.truncation, card.head_tokens
    budgets = dict(card.column_max_len)

    def segment(columns: Sequence[str]) -> list[list[int]]:
        per_column = [_column_tokens(tokenizer, table, column, budgets.get(column), mode, head) for column in columns]
        rows: list[list[int]] = []
        for parts in zip(*per_column, strict=True):
            row: list[int] = []
            for index, part in enumerate(parts):
                row += (joiner if index else []) + part
            rows.append(row)
        return rows

    first = segment(list(card.text_columns))
    pairs = list(card.text_pair_columns)
    second: list[list[int] | None] = list(segment(pairs)) if pairs else [None] * len(first)
    shape = text.special_tokens(tokenizer, card, bool(pairs))
    room = card.max_len - shape.count
    input_ids, token_types = [], []
    for a, b in zip(first, second, strict=True):
        keep_a, keep_b = text.budgets(len(a), len(b or ()), room)
        ids, types = shape.around(text.cut(a, keep_a, mode, head), text.cut(b, keep_b, mode, head) if b is not None else None)
        input_ids.append(ids)
        token_types.append(types)
    return text.Encoded(input_ids, token_types)


def _column_tokens(tokenizer: Any, table: pd.DataFrame, column: str, budget: int | None, mode: str,
                   head: int | None) -> list[list[int]]:
    values = table[column].fillna("").astype(str).tolist()
    tokens = tokenizer(values, add_special_tokens=False)["input_ids"] if values else []
    return [text.cut(list(row), budget, mode, head) if budget is not None else list(row) for row in tokens]


__all__ = ["encode_rows", "probe_rows", "encode_with_budgets", "encode_with_function", "padding_length"]
