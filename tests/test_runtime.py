"""The kernel-side runtime, tested directly (it ships in the code dataset and never imports builder)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from builder.bundle.kernel_config import section
from builder.kkb_runtime import commit, config, inputs, install, postprocess, steps, submission
from builder.project import spec
from tests.support.cards import kernel_stages

SAMPLE = pd.DataFrame({"id": ["a", "b", "c"], "target": [0.0, 0.0, 0.0]})


def _frame(ids, values, column="target"):
    return pd.DataFrame({"id": ids, column: values})


@pytest.mark.parametrize(
    ("frame", "problem"),
    [
        pytest.param(_frame(["a", "b"], [1.0, 2.0]), "row count: expected 3 rows (as the sample submission), got 2", id="rows"),
        pytest.param(_frame(["a", "b", "c"], [1.0, 2.0, 3.0], column="label"), "missing column(s): target", id="missing-column"),
        pytest.param(_frame(["a", "b", "c"], [1.0, 2.0, 3.0]).assign(extra=1), "extra column(s): extra", id="extra-column"),
        pytest.param(_frame(["a", "b", "x"], [1.0, 2.0, 3.0]),
                     "ids do not match the sample submission: 1 missing (e.g. 'c'), 1 unexpected (e.g. 'x')", id="ids"),
        pytest.param(_frame(["a", "c", "b"], [1.0, 2.0, 3.0]),
                     "ids are not in the sample submission's order (row 1: expected 'b', got 'c')", id="order"),
        pytest.param(_frame(["a", "a", "c"], [1.0, 2.0, 3.0]), "duplicate ids: 1 (e.g. 'a'), 1 extra row(s)", id="duplicates"),
        pytest.param(_frame(["a", "b", "c"], [1.0, np.nan, 3.0]), "NaN in target column 'target': 1 rows", id="nan"),
        pytest.param(_frame(["a", "b", "c"], [1.0, np.inf, 3.0]), "inf in target column 'target': 1 rows", id="inf"),
        pytest.param(_frame(["a", "b", "c"], ["1.0", "cat", "3"]),
                     "non-numeric values in target column 'target': 1 rows (e.g. 'cat')", id="non-numeric"),
    ],
)
def test_check_submission_names_the_reason(frame: pd.DataFrame, problem: str) -> None:
    assert problem in submission.check_submission(frame, SAMPLE, "id")


def test_check_submission_accepts_a_valid_frame() -> None:
    assert submission.check_submission(_frame(["a", "b", "c"], [0.1, 0.2, 0.3]), SAMPLE, "id") == []


def test_combine_methods() -> None:
    one = _frame(["a", "b", "c"], [0.0, 1.0, 2.0])
    two = _frame(["c", "b", "a"], [8.0, 4.0, 2.0])  # other order: aligned by id
    mean = submission.combine([one, two], "id", ["target"], "mean")
    assert mean["target"].tolist() == [1.0, 2.5, 5.0]
    weighted = submission.combine([one, two], "id", ["target"], "weighted_mean", [3.0, 1.0])
    assert weighted["target"].tolist() == pytest.approx([0.5, 1.75, 3.5])
    ranked = submission.combine([one, two], "id", ["target"], "rank_mean")
    assert ranked["target"].tolist() == pytest.approx([1 / 3, 2 / 3, 1.0])
    with pytest.raises(ValueError, match="different ids"):
        submission.combine([one, _frame(["a", "b", "z"], [1.0, 1.0, 1.0])], "id", ["target"])


def test_rounding_removes_float_noise_and_negative_zero() -> None:
    frame = _frame(["a", "b", "c"], [0.1 + 0.2, -1e-17, 2.0 / 3.0])
    rounded = submission.round_predictions(frame, ["target"], 4)
    assert rounded.to_csv(index=False) == "id,target\na,0.3\nb,0.0\nc,0.6667\n"
    assert submission.round_predictions(frame, ["target"], None) is frame


def test_write_submission_is_atomic(tmp_path: Path) -> None:
    path = submission.write_submission(_frame(["a"], [1.0]), tmp_path / "submission.csv")
    assert path.read_text() == "id,target\na,1.0\n"
    assert not list(tmp_path.glob("*.partial"))


@pytest.mark.parametrize(
    ("environ", "rows", "fast", "reason"),
    [
        ({}, 5, True, "commit run (KAGGLE_IS_COMPETITION_RERUN absent, sample has 5 rows): writing the sample submission"),
        ({"KAGGLE_IS_COMPETITION_RERUN": ""}, 5, False, "KAGGLE_IS_COMPETITION_RERUN is set: scoring rerun, running every step"),
        ({}, 11, False, "KAGGLE_IS_COMPETITION_RERUN is absent but the sample submission has 11 rows (>= 11): running every step"),
    ],
)
def test_fast_commit_decision(environ: dict, rows: int, fast: bool, reason: str) -> None:
    decision = commit.decide(fast_commit(enabled=True, rows_below=11, detect="env_and_rows", write="sample"), lambda: rows, environ)
    assert (decision.fast, decision.reason) == (fast, reason)


def fast_commit(**keys: object) -> config.FastCommitSection:
    """``[fast_commit]`` as the kernel reads it (the spec's defaults for the keys not given)."""
    return section(config.FastCommitSection, spec.FastCommitSection.model_validate(keys), "fast_commit")


def step(name: str, run: str) -> config.StepSection:
    """A ``[[steps]]`` entry as the kernel reads it."""
    return section(config.StepSection, spec.Step(name=name, run=run), "steps[0]")


def test_fast_commit_env_only_and_first_rows() -> None:
    decision = commit.decide(fast_commit(detect="env", write="first_rows", first_rows=3), lambda: 10_000, {})
    assert decision.fast and decision.row_limit == 3
    assert not commit.decide(fast_commit(enabled=False), lambda: 1, {}).fast


def _dataset(folder: Path, dataset_id: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"dataset": dataset_id}))
    return folder


