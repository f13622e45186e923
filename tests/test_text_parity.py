"""Text cards reach real notebooks: the notebook's own tokenization (``encode_function``), ``padding =
"max_length"``, ``factory`` with ``model_dir``, per-column budgets, and the unknown-token warning.

The kernel below is shaped like the Google QUEST notebooks that kkb's own truncation could not express:
a per-row category token first, title and body cut to their own budgets, and a model that mean-pools
over every position, padding included (so it only equals the notebook when batches are padded as the
notebook padded them). A direct run of the same model code on the same data is the reference.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests.support.cards import kernel_card

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from builder.build import BuildSettings, build_kernel  # noqa: E402
from builder.errors import SpecError  # noqa: E402
from builder.kkb_runtime.cards import text as runtime_text  # noqa: E402
from builder.kkb_runtime.cards import text_inputs  # noqa: E402
from builder.kkb_runtime.cards.common.device import DeviceChoice  # noqa: E402
from builder.kkb_runtime.cards.common.models import load_weights  # noqa: E402
from builder.kkb_runtime.vocabulary import Scenario  # noqa: E402
from builder.rehearse.dryrun import DryRunSettings, dry_run  # noqa: E402

WORDS = ["the", "a", "cat", "dog", "code", "file", "run", "model", "data", "is", "on", "why", "how", "good", "bad"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[TECH]", "[LIFE]", *WORDS]
MAX_LEN = 24

NET = '''
import torch
from transformers import AutoConfig, AutoModel

CATEGORIES = {"tech": "[TECH]", "life": "[LIFE]"}
TITLE_BUDGET, BODY_BUDGET = 5, 9


class MeanPool(torch.nn.Module):
    """A notebook's model: BERT, then the mean over all positions (padding included), then a head."""

    def __init__(self, model_dir):
        super().__init__()
        self.bert = AutoModel.from_config(AutoConfig.from_pretrained(model_dir, local_files_only=True))
        self.head = torch.nn.Linear(self.bert.config.hidden_size, 2)

    def forward(self, input_ids, attention_mask):
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.head(hidden.mean(dim=1))


def build(model_dir):
    return MeanPool(model_dir)


def encode(frame, tokenizer):
    """The notebook's tokenization: [CLS] category title[:5] [SEP] body(head 4 + tail 5) [SEP]."""
    rows = []
    for category, title, body in zip(frame["category"], frame["title"], frame["body"]):
        t = tokenizer.encode(title, add_special_tokens=False)[:TITLE_BUDGET]
        b = tokenizer.encode(body, add_special_tokens=False)
        if len(b) > BODY_BUDGET:
            b = b[:4] + b[-5:]
        rows.append([tokenizer.cls_token_id, tokenizer.convert_tokens_to_ids(CATEGORIES[category]), *t,
                     tokenizer.sep_token_id, *b, tokenizer.sep_token_id])
    return {"input_ids": rows, "attention_mask": [[1] * len(row) for row in rows]}
