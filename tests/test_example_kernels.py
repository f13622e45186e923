"""The cassava-style and ranzcr-style example kernels: generated, dry-run in both scenarios, scored.

Each example's assets come from its seeded ``make_assets.py`` (skipped when up to date). One dry run
runs the commit (fast path) on the public data and the rerun on the hidden test (``--rerun-data``), whose
submission the local Kaggle's scorer scores with the competition's own metric. The submit path is the same code for
every kernel: ``tests/test_card_examples.py`` takes it end to end with tabular-style; for either example here it is
``python -m builder.demo --kernel kernels/cassava-style`` (``kkb submit .`` against the local Kaggle). kkb runs as
people call it: the command in a subprocess on a copy of the example in a fresh folder, named by its absolute path
(cassava-style) or from its parent (ranzcr-style); then ``kkb build`` every way, nothing changed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("timm")

from builder.local_kaggle.competition import load_competition
from builder.local_kaggle.scoring import ScoringError, score_submission
from tests.support.assets import make_assets
from tests.support.cli import build_every_way, dry_run, ways
from tests.support.files import KERNELS

pytestmark = pytest.mark.slow

# example: the lowest score the hidden test must reach (chance: accuracy 0.2 of five classes, AUC 0.5)
EXAMPLES = {"cassava-style": 0.6, "ranzcr-style": 0.6}


@pytest.fixture(scope="module", params=sorted(EXAMPLES))
def example(request: pytest.FixtureRequest) -> Path:
    kernel = KERNELS / request.param
    result = make_assets(kernel, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return kernel


WAY = {"cassava-style": "absolute", "ranzcr-style": "parent"}  # the ways rotate over the examples' end-to-end tests
OWNER = {"KAGGLE_USERNAME": "tester"}


def test_both_scenarios_are_ok_and_the_hidden_rerun_scores(example: Path, tmp_path: Path) -> None:
    kernel = Path(shutil.copytree(example, tmp_path / example.name, ignore=shutil.ignore_patterns(".kkb", "build")))
    way = ways(kernel, tmp_path)[WAY[example.name]]
    out = way.cwd / "build" / example.name  # the default: build/NAME in the folder the command starts in
    # one command, as a user rehearses both runs: the commit on the public data, the rerun on the hidden test
    report = dry_run(way, "--rerun-data", Path(way.kernel) / "data/competition/hidden", env=OWNER)
    assert [(s["scenario"], s["verdict"]["name"]) for s in report["scenarios"]] == [("commit", "OK"), ("rerun", "OK")]
    commit, rerun = report["scenarios"]
    assert commit["steps"] == []  # the commit run took the fast path

    competition = kernel / "data" / "competition"
    submission = Path(rerun["submission"])
    config = load_competition(competition)
    scores = score_submission(submission, competition / "answers.csv", config.metric, config.id_column,
                              config.target_columns, competition, column_types=config.column_types)
    assert scores.public >= EXAMPLES[example.name], scores
    written = pd.read_csv(submission, dtype={config.id_column: str})
    sample = pd.read_csv(competition / "hidden" / "sample_submission.csv", dtype={config.id_column: str})
    assert list(written.columns) == list(sample.columns) and list(written[config.id_column]) == list(sample[config.id_column])
    if example.name == "cassava-style":  # argmax into an integer label, written as integers
        assert written["label"].dtype.kind == "i"
        assert submission.read_text().splitlines()[1].rsplit(",", 1)[1].isdigit()
    else:  # the sample holds integer 0s: probabilities score because the metric (AUC) scores floats...
        assert score_submission(submission, competition / "answers.csv", config.metric, config.id_column,
                                config.target_columns, competition) == scores
        with pytest.raises(ScoringError, match=r"fractional values in 11 columns \('ETT - Abnormal', .*column_types"):
            (tmp_path / "m.py").write_text("def score(solution, submission, row_id_column_name):\n    return 1.0\n")
            score_submission(submission, competition / "answers.csv", "m.py", config.id_column,  # ...unknown: the sample
                             config.target_columns, tmp_path, sample_csv=competition / "hidden" / "sample_submission.csv")
    build_every_way(kernel, tmp_path, out, env=OWNER)  # nothing changed: each way finds the build as it was
