"""Generate the text-style example: a Q&A competition scored by Spearman, and two tiny BERTs x 2 folds.

    python kernels/text-style/make_assets.py [--force] [--out FOLDER]

Shaped like the Google QUEST Q&A inference notebooks (seeded, offline, CPU, a few seconds):

    data/competition/   competition.toml (metric spearman), answers.csv, public/ (4 rows), hidden/ (60)
                        each split: sample_submission.csv (qa_id + 5 target columns, integer ids)
                        and test.csv (qa_id, question_title, question_body, answer)
    weights/bert/       config.json (a 2-layer BERT, built from a config: nothing is downloaded)
                        and the tokenizer: vocab.txt written here, tokenizer files saved from it
    weights/question.pth  {0: state_dict, 1: state_dict}: the question model's two folds in one file
    weights/answer.pth    the same for the answer model (question and answer as a token pair)

The question targets follow the question's words (how many "good" words, how long, whether the
title asks "why"), the answer targets the answer's; tiny models learn them in a few dozen steps.
Skipped when ``data/.stamp.json`` matches this script and the library versions; ``--force`` regenerates.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np

HERE = Path(__file__).resolve().parent
SEED = 20261201
SLUG = "kkb-qa"
TRAIN_ROWS, PUBLIC_ROWS, HIDDEN_ROWS = 240, 4, 60
FOLDS, STEPS, BATCH, LR, MAX_LEN = 2, 60, 16, 3e-3, 48
POSITIVE = ["good", "great", "clear", "helpful"]
NEGATIVE = ["bad", "poor", "vague", "wrong"]
NEUTRAL = ["the", "a", "cat", "dog", "mat", "code", "file", "run", "model", "data", "is", "on", "in", "with", "it"]
ASKING = ["why", "how", "what"]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
QUESTION_TARGETS = ["question_well_written", "question_long", "question_why"]
ANSWER_TARGETS = ["answer_helpful", "answer_on_topic"]
VERSIONED = ("torch", "transformers", "tokenizers", "numpy")


def sentence(rng: np.random.Generator, length: int, positive: float) -> list[str]:
    words = []
    for _ in range(length):
        draw = rng.random()
        pool = POSITIVE if draw < positive * 0.5 else NEGATIVE if draw < 0.5 else NEUTRAL
        words.append(str(rng.choice(pool)))
    return words


def rows(count: int, rng: np.random.Generator) -> tuple[list[dict[str, Any]], np.ndarray]:
    table, targets = [], []
    for _ in range(count):
        quality, helpful = rng.random(), rng.random()
        title = [str(rng.choice(ASKING))] + sentence(rng, int(rng.integers(2, 5)), quality)
        body = sentence(rng, int(rng.integers(3, 14)), quality)
        answer = sentence(rng, int(rng.integers(3, 10)), helpful) + [str(rng.choice(body))]
        question_words = title + body
        good = sum(word in POSITIVE for word in question_words) / len(question_words)
        answer_good = sum(word in POSITIVE for word in answer) / len(answer)
        on_topic = sum(word in question_words and word not in NEUTRAL for word in answer) / len(answer)
        table.append({"question_title": " ".join(title), "question_body": " ".join(body), "answer": " ".join(answer)})
        targets.append([good, len(body) / 14, float(title[0] == "why"), answer_good, on_topic])
    return table, np.clip(np.asarray(targets, dtype=np.float64), 0.0, 1.0)


def write_split(folder: Path, table: list[dict[str, Any]], ids: list[int]) -> None:
    import pandas as pd

    folder.mkdir(parents=True)
    pd.DataFrame([{"qa_id": qa_id, **row} for qa_id, row in zip(ids, table, strict=True)]).to_csv(folder / "test.csv", index=False)
    header = "qa_id," + ",".join(QUESTION_TARGETS + ANSWER_TARGETS) + "\n"
    (folder / "sample_submission.csv").write_text(header + "".join(f"{qa_id},0.5,0.5,0.5,0.5,0.5\n" for qa_id in ids))


def write_competition(root: Path, rng: np.random.Generator) -> None:
    public, _ = rows(PUBLIC_ROWS, rng)
    hidden, truth = rows(HIDDEN_ROWS, rng)
    ids = [int(number) for number in rng.choice(np.arange(1000, 99999), PUBLIC_ROWS + HIDDEN_ROWS, replace=False)]
    write_split(root / "public", public, ids[:PUBLIC_ROWS])
    write_split(root / "hidden", hidden, ids[PUBLIC_ROWS:])
    columns = QUESTION_TARGETS + ANSWER_TARGETS
    (root / "answers.csv").write_text("qa_id," + ",".join(columns) + "\n" + "".join(
        f"{qa_id}," + ",".join(f"{value:.6f}" for value in values) + "\n"
        for qa_id, values in zip(ids[PUBLIC_ROWS:], truth, strict=True)))
    (root / "competition.toml").write_text(
        f'slug = "{SLUG}"\ntitle = "kkb qa (text-style example)"\nmetric = "spearman"\n'
        f'id_column = "qa_id"\ntarget_columns = {json.dumps(columns)}\ndaily_submission_limit = 5\ntime_limit_hours = 9\n')


def write_bert(folder: Path) -> Any:
    """A config (no download) and a tokenizer from a vocabulary file written here."""
    from transformers import AutoTokenizer, BertConfig

    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(SPECIAL + POSITIVE + NEGATIVE + NEUTRAL + ASKING) + "\n")
    # Loaded from the folder as a notebook's tokenizer is: transformers 5's BertTokenizer(vocab_file=...) ignores
    # the file (its argument is `vocab`) and would tokenize every word as [UNK]; 4 and 5 both read this folder.
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True}))
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    tokenizer.save_pretrained(folder)
    BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
               intermediate_size=64, max_position_embeddings=64).save_pretrained(folder)
    return tokenizer


def encode(tokenizer: Any, table: list[dict[str, Any]], pair: bool) -> dict[str, Any]:
    first = [f"{row['question_title']} {row['question_body']}" for row in table]
    second = [row["answer"] for row in table] if pair else None
    return tokenizer(first, second, padding="max_length", max_length=MAX_LEN, truncation=True, return_tensors="pt")


def train_fold(folder: Path, tokenizer: Any, table: list[dict[str, Any]], targets: np.ndarray, pair: bool,
               fold: int) -> dict[str, Any]:
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    torch.manual_seed(SEED + fold)
    config = AutoConfig.from_pretrained(folder, num_labels=targets.shape[1], local_files_only=True)
    model = AutoModelForSequenceClassification.from_config(config)
    keep = np.arange(len(table)) % FOLDS != fold
    batch = encode(tokenizer, [row for row, kept in zip(table, keep, strict=True) if kept], pair)
    labels = torch.from_numpy(targets[keep]).float()
    optimiser = torch.optim.AdamW(model.parameters(), lr=LR)
    order = np.random.default_rng(SEED + fold)
    model.train()
    for _ in range(STEPS):
        index = torch.from_numpy(order.integers(0, len(labels), BATCH))
        logits = model(**{key: value[index] for key, value in batch.items()}).logits
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels[index])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return model.eval().state_dict()


def fingerprint() -> str:
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for package in VERSIONED:
        digest.update(f"{package}={metadata.version(package)}".encode())
    return digest.hexdigest()


def generate(out: Path) -> None:
    import torch

    torch.set_num_threads(min(4, os.cpu_count() or 1))
    scratch = out / "data" / f".tmp-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    (scratch / "weights").mkdir(parents=True)
    rng = np.random.default_rng(SEED)
    write_competition(scratch / "competition", rng)
    tokenizer = write_bert(scratch / "weights" / "bert")
    table, targets = rows(TRAIN_ROWS, rng)
    width = len(QUESTION_TARGETS)
    for name, pair, columns in (("question", False, slice(0, width)), ("answer", True, slice(width, None))):
        folds = {fold: train_fold(scratch / "weights" / "bert", tokenizer, table, targets[:, columns], pair, fold)
                 for fold in range(FOLDS)}
        torch.save(folds, scratch / "weights" / f"{name}.pth")  # {fold: state_dict}, as QUEST notebooks saved them
    for part, target in (("competition", out / "data" / "competition"), ("weights", out / "weights")):
        if target.exists():
            shutil.rmtree(target)
        os.replace(scratch / part, target)
    shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args(argv)
    out = args.out.resolve()
    stamp = out / "data" / ".stamp.json"
    try:
        if not args.force and json.loads(stamp.read_text())["fingerprint"] == fingerprint() and (out / "weights").is_dir():
            print(f"text-style assets up to date in {out}")
            return 0
    except (OSError, ValueError, KeyError):
        pass
    started = time.perf_counter()
    (out / "data").mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    generate(out)
    stamp.write_text(json.dumps({"fingerprint": fingerprint()}, indent=1) + "\n")
    print(f"text-style assets written to {out} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
