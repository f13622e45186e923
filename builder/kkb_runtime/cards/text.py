"""Text cards: a transformers model over the test table's text columns, offline.

* The model: ``AutoModelForSequenceClassification`` from the card's ``model_dir`` (its ``config.json``,
  ``num_labels = num_classes``, never a download: ``local_files_only`` and ``HF_HUB_OFFLINE``), or the
  user's ``factory(**model_kwargs)`` (given ``model_dir=`` too when it takes it), then each fold's
  state dict loaded strictly.
* The tokens: the tokenizer from its folder (``tokenizer``, else ``model_dir``); ``text_columns``
  joined with ``separator`` (and ``text_pair_columns`` as the second segment), cut to ``max_len`` with
  the special tokens, keeping the head and the tail of a long text (``truncation``, ``head_tokens``).
* The batches: sorted by length, each padded only to its own longest row (dynamic padding), AMP on
  CUDA; the predictions are put back in the sample's order.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..card import NetworkBuilt, NetworkCard
from ..typed import JsonValue
from .common import device as devices
from .common import models
from .common.models import activation

if TYPE_CHECKING:  # imported where used: importing kkb_runtime stays free of them (kkb_runtime/__init__)
    import numpy as np
    import pandas as pd


@dataclass(frozen=True)
class TextCard(NetworkCard):
    model_dir: str | None  # config.json (and the tokenizer's files), in the weights
    tokenizer: str | None  # the tokenizer's folder, when it is not model_dir
    text_columns: tuple[str, ...]
    text_pair_columns: tuple[str, ...]  # the second segment of a pair
    separator: str
    max_len: int
    truncation: Literal["head_tail", "head", "tail"]
    head_tokens: int | None
    output: int | str | None  # what forward() returns, when it is not the logits
    encode_function: str | None  # the notebook's own tokenization (kkb_runtime.cards.text_inputs)
    encode_args: Mapping[str, JsonValue]  # the encode function's keyword arguments
    padding: Literal["dynamic", "max_length"]
    column_max_len: Mapping[str, int]

    def describe(self) -> str:
        if self.factory or not self.model_dir:
            return super().describe()
        return f"{self.model_dir}/config.json (num_labels={self.num_classes})"


@dataclass(frozen=True)
class TextBuilt(NetworkBuilt):
    tokenizer_class: str  # the class the build loaded the tokenizer as


@dataclass(frozen=True)
class Encoded:
    """Token ids per row (special tokens included), each row's token types, and (from an encode function) its mask."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    attention_mask: list[list[int]] | None = None  # None: 1 for every token of the row

    def __len__(self) -> int:
        return len(self.input_ids)


def folder(card: TextCard, root: Path, which: str | None) -> Path:
    """The folder of the tokenizer (``which``: the card's ``tokenizer``), else ``model_dir``."""
    relative = which or card.model_dir
    if not relative:
        raise models.ModelLoadError(f"model '{card.name}': no tokenizer (a folder with the tokenizer's files)")
    return root / relative


