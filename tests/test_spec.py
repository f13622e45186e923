"""kernel.toml validation: every bad spec gets one exact message naming the file and the key."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from builder.errors import SpecError
from builder.project.spec import load_spec, parse_spec
from builder.project.spec_reference import keys_by_table
from builder.project.spec_renames import SpecDeprecation

VALID = {
    "kernel": {"title": "KKB Minimal Inference", "owner": "someone"},
    "competition": {"slug": "kkb-minimal"},
    "steps": [{"name": "a", "run": "python predict.py --out {out}"}],
}


def _with(path: str, value: object) -> dict:
    spec = copy.deepcopy(VALID)
    *parents, last = path.split(".")
    node: Any = spec  # a dict, or a list where the path has an index
    for part in parents:
        node = node.setdefault(part, {}) if not part.isdigit() else node[int(part)]
    node[last] = value
    return spec


def test_valid_spec_defaults() -> None:
    spec = parse_spec(VALID)
    assert spec.kernel.kernel_slug == "kkb-minimal-inference"
    assert spec.kernel.machine_shape == "NvidiaTeslaT4"  # not the P100 that `enable_gpu` alone gives
    assert spec.kernel.private is True and spec.kernel.internet is False
    assert spec.submission.file == "submission.csv" and spec.fast_commit.rows_below == 11


@pytest.mark.parametrize(
    ("spec", "message", "hint"),
    [
        pytest.param(_with("kernel.titel", "x"), "kernel.toml: kernel.titel: unknown key", "did you mean 'kernel.title'?", id="typo"),
        pytest.param(_with("kernel.slug", "other-name"),
                     "kernel.toml: kernel: slug 'other-name' does not match the title: Kaggle derives the slug from the title, "
                     "and 'KKB Minimal Inference' gives 'kkb-minimal-inference'",
                     "remove [kernel] slug (kkb derives it from the title) or change the title", id="slug-mismatch"),
        pytest.param(_with("kernel.title", "abc"), "kernel.toml: kernel.title: String should have at least 5 characters",
                     "use a title of 5 to 50 characters; Kaggle derives the kernel slug from it", id="short-title"),
        pytest.param(_with("kernel.accelerator", "NvidiaTeslaT5"),
                     "kernel.toml: kernel.accelerator: unknown accelerator 'NvidiaTeslaT5' (did you mean 'NvidiaTeslaT4'?); use gpu, "
                     "tpu, none or one of: NvidiaTeslaT4, NvidiaTeslaT4Highmem, NvidiaTeslaP100, NvidiaTeslaA100, NvidiaL4, "
                     "NvidiaL4X1, NvidiaH100, NvidiaRtxPro6000, TpuV38, Tpu1VmV38, TpuV5E8, TpuV6E8",
                     "see kernels/minimal/kernel.toml for a valid example", id="accelerator"),
        pytest.param(_with("kernel.internet", True),
                     "kernel.toml: [kernel] internet = true: a kernel submitted to a code competition must run with internet off",
                     "set [kernel] internet = false; ship packages as wheels instead (kkb wheels)", id="internet"),
        pytest.param(_with("competition.slug", "c/Foo"),
                     "kernel.toml: competition.slug: 'c/Foo' is not a competition slug (lowercase letters, digits and '-', no 'c/' prefix)",
                     "see kernels/minimal/kernel.toml for a valid example", id="competition-slug"),
        pytest.param({k: v for k, v in VALID.items() if k != "competition"},
                     "kernel.toml: competition: required key is missing", "add competition to kernel.toml", id="missing-table"),
        pytest.param(_with("postprocess", [{"function": "mypkg.post:fix"}]),
                     "kernel.toml: postprocess[0].kind: required key is missing; one of: argmax, threshold, clip, function",
                     "add postprocess[0].kind to kernel.toml", id="missing-kind-lists-the-kinds"),
        pytest.param(_with("code.include", ["../secrets/*"]),
                     "kernel.toml: code.include: '../secrets/*' must be a relative path inside the kernel folder (no '..', no absolute path)",
                     "see kernels/minimal/kernel.toml for a valid example", id="escaping-path"),
        pytest.param(_with("steps", [{"name": "a", "run": "x"}, {"name": "a", "run": "y"}]),
                     "kernel.toml: [[steps]] names must be unique; repeated: a",
                     "see kernels/minimal/kernel.toml for a valid example", id="duplicate-steps"),
        pytest.param(_with("submission.combine", "median"),
                     "kernel.toml: submission.combine: Input should be 'mean', 'weighted_mean', 'weighted_sum' or 'rank_mean'",
                     "see kernels/minimal/kernel.toml for a valid example", id="combine"),
        pytest.param(_with("fast_commit.rows_bellow", 5), "kernel.toml: fast_commit.rows_bellow: unknown key",
                     "did you mean 'fast_commit.rows_below'?", id="nested-typo"),
        pytest.param(_with("steps", []), "kernel.toml: [[steps]] is empty: add at least one inference step",
                     "see kernels/minimal/kernel.toml for a valid example", id="no-steps"),
    ],
)
def test_bad_spec_messages(spec: dict, message: str, hint: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(spec)
    assert caught.value.message == message
    assert caught.value.hint == hint


def test_model_card_typo_names_the_index() -> None:
    spec = _with("models", [{"name": "m", "arch": "test_efficientnet", "checkpoint": "w.pt", "num_classes": 2, "batchsize": 8}])
    with pytest.raises(SpecError) as caught:
        parse_spec(spec)
    assert caught.value.message == "kernel.toml: models[0].batchsize: unknown key"
    assert caught.value.hint == "did you mean 'models[0].batch_size'?"


def test_load_spec_file_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"kernel.toml: file not found"):
        load_spec(tmp_path)
    (tmp_path / "kernel.toml").write_text("[kernel\ntitle = 1")
    with pytest.raises(SpecError, match=r"kernel.toml: not valid TOML: "):
        load_spec(tmp_path)
    with pytest.raises(SpecError, match=r"no such kernel folder"):
        load_spec(tmp_path / "nope")


def test_example_kernels_are_valid() -> None:
    root = Path(__file__).resolve().parent.parent / "kernels"
    for folder in sorted(p for p in root.iterdir() if (p / "kernel.toml").is_file()):
        load_spec(folder)


def _card(**card: object) -> dict:
    return _with("models", [{"name": "m", "arch": "test_efficientnet", "checkpoint": "w.pt", "num_classes": 2, **card}])


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(_card(factory="pkg.model:build"),
                     "kernel.toml: models[0]: [[models]] 'm': set exactly one of arch (a timm architecture) or factory "
                     "('package.module:function' returning the nn.Module)", id="arch-and-factory"),
        pytest.param(_card(arch=None, factory="pkg.model"),
                     "kernel.toml: models[0].factory: 'pkg.model' is not 'package.module:function' (a function of your code "
                     "that returns the nn.Module)", id="factory-shape"),
        pytest.param(_card(fold_weights=[1.0, 2.0]),
                     "kernel.toml: models[0]: [[models]] 'm': fold_weights needs several checkpoints (a list or a glob)",
                     id="fold-weights-one-checkpoint"),
        pytest.param(_card(checkpoint=["a.pt", "b.pt"], fold_weights=[1.0]),
                     "kernel.toml: models[0]: [[models]] 'm': 1 fold_weights for 2 checkpoints", id="fold-weights-count"),
        pytest.param(_card(tta=["hflip"], tta_weights={"vflip": 1.0}),
                     "kernel.toml: models[0]: [[models]] 'm': tta_weights names vflip, which this card does not run; "
                     "its views: hflip, identity", id="tta-weight-unknown-view"),
        pytest.param(_card(key_rename=[["(", "x"]]),
                     "kernel.toml: models[0].key_rename: '(' is not a regular expression: missing ), unterminated "
                     "subpattern at position 0", id="bad-regex"),
        pytest.param(_with("postprocess", [{"kind": "argmax", "value": 0.3}]),
                     "kernel.toml: postprocess[0]: kind = 'argmax' takes columns, into, labels, not value", id="postprocess-key"),
        pytest.param(_with("postprocess", [{"kind": "function"}]),
                     "kernel.toml: postprocess[0]: kind = 'function' needs function = 'package.module:function' "
                     "(DataFrame in, DataFrame out)", id="postprocess-function"),
        pytest.param(_with("steps", [{"name": "a", "run": "python p.py", "env": {"KKB_STEP_OUT": "x"}}]),
                     "kernel.toml: steps[0].env: 'KKB_STEP_OUT' is set by kkb for every step; a step cannot override it",
                     id="step-env"),
    ],
)
def test_bad_model_cards_and_postprocess(spec: dict, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(spec)
    assert caught.value.message == message


def test_the_submission_file_has_one_name_the_competition_s() -> None:
    spec = parse_spec(_with("competition.submission_file", "preds.csv"))
    assert (spec.competition.submission_file, spec.submission.file) == ("preds.csv", "preds.csv")
    with pytest.warns(SpecDeprecation, match=r"\[submission\] file is deprecated: the file is \[competition\] "
                                             r"submission_file \(= 'submission.csv'\); remove \[submission\] file"):
        assert parse_spec(_with("submission.file", "submission.csv")).submission.file == "submission.csv"


def test_an_evaluation_api_kernel_s_old_submission_file_is_the_file_its_gateway_writes() -> None:
    raw = _with("submission", {"kind": "evaluation-api", "file": "submission.parquet"})
    raw["evaluation_api"] = {"module": "kaggle_evaluation.x_inference_server", "server_class": "XServer", "predict": "m:p"}
    with pytest.warns(SpecDeprecation):
        spec = parse_spec(raw)
    assert (spec.competition.submission_file, spec.submission.file) == ("submission.parquet", "submission.parquet")


def test_the_reference_has_one_key_for_the_submission_file() -> None:
    tables = keys_by_table()
    assert "submission_file" in tables["competition"] and "file" not in tables["submission"]
