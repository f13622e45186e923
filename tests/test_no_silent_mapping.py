"""No silent mapping: classes matched to columns by exact label (a mismatch refused at build, naming both lists),
and every reorder or mapping kkb applies to a tabular model's input or output printed by the build."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from builder.build import BuildSettings, build_kernel
from builder.bundle.cards.tabular import class_notes, feature_notes
from builder.errors import BundleError
from builder.kkb_runtime.cards import tabular

joblib = pytest.importorskip("joblib")
pytest.importorskip("sklearn")

COLUMNS = ["low", "mid", "high"]
FEATURES = '''
def make(table):
    return table[{order!r}]
'''


def _kernel(root: Path, cards: str, features: list[str] = ["x1", "x2", "x3"]) -> Path:  # noqa: B006 - read only
    rng = np.random.default_rng(0)
    (root / "data").mkdir(parents=True)
    test = pd.DataFrame({"id": range(10, 16), **{f"x{k}": rng.normal(size=6).round(3) for k in (1, 2, 3)}})
    test.to_csv(root / "data" / "test.csv", index=False)
    (root / "data" / "sample_submission.csv").write_text("id," + ",".join(COLUMNS) + "\n"
                                                         + "".join(f"{i},0.3,0.3,0.4\n" for i in test["id"]))
    (root / "feats").mkdir()
    (root / "feats" / "__init__.py").write_text("")
    (root / "feats" / "make.py").write_text(FEATURES.format(order=features))
    (root / "kernel.toml").write_text(
        '[kernel]\ntitle = "kkb mapping test"\nowner = "tester"\naccelerator = "none"\n\n'
        '[competition]\nslug = "kkb-mapping"\ndata = "data"\ntest = "test.csv"\n\n'
        '[code]\ninclude = ["feats/**/*.py"]\n\n[weights]\ninclude = []\n\n' + cards)
    return root


def _classifier(path: Path, labels: list[str]) -> None:
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(1)
    x = pd.DataFrame(rng.normal(size=(60, 3)), columns=["x1", "x2", "x3"])
    y = np.array(labels)[rng.integers(0, 3, 60)]
    path.parent.mkdir(parents=True, exist_ok=True)
    joblib.dump(LogisticRegression().fit(x, y), path)


SKLEARN_CARD = ('[[models]]\nname = "logreg"\nkind = "sklearn"\ncheckpoint = "weights/logreg.joblib"\nallow_joblib = true\n'
                'feature_function = "feats.make:make"\nnum_classes = 3\n')


def test_classes_differing_from_the_columns_in_case_are_refused_at_build_naming_both_lists(tmp_path: Path) -> None:
    kernel = _kernel(tmp_path / "k", SKLEARN_CARD)
    _classifier(kernel / "weights" / "logreg.joblib", ["High", "Low", "Mid"])
    with pytest.raises(BundleError) as caught:
        build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    assert ("models.logreg: on the public test: model 'logreg': its classes (High, Low, Mid) are not the step's columns "
            "(low, mid, high): they differ in case ('Low' vs 'low', 'Mid' vs 'mid', 'High' vs 'high')") in caught.value.message


def test_classes_matched_by_label_are_printed_by_the_build(tmp_path: Path) -> None:
    kernel = _kernel(tmp_path / "k", SKLEARN_CARD)
    _classifier(kernel / "weights" / "logreg.joblib", ["high", "low", "mid"])
    result = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    assert ("models.logreg: predict_proba's classes (high, low, mid) matched by label to the columns (low, mid, high)"
            in result.model_notes)


@pytest.mark.parametrize(("classes", "message"), [
    pytest.param(["low", "mid", "top"], "classes without a column: top; columns without a class: high", id="one-differs"),
    pytest.param([1, 2, 3], "classes without a column: 1, 2, 3; columns without a class: high, low, mid", id="integers-from-1"),
])
def test_a_missing_or_extra_class_is_refused(classes: list[object], message: str) -> None:
    with pytest.raises(Exception, match="kkb matches classes to columns by exact label") as caught:
        tabular.class_order(classes, COLUMNS, "m")
    assert message in str(caught.value)


def test_integer_classes_and_binary_models_are_said() -> None:
    assert tabular.class_order([0, 1, 2], COLUMNS, "m") == [0, 1, 2]
    assert class_notes("m", [0, 1, 2], COLUMNS, 3) == [
        "models.m: integer classes 0..2 fill the columns in order: low = class 0, mid = class 1, high = class 2"]
    assert class_notes("m", ["no", "yes"], ["target"], 2) == [
        "models.m: a binary classifier: its positive class 'yes' (of predict_proba's two) is column target"]
    assert class_notes("m", COLUMNS, COLUMNS, 3) == []


def lgbm_kernel(root: Path, features: list[str]) -> Path:
    """A LightGBM card trained on x1, x2, x3 whose feature function returns ``features``."""
    lgb = pytest.importorskip("lightgbm")
    card = ('[[models]]\nname = "lgbm"\nkind = "gbdt"\nlibrary = "lightgbm"\ncheckpoint = "weights/lgbm.txt"\n'
            'feature_function = "feats.make:make"\nnum_classes = 3\n')
    kernel = _kernel(root, card, features=features)
    rng = np.random.default_rng(2)
    x = pd.DataFrame(rng.normal(size=(90, 3)), columns=["x1", "x2", "x3"])
    booster = lgb.train({"objective": "multiclass", "num_class": 3, "verbose": -1, "min_data_in_leaf": 5},
                        lgb.Dataset(x, rng.integers(0, 3, 90)), num_boost_round=3)
    (kernel / "weights").mkdir()
    booster.save_model(str(kernel / "weights" / "lgbm.txt"))
    return kernel


def test_a_feature_function_in_another_order_than_training_is_printed_by_the_build(tmp_path: Path) -> None:
    kernel = lgbm_kernel(tmp_path / "k", ["x3", "x1", "x2"])
    result = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    assert ("models.lgbm: features reordered to the model's training order (x1, x2, x3); the feature function returns "
            "them as x3, x1, x2 (3 column(s) moved)") in result.model_notes
    assert feature_notes("m", ["a", "b", "extra"], ["a", "b"]) == [
        "models.m: 1 feature column(s) the model was not trained on are left out: extra"]
