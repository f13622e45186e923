"""Code competitions on the local Kaggle: submit a kernel version, scoring rerun, scores and errors."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
import requests

from builder.local_kaggle import ServerSettings
from tests.support.local_kaggle import (
    COMPETITION,
    USER,
    FakeRunner,
    connect_as,
    make_competition,
    make_dataset,
    make_kernel,
    start_server,
    wait_for,
    wait_kernel,
    wait_submission,
)

pytestmark = pytest.mark.loopback  # every test talks to a local Kaggle over HTTP

KERNEL = f"{USER}/parity-kernel"

# Writes the right answer in the commit run, a broken file in the rerun: what a rerun-only bug looks like.
RERUN_ONLY_BUG = """
import os
if "KAGGLE_IS_COMPETITION_RERUN" in os.environ:
    open("submission.csv", "w").write("id,label\\n10,1\\n")
else:
    open("submission.csv", "w").write("id,label\\n1,1\\n2,0\\n3,1\\n")
"""
SKIPS_RERUN = "import os\nif 'KAGGLE_IS_COMPETITION_RERUN' not in os.environ:\n    open('submission.csv', 'w').write('id,label\\n')\n"


@pytest.fixture
def competition(kaggle_server, tmp_path: Path) -> Path:
    folder = make_competition(tmp_path / "competition")
    kaggle_server.add_competition(folder)
    return folder


def committed(api, tmp_path: Path, **kernel) -> int:
    pushed = api.kernels_push(str(make_kernel(tmp_path / "kernel", **kernel)))
    assert wait_kernel(api, KERNEL).status.name == "COMPLETE"
    return pushed.version_number


def submit(api, version: int, file_name: str = "submission.csv") -> int:
    return api.competition_submit_code(file_name, "test run", COMPETITION, KERNEL, version, quiet=True).ref


def test_a_code_submission_is_rerun_on_the_hidden_test_and_scored(api, fake_runner, competition, tmp_path: Path) -> None:
    version = committed(api, tmp_path)
    response = api.competition_submit_code("submission.csv", "first try", COMPETITION, KERNEL, version, quiet=True)
    assert response.message == "Successfully submitted to Tiny Parity"
    scored = wait_submission(api, response.ref)
    assert (scored.status.name, scored.public_score, scored.error_description) == ("COMPLETE", "1.00000", "")

    rerun = fake_runner.calls[-1]
    assert rerun.rerun is True
    assert [(m.target, m.source.name) for m in rerun.mounts] == [(f"competitions/{COMPETITION}", "hidden")]
    listed = api.competition_submissions(COMPETITION)
    assert [(s.ref, s.description, s.file_name) for s in listed] == [(response.ref, "first try", "submission.csv")]
    limits = api.competition_get_submission_limits(COMPETITION)
    assert (limits.num_today, limits.num_allowed_now) == (1, 4)


def test_a_wrong_prediction_scores_lower(api, competition, tmp_path: Path) -> None:
    code = ("import csv, os\nroot = os.environ['KKB_KAGGLE_ROOT']\n"
            "rows = list(csv.DictReader(open(root + '/input/competitions/tiny-parity/test.csv')))\n"
            "open('submission.csv', 'w').write('id,label\\n' + ''.join(r['id'] + ',1\\n' for r in rows))\n")
    ref = submit(api, committed(api, tmp_path, code=code))
    assert wait_submission(api, ref).public_score == "0.50000"  # hidden answers: 1, 0, 1, 0


@pytest.mark.parametrize(
    ("code", "description"),
    # A scoring error carries the local Kaggle's reason (kaggle.com gives none): kkb submit shows it.
    [(RERUN_ONLY_BUG, "Submission Scoring Error: rows or columns differ from the sample submission"),
     (SKIPS_RERUN, "Submission CSV Not Found")],
    ids=["wrong-rows-in-rerun", "no-file-in-rerun"],
)
def test_rerun_failures_use_kaggles_vocabulary(api, competition, tmp_path: Path, code: str, description: str) -> None:
    ref = submit(api, committed(api, tmp_path, code=code))
    failed = wait_submission(api, ref)
    assert (failed.status.name, failed.error_description, failed.public_score) == ("ERROR", description, "")


def test_a_rerun_past_the_time_limit_is_a_notebook_timeout(tmp_path: Path, monkeypatch) -> None:
    slow_in_rerun = ("import os, time\nif 'KAGGLE_IS_COMPETITION_RERUN' in os.environ:\n    time.sleep(30)\n"
                     "open('submission.csv', 'w').write('id,label\\n1,1\\n2,0\\n3,1\\n')\n")
    with start_server(tmp_path / "data", settings=ServerSettings(dataset_ready_seconds=0, rerun_timeout_seconds=0.5)) as srv:
        srv.add_competition(make_competition(tmp_path / "competition"))
        api = connect_as(monkeypatch, srv.base_url)
        ref = submit(api, committed(api, tmp_path, code=slow_in_rerun))
        assert wait_submission(api, ref).error_description == "Notebook Timeout"


def test_an_unscorable_submission_is_a_scoring_error(api, competition, tmp_path: Path) -> None:
    # Same shape as the sample (the judge passes it) but ids that are not in the test set.
    code = ("import os\nif 'KAGGLE_IS_COMPETITION_RERUN' in os.environ:\n"
            "    open('submission.csv', 'w').write('id,label\\n90,1\\n91,0\\n92,1\\n93,0\\n')\n"
            "else:\n    open('submission.csv', 'w').write('id,label\\n1,1\\n')\n")
    ref = submit(api, committed(api, tmp_path, code=code))
    assert wait_submission(api, ref).error_description == (
        "Submission Scoring Error: ids do not match the sample submission: 4 missing (e.g. '10', '11', '12', ...), "
        "4 unexpected (e.g. '90', '91', '92', ...)")


@pytest.mark.parametrize(
    ("kernel", "file_name", "message"),
    [
        ({"internet": True}, "submission.csv", "must have internet access disabled"),
        ({"competitions": [], "code": "open('submission.csv', 'w').write('id,label\\n')"}, "submission.csv",
         "must have the competition's data (tiny-parity) attached"),
        ({}, "preds.csv", "has no output file named 'preds.csv'"),
    ],
    ids=["internet-on", "competition-not-attached", "missing-output-file"],
)
def test_submissions_kaggle_refuses(api, competition, tmp_path: Path, kernel: dict, file_name: str, message: str) -> None:
    version = committed(api, tmp_path, **kernel)
    with pytest.raises(requests.HTTPError, match=re.escape(message)) as raised:
        api.competition_submit_code(file_name, "nope", COMPETITION, KERNEL, version, quiet=True)
    assert raised.value.response is not None and raised.value.response.status_code == 400


def test_a_failed_commit_run_cannot_be_submitted(api, competition, tmp_path: Path) -> None:
    api.kernels_push(str(make_kernel(tmp_path / "k", code="1/0")))
    assert wait_kernel(api, KERNEL).status.name == "ERROR"
    with pytest.raises(requests.HTTPError, match="has not completed successfully"):
        submit(api, 1)


def test_unknown_kernel_or_competition_is_404(api, competition, tmp_path: Path) -> None:
    with pytest.raises(requests.HTTPError) as raised:
        api.competition_submit_code("submission.csv", "x", COMPETITION, f"{USER}/no-such-kernel", 1, quiet=True)
    assert raised.value.response is not None and raised.value.response.status_code == 404
    with pytest.raises(requests.HTTPError) as raised:
        api.competition_submissions("no-such-competition")
    assert raised.value.response is not None and raised.value.response.status_code == 404


def test_the_daily_submission_limit(tmp_path: Path, monkeypatch) -> None:
    with start_server(tmp_path / "data") as srv:
        srv.add_competition(make_competition(tmp_path / "competition", limit=2))
        api = connect_as(monkeypatch, srv.base_url)
        version = committed(api, tmp_path)
        submit(api, version)
        submit(api, version)
        with pytest.raises(requests.HTTPError, match=r"daily Submission allowance \(2\)"):
            submit(api, version)
        assert api.competition_get_submission_limits(COMPETITION).num_allowed_now == 0


def test_a_python_metric_file(tmp_path: Path, monkeypatch) -> None:
    metric = "def score(solution, submission):\n    return float((solution['label'] == submission['label']).sum())\n"
    folder = make_competition(tmp_path / "competition", metric="python:metric.py", extra={"metric.py": metric})
    with start_server(tmp_path / "data") as srv:
        srv.add_competition(folder)
        api = connect_as(monkeypatch, srv.base_url)
        ref = submit(api, committed(api, tmp_path))
        assert wait_submission(api, ref).public_score == "4.00000"


def test_competition_files_can_be_listed_and_downloaded(api, competition, tmp_path: Path) -> None:
    names = sorted(f.name for f in api.competition_list_files(COMPETITION).files)
    assert names == ["sample_submission.csv", "test.csv"]  # public/ only, never hidden/ or answers
    api.competition_download_files(COMPETITION, path=str(tmp_path / "dl"), quiet=True)
    assert (tmp_path / "dl" / f"{COMPETITION}.zip").is_file()
    api.competition_download_file(COMPETITION, "test.csv", path=str(tmp_path / "one"), quiet=True)
    assert (tmp_path / "one" / "test.csv").read_text().startswith("id,x")


def test_file_submissions_are_refused_in_a_code_competition(api, competition, tmp_path: Path) -> None:
    csv = tmp_path / "submission.csv"
    csv.write_text("id,label\n10,1\n")
    with pytest.raises(requests.HTTPError, match="only accepts submissions from notebooks"):
        api.competition_submit(str(csv), "upload", COMPETITION, quiet=True)


def test_a_scoring_interrupted_by_a_crash_is_redone_after_restart(tmp_path: Path, monkeypatch) -> None:
    data = tmp_path / "data"
    monkeypatch.setattr(threading, "excepthook", lambda args: None)
    first_runner = FakeRunner()
    with start_server(data, runner=first_runner) as first:
        first.add_competition(make_competition(tmp_path / "competition"))
        api = connect_as(monkeypatch, first.base_url)
        version = committed(api, tmp_path)
        first_runner.crash = True
        ref = submit(api, version)
        wait_for(lambda: len(first_runner.calls) == 2 and first.wait_idle(0.1))
        assert api.get_submission(ref).status.name == "PENDING"
    with start_server(data, users=False) as second:
        api = connect_as(monkeypatch, second.base_url)
        assert wait_submission(api, ref).public_score == "1.00000"
        assert [s.ref for s in api.competition_submissions(COMPETITION)] == [ref]


def test_everything_survives_a_restart(tmp_path: Path, monkeypatch) -> None:
    data = tmp_path / "data"
    with start_server(data) as first:
        first.add_competition(make_competition(tmp_path / "competition"))
        api = connect_as(monkeypatch, first.base_url)
        assert api.dataset_create_new(str(make_dataset(tmp_path / "ds")), quiet=True).status == "ok"
        ref = submit(api, committed(api, tmp_path, datasets=[f"{USER}/tiny-numbers"]))
        assert wait_submission(api, ref).public_score == "1.00000"
    with start_server(data, users=False) as second:  # a new process would see exactly this
        api = connect_as(monkeypatch, second.base_url)
        assert api.dataset_status(f"{USER}/tiny-numbers") == "ready"
        assert api.kernels_status(KERNEL).status.name == "COMPLETE"
        files, _ = api.kernels_output(KERNEL, str(tmp_path / "out"))
        assert sorted(Path(f).name for f in files) == ["parity-kernel.log", "submission.csv"]
        assert [(s.ref, s.public_score) for s in api.competition_submissions(COMPETITION)] == [(ref, "1.00000")]
        assert api.competition_get_submission_limits(COMPETITION).num_today == 1
        again = submit(api, 1)
        assert again == ref + 1 and wait_submission(api, again).status.name == "COMPLETE"