def load_tokenizer(card: TextCard, root: Path) -> Any:
    models.offline()
    from transformers import AutoTokenizer

    where = folder(card, root, card.tokenizer)
    try:
        return AutoTokenizer.from_pretrained(str(where), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise models.ModelLoadError(f"model '{card.name}': no tokenizer in {where}: {exc}") from None


def create_model(card: TextCard, root: Path) -> Any:
    """The card's network with fresh weights, on the CPU: the factory's, or transformers' from config.json."""
    models.offline()
    if card.factory:
        factory = models.load_factory(card.factory)
        kwargs = dict(card.model_kwargs)
        if card.model_dir and "model_dir" in inspect.signature(factory).parameters:
            kwargs["model_dir"] = str(root / card.model_dir)
        return factory(**kwargs)
    from transformers import AutoConfig, AutoModelForSequenceClassification

    where = root / str(card.model_dir)
    try:
        config = AutoConfig.from_pretrained(str(where), num_labels=card.num_classes, local_files_only=True,
                                            **dict(card.model_kwargs))
    except (OSError, ValueError) as exc:
        raise models.ModelLoadError(f"model '{card.name}': no transformers config in {where}: {exc}") from None
    return AutoModelForSequenceClassification.from_config(config)


def load_model(card: TextCard, built: TextBuilt, root: Path, checkpoint: str) -> Any:
    """The card's network with one fold the build wrote (``checkpoint``, under ``root``: the weights), in eval mode."""
    return models.load_weights(create_model(card, root), card, root, checkpoint, built.checkpoint_key)


def texts(table: pd.DataFrame, columns: Sequence[str], separator: str) -> list[str]:
    if not columns:
        return []
    parts = table[list(columns)].fillna("").astype(str)
    joined = parts.agg(separator.join, axis=1) if len(columns) > 1 else parts[columns[0]]
    return [str(text) for text in joined]


def cut(tokens: list[int], keep: int, mode: str, head: int | None) -> list[int]:
    """``keep`` tokens of ``tokens``: the head, the tail, or both ends (``head`` of the start, the rest from the end)."""
    if len(tokens) <= keep:
        return tokens
    if mode == "head":
        return tokens[:keep]
    if mode == "tail":
        return tokens[len(tokens) - keep:]
    start = min(keep, keep // 2 if head is None else head)
    return tokens[:start] + (tokens[len(tokens) - (keep - start):] if keep > start else [])


def budgets(first: int, second: int, room: int) -> tuple[int, int]:
    """How many tokens each segment keeps: both whole if they fit, else the shorter whole up to half the room."""
    if first + second <= room:
        return first, second
    half = room // 2
    if first <= half:
        return first, room - first
    if second <= room - half:
        return room - second, second
    return half, room - half


def encode(tokenizer: Any, card: TextCard, table: pd.DataFrame) -> Encoded:
    first = texts(table, card.text_columns, card.separator)
    second = texts(table, card.text_pair_columns, card.separator)
    ids_a = tokenizer(first, add_special_tokens=False)["input_ids"] if first else []
    ids_b = tokenizer(second, add_special_tokens=False)["input_ids"] if second else [None] * len(ids_a)
    shape = special_tokens(tokenizer, card, bool(second))
    room = card.max_len - shape.count
    mode, head = card.truncation, card.head_tokens
    input_ids, token_types = [], []
    for a, b in zip(ids_a, ids_b, strict=True):
        keep_a, keep_b = budgets(len(a), len(b or ()), room)
        ids, types = shape.around(cut(list(a), keep_a, mode, head), cut(list(b), keep_b, mode, head) if b is not None else None)
        input_ids.append(ids)
        token_types.append(types)
    return Encoded(input_ids, token_types)


@dataclass(frozen=True)
class SpecialTokens:
    """Where the tokenizer puts its special tokens around one text or a pair: ``prefix a middle b suffix``, each part
    with its token types. Read off the tokenizer's own ``__call__`` (transformers 4 and 5 alike: 5 dropped
    ``build_inputs_with_special_tokens`` from the fast tokenizers), so kkb can cut first and add them after."""

    prefix: tuple[list[int], list[int]]
    middle: tuple[list[int], list[int]]
    suffix: tuple[list[int], list[int]]
    type_a: int
    type_b: int

    @property
    def count(self) -> int:
        return len(self.prefix[0]) + len(self.middle[0]) + len(self.suffix[0])

    def around(self, a: list[int], b: list[int] | None) -> tuple[list[int], list[int]]:
        ids = [*self.prefix[0], *a, *(self.middle[0] + b if b is not None else []), *self.suffix[0]]
        types = [*self.prefix[1], *[self.type_a] * len(a),
                 *(self.middle[1] + [self.type_b] * len(b) if b is not None else []), *self.suffix[1]]
        return ids, types


def special_tokens(tokenizer: Any, card: TextCard, pair: bool) -> SpecialTokens:
    """The special tokens' places, found by tokenizing two probe words with and without them."""
    probe_a = list(tokenizer("a", add_special_tokens=False)["input_ids"])
    probe_b = list(tokenizer("b", add_special_tokens=False)["input_ids"]) if pair else []
    full = tokenizer("a", "b" if pair else None, add_special_tokens=True, return_token_type_ids=True)
    ids = list(full["input_ids"])
    types = list(full.get("token_type_ids") or [0] * len(ids))
    start_a = _find(ids, probe_a, 0)
    start_b = _find(ids, probe_b, start_a + len(probe_a)) if pair and start_a >= 0 else start_a + len(probe_a)
    if start_a < 0 or start_b < 0:
        raise models.ModelLoadError(
            f"model '{card.name}': {type(tokenizer).__name__} does not keep a text's own tokens when it adds its special "
            "tokens, so kkb cannot cut the text first and add them after: save the tokenizer with its model's own class "
            "(tokenizer_config.json's tokenizer_class, e.g. BertTokenizerFast)")
    end_a, end_b = start_a + len(probe_a), start_b + len(probe_b)
    return SpecialTokens((ids[:start_a], types[:start_a]), (ids[end_a:start_b], types[end_a:start_b]),
                         (ids[end_b:], types[end_b:]), types[start_a] if probe_a else 0,
                         types[start_b] if pair and probe_b else 0)


def _find(ids: list[int], part: list[int], start: int) -> int:
    for index in range(start, len(ids) - len(part) + 1):
        if ids[index:index + len(part)] == part:
            return index
    return -1


def length_sorted_batches(encoded: Encoded, batch_size: int) -> list[np.ndarray]:
    """Row indices, batched in order of length (stable): each batch pads only to its own longest row."""
    import numpy as np
    order = np.argsort([len(ids) for ids in encoded.input_ids], kind="stable")
    return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]


def padded(encoded: Encoded, rows: Sequence[int] | np.ndarray, pad_id: int, length: int | None = None) -> dict[str, Any]:
    """The rows as tensors padded to ``length`` (default: the longest of them), with the attention mask."""
    import torch

    width = length or max(len(encoded.input_ids[row]) for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    types = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for slot, row in enumerate(rows):
        tokens = encoded.input_ids[row][:width]
        ids[slot, :len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        types[slot, :len(tokens)] = torch.tensor(encoded.token_type_ids[row][:width], dtype=torch.long)
        given = encoded.attention_mask[row][:width] if encoded.attention_mask is not None else None
        mask[slot, :len(tokens)] = torch.tensor(given, dtype=torch.long) if given is not None else 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def accepted_inputs(model: Any) -> set[str] | None:
    """The batch keys ``forward`` takes (None: it takes ``**kwargs``, so all of them)."""
    parameters = inspect.signature(model.forward).parameters
    if any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values()):
        return None
    return set(parameters)


def select_output(output: Any, selector: int | str | None) -> Any:
    """The logits: ``output[selector]`` when the card says, else ``.logits``, else the first of a tuple."""
    if selector is not None:
        return output[selector]
    if hasattr(output, "logits"):
        return output.logits
    if isinstance(output, (tuple, list)):
        return output[0]
    return output


def autocast_dtype(card: TextCard, choice: devices.DeviceChoice) -> str | None:
    """What the forward pass autocasts to: ``float16`` on CUDA with ``amp = true``, else None (float32 logits, as a
    notebook's plain ``model(**batch)`` computes them)."""
    return "float16" if choice.kind == "cuda" and card.amp else None


def make_forward(model: Any, card: TextCard, choice: devices.DeviceChoice, target: Any) -> Callable[[dict[str, Any]], Any]:
    """One batch of token tensors to activated float outputs on the CPU."""
    import torch

    act = activation(card.activation)
    dtype = autocast_dtype(card, choice)
    keys = accepted_inputs(model)

    def forward(batch: dict[str, Any]) -> Any:
        inputs = {key: value.to(target) for key, value in batch.items() if keys is None or key in keys}
        with torch.autocast(device_type="cuda", dtype=getattr(torch, dtype)) if dtype else contextlib.nullcontext():
            output = select_output(model(**inputs), card.output)
        return act(output.float()).cpu()

    return forward


def predict_encoded(forward: Callable[[dict[str, Any]], Any], encoded: Encoded, batch_size: int, pad_id: int,
                    width: int, length: int | None = None) -> np.ndarray:
    """Every row's output, batched by length (each batch padded to ``length``, else its longest row), in the rows' order."""
    import numpy as np
    import torch

    out = np.zeros((len(encoded), width), dtype=np.float64)
    with torch.inference_mode():
        for rows in length_sorted_batches(encoded, batch_size):
            out[rows] = forward(padded(encoded, rows, pad_id, length)).numpy().reshape(len(rows), -1)
    return out


def pad_id(tokenizer: Any) -> int:
    return int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)


__all__ = ["Encoded", "TextBuilt", "TextCard", "budgets", "create_model", "cut", "encode", "length_sorted_batches", "load_model",
           "load_tokenizer", "autocast_dtype", "make_forward", "padded", "predict_encoded", "select_output"]
