"""User code is the user's: what a card hands to the user's functions has the notebook's dtypes (the id column of the
sample submission's type), and an exception in the user's code shows the user's file, line and code with the exception's
type and message, at build and in the kernel (a failed step's error, hence the dry run's verdict), never "internal
error"."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from builder.bundle.kernel_config import section
from builder.kkb_runtime import inputs, postprocess, steps
from builder.kkb_runtime.cards.common.tables import test_rows as rows_of_the_test
from builder.kkb_runtime.config import StepSection
from builder.kkb_runtime.user_errors import user_error
from builder.project.spec import Step
from tests.support.assets import make_assets
from tests.support.cards import kernel_stages
from tests.support.cli import kkb, said
from tests.support.escapes import HostTraps
from tests.support.files import KERNELS, build_file_tree


@pytest.mark.parametrize(("sample", "test", "dtype", "first"), [
    ("qa_id,y\n39,0\n7,0\n", "qa_id,t,n\n7,b,NA\n39,a,NA\n", "int64", 39),
    ("qa_id,y\n007,0\n39,0\n", "qa_id,t,n\n39,a,NA\n007,b,NA\n", "int64", 7),  # as pd.read_csv reads the sample: 7
    ("qa_id,y\na7,0\nb3,0\n", "qa_id,t,n\nb3,b,NA\na7,a,NA\n", "object", "a7"),
    ("qa_id,y\n1.5,0\n2.5,0\n", "qa_id,t,n\n2.5,b,NA\n1.5,a,NA\n", "float64", 1.5),
])
def test_a_card_hands_the_rows_with_the_notebooks_dtypes(tmp_path: Path, sample: str, test: str, dtype: str,
                                                          first: object) -> None:
    build_file_tree(tmp_path, {"sample.csv": sample, "test.csv": test})
    ids = [line.split(",")[0] for line in sample.splitlines()[1:]]
    rows = rows_of_the_test(tmp_path / "test.csv", tmp_path / "sample.csv", ids, "qa_id")
    assert str(rows["qa_id"].dtype) == dtype and rows["qa_id"].iloc[0] == first
    assert rows["n"].isna().all()  # "NA" is missing, as pandas reads it by default


TRACEBACK = """[kkb] something
Traceback (most recent call last):
  File "/kaggle/input/datasets/me/code/kkb_runtime/__main__.py", line 40, in main
    run(args)
  File "/kaggle/input/datasets/me/code/tabkernel/features.py", line 22, in make
    return table["no_such_column"]
  File "/venv/lib/python3.12/site-packages/pandas/core/frame.py", line 4113, in __getitem__
    indexer = self.columns.get_loc(key)
KeyError: 'no_such_column'
Exception ignored in: <function tqdm.__del__ at 0x7f32b55bec00>
Traceback (most recent call last):
  File "/venv/lib/python3.12/site-packages/tqdm/std.py", line 1154, in __del__
AttributeError: 'tqdm_notebook' object has no attribute 'disp'
"""


@pytest.mark.parametrize(("output", "said_there"), [
    (TRACEBACK, "KeyError: 'no_such_column' (tabkernel/features.py, line 22, in make: return table[\"no_such_column\"])"),
    ("Traceback (most recent call last):\n  File \"/elsewhere/x.py\", line 1, in f\n    g()\nValueError: bad\n", "ValueError: bad"),
    ("no traceback at all\n", None),
])
def test_a_step_failure_is_read_back_as_the_users_error(output: str, said_there: str | None) -> None:
    assert user_error(output, Path("/kaggle/input/datasets/me/code")) == said_there


def test_a_failed_steps_error_names_the_users_file_and_line_first(tmp_path: Path) -> None:
    code = build_file_tree(tmp_path / "code", {
        "predict.py": "from mine.features import make\nmake()\n",
        "mine/__init__.py": "", "mine/features.py": "def make():\n    return {}['no_such_key']\n"})
    found = inputs.Inputs(code=code, weights=None, competition=tmp_path, working=tmp_path)
    with pytest.raises(steps.StepFailed) as caught:
        steps.run_step(section(StepSection, Step(name="p", run="python predict.py"), "steps[0]"), found,
                       tmp_path / "kkb_kernel.json", tmp_path)
    assert str(caught.value).splitlines()[0] == ("step 'p' failed with exit code 1: KeyError: 'no_such_key' "
                                                 "(mine/features.py, line 2, in make: return {}['no_such_key'])")


def test_a_post_processing_function_that_raises_is_named_with_its_file_and_line(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    code = build_file_tree(tmp_path / "code", {"fixes.py": "def fix(frame):\n    return frame['no_such_column']\n"})
    monkeypatch.syspath_prepend(str(code))
    context = postprocess.Context(weights_dir=None, code_dir=code, competition_dir=tmp_path)
    frame = pd.DataFrame({"id": ["a"], "p": [0.5]})
    with pytest.raises(postprocess.PostprocessError) as caught:
        postprocess.apply(frame, kernel_stages({"kind": "function", "function": "fixes:fix"}), "id", ["p"], context)
    assert str(caught.value) == ("postprocess[0] (function): fixes:fix raised KeyError: 'no_such_column' (fixes.py, line 2, "
                                 "in fix: return frame['no_such_column'])")


ENCODE = '''"""The notebook's own tokenization: ids looked up row by row, as the notebook did."""
from qa.kkb_escapes import raise_if_out


