"""Torch cards over a feature table: the spec's keys, the build (folds, preprocessors, widths), the kernel's inputs,
and feature tables shared by the cards of one run (computed once, read by the others, reported)."""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from builder.errors import BundleError, ModelError, SpecError
from builder.kkb_runtime import features
from builder.kkb_runtime.cards.common import models as runtime_models
from builder.kkb_runtime.typed import write
from builder.kkb_runtime.vocabulary import Scenario
from builder.project.cards import ImageCard, TorchCard
from builder.project.spec import KernelSpec, parse_spec
from tests.support.cards import kernel_card

TORCH = {"name": "net", "kind": "torch", "factory": "tnet.model:make", "checkpoint": "weights/net.pt", "num_classes": 2,
         "feature_function": "tnet.model:feats"}


def torch_card(**keys: Any) -> Any:
    """The kernel's card of a torch card (``TORCH`` with ``keys``)."""
    return kernel_card({**TORCH, **keys})


def spec(*cards: dict[str, Any], **extra: Any) -> KernelSpec:
    return parse_spec({"kernel": {"title": "torch card tests"}, "competition": {"slug": "kkb-torch"},
                       "models": list(cards), **extra})


def only_torch(loaded: KernelSpec) -> TorchCard:
    """The spec's one card, a torch card."""
    (card,) = loaded.models
    assert isinstance(card, TorchCard)
    return card


@pytest.mark.parametrize(("card", "message"), [
    pytest.param({**TORCH, "factory": None}, "'net': a torch card needs factory ('package.module:function' returning "
                 "the nn.Module that takes a (rows, features) float32 tensor)", id="no-factory"),
    pytest.param({**TORCH, "arch": "resnet18"}, 'models[0].arch: `arch` is a key of image cards; this card is '
                 '`kind = "torch"`', id="arch"),
    pytest.param({**TORCH, "library": "lightgbm"}, 'models[0].library: `library` is a key of gbdt cards; this card is '
                 '`kind = "torch"`', id="library"),
    pytest.param({**TORCH, "preprocessor": "weights/scaler.joblib"}, "'net': preprocessor is a pickle (joblib), which "
                 "runs code when loaded: set allow_joblib = true if you trust the file", id="pickle-opt-in"),
    pytest.param({**TORCH, "num_classes": 1}, "'net': activation = 'softmax' over one output is always 1", id="softmax-1"),
    pytest.param({**TORCH, "feature_columns": ["a", "b", "a"]}, "feature_columns names a more than once", id="repeated"),
    pytest.param({**TORCH, "preprocessor": "../scaler.joblib", "allow_joblib": True},
                 "'../scaler.joblib' must be a relative path inside the kernel folder", id="outside"),
    pytest.param({"name": "g", "kind": "gbdt", "library": "lightgbm", "checkpoint": "w/g.txt", "num_classes": 1,
                  "feature_columns": ["a"]}, 'models[0].feature_columns: `feature_columns` is a key of torch cards; '
                 'this card is `kind = "gbdt"`', id="other-kind"),
])
def test_a_torch_card_is_checked(card: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec({key: value for key, value in card.items() if value is not None})
    assert message in caught.value.message


def test_a_torch_card_has_its_own_defaults_where_unset() -> None:
    card = only_torch(spec(TORCH))
    assert (card.amp, card.batch_size) == (False, 1024)
    card = only_torch(spec({**TORCH, "amp": True}, model_defaults={"batch_size": 32}))
    assert (card.amp, card.batch_size) == (True, 32)  # [model_defaults] is the user's
    image = spec({"name": "i", "arch": "resnet18", "checkpoint": "w/i.pth", "num_classes": 2}).models[0]
    assert isinstance(image, ImageCard)
    assert (image.amp, image.batch_size) == (True, 32)


# --- the kernel's inputs ------------------------------------------------------------------------

def test_feature_columns_select_and_order_and_a_missing_one_is_named() -> None:
    from builder.kkb_runtime.cards import torch as runtime_torch

    frame = pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0], "c": [5, 6]})
    assert list(runtime_torch.select_columns(torch_card(feature_columns=["c", "a"]), frame).columns) == ["c", "a"]
    assert list(runtime_torch.select_columns(torch_card(), frame).columns) == ["a", "b", "c"]
    with pytest.raises(runtime_models.ModelLoadError, match=r"model 'net': feature_columns names 1 column\(s\) the "
                                                            r"feature table lacks: d \(it has: a, b, c\)"):
        runtime_torch.select_columns(torch_card(feature_columns=["a", "d"]), frame)
    with pytest.raises(runtime_models.ModelLoadError, match=r"lacks: x1x2 \(did you mean x1_x2\?\)"):
        runtime_torch.select_columns(torch_card(feature_columns=["x1x2"]), frame.assign(x1_x2=1.0))