@pytest.mark.parametrize("layout", ["current", "legacy", "nested"])
def test_find_dataset_in_every_layout(tmp_path: Path, layout: str) -> None:
    where = {"current": "input/datasets/me/my-weights", "legacy": "input/my-weights", "nested": "input/other/place/x"}[layout]
    _dataset(tmp_path / "input/datasets/me/decoy", "me/decoy")
    expected = _dataset(tmp_path / where, "me/my-weights")
    assert inputs.find_dataset("me/my-weights", root=tmp_path) == expected


def test_missing_input_shows_the_tree(tmp_path: Path) -> None:
    _dataset(tmp_path / "input/datasets/me/something-else", "me/something-else")
    with pytest.raises(inputs.InputNotFound) as caught:
        inputs.find_competition("kkb-minimal", "sample_submission.csv", root=tmp_path)
    text = str(caught.value)
    assert "competition data for kkb-minimal: not found" in text
    assert str(tmp_path / "input/competitions/kkb-minimal") in text
    assert "    me/\n      something-else/\n        manifest.json" in text


def test_step_command_and_failure_tail(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "boom.py").write_text("import sys\nprint('to stderr', file=sys.stderr)\nsys.exit(3)\n")
    argv = steps.step_command("python boom.py --out {out}", {"out": "/o.csv", "code": str(code)})
    assert argv == [sys.executable, str(code / "boom.py"), "--out", "/o.csv"]
    found = inputs.Inputs(code=code, weights=None, competition=tmp_path, working=tmp_path)
    with pytest.raises(steps.StepFailed, match=r"step 'boom' failed with exit code 3\n--- stderr \(last 1 lines\) ---\nto stderr"):
        steps.run_step(step("boom", "python boom.py"), found, tmp_path / "kkb_kernel.json", tmp_path)


def test_step_sees_the_kernel_environment(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "echo.py").write_text(
        "import os, sys\nopen(sys.argv[1], 'w').write(','.join(os.environ[k] for k in "
        "('KKB_STEP_NAME', 'KKB_ROW_LIMIT', 'KKB_COMPETITION_DIR')) + '|' + os.getcwd())\n")
    found = inputs.Inputs(code=code, weights=None, competition=tmp_path / "comp", working=tmp_path)
    result = steps.run_step(step("echo", "python echo.py {out}"), found, tmp_path / "c.json", tmp_path, row_limit=4)
    assert Path(result.output).read_text() == f"echo,4,{tmp_path / 'comp'}|{tmp_path}"


