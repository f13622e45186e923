"""End to end with the real sandbox: nbclient runs the pushed notebook; the rerun is judged and scored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.local_kaggle import SandboxRunner, ServerSettings
from tests.support.local_kaggle import (
    COMPETITION,
    USER,
    connect_as,
    make_competition,
    make_dataset,
    make_kernel,
    start_server,
    wait_kernel,
    wait_submission,
)

pytestmark = [pytest.mark.slow, pytest.mark.loopback]
KERNEL = f"{USER}/parity-kernel"

# Reads a dataset and the competition data from the current layout, as a kkb kernel does.
NOTEBOOK = """
import csv, os
root = os.environ["KKB_KAGGLE_ROOT"]
offset = int(open(os.path.join(root, "input/datasets/alice/tiny-numbers/offset.txt")).read())
rows = list(csv.DictReader(open(os.path.join(root, "input/competitions/tiny-parity/test.csv"))))
print("rerun" if "KAGGLE_IS_COMPETITION_RERUN" in os.environ else "commit", len(rows))
with open("submission.csv", "w") as out:
    out.write("id,label\\n" + "".join(f"{r['id']},{(int(r['x']) + offset) % 2}\\n" for r in rows))
"""
CRASHES_IN_RERUN = """
import os
if "KAGGLE_IS_COMPETITION_RERUN" in os.environ:
    raise RuntimeError("model file missing in the rerun")
open("submission.csv", "w").write("id,label\\n1,1\\n2,0\\n3,1\\n")
"""


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    with start_server(tmp_path / "data", runner=SandboxRunner(), settings=ServerSettings(dataset_ready_seconds=0)) as srv:
        srv.add_competition(make_competition(tmp_path / "competition"))
        api = connect_as(monkeypatch, srv.base_url)
        assert api.dataset_create_new(str(make_dataset(tmp_path / "ds", files={"offset.txt": "0"})), quiet=True).status == "ok"
        yield srv, api


def test_commit_run_and_scored_submission_in_the_real_sandbox(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, api = world
    api.kernels_push(str(make_kernel(tmp_path / "k", code=NOTEBOOK, datasets=[f"{USER}/tiny-numbers"])))
    status = wait_kernel(api, KERNEL, timeout=120)
    assert status.status.name == "COMPLETE", api.kernels_logs(KERNEL)
    api.kernels_output(KERNEL, str(tmp_path / "out"))
    assert (tmp_path / "out" / "submission.csv").read_text() == "id,label\n1,1\n2,0\n3,1\n"
    log = json.loads((tmp_path / "out" / "parity-kernel.log").read_text())
    assert any("commit 3" in entry["data"] for entry in log)

    ref = api.competition_submit_code("submission.csv", "e2e", COMPETITION, KERNEL, 1, quiet=True).ref
    scored = wait_submission(api, ref, timeout=120)
    assert (scored.status.name, scored.public_score) == ("COMPLETE", "1.00000"), scored.error_description


def test_a_notebook_that_raises_in_the_rerun_has_no_submission_csv(world, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, api = world
    api.kernels_push(str(make_kernel(tmp_path / "k", code=CRASHES_IN_RERUN)))
    assert wait_kernel(api, KERNEL, timeout=120).status.name == "COMPLETE"
    ref = api.competition_submit_code("submission.csv", "e2e", COMPETITION, KERNEL, 1, quiet=True).ref
    failed = wait_submission(api, ref, timeout=120)
    assert (failed.status.name, failed.error_description) == ("ERROR", "Submission CSV Not Found")