def test_inputs_are_float32_and_text_columns_are_refused() -> None:
    from builder.kkb_runtime.cards import torch as runtime_torch

    frame = pd.DataFrame({"a": [1, 2], "flag": [True, False]})
    values = runtime_torch.as_inputs(torch_card(), frame)
    assert values.dtype == np.float32 and values.tolist() == [[1.0, 1.0], [2.0, 0.0]]
    with pytest.raises(runtime_models.ModelLoadError, match="feature column\\(s\\) colour are not numeric"):
        runtime_torch.as_inputs(torch_card(), frame.assign(colour=["red", "blue"]))


def test_a_preprocessor_fitted_on_a_frame_gets_the_frame() -> None:
    from sklearn.preprocessing import StandardScaler

    from builder.kkb_runtime.cards import torch as runtime_torch

    frame = pd.DataFrame({"a": [1.0, 3.0], "b": [0.0, 4.0]})
    scaler = StandardScaler().fit(frame)
    assert runtime_torch.as_inputs(torch_card(), frame, [("s.joblib", scaler)]).tolist() == [[-1.0, -1.0], [1.0, 1.0]]
    with pytest.raises(runtime_models.ModelLoadError, match="the preprocessor s.joblib fails on the 1 feature"):
        runtime_torch.as_inputs(torch_card(), frame[["b"]], [("s.joblib", scaler)])


def test_the_net_output_width_must_be_num_classes() -> None:
    torch = pytest.importorskip("torch")
    from builder.kkb_runtime.cards import torch as runtime_torch
    from builder.kkb_runtime.cards.common.device import DeviceChoice

    net = torch.nn.Linear(3, 2).eval()
    card = torch_card(activation="softmax", batch_size=2, num_classes=2)
    values = runtime_torch.predict_array(card, net, np.zeros((5, 3), dtype=np.float32), DeviceChoice("cpu", "test"), "cpu")
    assert values.shape == (5, 2) and np.allclose(values.sum(1), 1.0)
    with pytest.raises(runtime_models.ModelLoadError, match="the net outputs 2 value\\(s\\) per row, num_classes = 3"):
        runtime_torch.predict_array(torch_card(num_classes=3), net, np.zeros((1, 3), dtype=np.float32),
                                    DeviceChoice("cpu", "test"), "cpu")


# --- shared feature tables ------------------------------------------------------------------------

def test_a_feature_table_is_computed_once_and_read_by_the_next_card(tmp_path: Path) -> None:
    calls: list[int] = []

    def compute() -> pd.DataFrame:
        calls.append(1)
        return pd.DataFrame({"x": pd.Categorical(["a", "b"]), "y": [1.5, 2.5]})

    environ = {features.CACHE_VARIABLE: str(tmp_path)}
    first, made = features.shared_features("pkg.f:make", ["1", "2"], {"step": "lgbm", "card": "lgbm"}, compute, environ)
    second, read = features.shared_features("pkg.f:make", ["1", "2"], {"step": "net", "card": "net"}, compute, environ)
    assert len(calls) == 1 and made["computed"] and not read["computed"] and read["computed_by"] == "lgbm"
    pd.testing.assert_frame_equal(first, second)  # dtypes too: a categorical stays one
    features.shared_features("pkg.f:make", ["1"], {"step": "fast", "card": "net"}, compute, environ)
    assert len(calls) == 2  # other rows (the fast commit's first rows): computed again
    features.shared_features("pkg.f:make", ["1", "2"], {"step": "solo", "card": "net"}, compute, {})
    assert len(calls) == 3  # no cache folder (a step run by hand): its own table

    steps: list[dict[str, Any]] = [{"name": "lgbm", "features": made}, {"name": "net", "features": read}, {"name": "user"}]
    assert [entry["line"] for entry in features.sharing(steps)] == [
        "features pkg.f:make: computed once (lgbm, " + f"{made['seconds']:.2f} s), shared with net"]