def test_a_step_sets_its_own_environment_under_kkbs(tmp_path: Path) -> None:
    found = inputs.Inputs(code=tmp_path, weights=None, competition=tmp_path / "comp", working=tmp_path)
    env = steps.step_environment(found, tmp_path / "c.json", "s", tmp_path / "s.csv", None,
                                 {"OMP_NUM_THREADS": "2", "KKB_STEP_NAME": "mine"})
    assert env["OMP_NUM_THREADS"] == "2" and env["KKB_STEP_NAME"] == "s"


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ((25, 3), ["--config-settings", "--build-option=--cpp_ext", "--config-settings", "--build-option=--cuda_ext"]),
        ((23, 0), ["--global-option=--cpp_ext", "--global-option=--cuda_ext"]),
    ],
)
def test_source_install_uses_the_form_this_pip_accepts(version: tuple[int, int], expected: list[str]) -> None:
    argv = install.source_install_command(Path("/code/apex"), ["--cpp_ext", "--cuda_ext"], version)
    assert argv[-1] == "/code/apex" and argv[-1 - len(expected):-1] == expected
    assert "--no-build-isolation" in argv and "--no-index" in argv


def test_source_install_env_sets_apex_flags_and_arch() -> None:
    env = install.source_install_env({"cpp_ext": True, "cuda_ext": True, "extra_env": {"MAX_JOBS": "4"}}, "7.5")
    assert (env["APEX_CPP_EXT"], env["APEX_CUDA_EXT"], env["TORCH_CUDA_ARCH_LIST"], env["MAX_JOBS"]) == ("1", "1", "7.5", "4")


