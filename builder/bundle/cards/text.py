"""Text cards at build time: the network rebuilt offline, checked on a batch of token ids, each fold fitted strictly.

The model comes from the card's ``model_dir`` (transformers' ``config.json``) or its factory, built by
the kernel's own code (``builder.kkb_runtime.cards.text``); the tokenizer from its folder. The output
width is proven on two rows of token ids; each fold (a file, a glob, or several state dicts in one
file) is remapped, fitted strictly and written as safetensors (``builder.bundle.models``). The
model and tokenizer folders travel in the weights dataset.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.bundle.cards.text_checks import check_files, check_max_len
from builder.bundle.cards.unit import Extra, build_card, build_context, kernel_card, public_test_rows
from builder.bundle.checkpoints import checkpoint_sources
from builder.bundle.models import offline_environment, prepare_source, user_code_importable
from builder.bundle.user_code import user_code
from builder.errors import BundleError, ModelError
from builder.kkb_runtime.cards import text as runtime_text
from builder.kkb_runtime.cards import text_inputs
from builder.kkb_runtime.cards.common import checkpoints
from builder.kkb_runtime.cards.common import models as runtime
from builder.kkb_runtime.cards.common.tables import DEFAULT_TEST_TABLE, TableError, read_table, require_columns
from builder.kkb_runtime.submission import read_sample
from builder.project.cards import TextCard
from builder.project.spec import SPEC_FILE, KernelSpec

if TYPE_CHECKING:  # imported where used: the CLI starts without them (tests/test_dry_run_cost.py)
    import pandas as pd

RECORDED_VERSIONS = ("torch", "transformers", "tokenizers")
CHECK_TEXT = "kkb checks the model on this sentence"
SHOWN_ROWS = 64  # the public test's rows an encode function is run on at build time, for the notes


def to_kernel(card: TextCard) -> runtime_text.TextCard:
    """The kernel's card of a text card (kernel.toml's keys, resolved)."""
    return kernel_card(runtime_text.TextCard, card)


def build(card: TextCard, kernel_dir: Path) -> tuple[Any, Any]:
    """(model, tokenizer), as the kernel builds them, from the kernel folder."""
    missing = [package for package in ("transformers", "tokenizers") if not _installed(package)]
    if missing:
        raise ModelError(f"[[models]] '{card.name}': a text card needs {' and '.join(missing)}, not installed here",
                         hint=f"pip install {' '.join(missing)} (the Kaggle image has them)")
    check_files(card, kernel_dir)  # config.json and the tokenizer's files, before transformers guesses
    with user_code_importable(kernel_dir), offline_environment():
        try:
            with user_code(f"[[models]] '{card.name}'", "building the model failed", [kernel_dir], card=card.name,
                           function=card.factory, file=card.model_dir, error=ModelError,
                           hint="build the backbone from a local config (AutoModel.from_config), never from the hub: "
                                "the kernel has no internet"):
                model = runtime_text.create_model(to_kernel(card), kernel_dir)
                tokenizer = runtime_text.load_tokenizer(to_kernel(card), kernel_dir)
        except runtime.ModelLoadError as exc:
            raise ModelError(f"[[models]] '{card.name}': {exc}",
                             hint="model_dir is a folder of the kernel with config.json; the tokenizer's files "
                                  "(tokenizer.json or vocab.txt, tokenizer_config.json) there or in tokenizer") from None
    if not hasattr(model, "state_dict"):
        raise ModelError(f"[[models]] '{card.name}': the factory returned {type(model).__name__}, not a torch nn.Module",
                         hint="return the nn.Module from the factory")
    check_max_len(card, to_kernel(card), kernel_dir, model, tokenizer)
    return model, tokenizer


def _installed(package: str) -> bool:
    try:
        metadata.version(package)
    except metadata.PackageNotFoundError:
        return False
    return True


def check_output_width(card: TextCard, model: Any, tokenizer: Any) -> None:
    """Two rows of token ids through ``forward``: the output must be (2, num_classes)."""
    import torch

    try:
        encoded = text_inputs.probe_rows(tokenizer, to_kernel(card), [CHECK_TEXT, CHECK_TEXT + " twice " + CHECK_TEXT])
    except runtime.ModelLoadError as exc:
        raise ModelError(f"[[models]] '{card.name}': {str(exc).removeprefix(f'model {card.name!r}: ')}",
                         hint="tokenizer_class in tokenizer_config.json names the model's tokenizer class") from None
    batch = runtime_text.padded(encoded, [0, 1], runtime_text.pad_id(tokenizer), text_inputs.padding_length(to_kernel(card)))
    keys = runtime_text.accepted_inputs(model)
    width = batch["input_ids"].shape[1]
    try:
        with torch.no_grad():
            raw = model.eval()(**{key: value for key, value in batch.items() if keys is None or key in keys})
            output = runtime_text.select_output(raw, card.output)
    except Exception as exc:
        raise ModelError(f"[[models]] '{card.name}': the model fails on a batch of 2x{width} token ids: "
                         f"{type(exc).__name__}: {checkpoints.plain(str(exc))}",
                         hint="forward() takes input_ids, attention_mask (and token_type_ids); "
                              "output = 0 or a key picks the logits from a tuple or a dict") from None
    if not isinstance(output, torch.Tensor) or output.ndim != 2:
        shape = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
        raise ModelError(f"[[models]] '{card.name}': the model returns {shape} on 2x{width} token ids, "
                         "not a (batch, num_classes) tensor",
                         hint="set output = 0 (a tuple's first) or output = 'key' (a dict's entry) to pick the logits")
    if output.shape[1] != card.num_classes:
        raise ModelError(f"[[models]] '{card.name}': the model outputs {output.shape[1]} values per row, "
                         f"num_classes = {card.num_classes}",
                         hint=f"set num_classes = {output.shape[1]} or fix model_kwargs / the model's config")


def prepare(card: TextCard, kernel_dir: Path, weights_stage: Path, written: dict[str, str]) -> runtime_text.TextBuilt:
    model, tokenizer = build(card, kernel_dir)
    check_output_width(card, model, tokenizer)
    kernel = to_kernel(card)
    folds = [fold for source in checkpoint_sources(card, kernel_dir, must_exist=False)
             for fold in prepare_source(kernel, card.checkpoint_key, model, kernel_dir, source, weights_stage, written)]
    first = folds[0]
    return runtime_text.TextBuilt(
        checkpoint=first.file, checkpoint_sha256=first.sha256, checkpoint_source=first.source, checkpoints=tuple(folds),
        checkpoint_key=None, source_key=first.source_key, dtype="float16" if card.half else "float32",
        tokenizer_class=type(tokenizer).__name__, num_params=sum(int(parameter.numel()) for parameter in model.parameters()),
        built_with={package: metadata.version(package) for package in RECORDED_VERSIONS})


def extra_files(card: TextCard, kernel_dir: Path) -> list[str]:
    """The model's and the tokenizer's folders (config, vocabulary): shipped in the weights, checkpoints aside."""
    folders = {folder for folder in (card.model_dir, card.tokenizer) if folder}
    found = []
    for relative in sorted(folders):
        where = kernel_dir / relative
        if not where.is_dir():
            raise BundleError(f"{kernel_dir / SPEC_FILE}: models.{card.name}: {relative} is not a folder in {kernel_dir}",
                              hint="model_dir and tokenizer name folders of the kernel (config.json, the tokenizer's files)")
        found += [path.relative_to(kernel_dir).as_posix() for path in sorted(where.rglob("*")) if path.is_file()]
    return found


def check_public_data(spec: KernelSpec, kernel_dir: Path, data: Path, card: TextCard, columns: list[str],
                      sample: pd.DataFrame) -> None:
    """The public test table has the id column and every text column the card joins."""
    path = data / (spec.competition.test or DEFAULT_TEST_TABLE)
    if not path.is_file():
        raise BundleError(f"{kernel_dir / SPEC_FILE}: competition.test: no test table {path} in the public data "
                          f"for the text card '{card.name}'",
                          hint="set [competition] test to the CSV (or parquet) of test rows, relative to [competition] data")
    try:
        table = read_table(path, spec.submission.id_column)
        require_columns(table, [spec.submission.id_column, *card.text_columns, *card.text_pair_columns],
                        to_kernel(card), path)
    except (TableError, OSError, ValueError) as exc:
        raise BundleError(f"{kernel_dir / SPEC_FILE}: models.{card.name}: {exc}",
                          hint="text_columns and text_pair_columns name columns of the test table") from None


# --- the build's notes: tokens the tokenizer does not know ---------------------------------------------------------
# A notebook's separator written into a card (``separator = " [SEP] "``) is text to the tokenizer: a tokenizer saved
# lower-cased turns it into ``[sep]``, then into the unknown token, and the model sees ``[UNK]`` where it was trained on
# ``[SEP]``, silently. The build names each such token: the card's separator, the special tokens kkb adds around the
# segments, and (a card with an encode function) an unknown token in every row of the public test, where a per-row
# token or a separator the function adds is the likely cause. A few unknown tokens in some rows are ordinary text.


def notes(spec: KernelSpec, kernel_dir: Path, data: Path | None, card: TextCard) -> list[str]:
    """One warning per token the card's input maps to the unknown token (``data``: the public data, or None)."""
    kernel = to_kernel(card)
    precision = [f"models.{card.name}: amp = true: float16 autocast on a GPU, where the notebook's plain forward ran "
                 "float32; a dry run on the CPU (and --reference there) runs float32 and cannot see the difference"] \
        if card.amp else []
    with user_code_importable(kernel_dir), offline_environment():
        tokenizer = runtime_text.load_tokenizer(kernel, kernel_dir)
        return precision + _unknown_tokens(kernel, tokenizer, spec, kernel_dir, data)


