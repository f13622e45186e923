"""The competition's metric file in a sandbox of its own: however it ends, the scoring ends with an outcome.

``sys.exit(0)`` inside ``score()``, an endless loop, a ``KeyboardInterrupt``, prints, a non-number or NaN: each is an
outcome of :func:`builder.rehearse.metric_sandbox.score_metric_file` (the submission's failure, or the metric's own,
named), and the dry run still ends with a verdict, its report and one JSON document under ``--json``. The local
Kaggle's scorer runs the same sandboxed file.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from builder.errors import DryRunError
from builder.kkb_runtime.metric_file import MetricFile
from builder.local_kaggle.scoring import ScoringError, score_submission
from builder.rehearse.metric_sandbox import MetricJob, score_metric_file
from tests.support.cli import kkb, said
from tests.support.files import KERNELS

BODY = {
    "good": "return float(abs(solution['target'] - submission['target']).mean())",
    "exit": "print('scoring...'); sys.exit(0)",
    "loop": "while True:\n    pass",
    "interrupt": "raise KeyboardInterrupt",
    "text": "return 'zero point five'",
    "nan": "return float('nan')",
    "participant": "raise ParticipantVisibleError('the ids are not the answers ids')",
}


def _job(tmp_path: Path, body: str) -> MetricJob:
    (tmp_path / "metric.py").write_text(
        "import sys\n\n\nclass ParticipantVisibleError(Exception):\n    pass\n\n\n"
        "def score(solution, submission, row_id_column_name):\n" + textwrap.indent(body, "    ") + "\n")
    pd.DataFrame({"id": ["a", "b"], "target": [1.0, 3.0]}).to_csv(tmp_path / "answers.csv", index=False)
    pd.DataFrame({"id": ["a", "b"], "target": [1.5, 3.0]}).to_csv(tmp_path / "submission.csv", index=False)
    return MetricJob(MetricFile("metric.py"), tmp_path, tmp_path / "answers.csv", "id", ("target",))


@pytest.mark.parametrize(("case", "failures", "error"), [
    ("good", (), None),
    ("exit", (), "the metric file metric.py called sys.exit(0) while scoring: the competition's metric, not the submission"),
    ("loop", (), "metric.py:score (scoring the submission) did not return within 2 s: the competition's metric, not "
                 "the submission (KKB_METRIC_SECONDS=SECONDS gives a call more time)"),
    ("interrupt", (), "the metric file metric.py raised KeyboardInterrupt while scoring: the competition's metric, not "
                      "the submission"),
    ("text", ("metric.py: the metric metric.py returned 'zero point five' (str), not a number: no score",), None),
    ("nan", ("metric.py: the metric metric.py scored nan: no score",), None),
    ("participant", ("metric.py: the ids are not the answers ids",), None),
])
def test_however_the_metric_ends_the_scoring_has_an_outcome(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str,
                                                            failures: tuple[str, ...], error: str | None) -> None:
    monkeypatch.setenv("KKB_METRIC_SECONDS", "2")
    outcome = score_metric_file(_job(tmp_path, BODY[case]), tmp_path / "submission.csv")
    assert outcome.failures == failures
    if case == "good":
        assert (outcome.expected["public"], outcome.expected["split"]) == (0.25, False)
    elif error is not None:
        assert (outcome.expected["error"], outcome.metric_failed, outcome.warnings) == (error, True, (error,))
    else:
        assert outcome.expected["error"] == failures[0] and not outcome.metric_failed


def test_the_local_kaggles_scorer_runs_the_same_sandboxed_file(tmp_path: Path) -> None:
    job = _job(tmp_path, BODY["text"])
    with pytest.raises(ScoringError) as caught:
        score_submission(tmp_path / "submission.csv", job.answers, "metric.py", "id", ["target"], tmp_path)
    assert str(caught.value) == "metric.py: the metric metric.py returned 'zero point five' (str), not a number: no score"


@pytest.mark.parametrize("value", ["0", "-1", "nan", "soon"])
def test_a_bound_that_is_no_positive_number_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("KKB_METRIC_SECONDS", value)
    with pytest.raises(DryRunError) as caught:
        score_metric_file(_job(tmp_path, BODY["good"]), tmp_path / "submission.csv")
    assert caught.value.message == f"KKB_METRIC_SECONDS={value!r} is not a positive number of seconds"


@pytest.mark.loopback
@pytest.mark.slow
def test_a_metric_that_prints_and_exits_still_gives_a_verdict_a_report_and_one_json_document(tmp_path: Path) -> None:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "exit kernel", ignore=shutil.ignore_patterns(".kkb", "build")))
    (kernel / "metric.py").write_text("import sys\n\n\ndef score(solution, submission, row_id_column_name):\n"
                                      "    print('{\"not\": \"kkb\"}')\n    sys.exit(0)\n")
    spec = (kernel / "kernel.toml").read_text()
    (kernel / "kernel.toml").write_text(spec.replace("hidden_rows = 200", 'hidden_rows = 200\nmetric = "metric.py"'))
    ran = kkb("dry-run", ".", "--scenario", "rerun", "--rerun-data", "data/competition/hidden", "--json", cwd=kernel)

    assert ran.returncode == 0, said(ran)
    document = json.loads(ran.stdout)  # the whole of stdout: one JSON document, nothing the metric printed
    (rerun,) = document["scenarios"]
    said_there = "the metric file metric.py called sys.exit(0) while scoring: the competition's metric, not the submission"
    assert rerun["verdict"]["name"] == "OK" and said_there in rerun["warnings"]
    assert rerun["metric"]["expected"]["metric_failed"] is True
    assert json.loads((kernel / "build" / kernel.name / "dryrun" / "report.json").read_text())["scenarios"][0]["verdict"]