'''


def _table(count: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "id": [f"q{index:03d}" for index in range(count)],
        "category": rng.choice(["tech", "life"], count),
        "title": [" ".join(rng.choice(WORDS, int(rng.integers(2, 9)))) for _ in range(count)],
        "body": [" ".join(rng.choice(WORDS, int(rng.integers(3, 20)))) for _ in range(count)],
    })


def _kernel(root: Path, card: str, net: str = NET) -> Path:
    from transformers import BertConfig, BertTokenizerFast

    bert = root / "weights" / "bert"
    bert.mkdir(parents=True)
    (bert / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    # the tokenizer read from its folder, as a notebook reads it (transformers 5's vocab_file= argument is ignored)
    (bert / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True}))
    BertTokenizerFast.from_pretrained(bert).save_pretrained(bert)
    BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
               max_position_embeddings=32).save_pretrained(bert)
    (root / "parity").mkdir()
    (root / "parity" / "__init__.py").write_text("")
    (root / "parity" / "net.py").write_text(net)
    data = root / "data"
    data.mkdir()
    table = _table(14, 0)
    table.to_csv(data / "test.csv", index=False)
    pd.DataFrame({"id": table["id"], "a": 0.5, "b": 0.5}).to_csv(data / "sample_submission.csv", index=False)
    sys.path.insert(0, str(root))
    try:
        from parity.net import build  # type: ignore[import-not-found]

        torch.manual_seed(3)
        torch.save(build(str(bert)).state_dict(), root / "weights" / "fold0.pth")
    finally:
        sys.path.remove(str(root))
        sys.modules.pop("parity.net", None)
        sys.modules.pop("parity", None)
    (root / "kernel.toml").write_text(
        '[kernel]\ntitle = "kkb text parity"\nowner = "tester"\naccelerator = "none"\n\n'
        '[competition]\nslug = "kkb-text-parity"\ndata = "data"\ntest = "test.csv"\nhidden_rows = 14\n\n'
        '[code]\ninclude = ["parity/**/*.py"]\n\n[submission]\ndecimals = 10\n\n' + card)
    return root


CARD = ('[[models]]\nname = "quest"\nkind = "text"\nmodel_dir = "weights/bert"\nfactory = "parity.net:build"\n'
        'checkpoint = "weights/fold0.pth"\nnum_classes = 2\nactivation = "sigmoid"\nbatch_size = 4\n'
        f'max_len = {MAX_LEN}\nencode_function = "parity.net:encode"\npadding = "max_length"\n')


def direct_run(kernel: Path, table: pd.DataFrame, length: int | None = MAX_LEN) -> np.ndarray:
    """The notebook: its own encode, every row padded to MAX_LEN in one batch, its own model, sigmoid."""
    from transformers import BertTokenizerFast

    sys.path.insert(0, str(kernel))
    try:
        from parity.net import build, encode

        tokenizer = BertTokenizerFast.from_pretrained(kernel / "weights" / "bert")
        rows = encode(table, tokenizer)["input_ids"]
        width = length or max(len(row) for row in rows)
        ids = torch.tensor([row + [tokenizer.pad_token_id] * (width - len(row)) for row in rows])
        mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in rows])
        model = build(str(kernel / "weights" / "bert"))
        model.load_state_dict(torch.load(kernel / "weights" / "fold0.pth", weights_only=True))
        with torch.no_grad():
            return torch.sigmoid(model.eval()(ids, mask)).numpy().astype(np.float64)
    finally:
        sys.path.remove(str(kernel))
        sys.modules.pop("parity.net", None)
        sys.modules.pop("parity", None)


@pytest.mark.slow
@pytest.mark.loopback
def test_an_encode_function_with_max_length_padding_equals_the_notebook(tmp_path: Path) -> None:
    kernel = _kernel(tmp_path / "k", CARD)
    report = dry_run(DryRunSettings(kernel_dir=kernel, out_dir=tmp_path / "build", scenario=Scenario.RERUN, fit=False))
    (rerun,) = report.scenarios
    assert rerun.ok, rerun.verdict
    written = pd.read_csv(rerun.submission)
    table = pd.read_csv(kernel / "data" / "test.csv")
    assert written["id"].tolist() == table["id"].tolist()
    np.testing.assert_allclose(written[["a", "b"]].to_numpy(), direct_run(kernel, table), atol=1e-6, rtol=0)


def _encoded(kernel: Path, card: Any, table: pd.DataFrame) -> tuple[Any, runtime_text.Encoded]:
    sys.path.insert(0, str(kernel))
    try:
        tokenizer = runtime_text.load_tokenizer(card, kernel)
        return tokenizer, text_inputs.encode_rows(tokenizer, card, table)
    finally:
        sys.path.remove(str(kernel))


def test_the_runtime_batches_pads_and_restores_row_order_like_the_notebook(tmp_path: Path) -> None:
    kernel = _kernel(tmp_path / "k", CARD)
    table = _table(14, 0)
    card = kernel_card({"name": "quest", "kind": "text", "model_dir": "weights/bert", "factory": "parity.net:build",
                        "encode_function": "parity.net:encode", "max_len": MAX_LEN, "num_classes": 2, "activation": "sigmoid",
                        "checkpoint": "fold0.pth"})
    assert isinstance(card, runtime_text.TextCard)
    tokenizer, encoded = _encoded(kernel, card, table)
    assert [len(row) for row in encoded.input_ids] != sorted(len(row) for row in encoded.input_ids)  # batches reorder
    sys.path.insert(0, str(kernel))
    try:
        model = load_weights(runtime_text.create_model(card, kernel), card, kernel / "weights", "fold0.pth", None)
    finally:
        sys.path.remove(str(kernel))
    forward = runtime_text.make_forward(model, card, DeviceChoice("cpu", "cpu"), "cpu")

    def run(length: int | None) -> np.ndarray:
        return runtime_text.predict_encoded(forward, encoded, 4, runtime_text.pad_id(tokenizer), 2, length)

    np.testing.assert_allclose(run(MAX_LEN), direct_run(kernel, table), atol=1e-6, rtol=0)
    # Padded per batch, a model that pools over the padding sees other inputs: why padding = "max_length" exists.
    assert np.abs(run(None) - direct_run(kernel, table)).max() > 1e-3


def test_column_budgets_cut_each_column_before_joining(tmp_path: Path) -> None:
    kernel = _kernel(tmp_path / "k", CARD)
    table = pd.DataFrame({"title": ["why the cat is good"], "body": ["the dog run on the file the code model data"]})
    keys = {"name": "q", "kind": "text", "model_dir": "weights/bert", "text_columns": ["title", "body"], "max_len": 40,
            "separator": " ", "truncation": "head", "column_max_len": {"title": 2, "body": 3}, "num_classes": 1,
            "checkpoint": "fold0.pth"}
    card = kernel_card(keys)
    tokenizer, encoded = _encoded(kernel, card, table)
    assert tokenizer.convert_ids_to_tokens(encoded.input_ids[0]) == ["[CLS]", "why", "the", "the", "dog", "run", "[SEP]"]
    tail = kernel_card({**keys, "truncation": "tail"})
    assert tokenizer.convert_ids_to_tokens(_encoded(kernel, tail, table)[1].input_ids[0]) == [
        "[CLS]", "is", "good", "code", "model", "data", "[SEP]"]


@pytest.mark.parametrize(("extra", "message"), [
    pytest.param('separator = " [SEP] "\n', "encode_function does the tokenization, so separator would be ignored",
                 id="ignored-key"),
    pytest.param('column_max_len = { title = 0 }\n', "column_max_len: title = 0: a budget is a positive number of tokens",
                 id="budget"),
])
def test_text_input_keys_are_checked(tmp_path: Path, extra: str, message: str) -> None:
    kernel = _kernel(tmp_path / "k", CARD + extra)
    with pytest.raises(SpecError, match=message):
        build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))


def test_a_token_the_tokenizer_does_not_know_is_a_build_warning(tmp_path: Path) -> None:
    kernel = _kernel(tmp_path / "k", CARD, net=NET.replace('"life": "[LIFE]"', '"life": "[MISC]"')
                     .replace('"tech": "[TECH]"', '"tech": "[OTHER]"'))
    result = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    warnings = [note for note in result.model_notes if note.startswith("warning: models.quest")]
    assert len(warnings) == 1 and "[UNK] is in every row parity.net:encode encodes on the public test (14 rows" in warnings[0]
    own = ('[[models]]\nname = "joined"\nkind = "text"\nmodel_dir = "weights/bert"\ncheckpoint = "weights/joined.pth"\n'
           'num_classes = 2\ntext_columns = ["title", "body"]\nseparator = " [TECH] "\nmax_len = 24\n')
    other = _kernel(tmp_path / "j", own)
    config = transformers.AutoConfig.from_pretrained(other / "weights" / "bert", num_labels=2)
    torch.save(transformers.AutoModelForSequenceClassification.from_config(config).state_dict(),
               other / "weights" / "joined.pth")
    notes = build_kernel(BuildSettings(kernel_dir=other, out_dir=tmp_path / "build-j")).model_notes
    assert ("warning: models.joined: separator = ' [TECH] ' becomes [UNK] ([UNK] [UNK] [UNK]): the model sees the "
            "unknown token where the notebook meant a separator") in notes


def test_factory_with_model_dir_gets_the_folder(tmp_path: Path) -> None:
    kernel = _kernel(tmp_path / "k", CARD)
    result = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    assert not [note for note in result.model_notes if note.startswith("warning")]
    assert (result.weights_dir / "weights" / "bert" / "config.json").is_file()
    shutil.rmtree(tmp_path / "build")
