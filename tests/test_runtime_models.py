"""The kernel-side model runtime: device choice, strict loading, transforms that travel, TTA, predict pieces."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import types
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
timm = pytest.importorskip("timm")

from builder.kkb_runtime.cards.common import device as devices  # noqa: E402
from builder.kkb_runtime.cards.common import models as runtime  # noqa: E402
from builder.kkb_runtime.cards.image import predict, tta  # noqa: E402
from builder.kkb_runtime.cards.image import transforms as pipelines  # noqa: E402
from builder.kkb_runtime.cards.image.card import ImageCard  # noqa: E402
from tests.support.cards import image_built, kernel_card  # noqa: E402
from tests.support.files import REPO, build_file_tree  # noqa: E402

A = pipelines.albumentations()


# --- device ---------------------------------------------------------------------------------------

@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch):
    """Pretend hardware: set ``cuda`` (device count) and ``xla`` (torch_xla importable)."""

    def set_machine(cuda: int = 0, xla: bool = False) -> None:
        monkeypatch.setattr(devices, "cuda_available", lambda: cuda > 0)
        monkeypatch.setattr(devices, "cuda_count", lambda: cuda)
        monkeypatch.setattr(devices, "xla_importable", lambda: xla)

    return set_machine


@pytest.mark.parametrize(("cuda", "xla", "kind", "count"), [
    (2, True, "cuda", 2),  # CUDA wins even where torch_xla is installed
    (1, False, "cuda", 1),
    (0, True, "xla", 1),
    (0, False, "cpu", 1),
], ids=["cuda-x2-and-xla", "cuda", "xla", "cpu"])
def test_device_preference(machine, cuda: int, xla: bool, kind: str, count: int) -> None:
    machine(cuda=cuda, xla=xla)
    choice = devices.choose_device({})
    assert (choice.kind, choice.count) == (kind, count)


def test_kkb_device_forces_a_choice(machine) -> None:
    machine(cuda=1, xla=True)
    assert devices.choose_device({"KKB_DEVICE": "cpu"}).kind == "cpu"
    assert devices.choose_device({"KKB_DEVICE": "XLA"}).reason == "forced by KKB_DEVICE"
    machine(cuda=0)
    with pytest.raises(devices.DeviceError, match=r"KKB_DEVICE=cuda but torch.cuda.is_available\(\) is False"):
        devices.choose_device({"KKB_DEVICE": "cuda"})
    with pytest.raises(devices.DeviceError, match=r"use one of cuda, xla, cpu"):
        devices.choose_device({"KKB_DEVICE": "tpu"})


def test_xla_device_comes_from_torch_xla(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("torch_xla")
    vars(fake).update(device=lambda: "xla:0")  # torch_xla >= 2.5
    monkeypatch.setitem(sys.modules, "torch_xla", fake)
    assert devices.torch_device(devices.DeviceChoice("xla", "test")) == "xla:0"


def test_xla_device_on_older_torch_xla(monkeypatch: pytest.MonkeyPatch) -> None:
    fake, core, xla_model = (types.ModuleType(name) for name in ("torch_xla", "torch_xla.core", "torch_xla.core.xla_model"))
    vars(xla_model).update(xla_device=lambda: "xla:1")
    vars(fake).update(core=core)
    vars(core).update(xla_model=xla_model)
    for name, module in (("torch_xla", fake), ("torch_xla.core", core), ("torch_xla.core.xla_model", xla_model)):
        monkeypatch.setitem(sys.modules, name, module)
    assert devices.torch_device(devices.DeviceChoice("xla", "test")) == "xla:1"


def test_cpu_and_cuda_devices() -> None:
    assert devices.torch_device(devices.DeviceChoice("cpu", "test")) == torch.device("cpu")
    assert devices.torch_device(devices.DeviceChoice("cuda", "test")) == torch.device("cuda")


def test_the_device_command_reports_this_machine(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "kkb_runtime", "device"], cwd=tmp_path, capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "builder"), "KKB_DEVICE": "cpu"},
                            check=True, timeout=120)
    report = json.loads(result.stdout)
    assert report["kind"] == "cpu" and report["summary"].startswith("cpu (")


def test_importing_the_runtime_loads_no_heavy_library_and_no_builder(tmp_path: Path) -> None:
    probe = ("import sys, kkb_runtime.__main__, kkb_runtime.cards.image.predict, kkb_runtime.cards.common.models, "
             "kkb_runtime.cards.image.transforms, kkb_runtime.cards.common.device, kkb_runtime.cards.image.tta, "
             "kkb_runtime.cards.common.checkpoints, kkb_runtime.cards.text, kkb_runtime.cards.tabular, kkb_runtime.postprocess; "
             "print(sorted(m for m in ('torch', 'timm', 'albumentations', 'builder') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "builder")}, timeout=60)
    assert result.stdout.strip() == "[]"


# --- loading ---------------------------------------------------------------------------------------

KEYS = {"name": "net", "arch": "test_efficientnet", "checkpoint": "net.safetensors", "num_classes": 3}
CARD = kernel_card(KEYS)


def load_net(folder: Path) -> Any:
    """The card's network with ``net.safetensors`` loaded, as the kernel loads it."""
    return runtime.load_weights(predict.create_model(CARD), CARD, folder, "net.safetensors", None)  # type: ignore[arg-type]


