"""The rehearsal's pieces without Kaggle: the runtime's rehearsal mode (a kernel-side file tree under a fake
``/kaggle``), and the client-side judgement of a downloaded report (``builder.rehearse.on_kaggle``)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

import builder.kkb_runtime as kkb
from builder.bundle.kernel_config import Ids, kernel_config
from builder.kkb_runtime import commit, rehearsal, scale
from builder.kkb_runtime.config import config_text
from builder.kkb_runtime.config_reader import load_config
from builder.project.spec import load_spec, parse_spec
from builder.rehearse.on_kaggle import report_from_kaggle
from builder.rehearse.verdict import COMPUTE, OK, TIMEOUT
from tests.support.files import build_file_tree

KERNEL = "me/my-kernel"


def config_text_of(kernel_type: str = "notebook") -> str:
    """``kkb_kernel.json`` as the build writes it for a kernel with no step (its own id, the competition's test)."""
    spec = parse_spec({"kernel": {"title": "My Kernel", "owner": "me", "type": kernel_type},
                       "competition": {"slug": "comp", "test": "test.csv"},
                       "submission": {"target_columns": ["target"], "decimals": 4},
                       "steps": [{"name": "unused", "run": "python unused.py"}]})
    return config_text(replace(kernel_config(spec, Ids(KERNEL, "me/my-kernel-code", None)), steps=()))


@pytest.fixture
def kaggle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake /kaggle: the code dataset, the competition's public test, an empty working dir."""
    root = tmp_path / "kaggle"
    build_file_tree(root, {
        "input/datasets/me/my-kernel-code/kkb_kernel.json": config_text_of(),
        "input/competitions/comp/sample_submission.csv": "id,target\na,0.0\nb,0.0\n",
        "input/competitions/comp/test.csv": "id,x\na,1\nb,2\n",
        "working/.keep": "",
        "temp/.keep": "",
    })
    monkeypatch.setenv("KKB_KAGGLE_ROOT", str(root))
    # Rehearsal mode sets the rerun variable in this process: setting it first makes monkeypatch restore its absence.
    monkeypatch.setenv(commit.RERUN_VARIABLE, "")
    monkeypatch.delenv(commit.RERUN_VARIABLE)
    return root


def _attach(root: Path, **fields: object) -> Path:
    path = root / "input" / "datasets" / "me" / "my-kernel-rehearsal" / rehearsal.REHEARSAL_FILE
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"format": 1, "kernel": KERNEL, "scenario": "rerun", "scale": 3, **fields}))
    return path


def test_a_real_run_has_no_rehearsal_and_writes_no_report(kaggle: Path) -> None:
    run = kkb.start(kaggle / "input" / "datasets" / "me" / "my-kernel-code")
    assert run.rehearsal_report is None and len(run.sample) == 2
    assert commit.RERUN_VARIABLE not in os.environ
    assert not (kaggle / "working" / "report.json").exists()


def test_a_rehearsal_is_the_rerun_on_the_scaled_test_and_reports_as_it_goes(kaggle: Path) -> None:
    _attach(kaggle)
    run = kkb.start(kaggle / "input" / "datasets" / "me" / "my-kernel-code")
    assert os.environ[commit.RERUN_VARIABLE] == "1"
    assert run.inputs.competition == kaggle / "temp" / "kkb-rehearsal-data"
    assert run.sample["id"].tolist() == ["a", "b", "a_r1", "b_r1", "a_r2", "b_r2"]
    report = json.loads((kaggle / "working" / "report.json").read_text())
    assert (report["status"], report["stage"], report["verdict"], report["rows"]) == ("running", "inputs", None, 6)
    assert not run.fast_commit().fast  # the rerun: every step runs
    run.run_steps()
    run.predictions = run.sample.assign(target=0.5)
    run.round()
    run.check_and_write()
    report = json.loads((kaggle / "working" / "report.json").read_text())
    assert report["status"] == "done" and report["ok"] is True
    assert report["verdict"] == {"name": OK, "reason": "submission.csv matches the sample submission (6 rows, the public "
                                                        "test x3)", "detail": None}
    assert "KAGGLE_IS_COMPETITION_RERUN is set" in report["fast_commit"] and report["peak_rss_bytes"] > 0


