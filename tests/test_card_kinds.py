"""Card kinds: the registries, text cards, folds in one file, tabular cards, column groups, shorter specs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from builder.bundle import cards as bundle_cards
from builder.bundle.preflight import check_against_public_data
from builder.errors import BundleError, ModelError, SpecError
from builder.kkb_runtime import cards as runtime_cards
from builder.kkb_runtime import submission
from builder.kkb_runtime.cards import text as runtime_text
from builder.kkb_runtime.cards.common import checkpoints
from builder.kkb_runtime.cards.common.models import load_weights
from builder.kkb_runtime.vocabulary import CardKind
from builder.project.cards import CARD_MODELS, GbdtCard, ImageCard
from builder.project.spec import KernelSpec, parse_spec
from tests.support.cards import kernel_card, kernel_stages

REGISTRIES: dict[str, Mapping[CardKind, object]] = {
    "builder.project.cards.CARD_MODELS": CARD_MODELS,
    "builder.bundle.cards.BUILD_CARDS": bundle_cards.BUILD_CARDS,
    "builder.kkb_runtime.cards.RUNTIME_CARDS": runtime_cards.RUNTIME_CARDS,
}


@pytest.mark.parametrize("name", sorted(REGISTRIES))
def test_every_registry_covers_every_card_kind(name: str) -> None:
    assert set(REGISTRIES[name]) == set(CardKind), name


def spec(*cards: dict[str, Any], **extra: Any) -> KernelSpec:
    return parse_spec({"kernel": {"title": "card kind tests"}, "competition": {"slug": "kkb-cards"},
                       "models": list(cards), **extra})


TEXT = {"name": "q", "kind": "text", "model_dir": "weights/bert", "checkpoint": "weights/q.pth", "num_classes": 2,
        "text_columns": ["title"]}
GBDT = {"name": "g", "kind": "gbdt", "library": "lightgbm", "checkpoint": "weights/g.txt", "num_classes": 1}


@pytest.mark.parametrize(("card", "message"), [
    pytest.param({**TEXT, "text_columns": []}, "a text card needs text_columns", id="no-columns"),
    pytest.param({**TEXT, "model_dir": None}, "a text card needs model_dir (a folder with the transformers config.json) "
                 "or factory ('package.module:function' returning the nn.Module), or both", id="neither"),
    pytest.param({**TEXT, "arch": "bert"}, 'models[0].arch: `arch` is a key of image cards; this card is `kind = "text"`',
                 id="arch"),
    pytest.param({**TEXT, "tta": ["hflip"]}, 'models[0].tta: `tta` is a key of image cards; this card is `kind = "text"`',
                 id="tta"),
    pytest.param({**GBDT, "library": None}, "a gbdt card needs library = 'lightgbm', 'xgboost' or 'catboost'", id="library"),
    pytest.param({**GBDT, "library": "catboost"}, "weights/g.txt is not a catboost model file (.cbm)", id="suffix"),
    pytest.param({**GBDT, "kind": "sklearn", "library": None, "checkpoint": "weights/p.joblib"},
                 "a scikit-learn card loads a pickle (joblib), which runs code: set allow_joblib = true", id="joblib"),
    pytest.param({**GBDT, "arch": "x"}, 'models[0].arch: `arch` is a key of image cards; this card is `kind = "gbdt"`',
                 id="tabular-arch"),
    pytest.param({**TEXT, "kind": "audio"},
                 "models[0].kind: Input should be 'image', 'text', 'gbdt', 'sklearn' or 'torch'", id="kind"),
])
def test_a_card_is_checked_against_its_kind(card: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec({k: v for k, v in card.items() if v is not None})
    assert message in caught.value.message


IMAGE = {"name": "i", "arch": "test_resnet", "checkpoint": "weights/i.pth", "num_classes": 2}
SKLEARN = {"name": "s", "kind": "sklearn", "allow_joblib": True, "checkpoint": "weights/s.joblib", "num_classes": 1}
TORCH = {"name": "t", "kind": "torch", "factory": "tnet.model:make", "checkpoint": "weights/t.pt", "num_classes": 2}
VALID = {CardKind.IMAGE: IMAGE, CardKind.TEXT: TEXT, CardKind.GBDT: GBDT, CardKind.SKLEARN: SKLEARN, CardKind.TORCH: TORCH}
# A key of the kind that other kinds do not take, with a value that kind would accept (allow_joblib: sklearn's
# and torch's, for a torch card's preprocessor).
OWN_KEY = {CardKind.IMAGE: ("in_chans", 7), CardKind.TEXT: ("max_len", 10), CardKind.GBDT: ("library", "xgboost"),
           CardKind.SKLEARN: ("allow_joblib", True), CardKind.TORCH: ("feature_columns", ["a"])}
# A typo of one of the kind's own keys, and the key it means.
TYPO = {CardKind.IMAGE: ("input_sizes", "input_size"), CardKind.TEXT: ("text_column", "text_columns"),
        CardKind.GBDT: ("libary", "library"), CardKind.SKLEARN: ("pickle_mains", "pickle_main"),
        CardKind.TORCH: ("feature_column", "feature_columns")}


def test_every_kind_has_a_valid_card_and_keys_of_its_own() -> None:
    assert set(VALID) == set(OWN_KEY) == set(TYPO) == set(CardKind)
    for kind, card in VALID.items():
        assert type(spec(card).models[0]) is CARD_MODELS[kind]


@pytest.mark.parametrize(("kind", "other"), [(kind, other) for kind in CardKind for other in CardKind
                                             if OWN_KEY[other][0] not in CARD_MODELS[kind].model_fields])
def test_a_key_of_another_kind_is_refused_naming_that_kind(kind: CardKind, other: CardKind) -> None:
    key, value = OWN_KEY[other]
    owners = " and ".join(str(owner) for owner in CARD_MODELS if key in CARD_MODELS[owner].model_fields)
    with pytest.raises(SpecError) as caught:
        spec({**VALID[kind], key: value})
    assert caught.value.message == (f"kernel.toml: models[0].{key}: `{key}` is a key of {owners} cards; "
                                    f'this card is `kind = "{kind}"`')


@pytest.mark.parametrize("kind", list(CardKind))
def test_a_typo_gets_a_did_you_mean_among_its_own_kinds_keys_only(kind: CardKind) -> None:
    typo, meant = TYPO[kind]
    with pytest.raises(SpecError) as caught:
        spec({**VALID[kind], typo: 1})
    assert (caught.value.message, caught.value.hint) == (f"kernel.toml: models[0].{typo}: unknown key",
                                                          f"did you mean 'models[0].{meant}'?")
    # max_len is a text key: on a gbdt card its typo is no key of the card, and no text key is offered
    with pytest.raises(SpecError) as caught:
        spec({**GBDT, "max_lenn": 3})
    assert "max_len" not in str(caught.value.hint)


def test_a_default_no_inheriting_card_takes_is_refused() -> None:
    with pytest.raises(SpecError) as caught:
        spec(GBDT, IMAGE, model_defaults={"max_len": 64})
    assert caught.value.message == ("kernel.toml: model_defaults.max_len: no card takes it: max_len is a key of text "
                                    "cards; the cards here are kind gbdt, image")
    with pytest.raises(SpecError, match="batchsize is no card's key .did you mean 'batch_size'"):
        spec(IMAGE, model_defaults={"batchsize": 4})
    # a default one kind takes goes to the cards of that kind only, and says where it came from
    loaded = spec(GBDT, IMAGE, model_defaults={"batch_size": 4, "feature_function": "pkg.f:make"})
    gbdt, image = loaded.models
    assert isinstance(gbdt, GbdtCard) and isinstance(image, ImageCard)
    assert (image.batch_size, gbdt.feature_function) == (4, "pkg.f:make")
    assert "batch_size" not in gbdt.model_fields_set
    assert (image.origin("batch_size"), image.origin("arch"), image.origin("in_chans")) == (
        "[model_defaults]", "set", "default")


def test_defaults_inheritance_and_implicit_steps() -> None:
    loaded = spec({"name": "a", "arch": "test_resnet", "checkpoint": "w/a.pth", "columns": ["x"]},
                  {"name": "b", "base": "a", "checkpoint": "w/b.pth", "columns": ["y"]},
                  {"name": "c", "arch": "test_resnet", "checkpoint": "w/c.pth", "step": False},
                  model_defaults={"num_classes": 1, "batch_size": 4},
                  steps=[{"name": "mine", "run": "python -m kkb_runtime predict --model a --out {out}"}])
    images = [card for card in loaded.models if isinstance(card, ImageCard)]
    assert [(card.name, card.arch, card.batch_size, card.num_classes) for card in images] == [
        ("a", "test_resnet", 4, 1), ("b", "test_resnet", 4, 1), ("c", "test_resnet", 4, 1)]
    # a already has a step; b gets one (its column group copied), c opted out
    assert [(step.name, step.predict_model, step.columns) for step in loaded.steps] == [("mine", "a", []), ("b", "b", ["y"])]


def test_an_unknown_base_is_refused() -> None:
    with pytest.raises(SpecError, match=r"models\[0\].base: 'z' is no \[\[models\]\] card above this one"):
        spec({"name": "a", "base": "z", "arch": "test_resnet", "checkpoint": "w/a.pth", "num_classes": 1})


# --- column groups --------------------------------------------------------------------------------

def test_column_groups_are_joined_by_id_and_shared_columns_averaged() -> None:
    one = pd.DataFrame({"id": ["1", "2"], "a": [0.1, 0.2], "b": [0.3, 0.4]})
    two = pd.DataFrame({"id": ["2", "1"], "c": [0.6, 0.5], "b": [0.8, 0.7]})
    out = submission.combine_groups([("q", one, ["a", "b"]), ("r", two, ["c", "b"])], "id", ["a", "b", "c"],
                                    "weighted_mean", [1.0, 3.0])
    assert out["id"].tolist() == ["1", "2"]
    np.testing.assert_allclose(out[["a", "b", "c"]].to_numpy(), [[0.1, (0.3 + 3 * 0.7) / 4, 0.5], [0.2, (0.4 + 3 * 0.8) / 4, 0.6]])
    with pytest.raises(ValueError, match="no step writes the prediction column"):
        submission.combine_groups([("q", one, ["a"])], "id", ["a", "b"])


def test_a_step_output_missing_a_declared_column_names_the_step(tmp_path: Path) -> None:
    (tmp_path / "answer.csv").write_text("id,x\n1,0.5\n")
    with pytest.raises(submission.SubmissionError,
                       match=r"step 'answer' wrote no column\(s\) answer_helpful in answer.csv \(it has: id, x\)"):
        submission.read_step_output(tmp_path / "answer.csv", "answer", "id", ["answer_helpful"])


def _data(kernel: Path, columns: str) -> None:
    data = kernel / "data"
    data.mkdir(parents=True)
    (data / "sample_submission.csv").write_text(f"id,{columns}\n1,0\n")
    (data / "test.csv").write_text("id,title\n1,hello\n")


@pytest.mark.parametrize(("steps", "message"), [
    pytest.param([{"name": "s", "run": "python x.py", "columns": ["a", "zz"]}],
                 "kernel.toml: steps[0].columns: step 's' declares zz, which are no prediction column (a, b)", id="unknown"),
    pytest.param([{"name": "s", "run": "python x.py", "columns": ["a"]}],
                 "kernel.toml: steps: no step writes b (the steps' columns: a)", id="uncovered"),
])
def test_column_groups_are_checked_against_the_sample(tmp_path: Path, steps: list[dict[str, Any]], message: str) -> None:
    _data(tmp_path, "a,b")
    loaded = parse_spec({"kernel": {"title": "card kind tests"}, "competition": {"slug": "kkb-cards", "data": "data"},
                         "steps": steps})
    with pytest.raises(BundleError) as caught:
        check_against_public_data(loaded, tmp_path)
    assert str(caught.value).split("\n")[0].endswith(message)


# --- folds in one file ----------------------------------------------------------------------------

def test_folds_in_one_file_are_found_in_order() -> None:
    assert [key for key, _ in checkpoints.fold_states({2: {"w": 1}, 0: {"w": 0}, "1": {"w": 2}}) or ()] == ["0", "1", "2"]
    assert [key for key, _ in checkpoints.fold_states([{"w": 0}, {"w": 1}]) or ()] == ["0", "1"]
    assert checkpoints.fold_states({"model": {"w": 0}, "epoch": 3}) is None
    assert checkpoints.fold_states({"layer.weight": 0}) is None


torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kernel folder with a tiny BERT's config and a tokenizer made from a vocabulary file."""
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer, BertConfig

    kernel = tmp_path_factory.mktemp("text") / "kernel"
    folder = kernel / "weights" / "bert"
    folder.mkdir(parents=True)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"the a cat dog is on mat why how good bad".split()]
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    # from the folder: transformers 5's BertTokenizer(vocab_file=...) ignores the file (every word would be [UNK])
    (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "BertTokenizer", "do_lower_case": true}')
    AutoTokenizer.from_pretrained(folder, local_files_only=True).save_pretrained(folder)
    BertConfig(vocab_size=len(words), hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
               max_position_embeddings=512).save_pretrained(folder)
    return kernel