def test_load_model_is_strict_and_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from safetensors.torch import save_file

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    torch.manual_seed(3)
    source = timm.create_model("test_efficientnet", pretrained=False, num_classes=3)
    save_file(source.state_dict(), str(tmp_path / "net.safetensors"))
    model = load_net(tmp_path)
    assert not model.training
    assert torch.equal(model.state_dict()["conv_stem.weight"], source.state_dict()["conv_stem.weight"])
    import os

    assert os.environ["HF_HUB_OFFLINE"] == "1"
    state = {k: v for k, v in source.state_dict().items() if k != "bn1.bias"}
    save_file(state, str(tmp_path / "net.safetensors"))
    with pytest.raises(runtime.ModelLoadError) as caught:
        load_net(tmp_path)
    assert str(caught.value) == ("model 'net': checkpoint net.safetensors does not fit "
                                 "test_efficientnet(num_classes=3, in_chans=3)\n  missing keys (1): bn1.bias")


def test_a_missing_checkpoint_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(runtime.ModelLoadError, match=r"checkpoint not found: .*net.safetensors"):
        load_net(tmp_path)


def test_strip_common_prefix_only_when_it_matches_exactly() -> None:
    expected = ["a.weight", "b.weight"]
    assert runtime.strip_common_prefix({"model.a.weight": 1, "model.b.weight": 2}, expected) == (
        {"a.weight": 1, "b.weight": 2}, "model.")
    assert runtime.strip_common_prefix({"model.a.weight": 1}, expected) == ({"model.a.weight": 1}, None)


# --- transforms ------------------------------------------------------------------------------------

CUSTOM = '''
import numpy as np
import pandas as pd
from albumentations.core.transforms_interface import DualTransform, ImageOnlyTransform


class Erase(ImageOnlyTransform):
    """RandomErasing-like: a fixed box here, so the round trip can be compared pixel for pixel."""

    def __init__(self, top: int = 0, size: int = 4, fill: int = 0, p: float = 1.0):
        super().__init__(p=p)
        self.top, self.size, self.fill = top, size, fill

    def apply(self, img, **params):
        out = img.copy()
        out[self.top:self.top + self.size, self.top:self.top + self.size] = self.fill
        return out

    def get_transform_init_args_names(self):
        return ("top", "size", "fill")


class Mirror(DualTransform):
    def apply(self, img, **params):
        return np.ascontiguousarray(img[:, ::-1])

    def apply_to_mask(self, mask, **params):
        return np.ascontiguousarray(mask[:, ::-1])

    def get_transform_init_args_names(self):
        return ()
'''


@pytest.fixture
def code_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A code dataset holding a user package with custom transforms, on sys.path as PYTHONPATH puts it."""
    package = f"usercode_{uuid.uuid4().hex[:8]}"
    root = build_file_tree(tmp_path / "code", {f"{package}/__init__.py": "", f"{package}/aug.py": CUSTOM})
    monkeypatch.syspath_prepend(str(root))
    return root, package


def saved_pipeline(package: str, normalize: bool = False) -> tuple[Any, dict[str, Any]]:
    """Build the user's pipeline, serialise it to JSON text and back (what travels in kkb_kernel.json)."""
    import importlib

    aug = importlib.import_module(f"{package}.aug")
    steps = [A.Resize(32, 32, interpolation=2, p=1.0), aug.Erase(top=3, size=5, fill=7, p=1.0), aug.Mirror(p=1.0)]
    if normalize:
        steps.append(A.Normalize(mean=(0.2, 0.3, 0.4), std=(0.5, 0.5, 0.5), p=1.0))
    pipeline = A.Compose(steps)
    return pipeline, json.loads(json.dumps(A.to_dict(pipeline)))