def test_a_step_can_record_its_gpu_peak(tmp_path: Path) -> None:
    """CUDA memory is only readable inside the step's process: the step writes it next to its output."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "gpu.py").write_text("import sys\nfrom kkb_runtime.steps import write_step_meta\n"
                                 "open(sys.argv[1], 'w').write('id,target\\n')\nwrite_step_meta(sys.argv[1], peak_gpu_bytes=123)\n")
    runtime = Path(steps.__file__).parent
    (code / "kkb_runtime").symlink_to(runtime)
    found = inputs.Inputs(code=code, weights=None, competition=tmp_path, working=tmp_path)
    result = steps.run_step(step("gpu", "python gpu.py {out}"), found, tmp_path / "c.json", tmp_path)
    assert result.peak_gpu_bytes == 123
    steps.record_steps([result], tmp_path)
    assert json.loads((tmp_path / "kkb_steps.json").read_text())[0]["peak_gpu_bytes"] == 123
    plain = steps.run_step(step("echo", "python -c \"import sys; open(sys.argv[1], 'w').write('x')\" {out}"),
                           found, tmp_path / "c.json", tmp_path)
    assert plain.peak_gpu_bytes is None


# --- output types like the sample ------------------------------------------------------

LABELS = pd.DataFrame({"id": ["a.jpg", "b.jpg", "c.jpg"], "label": [4, 4, 4]})


@pytest.mark.parametrize(
    ("frame", "problem"),
    [
        pytest.param(pd.DataFrame({"id": ["a.jpg", "b.jpg", "c.jpg"], "label": [1.0, 2.5, 3.0]}),
                     "float values in column 'label', where the sample submission holds integers: 3 rows (e.g. 2.5); "
                     "write integers (post-process with argmax or threshold)", id="float-in-int"),
        pytest.param(pd.DataFrame({"id": ["a.jpg", "b.jpg", "c.jpg"], "label": [1.0, 2.0, 3.0]}),
                     "float values in column 'label', where the sample submission holds integers: 3 rows "
                     "(e.g. 1.0, 2.0, 3.0); write integers (post-process with argmax or threshold)", id="whole-floats"),
        pytest.param(pd.DataFrame({"id": ["a.jpg", "a.jpg", "b.jpg", "c.jpg"], "label": [1, 1, 2, 3]}),
                     "duplicate ids: 1 (e.g. 'a.jpg'), 1 extra row(s)", id="duplicates"),
        pytest.param(pd.DataFrame({"id": ["a.jpg", "b.jpg"], "label": [1, 2]}),
                     "ids do not match the sample submission: 1 missing (e.g. 'c.jpg')", id="missing-ids"),
        pytest.param(pd.DataFrame({"id": ["a.jpg", "b.jpg", "c.jpg"], "label": [1, "x", 3]}),
                     "non-numeric values in target column 'label': 1 rows (e.g. 'x')", id="string-in-int"),
    ],
)
def test_check_refuses_what_the_sample_types_forbid(frame: pd.DataFrame, problem: str) -> None:
    assert problem in submission.check_submission(frame, LABELS, "id")


def test_duplicated_ids_are_not_reported_as_a_row_count() -> None:
    frame = pd.DataFrame({"id": ["a.jpg", "a.jpg", "b.jpg", "c.jpg"], "label": [1, 1, 2, 3]})
    assert not [p for p in submission.check_submission(frame, LABELS, "id") if p.startswith("row count")]


def test_columns_are_written_with_the_sample_types(tmp_path: Path) -> None:
    sample = pd.DataFrame({"id": ["a", "b"], "label": [0, 0], "prob": [0.5, 0.5], "name": ["x", "y"]})
    frame = pd.DataFrame({"id": ["a", "b"], "label": [1.0, 3.0], "prob": [0.123456, 0.6], "name": [1, 2]})
    rounded = submission.round_predictions(frame, ["label", "prob", "name"], 0, sample)
    cast = submission.cast_like_sample(rounded, sample, ["label", "prob", "name"])
    assert submission.check_submission(cast, sample, "id") == []
    path = submission.write_submission(cast, tmp_path / "submission.csv")
    assert path.read_text() == "id,label,prob,name\na,1,0.0,1\nb,3,1.0,2\n"


def test_rounding_never_turns_a_fraction_into_a_label() -> None:
    sample = pd.DataFrame({"id": ["a"], "label": [0]})
    frame = pd.DataFrame({"id": ["a"], "label": [0.6]})
    cast = submission.cast_like_sample(submission.round_predictions(frame, ["label"], 0, sample), sample, ["label"])
    assert cast["label"].tolist() == [0.6]
    assert "fractional values in column 'label'" in submission.check_submission(cast, sample, "id")[0]


# --- post-processing ---------------------------------------------------------------------

def _probs() -> pd.DataFrame:
    return pd.DataFrame({"id": ["a", "b"], "p0": [0.1, 0.7], "p1": [0.6, 0.2], "p2": [0.3, 0.1]})


def test_argmax_into_a_label_through_a_label_map() -> None:
    out = postprocess.apply(_probs(), kernel_stages({"kind": "argmax", "into": "label", "labels": [10, 11, 12]}), "id", ["p0", "p1", "p2"])
    assert out.to_dict("list") == {"id": ["a", "b"], "label": [11, 10]}
    assert out["label"].dtype == np.int64
    named = postprocess.apply(_probs(), kernel_stages({"kind": "argmax", "into": "label", "labels": ["x", "y", "z"]}), "id", ["p0", "p1", "p2"])
    assert named["label"].tolist() == ["y", "x"]


def test_threshold_clip_and_a_user_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "userpost.py").write_text("def double(frame):\n    frame['p0'] = frame['p0'] * 2\n    return frame\n"
                                          "def broken(frame):\n    return frame.to_numpy()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    stages = kernel_stages({"kind": "function", "function": "userpost:double"}, {"kind": "clip", "columns": ["p0"], "max": 1.0},
                           {"kind": "threshold", "columns": ["p1"], "value": 0.5})
    out = postprocess.apply(_probs(), stages, "id", ["p0", "p1", "p2"])
    assert out["p0"].tolist() == pytest.approx([0.2, 1.0])
    assert out["p1"].tolist() == [1, 0]
    broken = r"postprocess\[0\] \(function\): userpost:broken returned ndarray, not a pandas DataFrame"
    with pytest.raises(postprocess.PostprocessError, match=broken):
        postprocess.apply(_probs(), kernel_stages({"kind": "function", "function": "userpost:broken"}), "id", ["p0"])


def test_output_columns_follow_the_stages() -> None:
    stages = kernel_stages({"kind": "argmax", "into": "label"}, {"kind": "clip", "min": 0})
    assert postprocess.output_columns(stages, ["p0", "p1"]) == ["label"]
    assert postprocess.output_columns(kernel_stages({"kind": "function", "function": "m:f"}), ["p0"]) is None


def test_column_types_override_a_sample_of_integer_placeholders() -> None:
    sample = pd.DataFrame({"id": ["a", "b"], "ETT": [0, 0], "label": [0, 0]})
    frame = pd.DataFrame({"id": ["a", "b"], "ETT": [0.25, 0.75], "label": [1, 2]})
    assert submission.check_submission(frame, sample, "id") == [
        "fractional values in column 'ETT', where the sample submission holds only integer 0s: 2 rows. If the "
        "competition scores probabilities, the 0s are placeholders: set [submission] column_types = { \"*\" = "
        "\"float\" } in kernel.toml; if it scores labels, write integers (argmax or threshold)"]
    assert submission.check_submission(frame, sample, "id", column_types={"ETT": "float"}) == []
    retyped = submission.retype_sample(sample, {"*": "float"}, "id")
    assert retyped["ETT"].dtype == float and retyped["id"].tolist() == ["a", "b"]