def test_the_cache_folder_lives_in_temp_for_the_steps_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(features.CACHE_VARIABLE, raising=False)
    with features.feature_cache(tmp_path) as folder:
        assert folder.parent == tmp_path / "temp" and os.environ[features.CACHE_VARIABLE] == str(folder)
        (folder / "x.pkl").write_text("x")
    assert not folder.exists() and features.CACHE_VARIABLE not in os.environ


# --- the build --------------------------------------------------------------------------------------

NET_CODE = '''
import pandas as pd
from torch import nn


def make(n_features=3, num_classes=2):
    return nn.Sequential(nn.Linear(n_features, 4), nn.ReLU(), nn.Linear(4, num_classes))


def feats(table):
    return pd.DataFrame({"a": table["x"] * 1.0, "b": table["x"] * 2.0, "c": table["y"] * 1.0})
'''


def write_kernel(root: Path, folds: int = 3, scalers: int = 1) -> Path:
    torch = pytest.importorskip("torch")
    joblib = pytest.importorskip("joblib")
    from sklearn.preprocessing import StandardScaler

    (root / "tnet").mkdir(parents=True)
    (root / "tnet" / "__init__.py").write_text("")
    (root / "tnet" / "model.py").write_text(NET_CODE)
    (root / "weights").mkdir()
    torch.manual_seed(0)
    layers = [torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)) for _ in range(folds)]
    torch.save({fold: net.state_dict() for fold, net in enumerate(layers)}, root / "weights" / "net.pt")
    frame = pd.DataFrame({"c": [1.0, 2.0, 4.0], "a": [0.0, 1.0, 0.0], "b": [3.0, 1.0, 2.0]})
    for index in range(scalers):
        joblib.dump(StandardScaler().fit(frame), root / "weights" / f"scaler_{index}.joblib")
    return root


def test_prepare_splits_the_folds_and_pairs_one_preprocessor_per_fold(tmp_path: Path) -> None:
    from builder.bundle.cards import torch as bundle_torch

    kernel = write_kernel(tmp_path / "k", folds=2, scalers=2)
    card = only_torch(spec({**TORCH, "preprocessor": "weights/scaler_*.joblib", "allow_joblib": True,
                            "feature_columns": ["c", "a", "b"]}))
    stage = tmp_path / "stage"
    prepared = bundle_torch.prepare(card, kernel, stage, {})
    assert [(fold.source, fold.preprocessors) for fold in prepared.checkpoints] == [
        ("weights/net.pt#0", ("weights/scaler_0.joblib",)), ("weights/net.pt#1", ("weights/scaler_1.joblib",))]
    assert all((stage / fold.file).is_file() for fold in prepared.checkpoints)
    kernel_side = bundle_torch.to_kernel(card)
    assert (kernel_side.amp, kernel_side.batch_size) == (False, 1024)
    assert prepared.preprocessing == {  # the build's notes: what the kernel does before the net
        "features": "tnet.model:feats: feature_columns, in that order (3: c, a, b)",
        "net": "float32 batches of 1024 rows, activation softmax, no autocast (amp = false)",
        "preprocessor": "one per fold: weights/scaler_0.joblib, weights/scaler_1.joblib: StandardScaler on the selected "
                        "columns (joblib.load: allow_joblib = true)"}
    assert bundle_torch.extra_files(card, kernel) == ["weights/scaler_0.joblib", "weights/scaler_1.joblib"]
    json.dumps(write(prepared))  # what kkb_kernel.json holds