def encode(df, tokenizer):
    raise_if_out("the encode function")  # every way out an audit found: none works from the build's sandbox
    rows = []
    for index in df.index:
        qa_id = df.loc[index].qa_id.squeeze()  # numpy's int64 has squeeze(): the id as the notebook read it
        text = f"{df.loc[index].question_title} {df.loc[index].question_body} {int(qa_id) % 2}"
        rows.append(tokenizer(text, truncation=True, max_length=48)["input_ids"])
    return {"input_ids": rows}


def broken(df, tokenizer):
    return tokenizer(df["no_such_column"].tolist())
'''


@pytest.fixture(scope="module")
def traps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostTraps]:
    laid = HostTraps(tmp_path_factory.mktemp("host"))
    yield laid
    laid.close()


@pytest.fixture(scope="module")
def text_kernel(tmp_path_factory: pytest.TempPathFactory, traps: HostTraps) -> Path:
    pytest.importorskip("transformers")
    made = make_assets(KERNELS / "text-style")
    assert made.returncode == 0, made.stdout + made.stderr
    kernel = Path(shutil.copytree(KERNELS / "text-style", tmp_path_factory.mktemp("text") / "qa kernel",
                                  ignore=shutil.ignore_patterns(".kkb", "build")))
    build_file_tree(kernel, {"qa/__init__.py": "", "qa/encode.py": ENCODE})
    traps.plant(kernel / "qa")
    spec = (kernel / "kernel.toml").read_text()
    spec = spec.replace("[model_defaults]", '[code]\ninclude = ["qa/*.py", "qa/kkb_host.json"]\n\n[model_defaults]', 1)
    spec = spec.replace('text_pair_columns = ["answer"]\n', 'encode_function = "qa.encode:ENCODER"\n', 1)  # the answer card
    (kernel / "kernel.toml").write_text(spec)
    return kernel


def _with_encoder(kernel: Path, function: str) -> None:
    spec = (kernel / "kernel.toml").read_text()
    (kernel / "kernel.toml").write_text(re.sub(r'encode_function = "qa.encode:\w+"', f'encode_function = "qa.encode:{function}"',
                                               spec))


@pytest.mark.loopback  # one of the traps is a server on the host's loopback
def test_an_encode_function_reading_the_id_as_the_notebook_did_builds(text_kernel: Path, traps: HostTraps) -> None:
    """It also tries every way out of the build's sandbox (kkb's credentials in the build's environment): none works."""
    _with_encoder(text_kernel, "encode")
    built = kkb("build", ".", cwd=text_kernel, env=traps.environment())
    assert built.returncode == 0, said(built)
    assert traps.untouched() == []


def test_an_encode_function_that_raises_at_build_shows_the_users_line(text_kernel: Path) -> None:
    _with_encoder(text_kernel, "broken")
    built = kkb("build", text_kernel.name, cwd=text_kernel.parent, env={"KAGGLE_USERNAME": "kkb-tests"})
    assert built.returncode == 1, said(built)
    line = ENCODE.splitlines().index("    return tokenizer(df[\"no_such_column\"].tolist())") + 1
    assert built.stderr.startswith(f"error: {text_kernel / 'kernel.toml'}: models.answer: on the public test: KeyError: "
                                   f"'no_such_column'\nin your code (most recent call last):\n  File \"qa/encode.py\", line "
                                   f"{line}, in broken\n    return tokenizer(df[\"no_such_column\"].tolist())\n"), said(built)
    assert "internal error" not in built.stderr  # the user's error, in the user's words
