"""Build-time model cards (builder.bundle.models): checkpoint normalisation, the load check, what the card records."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
timm = pytest.importorskip("timm")

from builder.bundle.cards import prepare_models  # noqa: E402
from builder.errors import ModelError  # noqa: E402
from builder.kkb_runtime.cards.common import models as runtime  # noqa: E402
from builder.kkb_runtime.cards.image import predict  # noqa: E402
from builder.kkb_runtime.config_reader import read_card  # noqa: E402
from builder.kkb_runtime.typed import write  # noqa: E402
from builder.project.spec import KernelSpec, parse_spec  # noqa: E402
from tests.support.files import build_file_tree  # noqa: E402

ARCH = "test_efficientnet"


def spec_for(**card: Any) -> KernelSpec:
    model = {"name": "net", "arch": ARCH, "checkpoint": "weights/net.pth", "num_classes": 3, **card}
    return parse_spec({
        "kernel": {"title": "model card tests"},
        "competition": {"slug": "kkb-shapes"},
        "models": [model],
        "steps": [{"name": "net", "run": "python -m kkb_runtime predict --model net --out {out}"}],
    })


def fresh_state(arch: str = ARCH, num_classes: int = 3, seed: int = 0) -> dict[str, Any]:
    torch.manual_seed(seed)
    return timm.create_model(arch, pretrained=False, num_classes=num_classes).state_dict()


@pytest.fixture(scope="module")
def state() -> dict[str, Any]:
    return fresh_state()


def save(kernel_dir: Path, obj: Any, name: str = "weights/net.pth") -> Path:
    path = kernel_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(obj, path)
    return path


def prepare(kernel_dir: Path, spec: KernelSpec, stage: Path | None = None) -> tuple[list[dict[str, Any]], Path]:
    """The cards prepared into ``stage``, each as kkb_kernel.json holds it."""
    stage = stage or kernel_dir.parent / "stage"
    stage.mkdir(parents=True, exist_ok=True)
    return [written(card) for card in prepare_models(spec, kernel_dir, stage)], stage


def written(card: object) -> dict[str, Any]:
    shown = write(card)
    assert isinstance(shown, dict)
    return shown


def written_state(stage: Path, card: dict[str, Any]) -> dict[str, Any]:
    return runtime.read_checkpoint(stage / card["checkpoint"])


def assert_same_weights(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert sorted(got) == sorted(want)
    for name, tensor in want.items():
        assert torch.equal(got[name].to(tensor.dtype), tensor), name


# --- normalisation cases -------------------------------------------------------------------------

def _prefixed(state: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {prefix + name: value for name, value in state.items()}


NORMALISATION_CASES = {
    "plain state dict": (lambda s: s, None),
    "state_dict key": (lambda s: {"state_dict": s, "epoch": 7, "optimizer": {"lr": 0.1}}, "state_dict"),
    "model key": (lambda s: {"model": s, "epoch": 7}, "model"),
    "ema key": (lambda s: {"ema": s}, "ema"),
    "DataParallel module. prefix": (lambda s: {"state_dict": _prefixed(s, "module.")}, "state_dict"),
    "DDP inside an EMA wrapper": (lambda s: {"model_ema": _prefixed(s, "module.module.")}, "model_ema"),
    "torch.compile around DDP": (lambda s: _prefixed(s, "_orig_mod.module."), None),
    "Lightning model. prefix": (lambda s: {"state_dict": _prefixed(s, "model.")}, "state_dict"),
    "AveragedModel": (lambda s: {**_prefixed(s, "module."), "n_averaged": torch.tensor(5)}, None),
}


@pytest.mark.parametrize("case", list(NORMALISATION_CASES))
def test_training_checkpoints_become_clean_state_dicts(tmp_path: Path, state: dict[str, Any], case: str) -> None:
    wrap, key = NORMALISATION_CASES[case]
    kernel = tmp_path / "kernel"
    save(kernel, wrap(state))
    (card,), stage = prepare(kernel, spec_for())
    assert card["source_key"] == key
    assert card["checkpoint"] == "weights/net.safetensors"
    assert card["checkpoint_key"] is None  # the written file is a plain state dict
    assert_same_weights(written_state(stage, card), state)


def test_ema_weights_win_over_the_raw_ones_like_timm(tmp_path: Path, state: dict[str, Any]) -> None:
    other = fresh_state(seed=1)
    save(tmp_path / "kernel", {"state_dict": other, "state_dict_ema": state})
    (card,), stage = prepare(tmp_path / "kernel", spec_for())
    assert card["source_key"] == "state_dict_ema"
    assert_same_weights(written_state(stage, card), state)


def test_checkpoint_key_picks_the_entry(tmp_path: Path, state: dict[str, Any]) -> None:
    save(tmp_path / "kernel", {"state_dict": state, "state_dict_ema": fresh_state(seed=1)})
    (card,), stage = prepare(tmp_path / "kernel", spec_for(checkpoint_key="state_dict"))
    assert card["source_key"] == "state_dict"
    assert_same_weights(written_state(stage, card), state)


def test_unknown_checkpoint_key_is_refused(tmp_path: Path, state: dict[str, Any]) -> None:
    save(tmp_path / "kernel", {"state_dict": state, "epoch": 1})
    with pytest.raises(ModelError) as caught:
        prepare(tmp_path / "kernel", spec_for(checkpoint_key="weights"))
    assert caught.value.message == ("[[models]] 'net': weights/net.pth: checkpoint has no key 'weights' "
                                    "(top-level keys: state_dict, epoch)")
    assert "checkpoint_key" in (caught.value.hint or "")


def test_half_and_torch_format(tmp_path: Path, state: dict[str, Any]) -> None:
    save(tmp_path / "kernel", {"state_dict": state})
    (card,), stage = prepare(tmp_path / "kernel", spec_for(half=True, safetensors=False))
    assert card["checkpoint"] == "weights/net.pt" and card["dtype"] == "float16"
    written = torch.load(stage / card["checkpoint"], weights_only=True)
    assert written["conv_stem.weight"].dtype == torch.float16
    assert written["bn1.num_batches_tracked"].dtype == torch.int64  # integer buffers are left alone
    assert torch.allclose(written["conv_stem.weight"].float(), state["conv_stem.weight"], atol=1e-3)


def test_the_copied_original_is_replaced_and_hashed(tmp_path: Path, state: dict[str, Any]) -> None:
    kernel = tmp_path / "kernel"
    save(kernel, {"state_dict": state})
    stage = tmp_path / "stage"
    save(stage, {"state_dict": state})  # what build_kernel copied from the [weights] selection
    (card,), _ = prepare(kernel, spec_for(), stage)
    assert sorted(p.relative_to(stage).as_posix() for p in stage.rglob("*") if p.is_file()) == ["weights/net.safetensors"]
    import hashlib

    assert card["checkpoint_sha256"] == hashlib.sha256((stage / card["checkpoint"]).read_bytes()).hexdigest()
    assert (kernel / "weights/net.pth").is_file()  # the user's file is never touched


def test_normalised_checkpoints_are_reproducible(tmp_path: Path, state: dict[str, Any]) -> None:
    save(tmp_path / "kernel", {"state_dict": _prefixed(state, "module.")})
    (first,), _ = prepare(tmp_path / "kernel", spec_for(half=True), tmp_path / "one")
    (second,), _ = prepare(tmp_path / "kernel", spec_for(half=True), tmp_path / "two")
    assert first["checkpoint_sha256"] == second["checkpoint_sha256"]  # unchanged weights: nothing to upload


def test_two_cards_sharing_a_checkpoint_get_their_own_files(tmp_path: Path, state: dict[str, Any]) -> None:
    save(tmp_path / "kernel", state)
    spec = parse_spec({
        "kernel": {"title": "model card tests"}, "competition": {"slug": "kkb-shapes"},
        "models": [{"name": "full", "arch": ARCH, "checkpoint": "weights/net.pth", "num_classes": 3},
                   {"name": "half", "arch": ARCH, "checkpoint": "weights/net.pth", "num_classes": 3, "half": True}],
        "steps": [{"name": "s", "run": "python x.py"}],
    })
    full, half = (written(card) for card in prepare_models(spec, tmp_path / "kernel", tmp_path / "stage"))
    assert (full["checkpoint"], half["checkpoint"]) == ("weights/net.safetensors", "weights/net.half.safetensors")
    assert written_state(tmp_path / "stage", half)["conv_stem.weight"].dtype == torch.float16


# --- refusals ------------------------------------------------------------------------------------

def test_a_wrong_num_classes_is_refused_naming_the_shapes(tmp_path: Path) -> None:
    save(tmp_path / "kernel", {"state_dict": _prefixed(fresh_state(num_classes=10), "module.")})
    with pytest.raises(ModelError) as caught:
        prepare(tmp_path / "kernel", spec_for())
    assert caught.value.message == (
        "model 'net': checkpoint weights/net.pth does not fit test_efficientnet(num_classes=3, in_chans=3)\n"
        "  shape mismatches (2): classifier.weight checkpoint [10, 256] != model [3, 256], "
        "classifier.bias checkpoint [10] != model [3]"
    )
    assert caught.value.hint == "the checkpoint's classifier has 10 outputs: set num_classes = 10 in [[models]] 'net'"
    assert not (tmp_path / "stage" / "weights").exists()  # nothing written for upload


def test_missing_and_unexpected_keys_are_named(tmp_path: Path, state: dict[str, Any]) -> None:
    broken = dict(state)
    del broken["conv_stem.weight"], broken["bn1.weight"]
    broken["head.fc.weight"] = torch.zeros(3, 256)
    save(tmp_path / "kernel", broken)
    with pytest.raises(ModelError) as caught:
        prepare(tmp_path / "kernel", spec_for(model_kwargs={"drop_rate": 0.1}))
    assert caught.value.message == (
        "model 'net': checkpoint weights/net.pth does not fit test_efficientnet(num_classes=3, in_chans=3, drop_rate=0.1)\n"
        "  missing keys (2): conv_stem.weight, bn1.weight\n"
        "  unexpected keys (1): head.fc.weight"
    )
    assert "check arch, num_classes, in_chans and model_kwargs" in (caught.value.hint or "")


def test_another_architecture_is_refused_with_clipped_lists(tmp_path: Path) -> None:
    save(tmp_path / "kernel", fresh_state("test_resnet"))
    with pytest.raises(ModelError) as caught:
        prepare(tmp_path / "kernel", spec_for())
    lines = caught.value.message.splitlines()
    assert lines[1].startswith("  missing keys (") and ", ... (" in lines[1] and lines[1].endswith(" more)")
    assert lines[2].startswith("  unexpected keys (")


def test_unknown_architecture_gets_a_suggestion(tmp_path: Path, state: dict[str, Any]) -> None:
    save(tmp_path / "kernel", state)
    with pytest.raises(ModelError) as caught:
        prepare(tmp_path / "kernel", spec_for(arch="test_efficientnett"))
    assert caught.value.message == f"[[models]] 'net': timm {timm.__version__} has no architecture 'test_efficientnett'"
    assert (caught.value.hint or "").startswith("did you mean 'test_efficientnet'")


def test_missing_checkpoint_file(tmp_path: Path) -> None:
    (tmp_path / "kernel").mkdir()
    with pytest.raises(ModelError, match=r"checkpoint weights/net.pth not found in"):
        prepare(tmp_path / "kernel", spec_for())


class _Opaque:  # pickled by reference: weights_only=True must refuse it, not run it
    pass


def test_a_pickle_that_is_not_just_tensors_is_refused(tmp_path: Path, state: dict[str, Any]) -> None:
    save(tmp_path / "kernel", {"state_dict": state, "config": _Opaque()})
    with pytest.raises(ModelError) as caught:
        prepare(tmp_path / "kernel", spec_for())
    assert "torch.load(weights_only=True) refused it" in caught.value.message
    assert (caught.value.hint or "").startswith("re-save only the weights")


def test_half_overflow_is_refused(tmp_path: Path, state: dict[str, Any]) -> None:
    big = dict(state)
    big["classifier.bias"] = torch.full((3,), 1e6)
    save(tmp_path / "kernel", big)
    with pytest.raises(ModelError, match=r"half = true overflows classifier.bias"):
        prepare(tmp_path / "kernel", spec_for(half=True))


# --- what the card records -----------------------------------------------------------------------

def test_normalisation_comes_from_timm_unless_the_card_says(tmp_path: Path) -> None:
    save(tmp_path / "kernel", fresh_state("test_convnext"))
    (card,), _ = prepare(tmp_path / "kernel", spec_for(arch="test_convnext"))
    cfg = timm.create_model("test_convnext", pretrained=False).pretrained_cfg
    assert card["mean"] == list(cfg["mean"]) and card["std"] == list(cfg["std"])
    assert card["input_size"] == list(cfg["input_size"][1:]) and card["interpolation"] == cfg["interpolation"]
    assert card["num_params"] > 0 and card["built_with"]["timm"] == timm.__version__
    (card,), _ = prepare(tmp_path / "kernel", spec_for(arch="test_convnext", mean=[0.1, 0.2, 0.3], input_size=[64, 32],
                                                       interpolation="bilinear"), tmp_path / "stage2")
    assert card["mean"] == [0.1, 0.2, 0.3] and card["std"] == list(cfg["std"])
    assert card["input_size"] == [64, 32] and card["interpolation"] == "bilinear"
    json.dumps(card)  # JSON-ready for kkb_kernel.json


def test_grayscale_models_get_one_channel_of_normalisation(tmp_path: Path) -> None:
    torch.manual_seed(0)
    save(tmp_path / "kernel", timm.create_model(ARCH, pretrained=False, num_classes=3, in_chans=1).state_dict())
    (card,), _ = prepare(tmp_path / "kernel", spec_for(in_chans=1))
    assert card["mean"] == [pytest.approx((0.485 + 0.456 + 0.406) / 3)]
    with pytest.raises(ModelError, match=r"mean has 3 values for in_chans = 1"):
        prepare(tmp_path / "kernel", spec_for(in_chans=1, mean=[0.5, 0.5, 0.5]), tmp_path / "stage2")


# --- real training checkpoints, factories, remapping, folds ------------------------------

def test_trainer_checkpoints_with_numpy_load_without_opting_in(tmp_path: Path, state: dict[str, Any]) -> None:
    import numpy as np

    save(tmp_path / "kernel", {"model": state, "preds": np.zeros((4, 3)), "best_auc": np.float64(0.91),
                               "epoch": 7, "step": np.int64(300), "optimizer": {"state": {}, "param_groups": [{"lr": 0.1}]}})
    (card,), stage = prepare(tmp_path / "kernel", spec_for())
    assert card["source_key"] == "model" and card["checkpoints"][0]["loaded_with"] == "weights_only"
    assert_same_weights(written_state(stage, card), state)


def test_other_classes_are_refused_quoting_torch_and_load_only_with_the_opt_in(tmp_path: Path, state: dict[str, Any]) -> None:
    save(tmp_path / "kernel", {"state_dict": state, "config": _Opaque()})
    with pytest.raises(ModelError) as caught:
        prepare(tmp_path / "kernel", spec_for())
    assert caught.value.message.endswith(
        "torch.load(weights_only=True) refused it: WeightsUnpickler error: Unsupported global: GLOBAL "
        "tests.test_models._Opaque was not an allowed global by default. Please use "
        "`torch.serialization.add_safe_globals([tests.test_models._Opaque])` or the "
        "`torch.serialization.safe_globals([tests.test_models._Opaque])` context manager to allowlist this global "
        "if you trust this class/function.")
    assert "\x1b" not in caught.value.message + (caught.value.hint or "")
    assert "allow_pickle = true in [[models]] 'net'" in (caught.value.hint or "")
    (card,), _ = prepare(tmp_path / "kernel", spec_for(allow_pickle=True), tmp_path / "stage2")
    assert card["allow_pickle"] is True
    assert card["checkpoints"][0]["loaded_with"] == "torch.load(weights_only=False) (allow_pickle = true)"


FACTORY = '''
import timm
import torch


class Net(torch.nn.Module):
    """A user's module: a timm backbone without its classifier, and a head of its own."""

    def __init__(self, backbone="test_efficientnet", out_dim=3):
        super().__init__()
        self.backbone = timm.create_model(backbone, pretrained=False, num_classes=0)
        self.head = torch.nn.Sequential(torch.nn.Dropout(0.1), torch.nn.Linear(self.backbone.num_features, out_dim))

    def forward(self, x):
        return self.head(self.backbone(x))