@pytest.mark.parametrize(("extra", "error", "message"), [
    pytest.param({"preprocessor": "weights/scaler_*.joblib", "allow_joblib": True}, BundleError,
                 "models.net.preprocessor: 'weights/scaler_*.joblib' matches 2 files (weights/scaler_0.joblib, "
                 "weights/scaler_1.joblib) for 3 folds",
                 id="pairing"),
    pytest.param({"feature_columns": ["a", "b"]}, ModelError,
                 "'net': the net fails on a (2, 2) float32 batch (one value per feature_columns entry)", id="width"),
    pytest.param({"model_kwargs": {"num_classes": 3}, "feature_columns": ["a", "b", "c"]}, ModelError,
                 "'net': the net outputs 3 value(s) per row, num_classes = 2", id="out-width"),
])
def test_prepare_refuses(tmp_path: Path, extra: dict[str, Any], error: type[Exception], message: str) -> None:
    from builder.bundle.cards import torch as bundle_torch

    kernel = write_kernel(tmp_path / "k", folds=3, scalers=2)
    card = only_torch(spec({**TORCH, **extra}))
    with pytest.raises(error) as caught:
        bundle_torch.prepare(card, kernel, tmp_path / "stage", {})
    assert message in str(caught.value)


def test_a_list_of_one_file_per_fold_is_not_taken_for_a_chain(tmp_path: Path) -> None:
    """A list is a chain; files differing only by a number, as many as the folds, are asked about, not chained."""
    from builder.bundle.cards import torch as bundle_torch

    kernel = write_kernel(tmp_path / "k", folds=2, scalers=2)
    card = only_torch(spec({**TORCH, "preprocessor": ["weights/scaler_0.joblib", "weights/scaler_1.joblib"],
                            "allow_joblib": True, "feature_columns": ["c", "a", "b"]}))
    with pytest.raises(BundleError) as caught:
        bundle_torch.prepare(card, kernel, tmp_path / "stage", {})
    assert caught.value.message.endswith(
        "models.net.preprocessor: ['weights/scaler_0.joblib', 'weights/scaler_1.joblib'] lists 2 files that differ only "
        "by a number, one per fold (2 folds), but a list is a chain: each file would be applied after the one before, "
        "on every fold")
    assert caught.value.hint is not None and 'preprocessor = "weights/scaler_*.joblib"' in caught.value.hint


def test_the_public_test_is_checked_as_the_kernel_computes_it(tmp_path: Path) -> None:
    from builder.bundle.cards import torch as bundle_torch

    kernel = write_kernel(tmp_path / "k", folds=2, scalers=2)  # one {fold: state_dict} file, a scaler per fold
    data = tmp_path / "data"
    data.mkdir()
    pd.DataFrame({"id": [1, 2], "x": [0.5, 1.5], "y": [2.0, 3.0]}).to_csv(data / "test.csv", index=False)
    sample = pd.DataFrame({"id": ["1", "2"], "p0": [0.5, 0.5], "p1": [0.5, 0.5]})
    loaded = spec({**TORCH, "feature_columns": ["c", "a", "z"], "preprocessor": "weights/scaler_0.joblib",
                   "allow_joblib": True}, steps=[{"name": "s", "run": "python s.py"}])
    with pytest.raises(BundleError, match=r"models.net: on the public test: model 'net': feature_columns names 1 "
                                          r"column\(s\) the feature table lacks: z \(it has: a, b, c\)"):
        bundle_torch.check_public_data(loaded, kernel, data, only_torch(loaded), ["p0", "p1"], sample)
    fine = spec({**TORCH, "feature_columns": ["c", "a", "b"], "preprocessor": "weights/scaler_*.joblib",
                 "allow_joblib": True}, steps=[{"name": "s", "run": "python s.py"}])
    bundle_torch.check_public_data(fine, kernel, data, only_torch(fine), ["p0", "p1"], sample)