def _unknown_tokens(card: runtime_text.TextCard, tokenizer: Any, spec: KernelSpec, kernel_dir: Path,
                    data: Path | None) -> list[str]:
    unknown = getattr(tokenizer, "unk_token_id", None)
    if unknown is None:
        return []
    name = getattr(tokenizer, "unk_token", None) or "the unknown token"
    where = f"warning: models.{card.name}"
    found = []
    if card.encode_function is None:
        separator = tokenizer(card.separator, add_special_tokens=False)["input_ids"] if card.separator.strip() else []
        if unknown in separator:
            found.append(f"{where}: separator = {card.separator!r} becomes {name} ({_decoded(tokenizer, separator)}): the "
                         "model sees the unknown token where the notebook meant a separator")
        shape = runtime_text.special_tokens(tokenizer, card, bool(card.text_pair_columns))
        added = [*shape.prefix[0], *shape.middle[0], *shape.suffix[0]]
        if unknown in added:
            found.append(f"{where}: the special tokens around the texts include {name} ({_decoded(tokenizer, added)})")
        return found
    rows = _public_rows(card, tokenizer, spec, kernel_dir, data)
    if rows and all(unknown in row for row in rows):
        found.append(f"{where}: {name} is in every row {card.encode_function} encodes on the public test "
                     f"({len(rows)} rows; the first: {_decoded(tokenizer, rows[0])[:300]}): a separator or a per-row "
                     "token the tokenizer does not know (a lower-cased tokenizer turns '[SEP]' into '[sep]')?")
    return found