def forget(package: str) -> None:
    for name in [name for name in sys.modules if name.split(".")[0] == package]:
        del sys.modules[name]


def image(seed: int = 0, size: tuple[int, int] = (50, 40)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (*size, 3), dtype=np.uint8)


def test_round_trip_with_custom_transforms(code_dir: tuple[Path, str]) -> None:
    _, package = code_dir
    original, serialized = saved_pipeline(package)
    forget(package)  # the kernel process has never imported the user's module
    rebuilt = pipelines.pipeline_from_dict(serialized)
    assert [type(t).__name__ for t in rebuilt.transforms] == ["Resize", "Erase", "Mirror"]
    assert (rebuilt.transforms[1].top, rebuilt.transforms[1].size, rebuilt.transforms[1].fill) == (3, 5, 7)
    assert np.array_equal(rebuilt(image=image())["image"], original(image=image())["image"])
    assert pipelines.custom_classes(serialized) == [f"{package}.aug.Erase", f"{package}.aug.Mirror"]


def test_the_card_normalisation_is_appended(code_dir: tuple[Path, str]) -> None:
    _, package = code_dir
    original, serialized = saved_pipeline(package)
    built = image_built("net.safetensors", transforms=serialized)
    out = pipelines.card_pipeline(built)(image=image())["image"]
    expected = (original(image=image())["image"].astype(np.float32) / 255.0 - 0.5) / 0.25
    assert out.dtype == np.float32 and np.allclose(out, expected, atol=1e-6)


def test_a_pipeline_that_normalises_itself_is_not_normalised_twice(code_dir: tuple[Path, str]) -> None:
    _, package = code_dir
    original, serialized = saved_pipeline(package, normalize=True)
    built = image_built("net.safetensors", transforms=serialized, mean=(0.9,) * 3, std=(9.0,) * 3)
    assert np.allclose(pipelines.card_pipeline(built)(image=image())["image"], original(image=image())["image"])


def test_without_a_pipeline_the_card_resizes_and_normalises() -> None:
    built = image_built("net.safetensors", mean=(0.0,) * 3, std=(1.0,) * 3, input_size=(24, 16), interpolation="bicubic")
    pipeline = pipelines.card_pipeline(built)
    assert pipeline.transforms[0].interpolation == 2  # cv2.INTER_CUBIC
    out = pipeline(image=image())["image"]
    assert out.shape == (24, 16, 3) and out.max() <= 1.0


def test_an_unimportable_custom_transform_is_named(code_dir: tuple[Path, str]) -> None:
    root, package = code_dir
    _, serialized = saved_pipeline(package)
    forget(package)
    (root / package / "aug.py").unlink()
    with pytest.raises(pipelines.TransformsError, match=rf"custom transform {package}.aug.Erase: cannot import module '{package}.aug'"):
        pipelines.pipeline_from_dict(serialized)


# --- TTA -------------------------------------------------------------------------------------------

def test_builtin_ttas() -> None:
    batch = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    views = dict(tta.resolve(["hflip", "vflip", "rot180", "transpose"]))
    assert list(views) == ["identity", "hflip", "vflip", "rot180", "transpose"]
    assert torch.equal(views["hflip"](batch), batch.flip(3))
    assert torch.equal(views["vflip"](batch), batch.flip(2))
    assert torch.equal(views["rot180"](batch), batch.flip(2).flip(3))
    assert views["transpose"](batch).shape == (2, 3, 5, 4)


def test_user_tta_and_averaging(code_dir: tuple[Path, str]) -> None:
    root, package = code_dir
    (root / package / "views.py").write_text("def double(batch):\n    return batch * 2\n")
    views = tta.resolve([f"{package}.views:double"])
    batch = torch.ones(1, 1, 2, 2)
    assert torch.equal(tta.averaged(lambda x: x + 1, batch, views), torch.full((1, 1, 2, 2), 2.5))  # ((1+1) + (2+1)) / 2
    with pytest.raises(tta.TtaError, match=r"unknown TTA 'flip'"):
        tta.resolve(["flip"])
    with pytest.raises(tta.TtaError, match=rf"cannot import nothing from module '{package}.views'"):
        tta.resolve([f"{package}.views:nothing"])