def bert_state(kernel: Path, num_labels: int, seed: int) -> dict[str, Any]:
    from transformers import AutoConfig, AutoModelForSequenceClassification

    torch.manual_seed(seed)
    config = AutoConfig.from_pretrained(kernel / "weights" / "bert", num_labels=num_labels, local_files_only=True)
    return AutoModelForSequenceClassification.from_config(config).state_dict()


def text_spec(**card: Any) -> KernelSpec:
    return spec({**TEXT, **card})


def test_a_text_card_with_folds_in_one_file_becomes_one_safetensors_per_fold(bert: Path, tmp_path: Path) -> None:
    torch.save({0: bert_state(bert, 2, 0), 1: bert_state(bert, 2, 1)}, bert / "weights" / "q.pth")
    (card,) = bundle_cards.prepare_models(text_spec(), bert, tmp_path)
    assert isinstance(card.built, runtime_text.TextBuilt)
    assert [(fold.file, fold.source) for fold in card.built.checkpoints] == [
        ("weights/q.fold0.safetensors", "weights/q.pth#0"), ("weights/q.fold1.safetensors", "weights/q.pth#1")]
    # transformers 5 (the image's) has one tokenizers-backed BertTokenizer, BertTokenizerFast its alias; 4 had both
    assert card.built.tokenizer_class in {"BertTokenizerFast", "BertTokenizer"}
    # every file of model_dir, as this transformers saved them (5 writes no special_tokens_map.json)
    saved = sorted(path.name for path in (bert / "weights" / "bert").iterdir())
    assert {"config.json", "tokenizer.json", "tokenizer_config.json"} <= set(saved)
    assert bundle_cards.card_files(text_spec().models[0], bert) == [f"weights/bert/{name}" for name in saved]


