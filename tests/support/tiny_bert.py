"""A kernel folder with a tiny BERT's config and a tokenizer made from a vocabulary file (nothing downloaded)."""

from __future__ import annotations

from pathlib import Path

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"the a cat dog is on mat why how good bad".split()]


def write_tiny_bert(kernel: Path, max_position_embeddings: int = 64) -> Path:
    """``kernel/weights/bert``: config.json (hidden size 8, one layer) and a WordPiece tokenizer's files."""
    from transformers import BertConfig, BertTokenizerFast

    folder = kernel / "weights" / "bert"
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt")).save_pretrained(folder)
    BertConfig(vocab_size=len(WORDS), hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
               max_position_embeddings=max_position_embeddings).save_pretrained(folder)
    return kernel
