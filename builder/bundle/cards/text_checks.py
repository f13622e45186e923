"""A text card's checks that belong at build: its files are there, and ``max_len`` fits the model.

Before: a tokenizer folder without the tokenizer's files failed in transformers with ``TypeError: stat:
path should be string ... not NoneType``; a ``model_dir`` without ``config.json`` built a default
config that transformers matched from the folder's name (and a shape mismatch against a file that
does not exist); a ``max_len`` past the model's position embeddings built, and failed on Kaggle at
the first long text, with any version of transformers.

:func:`check_files` runs before anything is loaded. :func:`check_max_len` runs on the built model and
tokenizer: when ``max_len`` is beyond ``max_position_embeddings`` (``config.json``) or the tokenizer's
``model_max_length``, it encodes a text of ``max_len`` tokens and runs the model on it, as the kernel
will; only a failure there is refused (a model with relative positions, DeBERTa's, takes longer texts
and builds).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from builder.errors import ModelError
from builder.kkb_runtime.cards import text as runtime_text
from builder.kkb_runtime.cards.common import checkpoints
from builder.project.cards import TextCard
from builder.project.spec import SPEC_FILE

# A folder holds a tokenizer when it has one of these (fast tokenizers, WordPiece, BPE, sentencepiece).
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model", "spm.model", "bpe.codes")
UNLIMITED = 1_000_000  # transformers' "no limit" model_max_length is about 1e30
CHECK_WORD = "kkb "


def check_files(card: TextCard, kernel_dir: Path) -> None:
    """``model_dir`` has ``config.json`` (unless a factory builds the model), the tokenizer folder its files."""
    where = f"{kernel_dir / SPEC_FILE}: models.{card.name}"
    if card.model_dir and not card.factory and not (kernel_dir / card.model_dir / "config.json").is_file():
        raise ModelError(f"{where}.model_dir: {card.model_dir}/config.json is missing",
                         hint=f"save the model's config there (model.config.save_pretrained('{card.model_dir}')): "
                              "without it transformers guesses a default config from the folder's name")
    key = "tokenizer" if card.tokenizer else "model_dir"
    folder = card.tokenizer or card.model_dir
    if not folder or not (kernel_dir / folder).is_dir():
        return  # no folder: the runtime's own message; a missing folder: the card's files check names it
    present = {path.name for path in (kernel_dir / folder).iterdir()}
    if not present & set(TOKENIZER_FILES) and not any(name.endswith(".model") for name in present):
        raise ModelError(f"{where}.{key}: {folder} holds no tokenizer files ({', '.join(TOKENIZER_FILES[:3])} or a "
                         "sentencepiece .model)",
                         hint=f"save the tokenizer there (tokenizer.save_pretrained('{folder}')), or set tokenizer to "
                              "the folder that holds its files")


def check_max_len(card: TextCard, kernel: runtime_text.TextCard, kernel_dir: Path, model: Any, tokenizer: Any) -> None:
    """Refuse a ``max_len`` past the model's positions when a text of that length fails in the model (``kernel``: the
    card as the kernel reads it)."""
    limits = _limits(card, model, tokenizer)
    if not limits or card.max_len <= min(limits.values()):
        return
    if card.encode_function is not None and card.padding != "max_length":
        return  # the function's rows are never cut or padded to max_len: it does not reach the model
    width, problem = _run_at(kernel, model, tokenizer)
    if problem is None:
        return
    said = " and ".join(f"{what} = {limit}" for what, limit in limits.items())
    raise ModelError(f"{kernel_dir / SPEC_FILE}: models.{card.name}.max_len: {card.max_len} is past the model's "
                     f"{said}: a text of {width} tokens fails in the model: {problem}",
                     hint=f"set max_len = {min(limits.values())} or less: a longer text fails on Kaggle with any "
                          "version of transformers (the position embeddings end there)")


def _limits(card: TextCard, model: Any, tokenizer: Any) -> dict[str, int]:
    limits: dict[str, int] = {}
    positions = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if isinstance(positions, int) and positions > 0:
        source = f" in {card.model_dir}/config.json" if card.model_dir else ""
        limits[f"max_position_embeddings{source}"] = positions
    tokens = getattr(tokenizer, "model_max_length", None)
    if isinstance(tokens, int) and 0 < tokens < UNLIMITED:
        limits["the tokenizer's model_max_length"] = tokens
    return limits


def _run_at(card: runtime_text.TextCard, model: Any, tokenizer: Any) -> tuple[int, str | None]:
    """(the width reached, the model's error or None) for one text of ``max_len`` tokens, encoded as the kernel does."""
    import pandas as pd
    import torch

    if card.encode_function is not None:  # padding = "max_length": every row reaches the model max_len tokens wide
        ids = list(tokenizer(CHECK_WORD * (card.max_len + 8), truncation=True, max_length=card.max_len)["input_ids"])
        encoded = runtime_text.Encoded([ids], [[0] * len(ids)])
    else:
        columns = [*card.text_columns, *card.text_pair_columns]
        table = pd.DataFrame({column: [CHECK_WORD * (card.max_len + 8)] for column in columns})
        encoded = runtime_text.encode(tokenizer, card, table)
    batch = runtime_text.padded(encoded, [0], runtime_text.pad_id(tokenizer))
    keys = runtime_text.accepted_inputs(model)
    width = int(batch["input_ids"].shape[1])
    try:
        with torch.no_grad():
            model.eval()(**{key: value for key, value in batch.items() if keys is None or key in keys})
    except Exception as exc:  # the model's own failure, whatever its kind: it is the finding
        return width, f"{type(exc).__name__}: {checkpoints.plain(str(exc))[:300]}"
    return width, None
