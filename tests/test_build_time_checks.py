"""Checks that belong at build, each a message naming the file, the key and the fix: a text card's max_len against
the model's positions, its config.json and tokenizer files, column names of [[postprocess]] and [submission]
unrounded against the columns they act on, and [models.defaults] answered with [model_defaults]."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from builder.build import BuildSettings, build_kernel
from builder.errors import BundleError, KkbError, ModelError, SpecError
from tests.support.files import KERNELS

CARD = '\n[[models]]\nname = "a"\nkind = "gbdt"\nlibrary = "lightgbm"\ncheckpoint = "w.txt"\n'
HINT_ROUND = "did you mean 'target'? list columns of the submission the stage acts on"


@pytest.fixture
def minimal(tmp_path: Path) -> Path:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))
    with (kernel / "minimal" / "model.py").open("a") as module:
        module.write("\n\ndef post(frame):\n    return frame\n")
    return kernel


@pytest.mark.parametrize(("edit", "error", "message", "hint"), [
    pytest.param(lambda text: text + CARD + "\n[models.defaults]\nnum_classes = 1\n", SpecError,
                 "line 47: [models.defaults] is not a kkb table",
                 "write [model_defaults]: the keys every [[models]] card inherits (a card's own keys win)", id="models.defaults"),
    pytest.param(lambda text: text + "\n[ models . \"defaults\" ]  # the defaults\nnum_classes = 1\n", SpecError,
                 "line 41: [models . \"defaults\"] is not a kkb table",
                 "write [model_defaults]: the keys every [[models]] card inherits (a card's own keys win)", id="spaced"),
    pytest.param(lambda text: text + "\n[postprocess]\nkind = \"clip\"\n", SpecError, "line 41: [postprocess] is not a kkb table",
                 "write [[postprocess]]: one stage per [[postprocess]] table (double brackets)", id="single-brackets"),
    pytest.param(lambda text: text.replace("decimals = 4", 'decimals = 4\nunrounded = ["targte"]'), BundleError,
                 "submission.unrounded: 'targte' is no target column (target)",
                 "did you mean 'target'? unrounded lists target columns of the sample submission", id="unrounded"),
    pytest.param(lambda text: text + '\n[[postprocess]]\nkind = "threshold"\ncolumns = ["targte"]\nvalue = 0.5\n', BundleError,
                 "postprocess[0].columns (threshold): 'targte' is no column here (the columns it gets: target)", HINT_ROUND,
                 id="threshold"),
    pytest.param(lambda text: text + '\n[[postprocess]]\nkind = "clip"\ncolumns = ["targte"]\nmin = 0\nmax = 1\nround = false\n',
                 BundleError, "postprocess[0].columns (clip, round = false): 'targte' is no column here (the columns it "
                 "gets: target)", HINT_ROUND, id="round-false"),
    pytest.param(lambda text: text + '\n[[postprocess]]\nkind = "function"\nfunction = "minimal.model:post"\n'
                 'columns = ["targte"]\nround = false\n', BundleError,
                 "postprocess[0].columns (function, round = false): 'targte' is no column here (the target columns and "
                 "the columns it gets: target)", HINT_ROUND, id="function-round-false"),
    pytest.param(lambda text: text + '\n[[postprocess]]\nkind = "function"\nfunction = "minimal.model:post"\n\n'
                 '[[postprocess]]\nkind = "clip"\ncolumns = ["targte"]\nmin = 0\nmax = 1\n', BundleError,
                 "postprocess[1].columns (clip): 'targte' is no column here (the target columns: target)", HINT_ROUND,
                 id="after-a-function"),
])
def test_a_misnamed_table_or_column_is_refused_at_build(minimal: Path, tmp_path: Path, edit, error: type[KkbError],  # type: ignore[no-untyped-def]
                                                         message: str, hint: str) -> None:
    spec = minimal / "kernel.toml"
    spec.write_text(edit(spec.read_text()))
    with pytest.raises(error) as caught:
        build_kernel(BuildSettings(kernel_dir=minimal, out_dir=tmp_path / "out"))
    assert caught.value.message == f"{spec}: {message}"
    assert caught.value.hint == hint
    assert not (tmp_path / "out").exists()


def test_columns_that_exist_build(minimal: Path, tmp_path: Path) -> None:
    spec = minimal / "kernel.toml"
    spec.write_text(spec.read_text().replace("decimals = 4", 'decimals = 4\nunrounded = ["target"]') +
                    '\n[[postprocess]]\nkind = "clip"\ncolumns = ["target"]\nmin = 0\nmax = 1\nround = false\n'
                    '\n[[postprocess]]\nkind = "function"\nfunction = "minimal.model:post"\ncolumns = ["target"]\n')
    assert build_kernel(BuildSettings(kernel_dir=minimal, out_dir=tmp_path / "out")).out_dir.is_dir()


# --- text cards ------------------------------------------------------------------------------------

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from builder.bundle import cards as bundle_cards  # noqa: E402 - after the skips: needs torch
from tests.support.tiny_bert import write_tiny_bert  # noqa: E402
from tests.test_card_kinds import bert_state, text_spec  # noqa: E402


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_bert(tmp_path_factory.mktemp("text") / "kernel")


def _kernel(bert: Path, tmp_path: Path) -> Path:
    kernel = Path(shutil.copytree(bert, tmp_path / "kernel"))
    torch.save(bert_state(kernel, 2, 0), kernel / "weights" / "q.pth")
    return kernel


def test_max_len_past_the_position_embeddings_is_refused(bert: Path, tmp_path: Path) -> None:
    kernel = _kernel(bert, tmp_path)
    with pytest.raises(ModelError) as caught:
        bundle_cards.prepare_models(text_spec(max_len=100), kernel, tmp_path / "stage")
    assert caught.value.message.startswith(
        f"{kernel / 'kernel.toml'}: models.q.max_len: 100 is past the model's max_position_embeddings in "
        "weights/bert/config.json = 64: a text of 100 tokens fails in the model: "), caught.value.message
    assert caught.value.hint == ("set max_len = 64 or less: a longer text fails on Kaggle with any version of "
                                 "transformers (the position embeddings end there)")
    (card,) = bundle_cards.prepare_models(text_spec(max_len=64), kernel, tmp_path / "stage64")
    assert card.card.max_len == 64  # type: ignore[attr-defined]


def test_the_tokenizers_model_max_length_is_named(bert: Path, tmp_path: Path) -> None:
    kernel = _kernel(bert, tmp_path)
    config = kernel / "weights" / "bert" / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "model_max_length": 48}))
    with pytest.raises(ModelError) as caught:
        bundle_cards.prepare_models(text_spec(max_len=100), kernel, tmp_path / "stage")
    assert "is past the model's max_position_embeddings in weights/bert/config.json = 64 and the tokenizer's " \
           "model_max_length = 48: a text of 100 tokens fails" in caught.value.message
    assert caught.value.hint is not None and caught.value.hint.startswith("set max_len = 48 or less")


@pytest.mark.parametrize(("removed", "message", "hint"), [
    (("config.json",), "models.q.model_dir: weights/bert/config.json is missing",
     "save the model's config there (model.config.save_pretrained('weights/bert')): without it transformers guesses a "
     "default config from the folder's name"),
    (("tokenizer.json", "vocab.txt"), "models.q.model_dir: weights/bert holds no tokenizer files (tokenizer.json, "
     "vocab.txt, vocab.json or a sentencepiece .model)",
     "save the tokenizer there (tokenizer.save_pretrained('weights/bert')), or set tokenizer to the folder that holds its files"),
])
def test_a_missing_config_or_tokenizer_file_is_named(bert: Path, tmp_path: Path, removed: tuple[str, ...], message: str,
                                                      hint: str) -> None:
    kernel = _kernel(bert, tmp_path)
    for name in removed:
        (kernel / "weights" / "bert" / name).unlink()
    with pytest.raises(ModelError) as caught:
        bundle_cards.prepare_models(text_spec(), kernel, tmp_path / "stage")
    assert caught.value.message == f"{kernel / 'kernel.toml'}: {message}"
    assert caught.value.hint == hint


def test_a_model_with_relative_positions_takes_a_longer_max_len(bert: Path, tmp_path: Path) -> None:
    """No false alarm: DeBERTa-style relative attention has no absolute position table, so 100 > 64 builds."""
    kernel = Path(shutil.copytree(bert, tmp_path / "kernel"))
    transformers.DebertaV2Config(vocab_size=16, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=16, max_position_embeddings=64, position_biased_input=False,
                                 relative_attention=True, pos_att_type=["p2c", "c2p"]).save_pretrained(kernel / "weights" / "bert")
    torch.save(bert_state(kernel, 2, 0), kernel / "weights" / "q.pth")
    (card,) = bundle_cards.prepare_models(text_spec(max_len=100), kernel, tmp_path / "stage")
    assert card.card.max_len == 100  # type: ignore[attr-defined]
