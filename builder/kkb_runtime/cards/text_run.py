"""A text card's step and view: the tokenizer and each fold's model over the test table's encoded rows
(``predict --model NAME``), and the tokens the model receives (``--show-inputs``).

Apart from :mod:`.text` (the model, kkb's own tokenization) because the notebook's own tokenization
(:mod:`.text_inputs`) builds on that module: the step uses both.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..card import Fold
from ..config import KernelConfig
from ..steps import write_step_meta
from . import text, text_inputs
from .common import checkpoints
from .common import device as devices
from .common.device import free_memory
from .common.tables import card_context, first_rows, table_job, write_table_output
from .common.unit import ViewRows, runtime_card
from .text import TextBuilt, TextCard

if TYPE_CHECKING:  # imported where used: importing kkb_runtime stays free of them (kkb_runtime/__init__)
    import numpy as np
    import pandas as pd


SEGMENT = "‖"  # in a view: where the token type changes (the second segment of a pair begins)


def run(card: TextCard, built: TextBuilt, out: Path, environ: Mapping[str, str], config: KernelConfig) -> Path:
    job = table_job(card, out, environ, config)
    choice = devices.choose_device(environ)
    target = devices.torch_device(choice)
    tokenizer = text.load_tokenizer(card, job.weights_dir)
    encoded = text_inputs.encode_rows(tokenizer, card, job.table, job.context(card, config))  # kkb's or the notebook's
    timings: dict[str, Any] = {"rows": len(job.ids), "load_seconds": 0.0, "infer_seconds": 0.0}
    print(f"[kkb] {card.name}: text model on {devices.summary(choice)}; {len(job.ids)} rows, "
          f"{len(built.checkpoints)} fold(s), columns {', '.join(job.columns)}", flush=True)

    def fold(entry: Fold) -> np.ndarray:
        started = time.perf_counter()
        model = text.load_model(card, built, job.weights_dir, entry.file).to(target)
        loaded = time.perf_counter()
        forward = text.make_forward(model, card, choice, target)
        values = text.predict_encoded(forward, encoded, card.batch_size, text.pad_id(tokenizer), len(job.columns),
                                      text_inputs.padding_length(card))
        timings["load_seconds"] += round(loaded - started, 4)
        timings["infer_seconds"] += round(time.perf_counter() - loaded, 4)
        del model, forward
        free_memory(choice)
        return values

    written = write_table_output(job, checkpoints.averaged_folds(card, built, fold))
    write_step_meta(written, **timings)
    return written


def view(card: TextCard, built: TextBuilt, config: KernelConfig, weights: Path, data: Path, rows: int) -> ViewRows:
    """The tokens the model receives, decoded (special tokens and segment changes marked), the row's length, and where
    kkb's truncation cut each segment (an encode function's rows are shown as returned)."""
    table = first_rows(config, data, rows)
    tokenizer = text.load_tokenizer(card, weights)
    encoded = text_inputs.encode_rows(tokenizer, card, table, card_context(card, config, weights, data))
    cuts = _cuts(tokenizer, card, table) if not card.encode_function else [None] * len(table)
    out = []
    for index, ids in enumerate(encoded.input_ids):
        tokens = [str(token) for token in tokenizer.convert_ids_to_tokens(ids)]
        types = encoded.token_type_ids[index]
        shown = [(SEGMENT + " " if k and types[k] != types[k - 1] else "") + token for k, token in enumerate(tokens)]
        out.append({"length": len(ids), "tokens": " ".join(shown), "cut": cuts[index],
                    "padded_to": text_inputs.padding_length(card)})
    return out


def _cuts(tokenizer: Any, card: TextCard, table: pd.DataFrame) -> list[str | None]:
    """Per row, where kkb's truncation cut: each segment's tokens before and after (None: nothing was cut)."""
    joiner = len(tokenizer(card.separator, add_special_tokens=False)["input_ids"]) if card.separator.strip() else 0
    segments = [columns for columns in (list(card.text_columns), list(card.text_pair_columns)) if columns]
    budgets = dict(card.column_max_len)
    room = card.max_len - text.special_tokens(tokenizer, card, len(segments) > 1).count
    out: list[str | None] = []
    for index in range(len(table)):
        counts = [[_count(tokenizer, table[column].iloc[index]) for column in columns] for columns in segments]
        kept = [[min(n, budgets.get(column, n)) for n, column in zip(ns, columns, strict=True)]
                for ns, columns in zip(counts, segments, strict=True)]
        whole = [sum(ns) + joiner * (len(ns) - 1) for ns in counts]
        joined = [sum(ks) + joiner * (len(ks) - 1) for ks in kept]
        final = text.budgets(joined[0], joined[1] if len(joined) > 1 else 0, room)
        if list(final[:len(segments)]) == whole:
            out.append(None)
            continue
        said = [f"{'+'.join(columns)} {total} → {keep} tokens" for columns, total, keep in zip(segments, whole, final, strict=False)]
        out.append(f"{'; '.join(said)} ({card.truncation})")
    return out


def _count(tokenizer: Any, value: Any) -> int:
    return len(tokenizer("" if value != value else str(value), add_special_tokens=False)["input_ids"])  # NaN: empty


UNIT = runtime_card(TextCard, TextBuilt, run, view)

__all__ = ["SEGMENT", "UNIT", "run", "view"]
