"""A corrupt model file is a clean build error naming it (exit 1), never a crash of kkb (LightGBM aborts: exit 134):
the build loads it in its sandboxed run, and the call that crashed names the file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.files import build_file_tree

lgb = pytest.importorskip("lightgbm")
np = pytest.importorskip("numpy")

SPEC = """
[kernel]
title = "kkb gbdt probe"
owner = "kkb-demo"
accelerator = "none"

[competition]
slug = "kkb-tables"
data = "data/competition/public"
test = "test.csv"

[code]
include = ["feat/**/*.py"]

[[models]]
name = "lgbm"
kind = "gbdt"
library = "lightgbm"
checkpoint = "weights/lgbm.txt"
feature_function = "feat.features:make"
num_classes = 1

[submission]
id_column = "id"
target_columns = ["target"]
"""


@pytest.fixture()
def kernel(tmp_path: Path) -> Path:
    root = build_file_tree(tmp_path / "k", {
        "kernel.toml": SPEC,
        "data/competition/public/test.csv": "id,x\na,1\nb,2\nc,3\n",
        "data/competition/public/sample_submission.csv": "id,target\na,0\nb,0\nc,0\n",
        "feat/__init__.py": "",
        "feat/features.py": 'def make(rows):\n    return rows[["x"]].astype(float).rename(columns={"x": "Column_0"})\n',
    })
    features = np.arange(40, dtype=float).reshape(-1, 1)
    booster = lgb.train({"verbose": -1, "min_data_in_leaf": 2}, lgb.Dataset(features, features[:, 0] * 2), 5)
    (root / "weights").mkdir()
    booster.save_model(str(root / "weights" / "lgbm.txt"))
    return root


def _build(kernel: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", "build", str(kernel), "--out", str(kernel.parent / "out")],
                          capture_output=True, text=True, errors="replace", timeout=300)


def test_a_truncated_lightgbm_file_fails_the_build_naming_it(kernel: Path) -> None:
    model = kernel / "weights" / "lgbm.txt"
    assert _build(kernel).returncode == 0
    model.write_bytes(model.read_bytes()[:3000])  # a copy cut short
    out = _build(kernel)
    assert out.returncode == 1, out.stderr[-2000:]
    first = out.stderr.splitlines()[0]
    assert first.startswith(f"error: [[models]] 'lgbm': {model} crashed the loader (SIGABRT): the file is corrupt or "
                            "truncated; its last words: "), out.stderr
    assert "hint: save the booster with lightgbm's own save_model" in out.stderr