def test_a_failed_check_is_the_verdict_with_its_problems(kaggle: Path) -> None:
    _attach(kaggle, scale=1)
    run = kkb.start(kaggle / "input" / "datasets" / "me" / "my-kernel-code")
    run.predictions = run.sample.assign(target=float("nan"))
    with pytest.raises(kkb.SubmissionError):
        run.check_and_write()
    report = json.loads((kaggle / "working" / "report.json").read_text())
    assert report["verdict"]["name"] == "Submission CSV Not Found"
    assert report["verdict"]["reason"].startswith("the notebook stopped before writing submission.csv: SubmissionError in "
                                                  "the write cell: ")
    assert "NaN in target column 'target': 2 rows" in report["verdict"]["reason"]
    assert report["ename"] == "SubmissionError" and report["stage"] == "write"


def test_a_script_kernels_failure_is_notebook_threw_exception(kaggle: Path) -> None:
    config = kaggle / "input" / "datasets" / "me" / "my-kernel-code" / "kkb_kernel.json"
    config.write_text(config_text_of("script"))
    _attach(kaggle, scale=1)
    run = kkb.start(config.parent)
    run.predictions = run.sample.iloc[:1]
    with pytest.raises(kkb.SubmissionError):
        run.check_and_write()
    verdict = json.loads((kaggle / "working" / "report.json").read_text())["verdict"]
    assert verdict["name"] == "Notebook Threw Exception"
    assert verdict["reason"].startswith("SubmissionError in the script: ")
    assert "row count: expected 2 rows (as the sample submission), got 1" in verdict["reason"]


def test_a_rehearsal_file_for_another_kernel_is_ignored(kaggle: Path) -> None:
    _attach(kaggle, kernel="me/another-kernel")
    assert kkb.start(kaggle / "input" / "datasets" / "me" / "my-kernel-code").rehearsal_report is None


@pytest.mark.parametrize(("fields", "message"), [
    ({"format": 2}, "format 2 is not 1: the rehearsal was pushed by another kkb version; push it again"),
    ({"scenario": "commit"}, "scenario 'commit' is not one of rerun"),
    ({"scale": 0}, "scale 0 must be a whole number >= 1"),
    ({"scale": True}, "scale True must be a whole number >= 1"),
])
def test_a_bad_rehearsal_file_is_named(kaggle: Path, fields: dict[str, object], message: str) -> None:
    path = _attach(kaggle, **fields)
    with pytest.raises(rehearsal.RehearsalFileError) as caught:
        rehearsal.find_rehearsal(load_config(kaggle / "input" / "datasets" / "me" / "my-kernel-code"), kaggle)
    assert str(caught.value) == f"{path}: {message}"


SPEC = """
[kernel]
title = "My Kernel"
owner = "me"
accelerator = "gpu"
[competition]
slug = "comp"
hidden_rows = 600
time_limit_hours = 1
[submission]
id_column = "id"
[[steps]]
name = "model"
run = "python predict.py --out {out}"
"""


def _kaggle_report(**changes: object) -> dict[str, object]:
    report = {"status": "done", "verdict": {"name": OK, "reason": "fine", "detail": None}, "rows": 6, "scale": 3,
              "wall_seconds": 100.0, "peak_rss_bytes": 2**30, "peak_gpu_bytes": 2**30,
              "steps": [{"name": "model", "seconds": 10.0, "peak_rss_bytes": 2**30}], "fast_commit": "rerun"}
    return {**report, **changes}


