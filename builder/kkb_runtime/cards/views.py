"""What each card feeds its model, for the first test rows: the dry run's ``--show-inputs`` view (``report.json``'s
``inputs``).

A card step makes its own view when ``$KKB_SHOW_INPUTS`` asks for it (the dry run's sandbox sets it to the number of
rows), after its output is written: the step has already imported its libraries and read its data, so the view costs
it a few milliseconds where kkb's own process would spend seconds importing torch or transformers. It is written into
the step's meta file (``inputs``), and the dry run makes it itself only for a card no step ran
(``builder.rehearse.card_inputs``). Per kind (:data:`VIEWS`):

* text: the tokens the model receives, decoded (special tokens and segment changes marked), the row's
  length, and where kkb's truncation cut each segment (an encode function's rows are shown as returned);
* tabular: the feature row in the order the model receives it, after any reorder (name, dtype, value);
* torch: the feature row in the net's order (``feature_columns``), and the float32 values the net receives after
  the first fold's preprocessor, when it has one;
* image: the tensor after the card's pipeline: shape, dtype, per-channel mean and std, value range.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..config import KernelConfig
from ..submission import read_sample
from ..vocabulary import CardKind
from . import tabular as runtime_tabular
from . import text as runtime_text
from . import text_inputs
from . import torch as runtime_torch
from .common.checkpoints import checkpoint_entries
from .common.estimators import load_estimator
from .common.features import features
from .common.tables import test_rows
from .image import predict as runtime_predict
from .image.transforms import inference_pipeline

ROWS_VARIABLE = "KKB_SHOW_INPUTS"  # how many rows a step shows (unset or 0: none; the dry run sets it)
SEGMENT = "‖"  # where the token type changes (the second segment of a pair begins)


def requested_rows(environ: Mapping[str, str]) -> int:
    """The rows ``$KKB_SHOW_INPUTS`` asks a step to show (0: no view)."""
    value = str(environ.get(ROWS_VARIABLE) or "0")
    return int(value) if value.isdigit() else 0


def card_view(config: KernelConfig, card: Mapping[str, Any], weights: Path, data: Path, rows: int) -> dict[str, Any]:
    """``{"rows": [...]}``, or ``{"error": "..."}`` when the view cannot be made: a view is a report, never a failure."""
    kind = CardKind(card.get("kind") or CardKind.IMAGE)
    try:
        return {"rows": VIEWS[kind](config, card, weights, data, rows)}
    except Exception as exc:  # the user's code and libraries raise anything; the run goes on
        return {"error": f"{type(exc).__name__}: {exc}"}


def _test_rows(config: KernelConfig, data: Path, rows: int) -> pd.DataFrame:
    """The first ``rows`` test rows in the sample's order, as the kernel hands them to the card."""
    id_column = str(config.submission.get("id_column", "id"))
    ids = read_sample(data / config.sample_submission, id_column)[id_column].astype(str).tolist()[:rows]
    test = data / str(config.raw.get("competition", {}).get("test") or "test.csv")
    return test_rows(test, data / config.sample_submission, ids, id_column).reset_index(drop=True)


def _text_rows(config: KernelConfig, card: Mapping[str, Any], weights: Path, data: Path, rows: int) -> list[dict[str, Any]]:
    table = _test_rows(config, data, rows)
    tokenizer = runtime_text.load_tokenizer(card, weights)
    encoded = text_inputs.encode_rows(tokenizer, card, table)
    cuts = _cuts(tokenizer, card, table) if not card.get("encode_function") else [None] * len(table)
    out = []
    for index, ids in enumerate(encoded.input_ids):
        tokens = [str(token) for token in tokenizer.convert_ids_to_tokens(ids)]
        types = encoded.token_type_ids[index]
        shown = [(SEGMENT + " " if k and types[k] != types[k - 1] else "") + token for k, token in enumerate(tokens)]
        out.append({"length": len(ids), "tokens": " ".join(shown), "cut": cuts[index],
                    "padded_to": text_inputs.padding_length(card)})
    return out