def test_the_dry_runs_report_and_summary_say_which_steps_shared_a_feature_table(
        capsys: pytest.CaptureFixture[str]) -> None:
    from builder.cli import views
    from builder.rehearse.report import DryRunReport, ScenarioReport
    from builder.rehearse.verdict import Judgement

    made = {"function": "pkg.f:make", "computed": True, "computed_by": "lgbm", "card": "lgbm", "seconds": 1.25}
    read = {"function": "pkg.f:make", "computed": False, "computed_by": "lgbm", "card": "net", "seconds": 0.01}
    scenario = ScenarioReport(
        scenario=Scenario.RERUN, verdict=Judgement("OK", "the file matches the sample", None), wall_seconds=1.0,
        peak_rss_bytes=1, peak_gpu_bytes=None, timed_out=False, failed_cell=None, failing_step=None, ename=None,
        evalue=None, traceback_tail=None, stderr_tail=None, rows=5, hidden_rows=None,
        steps=[{"name": "lgbm", "seconds": 2.0, "features": made}, {"name": "net", "seconds": 1.0, "features": read}],
        projected_seconds=1.0, time_limit_seconds=32400, ram_limit_bytes=1, gpu_limit_bytes=None, fast_commit=None,
        blocked_network=[], notebook=Path("n.ipynb"), log=Path("n.log.json"), submission=None)
    (entry,) = scenario.to_json()["shared_features"]
    assert (entry["computed_by"], entry["read_by"], entry["cards"], entry["compute_seconds"]) == (
        ["lgbm"], ["net"], ["lgbm", "net"], 1.25)
    views._show_dry_run(DryRunReport("k", "o/k", "notebook", Path("b"), Path("b/report.json"), (scenario,)))
    assert "features pkg.f:make: computed once (lgbm, 1.25 s), shared with net" in capsys.readouterr().out


def test_the_kernel_runs_each_fold_with_its_scaler_and_equals_torch_itself(tmp_path: Path) -> None:
    """The built card through the kernel's runner (two steps sharing the feature table), against a direct run."""
    import joblib
    import torch

    from builder.bundle.cards import torch as bundle_torch
    from builder.bundle.kernel_config import Ids, kernel_config
    from builder.kkb_runtime.card import BuiltCard
    from builder.kkb_runtime.cards import torch as runtime_torch

    kernel = write_kernel(tmp_path / "k", folds=2, scalers=2)
    loaded = spec({**TORCH, "preprocessor": "weights/scaler_*.joblib", "allow_joblib": True,
                   "feature_columns": ["c", "a", "b"], "batch_size": 3})
    card = only_torch(loaded)
    weights = tmp_path / "weights"
    prepared = bundle_torch.prepare(card, kernel, weights, {})
    for name in bundle_torch.extra_files(card, kernel):
        (weights / name).write_bytes((kernel / name).read_bytes())
    data = tmp_path / "data"
    data.mkdir()
    table = pd.DataFrame({"id": [3, 1, 2, 4], "x": [0.5, 1.5, -1.0, 2.0], "y": [2.0, 3.0, 0.0, 1.0]})
    table.to_csv(data / "test.csv", index=False)
    pd.DataFrame({"id": [1, 2, 3, 4], "p0": 0.5, "p1": 0.5}).to_csv(data / "sample_submission.csv", index=False)
    kernel_side = bundle_torch.to_kernel(card)
    config = kernel_config(loaded, Ids("me/k", "me/k-code", "me/k-weights"), [BuiltCard(kernel_side, prepared, card.origins)])
    cache = tmp_path / "cache"
    cache.mkdir()
    environ = {"KKB_WEIGHTS_DIR": str(weights), "KKB_COMPETITION_DIR": str(data), "KKB_DEVICE": "cpu",
               "KKB_CODE_DIR": str(kernel), features.CACHE_VARIABLE: str(cache)}
    sys.path.insert(0, str(kernel))
    try:
        first = runtime_torch.run(kernel_side, prepared, tmp_path / "first.csv", {**environ, "KKB_STEP_NAME": "first"}, config)
        second = runtime_torch.run(kernel_side, prepared, tmp_path / "second.csv", {**environ, "KKB_STEP_NAME": "second"},
                                   config)
        user_model = importlib.import_module("tnet.model")  # the kernel's own code, written above
        feats, make = user_model.feats, user_model.make
    finally:
        sys.path.remove(str(kernel))
        for name in [name for name in sys.modules if name == "tnet" or name.startswith("tnet.")]:
            del sys.modules[name]
    meta = [json.loads(Path(f"{path}.meta.json").read_text())["features"] for path in (first, second)]
    assert [(record["computed"], record["computed_by"]) for record in meta] == [(True, "first"), (False, "first")]

    rows = table.set_index("id").loc[[1, 2, 3, 4]].reset_index()
    chosen = feats(rows)[["c", "a", "b"]]
    folds = torch.load(kernel / "weights" / "net.pt", weights_only=True)
    expected = []
    for fold, state in folds.items():
        net = make()
        net.load_state_dict(state)
        scaled = joblib.load(kernel / "weights" / f"scaler_{fold}.joblib").transform(chosen)
        with torch.no_grad():
            expected.append(torch.softmax(net.eval()(torch.tensor(scaled, dtype=torch.float32)), 1).numpy())
    direct = (expected[0] + expected[1]) / 2
    for path in (first, second):
        written = pd.read_csv(path, dtype={"id": str})
        assert list(written["id"]) == ["1", "2", "3", "4"]
        np.testing.assert_allclose(written[["p0", "p1"]].to_numpy(), direct, atol=1e-6)