# --- predict pieces --------------------------------------------------------------------------------

def test_images_are_found_by_id(tmp_path: Path) -> None:
    from PIL import Image

    for name in ("a.png", "b.jpg", "sub/c.png", "notes.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".txt"):
            (tmp_path / name).write_text("x")
        else:
            Image.fromarray(image()).save(tmp_path / name)
    assert predict.image_paths(["b", "a", "sub/c", "c"], tmp_path) == [
        tmp_path / "b.jpg", tmp_path / "a.png", tmp_path / "sub/c.png", tmp_path / "sub/c.png"]
    with pytest.raises(predict.PredictError) as caught:
        predict.image_paths(["a", "zz", "notes"], tmp_path)
    assert str(caught.value).startswith(f"2 of 3 ids have no image in {tmp_path} ('zz', 'notes')")
    assert predict.read_image(tmp_path / "a.png", in_chans=1).shape == (50, 40, 1)


def test_num_classes_must_match_the_targets() -> None:
    with pytest.raises(predict.PredictError, match=r"model 'net' has num_classes = 3 but the submission has 2 target column\(s\) \(a, b\)"):
        predict.output_columns(CARD, ["a", "b"])  # type: ignore[arg-type]
    features = kernel_card({**KEYS, "features": True})
    assert predict.output_columns(features, ["a", "b"], width=3) == ["feat_0", "feat_1", "feat_2"]  # type: ignore[arg-type]


def test_features_are_pooled_pre_logits() -> None:
    model = timm.create_model("test_efficientnet", pretrained=False, num_classes=3).eval()
    with torch.no_grad():
        features = predict.pooled_features(model, torch.zeros(2, 3, 32, 32))
    assert features.shape == (2, model.num_features)


def test_run_model_averages_tta_views_and_extracts_features(tmp_path: Path) -> None:
    from PIL import Image
    from safetensors.torch import save_file

    torch.manual_seed(5)
    source = timm.create_model("test_efficientnet", pretrained=False, num_classes=3).eval()
    save_file(source.state_dict(), str(tmp_path / "net.safetensors"))
    paths = []
    for index in range(5):
        paths.append(tmp_path / f"{index}.png")
        Image.fromarray(image(index, (40, 40))).save(paths[-1])
    card = kernel_card({**KEYS, "tta": ["hflip"], "batch_size": 2, "num_workers": 0})
    built = image_built("net.safetensors")
    job = predict.Job(card, built, [str(i) for i in range(5)], paths, "id", ["a", "b", "c"], tmp_path,  # type: ignore[arg-type]
                      tmp_path / "out.csv")
    cpu = devices.DeviceChoice("cpu", "test")
    got = predict.run_model(job, cpu)
    batch = torch.stack([predict.ImageDataset(paths, pipelines.card_pipeline(built), 3)[i] for i in range(5)])
    with torch.no_grad():
        want = (source(batch).softmax(1) + source(batch.flip(3)).softmax(1)) / 2
    assert got.shape == (5, 3) and np.allclose(got, want.numpy(), atol=1e-5)
    with torch.no_grad():  # the CUDA layout, exercised on the CPU: same numbers
        assert torch.allclose(predict.make_forward(source, card, cpu, channels_last=True)(batch),  # type: ignore[arg-type]
                              source(batch).softmax(1), atol=1e-5)
    feature_card = kernel_card({**KEYS, "tta": ["hflip"], "batch_size": 2, "num_workers": 0, "features": True})
    assert isinstance(feature_card, ImageCard)
    feature_job = dataclasses.replace(job, card=feature_card)
    features = predict.run_model(feature_job, cpu)
    assert features.shape == (5, source.num_features)
    predict.write_output(feature_job, features)
    assert pd.read_csv(tmp_path / "out.csv").columns[:3].tolist() == ["id", "feat_0", "feat_1"]


# --- folds, weighted and random TTA, test layouts ----------------------------------------

def test_folds_run_one_after_another_and_average_with_weights(tmp_path: Path) -> None:
    from PIL import Image
    from safetensors.torch import save_file

    sources = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        sources.append(timm.create_model("test_efficientnet", pretrained=False, num_classes=3).eval())
        save_file(sources[-1].state_dict(), str(tmp_path / f"fold{seed}.safetensors"))
    paths = []
    for index in range(3):
        paths.append(tmp_path / f"{index}.jpg")
        Image.fromarray(image(index, (32, 32))).save(paths[-1], quality=95)
    card = kernel_card({**KEYS, "checkpoint": ["fold1.safetensors", "fold2.safetensors"], "tta": ["hflip"],
                        "tta_weights": {"identity": 3.0, "hflip": 1.0}, "batch_size": 2, "num_workers": 0,
                        "fold_weights": [1.0, 3.0]})
    built = image_built("fold1.safetensors", "fold2.safetensors")
    job = predict.Job(card, built, ["0.jpg", "1.jpg", "2.jpg"], paths, "id", ["a", "b", "c"], tmp_path,  # type: ignore[arg-type]
                      tmp_path / "out.csv")
    got = predict.run_model(job, devices.DeviceChoice("cpu", "test"))
    batch = torch.stack([predict.ImageDataset(paths, pipelines.card_pipeline(built), 3)[i] for i in range(3)])
    with torch.no_grad():
        per_fold = [(3 * model(batch).softmax(1) + model(batch.flip(3)).softmax(1)) / 4 for model in sources]
    assert np.allclose(got, ((per_fold[0] + 3 * per_fold[1]) / 4).numpy(), atol=1e-5)


def test_random_tta_passes_are_seeded_views(monkeypatch: pytest.MonkeyPatch) -> None:
    augment = A.Compose([A.HorizontalFlip(p=0.5), A.RandomBrightnessContrast(p=1.0)])
    built = image_built("net.safetensors", input_size=(16, 16))
    monkeypatch.setattr(predict, "read_image", lambda path, in_chans=3: image(0, (16, 16)))
    dataset = predict.ImageDataset([Path("a"), Path("b")], pipelines.card_pipeline(built), 3, augment, passes=4, seed=7)
    first, again = dataset[0], dataset[0]
    assert first.shape == (5, 3, 16, 16) and torch.equal(first, again)
    assert not torch.equal(first[1], first[2])
    forward = lambda x: x.mean(dim=(1, 2, 3)).unsqueeze(1)  # noqa: E731
    stacked = first.unsqueeze(0)
    plain_only = tta.averaged(forward, stacked, tta.resolve([]), {"random": 0.0})
    assert torch.allclose(plain_only, forward(stacked[:, 0]))
    mixed = tta.averaged(forward, stacked, tta.resolve([]), {"identity": 2.0, "random": 0.5})
    want = (2 * forward(stacked[:, 0]) + 0.5 * sum(forward(stacked[:, k]) for k in range(1, 5))) / 4
    assert torch.allclose(mixed, want)


def test_ids_with_extensions_nested_folders_and_a_listing_csv(tmp_path: Path) -> None:
    from PIL import Image

    for name in ("test/abc.jpg", "test/d1/d2/xyz.png"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(image()).save(tmp_path / name)
    assert predict.image_paths(["abc.jpg", "xyz", "d1/d2/xyz.png"], tmp_path / "test") == [
        tmp_path / "test/abc.jpg", tmp_path / "test/d1/d2/xyz.png", tmp_path / "test/d1/d2/xyz.png"]
    (tmp_path / "test.csv").write_text("StudyInstanceUID,path\n1.2.3,test/abc.jpg\n4.5.6,test/d1/d2/xyz.png\n")
    assert predict.image_paths(["4.5.6", "1.2.3"], tmp_path / "test.csv", "StudyInstanceUID") == [
        tmp_path / "test/d1/d2/xyz.png", tmp_path / "test/abc.jpg"]
    with pytest.raises(predict.PredictError, match=r"1 of 1 ids have no image"):
        predict.image_paths(["9.9"], tmp_path / "test.csv", "StudyInstanceUID")


@pytest.mark.parametrize(("kind", "cpus", "threads", "wanted", "workers"), [
    ("cpu", 2, 2, 2, 0),    # the forward pass uses both cores: decoding in workers would only compete with it
    ("cpu", 8, 4, 2, 2),    # cores left over: the card's workers decode while the model computes
    ("cpu", 8, 4, 6, 4),
    ("cuda", 2, 2, 2, 2),   # on an accelerator the cores are free for decoding
])
def test_loader_workers_only_where_cores_are_left(kind: str, cpus: int, threads: int, wanted: int, workers: int) -> None:
    choice = devices.DeviceChoice(kind=kind, reason="test")
    card = kernel_card({**KEYS, "num_workers": wanted})
    assert predict.loader_workers(card, choice, cpus=cpus, torch_threads=threads) == workers  # type: ignore[arg-type]
