"""A port in few lines: a user's function gets the card's arguments as keyword arguments (``encode_args``,
``feature_args``, a post-processing stage's ``args``) and the kernel's context in ``ctx``; the build checks the
signature against them, naming the file, the key and the argument.

The end-to-end kernel is shaped like the Google QUEST port: two text cards share one encode function with two token
budgets (no ``functools.partial``), and a post-processing function reads a file of the weights by ``ctx.weights_dir``
(no path rebuilt). ``kkb dry-run . --reference`` from inside the folder (a path with a space) holds the run to a
script that calls the function twice by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from builder.kkb_runtime import postprocess
from builder.kkb_runtime.context import Context
from builder.kkb_runtime.user_calls import ArgumentsRefused, Parameter, argument_problems, call_with, parameters_of
from tests.support.cards import kernel_stages
from tests.support.cli import kkb, said

CODE = '''
import json


def encode(table, tokenizer, column, max_len, ctx=None):
    """The notebook's tokenization, one budget per call."""
    assert ctx.card_name in ("question", "answer") and (ctx.weights_dir / "weights" / "bert").is_dir()
    return {"input_ids": [tokenizer.encode(text, add_special_tokens=True, truncation=True, max_length=max_len)
                          for text in table[column].astype(str)]}


def scale(frame, ctx, column, factor_file):
    """The notebook's last cell: a factor its training saved, read from the weights."""
    assert sorted(ctx.steps) == ["answer", "question"], ctx.steps
    factor = json.loads((ctx.weights_dir / factor_file).read_text())["factor"]
    return frame.assign(**{column: frame[column] * factor})
'''

CARDS = '''
[[models]]
name = "question"
kind = "text"
model_dir = "weights/bert"
checkpoint = "weights/question.pth"
num_classes = 1
activation = "sigmoid"
columns = ["q"]
encode_function = "quest.port:encode"
encode_args = { column = "body", max_len = 8 }

[[models]]
name = "answer"
base = "question"
checkpoint = "weights/answer.pth"
columns = ["a"]
encode_args = { column = "body", max_len = 20 }

