"""The Optiver-shaped port: a torch card picks its columns from the shared feature table by pattern and applies the
notebook's per-feature preprocessors (a list of dicts feature → fitted transformer, in order), and a blend
``0.2 × gbdt + 0.4 × torch`` of two cards needs no ``[[steps]]``.

End to end on a copy of ``kernels/tabular-style`` (its generated assets; the scikit-learn card dropped, the two cards
weighted): ``kkb dry-run . --reference`` from inside the folder (a path with a space) equals the blend computed by hand
(``tests/support/tabular_style``: the notebook's loop), and ``--show-inputs`` prints what the net receives in rows
under 200 characters.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from builder.kkb_runtime.cards import torch as runtime_torch
from builder.kkb_runtime.cards.common.models import ModelLoadError
from tests.support.cards import kernel_card
from tests.support.cli import kkb, said
from tests.support.tabular_style import features_by_hand, lgbm_by_hand, net_by_hand, tabular_style_assets

NET = {"name": "net", "kind": "torch", "factory": "pkg.net:make", "checkpoint": "net.pt", "num_classes": 1,
       "activation": "none"}
TABLE = ["a", "nn_2", "b", "nn_1", "nn_10"]


def torch_card(**keys: object) -> runtime_torch.TorchCard:
    card = kernel_card({**NET, **keys})
    assert isinstance(card, runtime_torch.TorchCard)
    return card


@pytest.mark.parametrize(("columns", "resolved"), [
    (["nn_*"], ["nn_2", "nn_1", "nn_10"]),  # the table's order, never sorted
    (["nn_1", "nn_*"], ["nn_1", "nn_2", "nn_10"]),  # a name first, the glob takes the rest
    (["b", "nn_1?"], ["b", "nn_10"]),
    ([], TABLE),
])
def test_feature_columns_patterns_resolve_against_the_table_in_its_order(columns: list[str], resolved: list[str]) -> None:
    card = torch_card(feature_columns=columns)
    assert runtime_torch.resolve_columns(card, TABLE) == resolved


def test_a_pattern_that_matches_nothing_is_named() -> None:
    card = torch_card(feature_columns=["a", "mlp_*"])
    with pytest.raises(ModelLoadError, match=r"feature_columns names 1 column\(s\) the feature table lacks: mlp_\*"):
        runtime_torch.resolve_columns(card, TABLE)


def test_a_mapping_preprocessor_runs_per_column_in_order_as_the_notebooks_loop() -> None:
    from sklearn.preprocessing import MinMaxScaler, QuantileTransformer

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"nn_1": rng.normal(size=50), "nn_2": rng.exponential(size=50), "flag": rng.integers(0, 2, 50)})
    quantiles = {column: QuantileTransformer(n_quantiles=20).fit(frame[[column]]) for column in ("nn_2", "nn_1")}
    scalers = {column: MinMaxScaler().fit(frame[[column]].to_numpy()) for column in frame.columns}  # fitted on arrays
    by_hand = frame.copy()
    for mapping in (quantiles, scalers):
        for column, transformer in mapping.items():
            by_hand[column] = transformer.transform(by_hand[[column]] if hasattr(transformer, "feature_names_in_")
                                                    else by_hand[[column]].to_numpy())[:, 0]
    card = torch_card(preprocessor=["q.pkl", "s.pkl"], allow_joblib=True)
    inputs = runtime_torch.as_inputs(card, frame, [("q.pkl", quantiles), ("s.pkl", scalers)])
    np.testing.assert_array_equal(inputs, by_hand.to_numpy(dtype=np.float32))


@pytest.fixture(scope="module")
def tabular_style() -> Path:
    return tabular_style_assets()


def _blend_port(source: Path, root: Path) -> Path:
    kernel = Path(shutil.copytree(source, root, ignore=shutil.ignore_patterns(".kkb", "build")))
    spec = (kernel / "kernel.toml").read_text()
    logreg = spec[spec.index('[[models]]\nname = "logreg"'):spec.index('[[models]]\nname = "net"')]
    spec = spec.replace(logreg, "").replace('checkpoint = "weights/lgbm_fold*.txt"\n',
                                            'checkpoint = "weights/lgbm_fold*.txt"\nweight = 0.2\n')
    (kernel / "kernel.toml").write_text(spec.replace('activation = "softmax"\n', 'activation = "softmax"\nweight = 0.4\n'))
    return kernel


@pytest.mark.slow
@pytest.mark.loopback
def test_a_blend_of_two_cards_equals_the_notebooks_blend_line(tabular_style: Path, tmp_path: Path) -> None:
    kernel = _blend_port(tabular_style, tmp_path / "my port")
    hidden = kernel / "data" / "competition" / "hidden"
    table = pd.read_csv(hidden / "test.csv")
    features = features_by_hand(kernel, table)
    original = pd.DataFrame({"id": table["id"]})
    original[["low", "mid", "high"]] = 0.2 * lgbm_by_hand(kernel, features) + 0.4 * net_by_hand(kernel, features)
    original.to_csv(kernel / "original.csv", index=False)
    run = kkb("dry-run", ".", "--scenario", "rerun", "--data", "data/competition/hidden", "--reference", "original.csv",
              "--show-inputs", "2", cwd=kernel, env={"KAGGLE_USERNAME": "tester"})
    assert run.returncode == 0, said(run)
    assert "reference (rerun): equal" in run.stdout, said(run)
    shown = run.stdout[run.stdout.index("inputs (what each card feeds its model)"):].splitlines()
    assert "  net (torch)" in shown and all(len(line) < 200 for line in shown), shown
    (received,) = [line for line in shown if "row 0: the net receives" in line]
    assert received == ("    row 0: the net receives 9 float32 values after weights/net_qt_map.pkl, "
                        "weights/net_scaler_map.pkl:")
    assert shown[shown.index(received) + 1].startswith("      x1_x2=")
    built = kkb("build", ".", cwd=kernel, env={"KAGGLE_USERNAME": "tester"})
    assert "blend: submission = 0.2 × lgbm + 0.4 × net (combine = weighted_sum, from the cards' weights)" in built.stdout
    assert ("feature_columns 'x1_x2', 'x*', 'colour_*' resolve on the public test's feature table to 9 column(s), in "
            "the net's order: x1_x2, x1, x2, x3, x4, x3_minus_x4, colour_red, colour_green, colour_blue") in built.stdout
