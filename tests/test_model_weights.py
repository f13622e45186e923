"""``[weights] publish = "model"``: the weights as a Kaggle Model variation, pushed with the real client
to the local Kaggle (versions only when the content changed), attached through ``model_sources``."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.build import BuildSettings, build_kernel
from builder.errors import SpecError
from builder.kkb_runtime.config_reader import load_config
from builder.kkb_runtime.inputs import resolve_inputs
from builder.kkb_runtime.vocabulary import Scenario
from builder.local_kaggle import InstantRunner, LocalKaggle
from builder.project.spec import parse_spec
from builder.rehearse.dryrun import DryRunSettings, dry_run
from builder.remote.push import PushResult, push
from builder.remote.session import ProgressEvent, PushSettings, Waits
from tests.support.demo_kaggle import demo_adapter, serve_local_kaggle
from tests.support.files import KERNELS

pytestmark = pytest.mark.loopback  # a local Kaggle over loopback HTTP

USER, KEY = "kkb-demo", "local-test-key-0123456789"
MODEL = "kkb-demo/kkb-minimal-inference-weights/other/default"
FAST = Waits(poll_initial_s=0.05, poll_max_s=0.3, dataset_timeout_s=30, run_timeout_s=60, scoring_timeout_s=60)
PUBLISH = '[weights]\ninclude = ["weights/*.json"]\npublish = "model"\n'


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))
    text = (kernel / "kernel.toml").read_text().replace('[weights]\ninclude = ["weights/*.json"]\n', PUBLISH)
    (kernel / "kernel.toml").write_text(text)
    return kernel


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    # Versions become ready only after two status polls: the push must wait for them.
    yield from serve_local_kaggle(tmp_path, monkeypatch, InstantRunner(), ready_polls=2)


def _push(kernel: Path, server: LocalKaggle) -> PushResult:
    return push(PushSettings(kernel_dir=kernel, out_dir=kernel.parent / "build", adapter=demo_adapter(server), waits=FAST))


def _model_sources(kernel: Path) -> list[str]:
    return json.loads((kernel.parent / "build" / "kernel" / "kernel-metadata.json").read_text())["model_sources"]


def test_build_writes_model_metadata_instead_of_a_dataset(kernel: Path, tmp_path: Path) -> None:
    build = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    assert (build.weights_dataset, build.weights_model) == (None, MODEL)
    files = sorted(path.name for path in build.weights_dir.iterdir())
    assert files == ["manifest.json", "model-instance-metadata.json", "model-metadata.json", "weights"]
    instance = json.loads((build.weights_dir / "model-instance-metadata.json").read_text())
    assert (instance["modelSlug"], instance["framework"], instance["instanceSlug"]) == ("kkb-minimal-inference-weights", "other", "default")
    meta = json.loads((build.kernel_dir / "kernel-metadata.json").read_text())
    assert meta["dataset_sources"] == [build.code_dataset] and meta["model_sources"] == []  # push adds the version
    assert json.loads((build.weights_dir / "manifest.json").read_text())["dataset"] == MODEL


@pytest.mark.parametrize("layout", ["models/kkb-demo/kkb-minimal-inference-weights/other/default/3",
                                    "kkb-minimal-inference-weights/other/default/3"], ids=["current", "legacy"])
def test_runtime_finds_model_weights_in_either_layout(kernel: Path, tmp_path: Path, layout: str) -> None:
    build = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    root = tmp_path / "kaggle"
    shutil.copytree(build.weights_dir, root / "input" / layout)
    shutil.copytree(build.code_dir, root / "input" / "datasets" / build.code_dataset)
    shutil.copytree(kernel / "data" / "competition" / "public", root / "input" / "competitions" / "kkb-minimal")
    assert resolve_inputs(load_config(build.code_dir), root).weights == root / "input" / layout


def test_push_creates_versions_only_when_the_weights_change(kernel: Path, server: LocalKaggle) -> None:
    first = _push(kernel, server)
    assert first.weights is not None
    assert (first.weights.ref, first.weights.version, first.weights.action) == (MODEL, 1, "created")
    assert first.weights.uploaded_bytes > 0 and _model_sources(kernel) == [f"{MODEL}/1"]
    adapter = demo_adapter(server)
    assert adapter.model_file(MODEL, 1, "weights/linear.json") == (kernel / "weights" / "linear.json").read_bytes()

    again = _push(kernel, server)
    assert again.weights is not None
    assert again.uploaded_bytes == 0 and (again.weights.action, again.kernel_action) == ("unchanged", "unchanged")
    assert adapter.model_instance_version(MODEL) == 1 and adapter.kernel_version("kkb-demo/kkb-minimal-inference") == 1

    (kernel / "weights" / "ridge.json").write_text((kernel / "weights" / "ridge.json").read_text() + "\n")
    changed = _push(kernel, server)
    assert changed.weights is not None
    assert (changed.weights.version, changed.weights.action, changed.kernel_version) == (2, "versioned", 2)
    assert changed.code.action == "unchanged" and _model_sources(kernel) == [f"{MODEL}/2"]
    version = server.kernels.version("kkb-demo", "kkb-minimal-inference", 2, USER)
    assert [pinned["target"] for pinned in version.meta["mounts"]["models"]] == [f"models/{MODEL}/2"]


@pytest.mark.slow
def test_push_with_no_wait_options_publishes_the_model_once(kernel: Path, server: LocalKaggle) -> None:
    # No Waits given: the defaults (and kernel.toml's [push], which sets none here) bound every wait.
    settings = PushSettings(kernel_dir=kernel, out_dir=kernel.parent / "build", adapter=demo_adapter(server))
    first = push(settings)
    assert first.weights is not None
    assert (first.weights.ref, first.weights.version, first.weights.action) == (MODEL, 1, "created")
    assert first.uploaded_bytes > 0 and _model_sources(kernel) == [f"{MODEL}/1"]

    again = push(settings)
    assert again.weights is not None
    assert again.uploaded_bytes == 0 and (again.weights.version, again.weights.action) == (1, "unchanged")
    assert demo_adapter(server).model_instance_version(MODEL) == 1 and again.kernel_action == "unchanged"


@pytest.mark.slow
def test_a_failed_model_version_call_is_tried_again_after_a_look_at_kaggle(kernel: Path, server: LocalKaggle) -> None:
    _push(kernel, server)
    (kernel / "weights" / "ridge.json").write_text((kernel / "weights" / "ridge.json").read_text() + "\n")
    server.faults.fail_rpc("CreateModelInstanceVersion", status=500, times=1)  # not retried by the adapter: not idempotent
    events: list[ProgressEvent] = []
    changed = push(PushSettings(kernel_dir=kernel, out_dir=kernel.parent / "build", adapter=demo_adapter(server),
                                waits=FAST, progress=events.append))
    assert changed.weights is not None
    assert (changed.weights.version, changed.weights.action) == (2, "versioned")
    assert demo_adapter(server).model_instance_version(MODEL) == 2  # one new version, not two
    assert any(event.stage == "retry" and "versioning model" in event.message for event in events)


def test_dry_run_mounts_model_weights_where_kaggle_does(kernel: Path, tmp_path: Path) -> None:
    report = dry_run(DryRunSettings(kernel_dir=kernel, out_dir=tmp_path / "build", scenario=Scenario.RERUN))
    assert report.ok, report.to_json()


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"publish": "model", "framework": "pytroch"},
         "kernel.toml: weights.framework: unknown framework 'pytroch' (did you mean 'pytorch'?); Kaggle's are: "
         "tensorflow1, tensorflow2, tflite, tfjs, pytorch, jax, flax, pax, maxtext, gemmacpp, ggml, gguf, coral, "
         "scikitlearn, mxnet, onnx, keras, transformers, api, other, tensorrtllm, triton, vllm"),
        ({"model": "me/net"}, "kernel.toml: weights: model is set but publish = 'dataset': set publish = 'model' to "
                              "publish the weights as a Kaggle Model"),
        ({"publish": "model", "model": "me"}, "kernel.toml: weights.model: 'me' is not a model id: write "
                                              "'owner/model-slug', slug of 3-50 lowercase letters, digits and '-'"),
    ],
)
def test_bad_model_publishing(weights: dict, message: str) -> None:
    raw = {"kernel": {"title": "KKB Minimal Inference"}, "competition": {"slug": "kkb-minimal"},
           "steps": [{"name": "a", "run": "python predict.py --out {out}"}], "weights": weights}
    with pytest.raises(SpecError) as caught:
        parse_spec(raw)
    assert caught.value.message == message