[[postprocess]]
kind = "function"
function = "quest.port:scale"
args = { column = "a", factor_file = "weights/scale.json" }
'''

WORDS = "the a cat dog is on mat why how good bad".split()


def _kernel(root: Path) -> Path:
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification

    from tests.support.tiny_bert import write_tiny_bert

    write_tiny_bert(root)
    (root / "quest").mkdir()
    (root / "quest" / "__init__.py").write_text("")
    (root / "quest" / "port.py").write_text(CODE)
    (root / "weights" / "scale.json").write_text('{"factor": 0.5}')
    config = AutoConfig.from_pretrained(root / "weights" / "bert", num_labels=1)
    for seed, name in ((1, "question"), (2, "answer")):
        torch.manual_seed(seed)
        torch.save(AutoModelForSequenceClassification.from_config(config).state_dict(), root / "weights" / f"{name}.pth")
    rng = np.random.default_rng(0)
    table = pd.DataFrame({"qa_id": [f"r{index:02d}" for index in range(9)],
                          "body": [" ".join(rng.choice(WORDS, int(rng.integers(3, 30)))) for _ in range(9)]})
    (root / "data").mkdir()
    table.to_csv(root / "data" / "test.csv", index=False)
    pd.DataFrame({"qa_id": table["qa_id"], "q": 0.5, "a": 0.5}).to_csv(root / "data" / "sample_submission.csv", index=False)
    (root / "kernel.toml").write_text(
        '[kernel]\ntitle = "kkb quest port"\nowner = "tester"\naccelerator = "none"\n\n'
        '[competition]\nslug = "kkb-quest-port"\ndata = "data"\ntest = "test.csv"\nhidden_rows = 9\n\n'
        '[code]\ninclude = ["quest/**/*.py"]\n\n[weights]\ninclude = ["weights/scale.json"]\n\n'
        '[submission]\nid_column = "qa_id"\ndecimals = 10\n' + CARDS)
    return root


def by_hand(kernel: Path) -> pd.DataFrame:
    """The original notebook: the encode function called twice, each model row by row, the factor applied."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, BertTokenizerFast

    sys.path.insert(0, str(kernel))
    try:
        from quest.port import encode  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(kernel))
        sys.modules.pop("quest", None)
    folder = kernel / "weights" / "bert"
    tokenizer = BertTokenizerFast.from_pretrained(folder)
    table = pd.read_csv(kernel / "data" / "test.csv")
    out = pd.DataFrame({"qa_id": table["qa_id"]})
    for column, name, budget in (("q", "question", 8), ("a", "answer", 20)):
        context = Context(competition_dir=kernel, weights_dir=kernel, code_dir=kernel, card=_named(name))
        rows = encode(table, tokenizer, "body", budget, ctx=context)["input_ids"]
        model = AutoModelForSequenceClassification.from_config(AutoConfig.from_pretrained(folder, num_labels=1))
        model.load_state_dict(torch.load(kernel / "weights" / f"{name}.pth", weights_only=True))
        with torch.no_grad():
            out[column] = [float(torch.sigmoid(model.eval()(input_ids=torch.tensor([row])).logits)[0, 0]) for row in rows]
    out["a"] *= 0.5
    return out


def _named(name: str) -> Any:
    from tests.support.cards import kernel_card

    return kernel_card({"name": name, "kind": "text", "model_dir": "weights/bert", "checkpoint": "x.pth", "num_classes": 1,
                        "encode_function": "quest.port:encode"})


@pytest.mark.slow
@pytest.mark.loopback
def test_two_cards_share_one_encode_function_with_their_own_budgets_as_the_notebook_did(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    kernel = _kernel(tmp_path / "my port")
    reference = kernel / "original.csv"
    by_hand(kernel).to_csv(reference, index=False)
    run = kkb("dry-run", ".", "--scenario", "rerun", "--reference", "original.csv", cwd=kernel)
    assert run.returncode == 0, said(run)
    report = json.loads((kernel / "build" / "my port" / "dryrun" / "report.json").read_text())
    assert report["reference"]["ok"] is True, report["reference"]
    assert "encode_args" in (kernel / "build" / "my port" / "code" / "kkb_kernel.json").read_text()


# --- the signature check: the kernel's and the build's ----------------------------------------------------------------

def encode(table: Any, tokenizer: Any, max_len: int, stride: int = 0, ctx: Any = None) -> Any:
    return max_len, stride, ctx


@pytest.mark.parametrize(("args", "problems"), [
    ({"max_len": 8}, []),
    ({"max_len": 8, "stride": 2}, []),
    ({}, ["it needs 'max_len': add it to encode_args"]),
    ({"max_len": 8, "budget": 3}, ["it takes no argument 'budget' (its arguments after table, tokenizer: ctx, max_len, "
                                   "stride)"]),
    ({"max_len": 8, "ctx": 1}, ["encode_args names 'ctx', the parameter kkb fills with the kernel's context: rename the "
                                "argument"]),
])
def test_the_arguments_are_checked_against_the_signature(args: dict[str, Any], problems: list[str]) -> None:
    assert argument_problems(parameters_of(encode), ["table", "tokenizer"], args, "encode_args") == problems


def test_a_function_gets_its_arguments_by_keyword_and_the_context_by_name() -> None:
    context = Context(competition_dir=Path("c"), weights_dir=Path("w"), code_dir=Path("k"))
    assert call_with(encode, "m:encode", {"table": 1, "tokenizer": 2}, {"max_len": 8}, "encode_args", context) == (
        8, 0, context)
    with pytest.raises(ArgumentsRefused, match="m:encode: it needs 'max_len': add it to encode_args"):
        call_with(encode, "m:encode", {"table": 1, "tokenizer": 2}, {}, "encode_args", context)
    assert argument_problems([Parameter("frame", "positional", False)], ["table", "tokenizer"], {}, "encode_args") == [
        "it takes 1 positional argument(s), kkb passes 2 (table, tokenizer)"]


def test_a_post_processing_function_reads_a_weights_file_by_ctx_weights_dir(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "post.py").write_text(CODE)
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "scale.json").write_text('{"factor": 4}')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "post", raising=False)
    context = Context(competition_dir=tmp_path, weights_dir=tmp_path, code_dir=tmp_path,
                      steps={"question": tmp_path / "q.csv", "answer": tmp_path / "a.csv"})
    stages = kernel_stages({"kind": "function", "function": "post:scale",
                            "args": {"column": "a", "factor_file": "weights/scale.json"}})
    frame = pd.DataFrame({"id": ["x", "y"], "a": [0.25, 0.5]})
    assert postprocess.apply(frame, stages, "id", ["a"], context)["a"].tolist() == [1.0, 2.0]
    wrong = kernel_stages({"kind": "function", "function": "post:scale", "args": {"column": "a"}})
    with pytest.raises(postprocess.PostprocessError, match=r"postprocess\[0\] \(function\): post:scale: it needs "
                                                           "'factor_file': add it to args"):
        postprocess.apply(frame, wrong, "id", ["a"], context)


def _spec_kernel(root: Path, cards: str) -> Path:
    (root / "quest").mkdir(parents=True)
    (root / "quest" / "__init__.py").write_text("")
    (root / "quest" / "port.py").write_text(CODE + "\n\ndef make(table, window=3):\n    return table\n")
    (root / "g.txt").write_text("a booster the check never reaches\n")
    (root / "kernel.toml").write_text('[kernel]\ntitle = "kkb args check"\nowner = "tester"\n\n[competition]\n'
                                      'slug = "kkb-args"\n\n[code]\ninclude = ["quest/**/*.py"]\n\n'
                                      '[[steps]]\nname = "s"\nrun = "python quest/port.py"\n\n' + cards)
    return root


@pytest.mark.parametrize(("cards", "message"), [
    pytest.param('[[postprocess]]\nkind = "function"\nfunction = "quest.port:scale"\nargs = { column = "a", factor = 2 }\n',
                 "postprocess[0].args: quest.port:scale: it needs 'factor_file': add it to args; it takes no argument "
                 "'factor' (its arguments after frame: column, ctx, factor_file)", id="postprocess"),
    pytest.param('[[models]]\nname = "g"\nkind = "gbdt"\nlibrary = "lightgbm"\ncheckpoint = "g.txt"\nnum_classes = 1\n'
                 'step = false\nfeature_function = "quest.port:make"\nfeature_args = { windows = 5 }\n',
                 "models.g.feature_args: quest.port:make: it takes no argument 'windows' (its arguments after table: "
                 "window)", id="feature"),
])
def test_kkb_build_names_the_file_the_key_and_the_argument(tmp_path: Path, cards: str, message: str) -> None:
    kernel = _spec_kernel(tmp_path / "my kernel", cards)
    run = kkb("build", ".", cwd=kernel)
    assert run.returncode == 1, said(run)
    assert f"{kernel / 'kernel.toml'}: {message}" in " ".join(run.stderr.split()), said(run)


def test_arguments_without_their_function_are_refused(tmp_path: Path) -> None:
    kernel = _spec_kernel(tmp_path / "k", '[[models]]\nname = "g"\nkind = "gbdt"\nlibrary = "lightgbm"\ncheckpoint = '
                                          '"g.txt"\nnum_classes = 1\nstep = false\nfeature_args = { window = 5 }\n')
    run = kkb("build", ".", cwd=kernel)
    assert run.returncode == 1 and ("[[models]] 'g': feature_args are passed to feature_function as keyword arguments, "
                                    "and the card has no feature_function") in " ".join(run.stderr.split()), said(run)