@pytest.mark.parametrize(("saved", "message", "hint"), [
    pytest.param("mixed", "[[models]] 'q': weights/q.pth: the file mixes fold numbers with other keys (optimizer): "
                 "a file of folds holds only {fold: state_dict}", "fold key 'optimizer' is the one to fix", id="mixed"),
    pytest.param("string", "[[models]] 'q': weights/q.pth: fold 1 holds str, not a state dict",
                 "fold key '1' is the one to fix", id="not-a-state-dict"),
    pytest.param("empty", "[[models]] 'q': weights/q.pth: the file holds an empty list, not the folds' state dicts",
                 "save the folds as {0: model.state_dict(), 1: ...}", id="empty-list"),
    pytest.param("shapes", "model 'q': checkpoint weights/q.pth#1 does not fit weights/bert/config.json (num_labels=2)\n"
                 "  shape mismatches (2): classifier.weight checkpoint [3, 8] != model [2, 8]", "must describe the network",
                 id="fold-of-another-width"),
])
def test_a_malformed_file_of_folds_names_the_card_the_key_and_the_fix(bert: Path, tmp_path: Path, saved: str,
                                                                      message: str, hint: str) -> None:
    good = bert_state(bert, 2, 0)
    content = {"mixed": {0: good, "optimizer": {"lr": 0.1}}, "string": {0: good, 1: "oops"}, "empty": [],
               "shapes": {0: good, 1: bert_state(bert, 3, 0)}}[saved]
    torch.save(content, bert / "weights" / "q.pth")
    with pytest.raises(ModelError) as caught:
        bundle_cards.prepare_models(text_spec(), bert, tmp_path)
    assert str(caught.value).startswith(message), str(caught.value)
    assert hint in (caught.value.hint or "")


