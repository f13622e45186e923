"""The build's model checks run the user's feature function as the kernel runs it (kkb's variables, Kaggle's
input paths, the working directory), and a failure shows the user's own file and line."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from builder.build import BuildSettings, build_kernel
from builder.errors import BundleError
from tests.support.files import build_file_tree

joblib = pytest.importorskip("joblib")
linear_model = pytest.importorskip("sklearn.linear_model")

KERNEL = """
[kernel]
title = "kkb feature env"
owner = "kkb-tests"
accelerator = "none"

[competition]
slug = "kkb-feature-env"
data = "data"
test = "test.csv"

[code]
include = ["feats/*.py"]

[[models]]
name = "lin"
kind = "sklearn"
checkpoint = "weights/lin.joblib"
allow_joblib = true
feature_function = "feats.make:{function}"
num_classes = 1
method = "predict"
"""

FEATURES = '''"""Reads the per-id side table the way a Kaggle notebook does."""
import os
from pathlib import Path

import pandas as pd


def from_variable(table):
    side = pd.read_csv(Path(os.environ["KKB_COMPETITION_DIR"]) / "side_test.csv")
    return table[["id"]].merge(side, on="id", how="left")[["x"]]


def from_relative_path(table):
    side = pd.read_csv("../input/kkb-feature-env/side_test.csv")
    return table[["id"]].merge(side, on="id", how="left")[["x"]]


def broken(table):
    frame = table.copy()
    frame["x"] = pd.Series([1.0], index=[99])
    return frame.loc[:, ["x"]].astype(float).iloc[:, 5]
'''


def _kernel(root: Path, function: str) -> Path:
    build_file_tree(root, {
        "kernel.toml": KERNEL.format(function=function),
        "feats/__init__.py": "",
        "feats/make.py": FEATURES,
        "data/sample_submission.csv": "id,target\na,0\nb,0\n",
        "data/test.csv": "id\na\nb\n",
        "data/side_test.csv": "id,x\na,1.0\nb,2.0\n",
    })
    (root / "weights").mkdir()
    joblib.dump(linear_model.LinearRegression().fit(pd.DataFrame({"x": [0.0, 1.0]}), [0.0, 1.0]), root / "weights" / "lin.joblib")
    return root


@pytest.mark.parametrize("function", ["from_variable", "from_relative_path"])
def test_a_feature_function_reading_the_kernels_paths_builds(tmp_path: Path, function: str) -> None:
    before = (Path.cwd(), os.environ.get("KKB_COMPETITION_DIR"))
    build_kernel(BuildSettings(kernel_dir=_kernel(tmp_path / "k", function), out_dir=tmp_path / "out"))
    assert (Path.cwd(), os.environ.get("KKB_COMPETITION_DIR")) == before  # the build's process is as it was


def test_a_feature_function_that_raises_shows_its_file_and_line(tmp_path: Path) -> None:
    kernel = _kernel(tmp_path / "k", "broken")
    with pytest.raises(BundleError) as caught:
        build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "out"))
    line = FEATURES.splitlines().index("    return frame.loc[:, [\"x\"]].astype(float).iloc[:, 5]") + 1
    assert caught.value.message.startswith(f"{kernel / 'kernel.toml'}: models.lin: on the public test: IndexError: ")
    assert caught.value.message.endswith(
        f'\nin your code (most recent call last):\n  File "feats/make.py", line {line}, in broken\n'
        '    return frame.loc[:, ["x"]].astype(float).iloc[:, 5]')
    assert caught.value.hint is not None and (f"the check ran as the kernel runs: KKB_COMPETITION_DIR={(kernel / 'data').resolve()}"
                                              in caught.value.hint)