@pytest.mark.parametrize(("changes", "name", "reason"), [
    ({}, OK, "fine"),
    # one size of a user step: anywhere from all fixed to all per row, so a warning, never a timeout on its own
    ({"steps": [{"name": "model", "seconds": 60.0}]}, OK, "fine"),
    ({"peak_rss_bytes": 40 * 2**30}, COMPUTE, "peak memory 40.0 GiB on Kaggle > 29.0 GiB of RAM on the machine shape"),
    ({"peak_gpu_bytes": 16 * 2**30}, COMPUTE, "peak GPU memory 16.0 GiB on Kaggle > 15.0 GiB per GPU on the machine shape"),
])
def test_the_downloaded_report_is_judged_against_kaggles_limits(tmp_path: Path, changes: dict[str, object], name: str,
                                                                reason: str) -> None:
    (tmp_path / "kernel.toml").write_text(SPEC)
    spec = load_spec(tmp_path)
    report = report_from_kaggle(_kaggle_report(**changes), spec, kernel_name="my", kernel_id="me/my-kernel",
                                out_dir=tmp_path)
    (scenario,) = report.scenarios
    assert (scenario.verdict.name, scenario.verdict.reason) == (name, reason)
    assert scenario.hidden_rows == 600 and scenario.time_limit_seconds == 3600


def test_a_card_step_measured_on_kaggle_times_out_from_its_steady_batches(tmp_path: Path) -> None:
    from builder.kkb_runtime.timing import BatchTiming, FoldTiming, StepTiming

    steady = tuple(BatchTiming(2, 0.1, 19.9) for _ in range(2))  # 10 s a row on Kaggle's GPU
    timing = StepTiming(6, "cuda", "Tesla T4", None, 2.0, 0.1, 3.0, 0.1,
                        (FoldTiming(5.0, 0.1, BatchTiming(2, 0.5, 30.0), steady),))
    (tmp_path / "kernel.toml").write_text(SPEC)
    one_size = _kaggle_report(steps=[{"name": "model", "seconds": 60.0}])
    warned = report_from_kaggle(one_size, load_spec(tmp_path), kernel_name="my", kernel_id="me/my-kernel", out_dir=tmp_path)
    assert "the projected rerun may pass the limit" in warned.scenarios[0].warnings[0]
    card = _kaggle_report(steps=[{"name": "model", "seconds": 80.0, "timing": timing.to_json()}])
    report = report_from_kaggle(card, load_spec(tmp_path), kernel_name="my", kernel_id="me/my-kernel", out_dir=tmp_path)
    (scenario,) = report.scenarios
    assert scenario.verdict.name == TIMEOUT and scenario.verdict.reason.startswith("even the lower end of the projection")
    assert "(measured on Kaggle: 100.0 s for 6 rows)" in scenario.verdict.reason
    assert scenario.projection is not None and scenario.projection["device"]["source"] == "measured here"


def test_inside_a_kernel_the_scaled_test_links_to_the_inputs_never_copies_them(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """/kaggle/input and /kaggle/temp are different file systems: no hard links, and no copy of the training data."""
    source = build_file_tree(tmp_path / "input", {"sample_submission.csv": "id,target\na,0\n", "test.csv": "id,x\na,1\n",
                                                  "train.csv": "id,x,target\nt,1,2\n", "test/a.png": "png"})

    def cross_device(src: object, dst: object) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr("builder.kkb_runtime.scale.os.link", cross_device)
    scaled = scale.scale_competition_data(source, tmp_path / "temp" / "scaled", 2, id_column="id", test="test",
                                          fallback="symlink")
    train, image, copy = scaled.path / "train.csv", scaled.path / "test" / "a.png", scaled.path / "test" / "a_r1.png"
    assert train.is_symlink() and train.resolve() == source / "train.csv"
    assert image.is_symlink() and copy.is_symlink() and copy.read_text() == "png"
    sample = scaled.path / "sample_submission.csv"
    assert not sample.is_symlink() and sample.read_text().split() == ["id,target", "a,0", "a_r1,0"]
    assert (source / "sample_submission.csv").read_text() == "id,target\na,0\n"  # never written through