def test_the_width_check_uses_token_ids(bert: Path, tmp_path: Path) -> None:
    torch.save(bert_state(bert, 3, 0), bert / "weights" / "q.pth")
    with pytest.raises(ModelError, match=r"'q': checkpoint weights/q.pth does not fit"):
        bundle_cards.prepare_models(text_spec(), bert, tmp_path)
    (bert / "tuplenet.py").write_text(
        "import torch\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.emb = torch.nn.Embedding(32, 4)\n"
        "    def forward(self, input_ids, attention_mask):\n"
        "        return {'features': self.emb(input_ids), 'scores': self.emb(input_ids).mean(1)[:, :2]}\n"
        "def build():\n"
        "    return Net()\n")
    torch.save({"emb.weight": torch.zeros(32, 4)}, bert / "weights" / "t.pth")
    card = {"model_dir": None, "factory": "tuplenet:build", "tokenizer": "weights/bert", "checkpoint": "weights/t.pth"}
    with pytest.raises(ModelError, match=r"'q': the model returns dict on 2x\d+ token ids, not a \(batch, num_classes\) tensor"):
        bundle_cards.prepare_models(text_spec(**card), bert, tmp_path)
    (prepared,) = bundle_cards.prepare_models(text_spec(**card, output="scores"), bert, tmp_path)
    assert isinstance(prepared.card, runtime_text.TextCard) and prepared.card.output == "scores"


