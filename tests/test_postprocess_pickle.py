"""``pickle_main`` on a ``[[postprocess]]`` function stage: a notebook's pickle (``__main__.OptimizedRounder``) loads."""

from __future__ import annotations

import pickle
import shutil
import sys
import types
from pathlib import Path

import pandas as pd
import pytest

from builder.build import BuildSettings, build_kernel
from builder.errors import BundleError, SpecError
from builder.kkb_runtime import postprocess
from tests.support.cards import kernel_stages
from tests.support.files import KERNELS

ROUNDER = '''
import pickle
from pathlib import Path

class OptimizedRounder:
    def __init__(self, cuts):
        self.cuts = cuts

    def predict(self, values):
        return [sum(value > cut for cut in self.cuts) for value in values]

def round_targets(frame):
    with open(Path(__file__).with_name("rounder.pkl"), "rb") as handle:
        rounder = pickle.load(handle)
    return frame.assign(target=rounder.predict(frame["target"]))
'''


def test_a_function_stage_loads_a_notebook_pickle_with_pickle_main(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "nbrounder.py").write_text(ROUNDER)
    monkeypatch.syspath_prepend(str(tmp_path))
    import nbrounder  # type: ignore[import-not-found]

    notebook_main = types.ModuleType("__main__")  # the notebook that pickled it defined the class in __main__
    notebook_main.OptimizedRounder = nbrounder.OptimizedRounder  # type: ignore[attr-defined]
    monkeypatch.setattr(nbrounder.OptimizedRounder, "__module__", "__main__")
    monkeypatch.setitem(sys.modules, "__main__", notebook_main)
    (tmp_path / "rounder.pkl").write_bytes(pickle.dumps(nbrounder.OptimizedRounder([0.3, 0.6])))
    kernel_main = types.ModuleType("__main__")  # the kernel's __main__ (kkb's notebook) defines no such class
    monkeypatch.setitem(sys.modules, "__main__", kernel_main)
    frame = pd.DataFrame({"id": ["a", "b", "c"], "target": [0.1, 0.5, 0.9]})
    stage = {"kind": "function", "function": "nbrounder:round_targets"}
    with pytest.raises(postprocess.PostprocessError, match="raised AttributeError: Can't get attribute 'OptimizedRounder'"):
        postprocess.apply(frame, kernel_stages(stage), "id", ["target"])
    out = postprocess.apply(frame, kernel_stages({**stage, "pickle_main": "nbrounder"}), "id", ["target"])
    assert out["target"].tolist() == [0, 1, 2]
    assert sys.modules["__main__"] is kernel_main  # restored after the stage


@pytest.fixture
def minimal(tmp_path: Path) -> Path:
    return Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))


def _stage(kernel: Path, extra: str) -> None:
    spec = kernel / "kernel.toml"
    text = (KERNELS / "minimal" / "kernel.toml").read_text()
    spec.write_text(text.replace('id_column = "id"\n', 'id_column = "id"\ncolumn_types = { target = "float" }\n')
                    + f'\n[[postprocess]]\nkind = "function"\nfunction = "minimal.model:LinearModel"\n{extra}\n')


def test_the_build_checks_pickle_main_names_a_module_of_the_code(minimal: Path) -> None:
    _stage(minimal, 'pickle_main = "minimal.model"')
    build_kernel(BuildSettings(kernel_dir=minimal, out_dir=minimal.parent / "build"))
    _stage(minimal, 'pickle_main = "minimal.rounder"')
    with pytest.raises(BundleError, match=r"postprocess\[0\]: pickle_main = 'minimal.rounder': the code dataset has no "
                                          r"module 'minimal.rounder'"):
        build_kernel(BuildSettings(kernel_dir=minimal, out_dir=minimal.parent / "build"))


def test_pickle_main_is_a_function_stage_key_only(minimal: Path) -> None:
    spec = minimal / "kernel.toml"
    spec.write_text(spec.read_text() + '\n[[postprocess]]\nkind = "clip"\nmin = 0.0\npickle_main = "minimal.model"\n')
    with pytest.raises(SpecError, match="kind = 'clip' takes columns, max, min, not pickle_main"):
        build_kernel(BuildSettings(kernel_dir=minimal, out_dir=minimal.parent / "build"))
