"""What each card feeds its model, for the first test rows: ``kkb dry-run --show-inputs [N]`` prints it, and
``report.json`` (``inputs``) always carries it.

Computed here, beside the sandbox, with the kernel runtime's own functions on the built code and weights
(``kkb_kernel.json``'s cards, as the kernel reads them) and the public test the commit run used:

* text: the tokens the model receives, decoded (special tokens and segment changes marked), the row's
  length, and where kkb's truncation cut each segment (an encode function's rows are shown as returned);
* tabular: the feature row in the order the model receives it, after any reorder (name, dtype, value);
* torch: the feature row in the net's order (``feature_columns``), and the float32 values the net receives after
  the first fold's preprocessor, when it has one;
* image: the tensor after the card's pipeline: shape, dtype, per-channel mean and std, value range.

A card whose view cannot be made says why in its entry; the dry run goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from builder.build import BuildResult
from builder.bundle.models import offline_environment, user_code_importable
from builder.kkb_runtime.cards import tabular as runtime_tabular
from builder.kkb_runtime.cards import text as runtime_text
from builder.kkb_runtime.cards import text_inputs
from builder.kkb_runtime.cards import torch as runtime_torch
from builder.kkb_runtime.cards.common.checkpoints import checkpoint_entries
from builder.kkb_runtime.cards.common.estimators import load_estimator
from builder.kkb_runtime.cards.common.features import features
from builder.kkb_runtime.cards.common.tables import read_table, rows_in_sample_order
from builder.kkb_runtime.cards.image import predict as runtime_predict
from builder.kkb_runtime.cards.image.transforms import inference_pipeline
from builder.kkb_runtime.config import KernelConfig, load_config
from builder.kkb_runtime.submission import read_sample
from builder.kkb_runtime.vocabulary import CardKind
from builder.project.layout import KERNEL_CONFIG

DEFAULT_ROWS = 3
SEGMENT = "‖"  # where the token type changes (the second segment of a pair begins)


def card_inputs(build: BuildResult, data: Path, rows: int = DEFAULT_ROWS) -> list[dict[str, Any]]:
    """One entry per card: ``{"card", "kind", "rows": [...], "lines": [...]}`` (or ``"error"``)."""
    config_path = build.code_dir / KERNEL_CONFIG
    if rows < 1 or not config_path.is_file():
        return []
    config = load_config(config_path)
    entries = []
    for card in config.models:
        kind = CardKind(card.get("kind") or CardKind.IMAGE)
        entry: dict[str, Any] = {"card": str(card["name"]), "kind": str(kind)}
        try:
            with user_code_importable(build.code_dir), offline_environment():
                entry["rows"] = VIEWS[kind](config, card, build, data, rows)
        except Exception as exc:  # a view is a report: its failure is said, the dry run goes on
            entry["error"] = f"{type(exc).__name__}: {exc}"
        entry["lines"] = lines(entry)
        entries.append(entry)
    return entries


def _test_rows(config: KernelConfig, data: Path, rows: int) -> Any:
    """The first ``rows`` test rows in the sample's order, as the kernel reads them (ids as text)."""
    id_column = str(config.submission.get("id_column", "id"))
    ids = read_sample(data / config.sample_submission, id_column)[id_column].astype(str).tolist()[:rows]
    test = data / str(config.raw.get("competition", {}).get("test") or "test.csv")
    return rows_in_sample_order(read_table(test, id_column), ids, id_column, test).reset_index(drop=True)


def _text_rows(config: KernelConfig, card: Mapping[str, Any], build: BuildResult, data: Path, rows: int) -> list[dict[str, Any]]:
    table = _test_rows(config, data, rows)
    tokenizer = runtime_text.load_tokenizer(card, build.weights_dir)
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


def _cuts(tokenizer: Any, card: Mapping[str, Any], table: Any) -> list[str | None]:
    """Per row, where kkb's truncation cut: each segment's tokens before and after (None: nothing was cut)."""
    separator = str(card.get("separator", " "))
    joiner = len(tokenizer(separator, add_special_tokens=False)["input_ids"]) if separator.strip() else 0
    segments = [columns for columns in (list(card.get("text_columns") or ()), list(card.get("text_pair_columns") or ()))
                if columns]
    budgets = {str(column): int(tokens) for column, tokens in dict(card.get("column_max_len") or {}).items()}
    room = int(card.get("max_len", 512)) - runtime_text.special_tokens(tokenizer, card, len(segments) > 1).count
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
        out.append(f"{'; '.join(said)} ({card.get('truncation', 'head_tail')})")
    return out


