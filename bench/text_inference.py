"""Bench: rows/s of a text card's inference (length-sorted batches, dynamic padding) against a naive fixed-length loop.

A BERT of 2 layers x 128 hidden is built from a config (random weights: the speed does not depend on
them) with a tokenizer from a vocabulary file written here; the rows are texts whose lengths follow a
long tail (most short, a few near ``max_len``), as Q&A bodies do. Side by side, on the CPU, each
repetition:

* the runtime: ``kkb_runtime.cards.text.encode`` (head+tail truncation) then ``predict_encoded``:
  batches of rows of similar length, each padded to its own longest row, put back in row order;
* the naive loop: the tokenizer's own call with ``padding="max_length"`` and truncation, batches in
  row order, every batch ``max_len`` tokens wide.

Both include tokenisation; the outputs are compared (largest absolute difference in ``detail``).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import Row

QUICK = {"rows": 96, "repeat": 1, "warmup": 0}
WORDS = "the a cat dog is on mat why how what good bad model data file code run with in it".split()


def _assets(folder: Path, max_len: int) -> tuple[Any, Any]:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    # from the folder (transformers 5's BertTokenizer(vocab_file=...) ignores the file: every word would be [UNK])
    (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "BertTokenizer", "do_lower_case": true}')
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=256, max_position_embeddings=max_len, num_labels=3)
    return tokenizer, BertForSequenceClassification(config).eval()


def _texts(rows: int, max_len: int) -> list[str]:
    import numpy as np

    rng = np.random.default_rng(0)
    lengths = np.clip(rng.lognormal(3.2, 0.8, rows).astype(int), 3, max_len + 40)  # median ~25 tokens, a long tail
    return [" ".join(rng.choice(WORDS, length)) for length in lengths]


def naive(model: Any, tokenizer: Any, texts: list[str], max_len: int, batch_size: int) -> Any:
    import numpy as np
    import torch

    out = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(texts[start:start + batch_size], padding="max_length", max_length=max_len,
                              truncation=True, return_tensors="pt")
            out.append(torch.sigmoid(model(**batch).logits).numpy())
    return np.concatenate(out)


def runtime(model: Any, tokenizer: Any, texts: list[str], max_len: int, batch_size: int) -> Any:
    import pandas as pd

    from builder.bundle.cards.text import to_kernel
    from builder.kkb_runtime.cards import text
    from builder.kkb_runtime.cards.common.device import DeviceChoice
    from builder.kkb_runtime.vocabulary import CardKind
    from builder.project.cards import TextCard

    # The kernel's card as the build makes it (every key resolved): the kernel's runner holds no defaults of its own.
    card = to_kernel(TextCard(name="bench", kind=CardKind.TEXT, model_dir="bench", checkpoint="bench.pth", num_classes=3,
                              text_columns=["text"], max_len=max_len, truncation="head", activation="sigmoid"))
    encoded = text.encode(tokenizer, card, pd.DataFrame({"text": texts}))
    forward = text.make_forward(model, card, DeviceChoice("cpu", "bench"), "cpu")
    return text.predict_encoded(forward, encoded, batch_size, text.pad_id(tokenizer), 3)


def run(rows: int = 512, repeat: int = 3, warmup: int = 1, max_len: int = 256, batch_size: int = 16) -> list[Row]:
    import numpy as np
    import torch

    with tempfile.TemporaryDirectory(prefix="kkb-bench-text-") as scratch:
        tokenizer, model = _assets(Path(scratch), max_len)
    texts = _texts(rows, max_len)
    sorted_s, naive_s = [], []
    for _ in range(warmup + repeat):
        started = time.perf_counter()
        ours = runtime(model, tokenizer, texts, max_len, batch_size)
        sorted_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        theirs = naive(model, tokenizer, texts, max_len, batch_size)
        naive_s.append(time.perf_counter() - started)
    ours_median, theirs_median = statistics.median(sorted_s[warmup:]), statistics.median(naive_s[warmup:])
    detail = {"rows": rows, "max_len": max_len, "batch_size": batch_size, "torch_threads": torch.get_num_threads(),
              "max_abs_difference": float(np.abs(ours - theirs).max()), "runtime_s": sorted_s[warmup:],
              "naive_s": naive_s[warmup:]}
    return [Row("text inference", "text card (CPU): length-sorted, dynamic padding", rows / ours_median, "/s",
                "fixed-length loop", rows / theirs_median, theirs_median / ours_median, "> 1x", detail)]