def _cuts(tokenizer: Any, card: Mapping[str, Any], table: pd.DataFrame) -> list[str | None]:
    """Per row, where kkb's truncation cut: each segment's tokens before and after (None: nothing was cut)."""
    separator = str(card["separator"])
    joiner = len(tokenizer(separator, add_special_tokens=False)["input_ids"]) if separator.strip() else 0
    segments = [columns for columns in (list(card.get("text_columns") or ()), list(card.get("text_pair_columns") or ()))
                if columns]
    budgets = {str(column): int(tokens) for column, tokens in dict(card.get("column_max_len") or {}).items()}
    room = int(card["max_len"]) - runtime_text.special_tokens(tokenizer, card, len(segments) > 1).count
    out: list[str | None] = []
    for index in range(len(table)):
        counts = [[_count(tokenizer, table[column].iloc[index]) for column in columns] for columns in segments]
        kept = [[min(n, budgets.get(column, n)) for n, column in zip(ns, columns, strict=True)]
                for ns, columns in zip(counts, segments, strict=True)]
        whole = [sum(ns) + joiner * (len(ns) - 1) for ns in counts]
        joined = [sum(ks) + joiner * (len(ks) - 1) for ks in kept]
        final = runtime_text.budgets(joined[0], joined[1] if len(joined) > 1 else 0, room)
        if list(final[:len(segments)]) == whole:
            out.append(None)
            continue
        said = [f"{'+'.join(columns)} {total} → {keep} tokens" for columns, total, keep in zip(segments, whole, final, strict=False)]
        out.append(f"{'; '.join(said)} ({card['truncation']})")
    return out


def _count(tokenizer: Any, value: Any) -> int:
    return len(tokenizer("" if value != value else str(value), add_special_tokens=False)["input_ids"])  # NaN: empty


def _tabular_rows(config: KernelConfig, card: Mapping[str, Any], weights: Path, data: Path,
                  rows: int) -> list[dict[str, Any]]:
    id_column = str(config.submission.get("id_column", "id"))
    frame = runtime_tabular.features(card, _test_rows(config, data, rows), id_column)
    if card.get("kind") != CardKind.SKLEARN:
        first = checkpoint_entries(card)[0]
        _, names = runtime_tabular.load_booster(card, weights / str(first["file"]))
        frame = runtime_tabular.in_model_order(frame, names, card)
    return [{"features": [{"name": str(column), "dtype": str(frame[column].dtype), "value": _plain(value)}
                          for column, value in row.items()]} for _, row in frame.iterrows()]


def _torch_rows(config: KernelConfig, card: Mapping[str, Any], weights: Path, data: Path,
                rows: int) -> list[dict[str, Any]]:
    id_column = str(config.submission.get("id_column", "id"))
    frame = runtime_torch.select_columns(card, features(card, _test_rows(config, data, rows), id_column))
    scaler = checkpoint_entries(card)[0].get("preprocessor")
    inputs = runtime_torch.as_inputs(card, frame, load_estimator(card, weights / str(scaler)) if scaler else None)
    out = []
    for index, (_, row) in enumerate(frame.iterrows()):
        entry: dict[str, Any] = {"features": [{"name": str(column), "dtype": str(frame[column].dtype), "value": _plain(value)}
                                              for column, value in row.items()]}
        if scaler:
            entry["net_input"] = [round(float(value), 6) for value in inputs[index]]
        out.append(entry)
    return out


def _image_rows(config: KernelConfig, card: Mapping[str, Any], weights: Path, data: Path,
                rows: int) -> list[dict[str, Any]]:
    id_column = str(config.submission.get("id_column", "id"))
    ids = read_sample(data / config.sample_submission, id_column)[id_column].astype(str).tolist()[:rows]
    paths = runtime_predict.image_paths(ids, runtime_predict.images_dir(config, data), id_column)
    dataset = runtime_predict.ImageDataset(paths, inference_pipeline(card), int(card["in_chans"]))
    out = []
    for index, path in enumerate(paths):
        tensor = dataset[index].numpy()
        flat = tensor.reshape(tensor.shape[0], -1)
        out.append({"image": path.name, "shape": list(tensor.shape), "dtype": str(tensor.dtype),
                    "mean": [round(float(v), 4) for v in flat.mean(axis=1)],
                    "std": [round(float(v), 4) for v in flat.std(axis=1)],
                    "range": [round(float(tensor.min()), 4), round(float(tensor.max()), 4)]})
    return out


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


View = Callable[[KernelConfig, Mapping[str, Any], Path, Path, int], list[dict[str, Any]]]
# One view per card kind (tests/test_vocabulary.py checks it covers CardKind).
VIEWS: dict[CardKind, View] = {
    CardKind.IMAGE: _image_rows,
    CardKind.TEXT: _text_rows,
    CardKind.GBDT: _tabular_rows,
    CardKind.SKLEARN: _tabular_rows,
    CardKind.TORCH: _torch_rows,
}

__all__ = ["ROWS_VARIABLE", "VIEWS", "card_view", "requested_rows"]
