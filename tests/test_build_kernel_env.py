"""The build runs the user's code exactly where the kernel runs it: the dry run's sandbox, Kaggle's paths (the current
layout, the legacy one when the dry run asks), /kaggle/working, the kernel's environment, every core; bounded in
time, its failures shown as the user's own (file, line, code), and kkb's own process left as it was."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from builder.build import BuildSettings, build_kernel
from builder.errors import BundleError
from builder.kkb_runtime.vocabulary import Isolation
from builder.run.isolation import probe
from tests.support.cli import kkb, said
from tests.support.files import build_file_tree

joblib = pytest.importorskip("joblib")
linear_model = pytest.importorskip("sklearn.linear_model")

SLUG = "kkb-feature-env"
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
import time
from pathlib import Path

import pandas as pd
from joblib import Parallel, delayed


def _part(side):
    return side


def _side(path):
    side = pd.read_csv(path)
    # every core, in worker processes that import this module again (Optiver's features do this)
    parts = Parallel(n_jobs=-1)(delayed(_part)(part) for part in (side.iloc[:1], side.iloc[1:]))
    return pd.concat(parts)


def from_variable(table):
    side = _side(Path(os.environ["KKB_COMPETITION_DIR"]) / "side_test.csv")
    return table[["id"]].merge(side, on="id", how="left")[["x"]]


def from_current_layout(table):
    side = _side("../input/competitions/kkb-feature-env/side_test.csv")
    return table[["id"]].merge(side, on="id", how="left")[["x"]]


def from_legacy_layout(table):
    side = _side("../input/kkb-feature-env/side_test.csv")
    return table[["id"]].merge(side, on="id", how="left")[["x"]]


def as_the_kernel(table):
    root = Path(os.environ["KKB_KAGGLE_ROOT"])
    assert os.path.samefile(os.getcwd(), root / "working"), os.getcwd()
    assert os.environ["KAGGLE_KERNEL_RUN_TYPE"] == "Batch"
    assert "KAGGLE_KEY" not in os.environ and "KAGGLE_USERNAME" not in os.environ
    assert Path(os.environ["KKB_CODE_DIR"], "feats", "make.py").is_file()
    assert not Path(os.environ["KKB_CODE_DIR"], "notes.txt").exists()  # not in [code] include: not in the code dataset
    return from_variable(table)


def plants(table):
    planted = Path(os.environ["KKB_KAGGLE_ROOT"], ".sandbox", "prepared", "weights", "planted.bin")
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.write_bytes(b"not a weight")
    return from_variable(table)


def broken(table):
    frame = table.copy()
    frame["x"] = pd.Series([1.0], index=[99])
    return frame.loc[:, ["x"]].astype(float).iloc[:, 5]


def forever(table):
    time.sleep(3600)
'''


def _kernel(root: Path, function: str) -> Path:
    build_file_tree(root, {
        "kernel.toml": KERNEL.format(function=function),
        "notes.txt": "not code",
        "feats/__init__.py": "",
        "feats/make.py": FEATURES,
        "data/sample_submission.csv": "id,target\na,0\nb,0\n",
        "data/test.csv": "id\na\nb\n",
        "data/side_test.csv": "id,x\na,1.0\nb,2.0\n",
    })
    (root / "weights").mkdir()
    joblib.dump(linear_model.LinearRegression().fit(pd.DataFrame({"x": [0.0, 1.0]}), [0.0, 1.0]), root / "weights" / "lin.joblib")
    return root


@pytest.mark.parametrize(("function", "isolation"), [  # the current layout's path: test_the_build_and_the_dry_run_agree
    ("as_the_kernel", "bwrap"), ("as_the_kernel", "namespace"), ("as_the_kernel", "python"),
])
def test_a_feature_function_reading_the_kernels_places_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              function: str, isolation: str) -> None:
    if isolation in ("bwrap", "namespace") and probe(Isolation(isolation)) is not None:
        pytest.skip(f"no {isolation} sandbox here: {probe(Isolation(isolation))}")
    monkeypatch.setenv("KKB_SANDBOX_ISOLATION", isolation)
    monkeypatch.setenv("KAGGLE_USERNAME", "someone")
    monkeypatch.setenv("KAGGLE_KEY", "0123456789abcdef")  # kkb's own credentials: never the kernel's
    before = (Path.cwd(), dict(os.environ))
    build_kernel(BuildSettings(kernel_dir=_kernel(tmp_path / "k", function), out_dir=tmp_path / "out"))
    assert (Path.cwd(), dict(os.environ)) == before  # the build's process is as it was


def test_a_feature_function_that_raises_shows_its_file_and_line(tmp_path: Path) -> None:
    kernel = _kernel(tmp_path / "k", "broken")
    with pytest.raises(BundleError) as caught:
        build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "out"))
    line = FEATURES.splitlines().index("    return frame.loc[:, [\"x\"]].astype(float).iloc[:, 5]") + 1
    assert caught.value.message.startswith(f"{kernel / 'kernel.toml'}: models.lin: on the public test: IndexError: ")
    assert caught.value.message.endswith(
        f'\nin your code (most recent call last):\n  File "feats/make.py", line {line}, in broken\n'
        '    return frame.loc[:, ["x"]].astype(float).iloc[:, 5]')
    assert caught.value.hint is not None and "the check ran where the kernel runs, in the dry run's sandbox" in caught.value.hint


def test_what_the_users_code_leaves_beside_the_prepared_weights_is_never_uploaded(tmp_path: Path) -> None:
    built = build_kernel(BuildSettings(kernel_dir=_kernel(tmp_path / "k", "plants"), out_dir=tmp_path / "out"))
    assert not (built.weights_dir / "weights" / "planted.bin").exists()
    assert ("the build's run of your code left 1 file(s) beside the weights it prepared (weights/planted.bin): not taken, "
            "never uploaded") in built.model_notes


def test_a_function_that_never_returns_fails_the_build_naming_it(tmp_path: Path) -> None:
    kernel = _kernel(tmp_path / "k", "forever")
    with pytest.raises(BundleError) as caught:
        build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "out", call_seconds=2))
    assert caught.value.message == (f"{kernel / 'kernel.toml'}: models.lin: feats.make:forever did not return within 2 s "
                                    "(on the public test)")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.loopback
@pytest.mark.parametrize(("function", "legacy"), [("from_current_layout", False), ("from_legacy_layout", True)])
def test_the_build_and_the_dry_run_agree_on_the_layout(tmp_path: Path, function: str, legacy: bool) -> None:
    """All cores and ../input/competitions/<slug>: built and rehearsed from the kernel folder. The legacy
    ../input/<slug>: the build fails as Kaggle's current layout fails, and both pass in the legacy layout."""
    kernel = _kernel(tmp_path / "my kernel", function)
    built = kkb("build", ".", cwd=kernel)
    assert built.returncode == (1 if legacy else 0), said(built)
    if legacy:
        assert built.stderr.startswith(f"error: {kernel / 'kernel.toml'}: models.lin: on the public test: FileNotFoundError: "
                                       f"[Errno 2] No such file or directory: '../input/{SLUG}/side_test.csv'"), said(built)
        assert f"the legacy ../input/{SLUG} is rehearsed by kkb dry-run --legacy-layout" in built.stderr
    rehearsed = kkb("dry-run", ".", "--scenario", "rerun", *(["--legacy-layout"] if legacy else []), cwd=kernel)
    assert rehearsed.returncode == 0, said(rehearsed)
