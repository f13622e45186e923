"""What a user reads from the CLI: --help, --json with a schema, failed runs without kkb's own traceback."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builder import cli
from builder.errors import EXIT_OK, EXIT_USAGE
from builder.kkb_runtime.vocabulary import Scenario
from builder.local_kaggle import InstantRunner, LocalKaggle
from builder.rehearse.report import ScenarioReport
from builder.rehearse.verdict import Judgement
from tests.support.demo_kaggle import serve_local_kaggle
from tests.support.files import KERNELS

COMMANDS = ["build", "init", "push", "submit", "status", "logs", "history", "dry-run", "wheels", "image", "version"]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_has_readable_placeholders(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([command, "--help"]) == EXIT_OK
    out = capsys.readouterr().out
    for unreadable in ("{kernel_dir}", "<list[str]>", "<str>", "<float>", "<int>", "<list[Path]>"):
        assert unreadable not in out, (command, unreadable)


def test_the_command_list_shows_whole_summaries(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == EXIT_OK
    out = " ".join(capsys.readouterr().out.split("Commands:")[1].split())
    assert "..." not in out
    assert "dry-run Run the kernel locally as Kaggle's commit run and scoring rerun would, and say what Kaggle " \
           "would say." in out
    assert "local-kaggle A local Kaggle: a loopback server that speaks Kaggle's API to the real kaggle client." in out


def test_scenario_is_a_choice(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["dry-run", str(KERNELS / "minimal"), "--scenario", "rerunn"]) == EXIT_USAGE
    assert "'rerunn' is not one of 'commit', 'rerun', 'both'" in capsys.readouterr().err


DETAIL = """
File /tmp/kkb-dryrun-commit-x/kaggle/input/datasets/o/k-code/kkb_runtime/__init__.py:79, in KernelRun.run_steps(self)
     77 with self._stage("steps"):
---> 79         self.steps.append(run_step(step, self.inputs, self.config.path, out_dir, limit))

File /tmp/kkb-dryrun-commit-x/kaggle/input/datasets/o/k-code/kkb_runtime/steps.py:125, in run_step(step, inputs)
--> 125     raise StepFailed(f"step '{name}' failed with exit code {returncode}")

StepFailed: step 'linear' failed with exit code 1
--- stderr (last 4 lines) ---
Traceback (most recent call last):
  File "/kaggle/input/datasets/o/k-code/predict.py", line 31, in <module>
    raise ValueError("boom in user code")
ValueError: boom in user code

blocked network access (internet is off in code competitions; ship files in a dataset): pypi.org"""


def test_a_failed_runs_detail_keeps_the_users_error_not_kkbs_frames() -> None:
    shown = cli.without_kkb_frames(DETAIL)
    assert "kkb_runtime" not in shown and "run_steps" not in shown
    assert shown.startswith("StepFailed: step 'linear' failed with exit code 1\n--- stderr (last 4 lines) ---\n"
                            "Traceback (most recent call last):")
    assert 'raise ValueError("boom in user code")' in shown and shown.endswith("ship files in a dataset): pypi.org")


def _scenario(steps: list[dict[str, object]], kept: dict[str, str]) -> ScenarioReport:
    return ScenarioReport(
        scenario=Scenario.RERUN, verdict=Judgement("OK", "the file matches the sample", None), wall_seconds=1.0,
        peak_rss_bytes=1, peak_gpu_bytes=None, timed_out=False, failed_cell=None, failing_step=None, ename=None,
        evalue=None, traceback_tail=None, stderr_tail=None, steps=steps, rows=5, hidden_rows=None,
        projected_seconds=1.0, time_limit_seconds=32400, ram_limit_bytes=1, gpu_limit_bytes=None, fast_commit=None,
        blocked_network=[], notebook=Path("n.ipynb"), log=Path("n.log.json"), submission=None, member_outputs=kept)


def test_step_outputs_in_the_report_point_at_the_kept_copies() -> None:
    steps = [{"name": "linear", "output": "/tmp/kkb-dryrun-rerun-x/kaggle/working/kkb_steps/linear.csv", "seconds": 1.0},
             {"name": "lost", "output": "/tmp/kkb-dryrun-rerun-x/kaggle/working/kkb_steps/lost.csv", "seconds": 1.0}]
    data = _scenario(steps, {"linear": "/b/dryrun/rerun.step-linear.csv"}).to_json()
    assert [step["output"] for step in data["steps"]] == ["/b/dryrun/rerun.step-linear.csv", None]


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    yield from serve_local_kaggle(tmp_path, monkeypatch, InstantRunner())


def _json(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    data = json.loads(capsys.readouterr().out)
    assert isinstance(data, dict)
    return data


@pytest.mark.slow
@pytest.mark.loopback
def test_json_on_push_status_and_history_with_a_schema(tmp_path: Path, server: LocalKaggle,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))
    assert cli.main(["push", str(kernel), "--out", str(tmp_path / "build"), "--json"]) == EXIT_OK
    pushed = _json(capsys)
    assert (pushed["schema"], pushed["kernel_action"], pushed["kernel_version"]) == ("kkb.push/1", "pushed", 1)
    assert cli.main(["status", str(kernel), "--json"]) == EXIT_OK
    status = _json(capsys)
    assert (status["schema"], status["kernel_id"], status["kernel_version"]) == \
        ("kkb.status/1", "kkb-demo/kkb-minimal-inference", 1)
    assert cli.main(["history", str(kernel), "--json"]) == EXIT_OK
    history = _json(capsys)
    assert history["schema"] == "kkb.history/1"
    # status records the run once it saw it end (the server runs it at once, but not before status asks, always)
    assert [row["kind"] for row in history["rows"]] in (["push"], ["push", "run"])


def test_json_on_image(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["image", "--json"]) == EXIT_OK
    image = _json(capsys)
    assert image["schema"] == "kkb.image/1" and image["python"] and isinstance(image["packages"], dict)