def build(**kwargs):
    return Net(**kwargs)
'''


def factory_kernel(root: Path) -> tuple[Path, Any]:
    package = f"userfac_{uuid.uuid4().hex[:8]}"
    kernel = build_file_tree(root / "kernel", {f"{package}/__init__.py": "", f"{package}/model.py": FACTORY})
    sys.path.insert(0, str(kernel))
    try:
        module = __import__(f"{package}.model", fromlist=["Net"])
        torch.manual_seed(0)
        net = module.Net(out_dim=3)
    finally:
        sys.path.remove(str(kernel))
    return kernel, (package, net)


def test_a_factory_card_loads_like_an_arch_card(tmp_path: Path) -> None:
    kernel, (package, net) = factory_kernel(tmp_path)
    # saved by another wrapper: every key under "net." and the head renamed
    saved = {"net." + name.replace("head.1.", "fc."): value for name, value in net.state_dict().items()}
    save(kernel, {"model": saved, "epoch": 2})
    card_args = {"arch": None, "factory": f"{package}.model:build", "model_kwargs": {"out_dim": 3}, "input_size": [32, 32]}
    with pytest.raises(ModelError) as caught:
        prepare(kernel, spec_for(**card_args))
    assert "missing keys" in caught.value.message and caught.value.message.startswith(
        f"model 'net': checkpoint weights/net.pth does not fit {package}.model:build(out_dim=3)")
    (card,), stage = prepare(kernel, spec_for(**card_args, strip_prefix="net.", key_rename=[[r"^fc\.", "head.1."]]),
                             tmp_path / "stage2")
    assert_same_weights(written_state(stage, card), net.state_dict())
    assert card["mean"] == list(net.backbone.pretrained_cfg["mean"])  # the backbone's timm config
    with pytest.raises(ModelError, match=r"the model outputs 3 values per image, num_classes = 5"):
        prepare(kernel, spec_for(**card_args, num_classes=5, strip_prefix="net.", key_rename=[[r"^fc\.", "head.1."]]),
                tmp_path / "stage3")
    with pytest.raises(ModelError, match=rf"factory '{package}.model:nope': module '{package}.model' has no attribute 'nope'"):
        prepare(kernel, spec_for(**{**card_args, "factory": f"{package}.model:nope"}), tmp_path / "stage4")


def test_non_strict_loading_only_when_asked_and_listed(tmp_path: Path, state: dict[str, Any]) -> None:
    partial = {name: value for name, value in state.items() if not name.startswith("classifier.")}
    partial["aux.weight"] = torch.zeros(2)
    save(tmp_path / "kernel", partial)
    with pytest.raises(ModelError, match=r"missing keys \(2\): classifier.weight, classifier.bias"):
        prepare(tmp_path / "kernel", spec_for())
    (card,), stage = prepare(tmp_path / "kernel", spec_for(strict=False), tmp_path / "stage2")
    assert card["checkpoints"][0]["left_out"] == {"missing": ["classifier.weight", "classifier.bias"],
                                                  "unexpected": ["aux.weight"]}
    assert "aux.weight" not in written_state(stage, card)
    typed = read_card(card)
    model = runtime.load_weights(predict.create_model(typed.card), typed.card, stage,  # type: ignore[arg-type]
                                 card["checkpoint"], None)  # the kernel loads it too
    assert torch.equal(model.state_dict()["conv_stem.weight"], state["conv_stem.weight"])


def test_folds_from_a_glob_each_checked_and_written(tmp_path: Path) -> None:
    folds = [fresh_state(seed=seed) for seed in range(3)]
    for index, fold in enumerate(folds):
        save(tmp_path / "kernel", {"model": fold, "preds": __import__("numpy").ones(3)}, f"weights/net_fold{index}.pth")
    (card,), stage = prepare(tmp_path / "kernel", spec_for(checkpoint="weights/net_fold*.pth", fold_weights=[1, 1, 2]))
    assert [entry["source"] for entry in card["checkpoints"]] == [f"weights/net_fold{i}.pth" for i in range(3)]
    for entry, fold in zip(card["checkpoints"], folds, strict=True):
        assert_same_weights(runtime.read_checkpoint(stage / entry["file"]), fold)
    broken = dict(folds[0])
    broken["classifier.bias"] = torch.zeros(5)
    save(tmp_path / "kernel", broken, "weights/net_fold1.pth")
    with pytest.raises(ModelError, match=r"checkpoint weights/net_fold1.pth does not fit"):
        prepare(tmp_path / "kernel", spec_for(checkpoint="weights/net_fold*.pth"), tmp_path / "stage2")


def test_a_glob_that_matches_nothing_or_the_wrong_number_of_folds_is_refused(tmp_path: Path) -> None:
    from builder.bundle.checkpoints import checkpoint_sources
    from builder.errors import BundleError

    kernel = tmp_path / "kernel"
    for index in range(3):
        save(kernel, {"model": {}}, f"weights/f{index}.pth")
    card = spec_for(checkpoint="weights/f*.pth", fold_weights=[1.0, 2.0]).models[0]
    with pytest.raises(BundleError) as caught:
        checkpoint_sources(card, kernel)
    assert caught.value.message == (f"{kernel}/kernel.toml: models.net.fold_weights: 2 weights for 3 checkpoints "
                                    "(weights/f0.pth, weights/f1.pth, weights/f2.pth)")
    with pytest.raises(BundleError, match=r"models.net.checkpoint: 'weights/g\*.pth' matches no file"):
        checkpoint_sources(spec_for(checkpoint="weights/g*.pth").models[0], kernel)


def test_the_build_output_records_what_the_opt_ins_did() -> None:
    from builder.bundle.cards.unit import fold_notes
    from builder.kkb_runtime.card import Built, LeftOut
    from tests.support.cards import fold

    built = Built(checkpoint="weights/a.safetensors", built_with={}, checkpoints=(
        fold("weights/a.safetensors", "weights/a.pth", loaded_with="torch.load(weights_only=False) (allow_pickle = true)",
             left_out=LeftOut(missing=("head.weight",), unexpected=())),))
    assert fold_notes("net", built) == [
        "models.net: weights/a.pth loaded with torch.load(weights_only=False) (allow_pickle = true)",
        "models.net: weights/a.pth: strict = false left 1 missing key(s) out: head.weight"]


def _pickle_with_a_user_class(kernel: Path, state: dict[str, Any]) -> str:
    """A checkpoint holding an instance of a class from the kernel's own code (its documented use of allow_pickle)."""
    package = f"userpkg_{uuid.uuid4().hex[:8]}"
    build_file_tree(kernel, {f"{package}/__init__.py": "", f"{package}/conf.py": "class TrainConfig:\n    lr = 0.1\n"})
    sys.path.insert(0, str(kernel))
    try:
        conf = __import__(f"{package}.conf", fromlist=["TrainConfig"])
        save(kernel, {"state_dict": state, "config": conf.TrainConfig()})
    finally:
        sys.path.remove(str(kernel))
        for name in [name for name in sys.modules if name.startswith(package)]:
            del sys.modules[name]
    return package


def test_allow_pickle_loads_a_class_from_the_kernels_own_code(tmp_path: Path, state: dict[str, Any]) -> None:
    package = _pickle_with_a_user_class(tmp_path / "kernel", state)
    (card,), stage = prepare(tmp_path / "kernel", spec_for(allow_pickle=True))
    assert card["checkpoints"][0]["loaded_with"] == "torch.load(weights_only=False) (allow_pickle = true)"
    assert_same_weights(written_state(stage, card), state)
    assert not any(name.startswith(package) for name in sys.modules)  # the user's modules are forgotten afterwards


def test_allow_pickle_names_a_module_the_build_cannot_import(tmp_path: Path, state: dict[str, Any]) -> None:
    package = _pickle_with_a_user_class(tmp_path / "kernel", state)
    (tmp_path / "kernel" / package / "conf.py").unlink()
    with pytest.raises(ModelError) as caught:
        prepare(tmp_path / "kernel", spec_for(allow_pickle=True))
    assert caught.value.message == (f"[[models]] 'net': weights/net.pth cannot be read: ModuleNotFoundError: "
                                    f"No module named '{package}.conf'")
    assert (caught.value.hint or "").startswith("the checkpoint names a class of a module the build cannot import: put the "
                                        "module under [code] include")