def test_head_and_tail_truncation() -> None:
    tokens = list(range(10))
    assert runtime_text.cut(tokens, 6, "head_tail", None) == [0, 1, 2, 7, 8, 9]
    assert runtime_text.cut(tokens, 6, "head_tail", 1) == [0, 5, 6, 7, 8, 9]
    assert runtime_text.cut(tokens, 4, "head", None) == [0, 1, 2, 3]
    assert runtime_text.cut(tokens, 4, "tail", None) == [6, 7, 8, 9]
    assert runtime_text.budgets(3, 20, 10) == (3, 7)
    assert runtime_text.budgets(20, 2, 10) == (8, 2)
    assert runtime_text.budgets(20, 20, 10) == (5, 5)


def test_length_sorted_dynamic_padding_equals_fixed_padding_in_the_original_order(bert: Path) -> None:
    from builder.kkb_runtime.cards.common import device as devices

    torch.save(bert_state(bert, 2, 0), bert / "weights" / "q.pth")
    card = kernel_card({**TEXT, "max_len": 12, "activation": "sigmoid"})
    assert isinstance(card, runtime_text.TextCard)
    tokenizer = runtime_text.load_tokenizer(card, bert)
    table = pd.DataFrame({"title": ["the cat", "why is the dog on the mat good bad cat dog the a", "a", "how good"]})
    encoded = runtime_text.encode(tokenizer, card, table)
    assert [len(ids) for ids in encoded.input_ids] == [4, 12, 3, 4]  # cut to max_len with [CLS] and [SEP]
    model = load_weights(runtime_text.create_model(card, bert), card, bert, "weights/q.pth", None)
    forward = runtime_text.make_forward(model, card, devices.DeviceChoice("cpu", "test"), "cpu")
    dynamic = runtime_text.predict_encoded(forward, encoded, 2, runtime_text.pad_id(tokenizer), 2)
    with torch.no_grad():
        fixed = np.concatenate([forward(runtime_text.padded(encoded, [row], 0, length=12)).numpy() for row in range(4)])
    np.testing.assert_allclose(dynamic, fixed, atol=1e-5)
    assert [list(rows) for rows in runtime_text.length_sorted_batches(encoded, 2)] == [[2, 0], [3, 1]]


# --- tabular --------------------------------------------------------------------------------------

def test_a_booster_library_that_is_not_installed_is_refused_naming_the_package(tmp_path: Path) -> None:
    pytest.importorskip("lightgbm")
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "g.json").write_text("{}")
    with pytest.raises(ModelError, match=r"\[\[models\]\] 'g': xgboost is not installed here, so kkb cannot check this card"):
        try:
            import xgboost  # noqa: F401
        except ImportError:
            bundle_cards.prepare_models(spec({**GBDT, "library": "xgboost", "checkpoint": "weights/g.json"}), tmp_path, tmp_path / "s")
        else:
            pytest.skip("xgboost is installed here")


def test_a_classifiers_classes_follow_the_columns_by_label() -> None:
    from builder.kkb_runtime.cards import tabular

    assert tabular.class_order(["high", "low", "mid"], ["low", "mid", "high"], "m") == [1, 2, 0]
    assert tabular.class_order([0, 1, 2], ["p0", "p1", "p2"], "m") == [0, 1, 2]
    with pytest.raises(Exception, match=r"model 'm': predict_proba gives 2 classes \(0, 1\) for 3 column\(s\)"):
        tabular.class_order([0, 1], ["a", "b", "c"], "m")


