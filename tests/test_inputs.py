"""``[[inputs]]`` offline: validation, what the build writes, where the runtime finds them, the dry run's stand-ins."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from builder.build import BuildSettings, build_kernel
from builder.errors import DryRunError, SpecError
from builder.kkb_runtime.config import InputSection
from builder.kkb_runtime.config_reader import load_config
from builder.kkb_runtime.inputs import InputNotFound, find_input
from builder.kkb_runtime.vocabulary import Layout
from builder.project.spec import parse_spec
from builder.rehearse.dryrun import DryRunSettings, competition_data, dry_run
from builder.run.sandbox import mount_path
from tests.support.files import KERNELS

VALID = {
    "kernel": {"title": "KKB Minimal Inference", "owner": "someone"},
    "competition": {"slug": "kkb-minimal"},
    "steps": [{"name": "a", "run": "python predict.py --out {out}"}],
}
FORMS = "Kaggle's are: " + ", ".join(("tensorflow1", "tensorflow2", "tflite", "tfjs", "pytorch", "jax", "flax", "pax",
                                       "maxtext", "gemmacpp", "ggml", "gguf", "coral", "scikitlearn", "mxnet", "onnx",
                                       "keras", "transformers", "api", "other", "tensorrtllm", "triton", "vllm"))
KIND_HINT = "kind is dataset (dataset_sources), model (model_sources) or notebook (kernel_sources)"
REF_HINT = "copy the reference from the input's Kaggle URL or from kernel-metadata.json"


def _spec(*inputs: dict) -> dict:
    spec = copy.deepcopy(VALID)
    spec["inputs"] = list(inputs)
    return spec


@pytest.mark.parametrize(
    ("inputs", "message", "hint"),
    [
        pytest.param([{"kind": "modle", "ref": "a/b/pytorch/c/1"}],
                     "kernel.toml: inputs[0].kind: unknown input kind 'modle' (did you mean 'model'?); use dataset, model, notebook",
                     KIND_HINT, id="kind-typo"),
        pytest.param([{"kind": "kernel", "ref": "a/b"}],
                     "kernel.toml: inputs[0].kind: unknown input kind 'kernel' (did you mean 'notebook'?); use dataset, model, notebook",
                     KIND_HINT, id="kind-kernel"),
        pytest.param([{"kind": "competition", "ref": "a/b"}],
                     "kernel.toml: inputs[0].kind: unknown input kind 'competition'; use dataset, model, notebook; "
                     "the competition's data comes from [competition]", KIND_HINT, id="kind-competition"),
        pytest.param([{"kind": "dataset", "ref": "bob"}],
                     "kernel.toml: inputs[0].ref: 'bob' is not a dataset reference: write owner/slug or owner/slug/VERSION",
                     REF_HINT, id="dataset-no-slug"),
        pytest.param([{"kind": "dataset", "ref": "bob/x/latest"}],
                     "kernel.toml: inputs[0].ref: 'bob/x/latest' is not a dataset reference: write owner/slug or owner/slug/VERSION",
                     REF_HINT, id="dataset-version-word"),
        pytest.param([{"kind": "model", "ref": "google/gemma/pytorch/2b"}],
                     "kernel.toml: inputs[0].ref: model 'google/gemma/pytorch/2b' has no version: write "
                     "owner/model/framework/variation/VERSION (Kaggle attaches one model version)",
                     "add the version number, as on the model's page: owner/model/framework/variation/VERSION",
                     id="model-without-version"),
        pytest.param([{"kind": "model", "ref": "google/gemma/pytroch/2b/1"}],
                     "kernel.toml: inputs[0].ref: model 'google/gemma/pytroch/2b/1': unknown framework 'pytroch' "
                     f"(did you mean 'pytorch'?); {FORMS}",
                     "use the framework segment of the model's Kaggle path, e.g. pytorch or transformers", id="framework"),
        pytest.param([{"kind": "model", "ref": "google/gemma/2b"}],
                     "kernel.toml: inputs[0].ref: 'google/gemma/2b' is not a model reference: write "
                     "owner/model/framework/variation/VERSION", REF_HINT, id="model-short"),
        pytest.param([{"kind": "notebook", "ref": "bob/a b"}],
                     "kernel.toml: inputs[0].ref: 'bob/a b' is not a notebook reference: write owner/kernel-slug or "
                     "owner/kernel-slug/VERSION", REF_HINT, id="notebook-space"),
        pytest.param([{"kind": "dataset", "ref": "bob/x", "pth": "x"}], "kernel.toml: inputs[0].pth: unknown key",
                     "did you mean 'inputs[0].path'?", id="key-typo"),
        pytest.param([{"kind": "dataset", "ref": "bob/x"}, {"kind": "notebook", "ref": "carol/x"}],
                     "kernel.toml: [[inputs]] names must be unique; repeated: x",
                     "give each [[inputs]] its own name = ..., and attach each source once", id="same-name"),
    ],
)
def test_bad_inputs(inputs: list[dict], message: str, hint: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec(*inputs))
    assert (caught.value.message, caught.value.hint) == (message, hint)


def test_input_names_and_mount_paths() -> None:
    spec = parse_spec(_spec({"kind": "dataset", "ref": "bob/timm-src/3"},
                            {"kind": "model", "ref": "google/gemma/pytorch/2b/1", "name": "gemma"},
                            {"kind": "notebook", "ref": "carol/make-wheels"}))
    assert [(i.input_name, i.mount_target) for i in spec.inputs] == [
        ("timm-src", "datasets/bob/timm-src"), ("gemma", "models/google/gemma/pytorch/2b/1"),
        ("make-wheels", "notebooks/carol/make-wheels")]
    # The legacy layout drops the owner (and the models/... prefix), as Kaggle mounted them for years.
    assert [str(mount_path(i.mount_target, Layout.LEGACY)) for i in spec.inputs] == ["timm-src", "gemma/pytorch/2b/1", "make-wheels"]


INPUTS_TOML = """
[[inputs]]
kind = "dataset"
ref = "bob/tiny-lookup"
path = "standins/lookup"