def test_show_inputs_gives_the_feature_row_in_the_nets_order_and_what_the_net_receives(tmp_path: Path) -> None:
    """A torch kernel built end to end (BUILD_CARDS: prepare, its preprocessor shipped, the public test checked), then
    its view for ``--show-inputs``: the features in feature_columns' order and the first fold's scaled float32 row."""
    import joblib

    from builder.build import BuildSettings, build_kernel
    from builder.rehearse.card_inputs import card_inputs

    kernel = write_kernel(tmp_path / "k", folds=2, scalers=2)
    (kernel / "data").mkdir()
    test = pd.DataFrame({"id": [7, 5, 6], "x": [0.5, 1.5, -1.0], "y": [2.0, 3.0, 0.0]})
    test.to_csv(kernel / "data" / "test.csv", index=False)
    pd.DataFrame({"id": [5, 6, 7], "p0": 0.5, "p1": 0.5}).to_csv(kernel / "data" / "sample_submission.csv", index=False)
    (kernel / "kernel.toml").write_text(
        '[kernel]\ntitle = "kkb torch inputs"\nowner = "tester"\naccelerator = "none"\n\n'
        '[competition]\nslug = "kkb-torch"\ndata = "data"\ntest = "test.csv"\n\n'
        '[code]\ninclude = ["tnet/**/*.py"]\n\n[weights]\ninclude = []\n\n'
        '[[models]]\nname = "net"\nkind = "torch"\nfactory = "tnet.model:make"\nfeature_function = "tnet.model:feats"\n'
        'checkpoint = "weights/net.pt"\nnum_classes = 2\nfeature_columns = ["c", "a", "b"]\n'
        'preprocessor = "weights/scaler_*.joblib"\nallow_joblib = true\n')
    build = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    (entry,) = card_inputs(build, kernel / "data", 2)
    assert (entry["card"], entry["kind"], len(entry["rows"])) == ("net", "torch", 2), entry
    first = entry["rows"][0]  # id 5 (the sample's order): x = 1.5, y = 3.0
    assert [(f["name"], f["value"]) for f in first["features"]] == [("c", 3.0), ("a", 1.5), ("b", 3.0)]
    scaler = joblib.load(kernel / "weights" / "scaler_0.joblib")
    expected = scaler.transform(pd.DataFrame({"c": [3.0], "a": [1.5], "b": [3.0]}))[0]
    assert [value["name"] for value in first["net_input"]] == ["c", "a", "b"]
    np.testing.assert_allclose([value["value"] for value in first["net_input"]], expected, atol=1e-5)
    assert entry["lines"][1] == "  row 0: the net receives 3 float32 values after weights/scaler_0.joblib:"
    assert entry["lines"][2].startswith("    c=")