def _public_rows(card: runtime_text.TextCard, tokenizer: Any, spec: KernelSpec, kernel_dir: Path,
                 data: Path | None) -> list[list[int]]:
    """The encode function's token rows of the public test's first rows, handed to it as the kernel hands them."""
    if data is None:
        return []
    path = data / (spec.competition.test or DEFAULT_TEST_TABLE)
    sample_path = data / spec.competition.sample_submission
    if not path.is_file() or not sample_path.is_file():
        return []
    try:
        table = public_test_rows(spec, data, path, read_sample(sample_path, spec.submission.id_column), SHOWN_ROWS)
    except TableError:
        return []  # ids the test lacks: the card's own check (and the dry run) say it
    with user_code(f"{kernel_dir / SPEC_FILE}: models.{card.name}", "on the public test", [kernel_dir], card=card.name,
                   function=card.encode_function, hint="the encode function gets the test rows and the tokenizer and "
                                                       "returns the input ids per row"):
        return text_inputs.encode_rows(tokenizer, card, table.reset_index(drop=True),
                                       build_context(card, kernel_dir, data)).input_ids


def _decoded(tokenizer: Any, ids: list[int]) -> str:
    return " ".join(str(token) for token in tokenizer.convert_ids_to_tokens(ids))


BUILD = build_card(TextCard, Extra("text", ("torch", "transformers", "safetensors")), to_kernel, prepare, extra_files,
                   check_public_data, notes=notes)

__all__ = ["BUILD", "check_public_data", "extra_files", "notes", "prepare", "to_kernel"]