[[inputs]]
kind = "model"
ref = "bob/tiny-net/pytorch/default/1"
name = "net"
path = "standins/net"

[[inputs]]
kind = "notebook"
ref = "bob/make-offsets"
path = "standins/offsets"
"""


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))
    (kernel / "kernel.toml").write_text((kernel / "kernel.toml").read_text() + INPUTS_TOML)
    for name, text in (("lookup", "lookup"), ("net", "net"), ("offsets", "offsets")):
        (kernel / "standins" / name).mkdir(parents=True)
        (kernel / "standins" / name / f"{name}.txt").write_text(text)
    return kernel


def test_build_attaches_each_input_in_its_sources(kernel: Path, tmp_path: Path) -> None:
    build = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    meta = json.loads((build.kernel_dir / "kernel-metadata.json").read_text())
    assert meta["dataset_sources"] == [build.code_dataset, build.weights_dataset, "bob/tiny-lookup"]
    assert meta["model_sources"] == ["bob/tiny-net/pytorch/default/1"]
    assert meta["kernel_sources"] == ["bob/make-offsets"]
    assert load_config(build.code_dir).inputs == (
        InputSection(name="tiny-lookup", kind="dataset", ref="bob/tiny-lookup", mount="datasets/bob/tiny-lookup"),
        InputSection(name="net", kind="model", ref="bob/tiny-net/pytorch/default/1", mount="models/bob/tiny-net/pytorch/default/1"),
        InputSection(name="make-offsets", kind="notebook", ref="bob/make-offsets", mount="notebooks/bob/make-offsets"),
    )


@pytest.mark.parametrize("layout", list(Layout))
def test_runtime_finds_each_input_by_name_and_by_reference(kernel: Path, tmp_path: Path, layout: Layout) -> None:
    build = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    config = load_config(build.code_dir)
    root = tmp_path / "kaggle"
    for item in config.inputs:  # mounted as the sandbox (and Kaggle) mounts them
        (root / "input" / mount_path(item.mount, layout)).mkdir(parents=True)
    for name, mount in (("tiny-lookup", "datasets/bob/tiny-lookup"), ("net", "models/bob/tiny-net/pytorch/default/1"),
                        ("bob/make-offsets", "notebooks/bob/make-offsets"),
                        ("bob/tiny-net/pytorch/default/1", "models/bob/tiny-net/pytorch/default/1")):
        assert find_input(name, root=root, config=config) == root / "input" / mount_path(mount, layout)
    with pytest.raises(InputNotFound, match=r"input 'nett': no \[\[inputs\]\] of that name \(known: tiny-lookup, net, make-offsets\)"):
        find_input("nett", root=root, config=config)


def test_runtime_names_what_is_mounted_when_an_input_is_missing(tmp_path: Path) -> None:
    (tmp_path / "input" / "datasets" / "bob" / "other").mkdir(parents=True)
    with pytest.raises(InputNotFound) as caught:
        find_input("bob/tiny-lookup", root=tmp_path, config=None)
    text = str(caught.value)
    assert text.startswith("input 'bob/tiny-lookup': not mounted. Tried:")
    assert str(tmp_path / "input" / "datasets" / "bob" / "tiny-lookup") in text and "    other/" in text


def test_dry_run_refuses_a_missing_stand_in_by_name(kernel: Path, tmp_path: Path) -> None:
    shutil.rmtree(kernel / "standins" / "net")
    with pytest.raises(DryRunError) as caught:
        dry_run(DryRunSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    assert caught.value.message == (f"{kernel / 'kernel.toml'}: inputs[1].path: the stand-in {kernel / 'standins' / 'net'} "
                                    "for model 'bob/tiny-net/pytorch/default/1' is not a folder")
    assert caught.value.hint == ("create it with a copy of the input (e.g. kaggle models instances versions download "
                                 "bob/tiny-net/pytorch/default/1 --untar), or fix inputs[1].path")
    assert not (tmp_path / "build" / "dryrun").exists()  # refused before any run


def test_dry_run_refuses_an_input_without_stand_in(kernel: Path, tmp_path: Path) -> None:
    text = (kernel / "kernel.toml").read_text().replace('path = "standins/lookup"\n', "")
    (kernel / "kernel.toml").write_text(text)
    with pytest.raises(DryRunError) as caught:
        dry_run(DryRunSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    assert caught.value.message == (f"{kernel / 'kernel.toml'}: inputs[0].path: dataset 'bob/tiny-lookup' has no local "
                                    "stand-in, so the dry run cannot mount it")
    assert caught.value.hint == ("set inputs[0].path to a folder holding a copy of it "
                                 "(e.g. from kaggle datasets download bob/tiny-lookup --unzip)")


@pytest.mark.parametrize("form", ["absolute", "home"])
def test_competition_data_outside_the_kernel_folder(kernel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    form: str) -> None:
    data = Path(shutil.copytree(kernel / "data" / "competition" / "public", tmp_path / "home" / "comp"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    where = str(data) if form == "absolute" else "~/comp"
    text = (kernel / "kernel.toml").read_text().replace('data = "data/competition/public"', f'data = "{where}"')
    (kernel / "kernel.toml").write_text(text)
    spec = parse_spec({**VALID, "competition": {"slug": "kkb-minimal", "data": where}})
    assert competition_data(DryRunSettings(kernel_dir=kernel), spec) == data