def _count(tokenizer: Any, value: Any) -> int:
    return len(tokenizer("" if value != value else str(value), add_special_tokens=False)["input_ids"])  # NaN: empty


def _tabular_rows(config: KernelConfig, card: Mapping[str, Any], build: BuildResult, data: Path,
                  rows: int) -> list[dict[str, Any]]:
    id_column = str(config.submission.get("id_column", "id"))
    frame = runtime_tabular.features(card, _test_rows(config, data, rows), id_column)
    if card.get("kind") != CardKind.SKLEARN:
        first = checkpoint_entries(card)[0]
        _, names = runtime_tabular.load_booster(card, build.weights_dir / str(first["file"]))
        frame = runtime_tabular.in_model_order(frame, names, card)
    return [{"features": [{"name": str(column), "dtype": str(frame[column].dtype), "value": _plain(value)}
                          for column, value in row.items()]} for _, row in frame.iterrows()]


def _torch_rows(config: KernelConfig, card: Mapping[str, Any], build: BuildResult, data: Path,
                rows: int) -> list[dict[str, Any]]:
    id_column = str(config.submission.get("id_column", "id"))
    frame = runtime_torch.select_columns(card, features(card, _test_rows(config, data, rows), id_column))
    scaler = checkpoint_entries(card)[0].get("preprocessor")
    inputs = runtime_torch.as_inputs(card, frame, load_estimator(card, build.weights_dir / str(scaler)) if scaler else None)
    out = []
    for index, (_, row) in enumerate(frame.iterrows()):
        entry: dict[str, Any] = {"features": [{"name": str(column), "dtype": str(frame[column].dtype), "value": _plain(value)}
                                              for column, value in row.items()]}
        if scaler:
            entry["net_input"] = [round(float(value), 6) for value in inputs[index]]
        out.append(entry)
    return out


def _image_rows(config: KernelConfig, card: Mapping[str, Any], build: BuildResult, data: Path,
                rows: int) -> list[dict[str, Any]]:
    id_column = str(config.submission.get("id_column", "id"))
    ids = read_sample(data / config.sample_submission, id_column)[id_column].astype(str).tolist()[:rows]
    paths = runtime_predict.image_paths(ids, runtime_predict.images_dir(config, data), id_column)
    dataset = runtime_predict.ImageDataset(paths, inference_pipeline(card), int(card.get("in_chans", 3)))
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


View = Callable[[KernelConfig, Mapping[str, Any], BuildResult, Path, int], list[dict[str, Any]]]
# One view per card kind (tests/test_vocabulary.py checks it covers CardKind).
VIEWS: dict[CardKind, View] = {
    CardKind.IMAGE: _image_rows,
    CardKind.TEXT: _text_rows,
    CardKind.GBDT: _tabular_rows,
    CardKind.SKLEARN: _tabular_rows,
    CardKind.TORCH: _torch_rows,
}


def lines(entry: Mapping[str, Any]) -> list[str]:
    """The entry as plain text lines (what the terminal shows)."""
    head = f"{entry['card']} ({entry['kind']})"
    if "error" in entry:
        return [f"{head}: no view of its inputs: {entry['error']}"]
    out = [head]
    for index, row in enumerate(entry.get("rows", [])):
        if "tokens" in row:
            padded = f", padded to {row['padded_to']}" if row.get("padded_to") else ""
            out.append(f"  row {index}: {row['length']} tokens{padded}" + (f"; cut: {row['cut']}" if row.get("cut") else ""))
            out.append(f"    {row['tokens']}")
        elif "features" in row:
            out.append(f"  row {index}: " + ", ".join(f"{f['name']}:{f['dtype']}={f['value']}" for f in row["features"]))
            if "net_input" in row:  # a torch card's features after its preprocessor
                out.append(f"    net input (float32, after the preprocessor): {row['net_input']}")
        else:
            out.append(f"  row {index}: {row['image']}: tensor {tuple(row['shape'])} {row['dtype']}, mean "
                       f"{row['mean']}, std {row['std']}, range {row['range']}")
    return out


__all__ = ["DEFAULT_ROWS", "VIEWS", "card_inputs", "lines"]