def test_a_notebook_pickle_loads_with_pickle_main(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    joblib = pytest.importorskip("joblib")
    import sys
    import types

    from builder.kkb_runtime.cards import tabular

    (tmp_path / "nbcode.py").write_text("class Constant:\n    def predict(self, frame):\n        return [0.25] * len(frame)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import nbcode  # type: ignore[import-not-found]

    fake_main = types.ModuleType("__main__")
    vars(fake_main).update(Constant=nbcode.Constant)  # a module made at run time, as a notebook's __main__
    nbcode.Constant.__module__ = "__main__"  # as a class defined in a notebook is pickled
    monkeypatch.setitem(sys.modules, "__main__", fake_main)
    joblib.dump(nbcode.Constant(), tmp_path / "m.joblib")
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
    card = {"name": "m", "kind": "sklearn", "allow_joblib": True, "checkpoint": "m.joblib", "num_classes": 1}
    with pytest.raises(Exception, match="set pickle_main to the module of your code that defines it"):
        tabular.load_estimator(kernel_card(card), tmp_path / "m.joblib")  # type: ignore[arg-type]
    model = tabular.load_estimator(kernel_card({**card, "pickle_main": "nbcode"}), tmp_path / "m.joblib")  # type: ignore[arg-type]
    assert model.predict([1, 2]) == [0.25, 0.25]


# --- image cards: transforms factory, tensors, the preprocessing stated --------------------------

timm = pytest.importorskip("timm")

PIPELINES = '''
import albumentations as A
from albumentations.pytorch import ToTensorV2

def plain():
    return A.Compose([A.Resize(24, 24)])

def normalised_tensor():
    return A.Compose([A.Resize(24, 24), A.Normalize(mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25)), ToTensorV2()])

def tensor_only():
    return A.Compose([A.Resize(24, 24), ToTensorV2()])

def not_a_pipeline():
    return 3
'''


def image_kernel(root: Path, **card: Any) -> tuple[Path, KernelSpec]:
    (root / "weights").mkdir(parents=True)
    (root / "pipes.py").write_text(PIPELINES)
    torch.manual_seed(0)
    torch.save(timm.create_model("test_resnet", pretrained=False, num_classes=2).state_dict(), root / "weights" / "m.pth")
    return root, spec({"name": "m", "arch": "test_resnet", "checkpoint": "weights/m.pth", "num_classes": 2, **card})


def test_a_transforms_factory_runs_in_the_kernel_and_its_normalize_is_not_doubled(tmp_path: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from builder.kkb_runtime.cards.image import transforms
    from builder.kkb_runtime.cards.image.card import ImageBuilt

    kernel, loaded = image_kernel(tmp_path / "k", transforms="pipes:normalised_tensor", input_size=[24, 24])
    (card,) = bundle_cards.prepare_models(loaded, kernel, tmp_path / "stage")
    built = card.built
    assert isinstance(built, ImageBuilt)
    assert (built.transforms_factory, built.transforms, built.normalize_in_pipeline) == ("pipes:normalised_tensor", None, True)
    assert (built.mean, built.std) == ((0.5,) * 3, (0.25,) * 3)
    assert built.preprocessing["normalize"] == "mean [0.5, 0.5, 0.5], std [0.25, 0.25, 0.25] (the pipeline's Normalize), in the pipeline"
    assert built.preprocessing["resize"] == "the pipeline's own (kkb adds no Resize)"
    monkeypatch.syspath_prepend(str(kernel))
    image = np.full((30, 30, 3), 255, dtype=np.uint8)
    out = transforms.card_pipeline(built)(image=image)["image"]
    assert tuple(out.shape) == (3, 24, 24) and float(out.max()) == pytest.approx(2.0)  # (1 - 0.5) / 0.25, once


@pytest.mark.parametrize(("factory", "message"), [
    ("pipes:tensor_only", "[[models]] 'm': transforms pipes:tensor_only: the pipeline converts to a tensor (ToTensorV2) "
                          "without normalising first, and kkb cannot normalise after it"),
    ("pipes:not_a_pipeline", "[[models]] 'm': transforms pipes:not_a_pipeline: transforms 'pipes:not_a_pipeline' returned int, "
                             "not an albumentations pipeline (A.Compose)"),
    ("pipes:missing", "[[models]] 'm': transforms pipes:missing: transforms 'pipes:missing': cannot import missing from 'pipes'"),
])
def test_a_transforms_factory_that_cannot_work_is_refused_with_the_reason(tmp_path: Path, factory: str, message: str) -> None:
    kernel, loaded = image_kernel(tmp_path / "k", transforms=factory)
    with pytest.raises(ModelError) as caught:
        bundle_cards.prepare_models(loaded, kernel, tmp_path / "stage")
    assert str(caught.value).startswith(message), str(caught.value)


def test_the_build_states_the_preprocessing_and_where_it_came_from(tmp_path: Path) -> None:
    kernel, loaded = image_kernel(tmp_path / "k", input_size=[32, 32])
    (card,) = bundle_cards.prepare_models(loaded, kernel, tmp_path / "stage")
    notes = [note for note in bundle_cards.record_notes([card]) if not note.startswith("models.m: weights")]
    assert notes[:2] == [
        "models.m: resize: 32x32 (the card), bilinear (timm's pretrained config)",
        "models.m: normalize: mean [0.5, 0.5, 0.5], std [0.5, 0.5, 0.5] (timm's pretrained config), "
        "added by kkb after the pipeline"]


# --- post-processing with context ---------------------------------------------------------------

def test_a_postprocess_function_gets_typed_ids_and_context_and_names_what_it_discretised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from builder.kkb_runtime import postprocess

    (tmp_path / "post.py").write_text(
        "def snap(frame, context):\n"
        "    assert frame['qa_id'].dtype.kind == 'i', frame.dtypes\n"
        "    scale = float((context.weights / 'scale.txt').read_text())\n"
        "    out = frame.assign(a=(frame['a'] * scale).round(1))\n"
        "    return out, ['a']\n"
        "def plain(frame):\n"
        "    return frame\n")
    (tmp_path / "scale.txt").write_text("2")
    monkeypatch.syspath_prepend(str(tmp_path))
    frame = pd.DataFrame({"qa_id": ["7", "12"], "a": [0.1234, 0.3333], "b": [0.5, 0.25]})
    context = postprocess.Context(weights_dir=tmp_path, code_dir=tmp_path, competition_dir=tmp_path, id_column="qa_id",
                                  id_type=postprocess.id_type(pd.Series(["7", "12"])))
    out = postprocess.apply(frame, kernel_stages({"kind": "function", "function": "post:snap"},
                                                 {"kind": "function", "function": "post:plain"}), "qa_id", ["a", "b"], context)
    assert out["qa_id"].tolist() == ["7", "12"] and out["a"].tolist() == [0.2, 0.7]
    assert out.attrs[postprocess.DISCRETISED] == ["a"]
    assert postprocess.id_type(pd.Series(["007", "12"])) == "str"  # "007" is not the integer 7 to the scorer


def test_a_tokenizer_that_adds_special_tokens_only_when_called_encodes_like_its_own_class(bert: Path) -> None:
    """kkb reads where the special tokens go off the tokenizer's own __call__ (transformers 5's fast tokenizers have no
    build_inputs_with_special_tokens), so a generic fast tokenizer over the same vocabulary cuts and encodes the same."""
    from transformers import PreTrainedTokenizerFast

    card = kernel_card(TEXT)
    assert isinstance(card, runtime_text.TextCard)
    own = runtime_text.load_tokenizer(card, bert)
    generic = PreTrainedTokenizerFast(tokenizer_object=own._tokenizer)
    table = pd.DataFrame({"title": ["the cat " * 40, "the"]})
    assert runtime_text.encode(generic, card, table) == runtime_text.encode(own, card, table)
    assert runtime_text.encode(own, card, table).input_ids[1] == own("the")["input_ids"]


def test_the_tiny_bert_s_tokenizer_knows_its_vocabulary(bert: Path) -> None:
    """Not every word [UNK]: the tokenizer is read from its folder (transformers 4 and 5 alike)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(bert / "weights" / "bert", local_files_only=True)
    assert tokenizer.convert_ids_to_tokens(tokenizer("The cat is on the mat")["input_ids"]) == [
        "[CLS]", "the", "cat", "is", "on", "the", "mat", "[SEP]"]
