"""The text-style and tabular-style example kernels: dry-run OK in both scenarios, scored on the hidden
test, equal to a direct run of the same models on the same data, and (tabular-style) submitted end to end to the local Kaggle.

Each example's assets come from its seeded ``make_assets.py`` (skipped when up to date). The direct run
uses the libraries themselves (transformers' own tokenizer call and model, LightGBM's and scikit-learn's
predict, torch's forward), not kkb's runtime, on the hidden test table. kkb runs as people call it: the command in a
subprocess on a copy of the example in a fresh folder, named from inside it (``kkb dry-run .``, tabular-style) or from
its parent (text-style); then ``kkb build`` every way (:func:`tests.support.cli.build_every_way`), nothing changed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")

from builder.local_kaggle.competition import load_competition
from builder.local_kaggle.scoring import score_submission
from tests.support.assets import make_assets
from tests.support.cli import build_every_way, dry_run, ways
from tests.support.files import KERNELS
from tests.support.tabular_style import features_by_hand, lgbm_by_hand, net_by_hand

pytestmark = pytest.mark.slow

# example: (the package it needs, a check of the hidden score: Spearman above chance, log loss below chance's 1.0986)
EXAMPLES: dict[str, tuple[str, Callable[[float], bool]]] = {
    "text-style": ("transformers", lambda score: score >= 0.3),
    "tabular-style": ("lightgbm", lambda score: score <= 0.7),
}


@pytest.fixture(scope="module", params=sorted(EXAMPLES))
def example(request: pytest.FixtureRequest) -> Path:
    pytest.importorskip(EXAMPLES[request.param][0])
    kernel = KERNELS / request.param
    result = make_assets(kernel, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    return kernel


def direct_text(kernel: Path, table: pd.DataFrame) -> pd.DataFrame:
    """Both BERTs, every fold of each {fold: state_dict} file, with transformers' own tokenizer call (no truncation
    happens: the texts fit in max_len), sigmoid, averaged over the folds."""
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    folder = kernel / "weights" / "bert"
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    first = (table["question_title"] + " " + table["question_body"]).tolist()
    out = pd.DataFrame({"qa_id": table["qa_id"].astype(str)})
    groups = {"question": (None, ["question_well_written", "question_long", "question_why"]),
              "answer": (table["answer"].tolist(), ["answer_helpful", "answer_on_topic"])}
    for name, (second, columns) in groups.items():
        batch = tokenizer(first, second, padding="max_length", max_length=48, truncation=True, return_tensors="pt")
        assert int(batch["attention_mask"].sum(1).max()) < 48  # nothing was cut: head+tail truncation agrees
        folds = torch.load(kernel / "weights" / f"{name}.pth", weights_only=True)
        config = AutoConfig.from_pretrained(folder, num_labels=len(columns), local_files_only=True)
        values = []
        for state in folds.values():
            model = AutoModelForSequenceClassification.from_config(config)
            model.load_state_dict(state)
            with torch.no_grad():
                values.append(torch.sigmoid(model.eval()(**batch).logits).numpy())
        out[columns] = np.mean(values, axis=0)
    return out


def direct_tabular(kernel: Path, table: pd.DataFrame) -> pd.DataFrame:
    """The LightGBM folds averaged, the pipeline's probabilities put in the columns' order, the torch net's folds
    (softmax over its columns after the notebook's per-feature loop) averaged; then the three averaged."""
    import joblib

    features = features_by_hand(kernel, table)
    pipeline = joblib.load(kernel / "weights" / "logreg.joblib")
    classes = list(pipeline.classes_)
    assert classes == ["high", "low", "mid"]  # sorted by scikit-learn, not in the submission's order
    proba = pipeline.predict_proba(features)[:, [classes.index(column) for column in ("low", "mid", "high")]]
    out = pd.DataFrame({"id": table["id"].astype(str)})
    out[["low", "mid", "high"]] = (lgbm_by_hand(kernel, features) + proba + net_by_hand(kernel, features)) / 3
    return out


DIRECT = {"text-style": direct_text, "tabular-style": direct_tabular}


WAY = {"tabular-style": "inside", "text-style": "parent"}  # the ways rotate over the examples' end-to-end tests
OWNER = {"KAGGLE_USERNAME": "tester"}


def test_both_scenarios_ok_scored_and_equal_to_a_direct_run(example: Path, tmp_path: Path) -> None:
    kernel = Path(shutil.copytree(example, tmp_path / example.name, ignore=shutil.ignore_patterns(".kkb", "build")))
    way = ways(kernel, tmp_path)[WAY[example.name]]
    out = way.cwd / "build" / example.name  # the default: build/NAME in the folder the command starts in
    # one command, as a user rehearses both runs: the commit on the public data, the rerun on the hidden test
    report = dry_run(way, "--rerun-data", Path(way.kernel) / "data/competition/hidden", env=OWNER)
    assert [(s["scenario"], s["verdict"]["name"]) for s in report["scenarios"]] == [("commit", "OK"), ("rerun", "OK")]
    rerun = report["scenarios"][1]

    competition = kernel / "data" / "competition"
    config = load_competition(competition)
    scores = score_submission(Path(rerun["submission"]), competition / "answers.csv", config.metric, config.id_column,
                              config.target_columns, competition, column_types=config.column_types)
    assert EXAMPLES[example.name][1](scores.public), scores

    written = pd.read_csv(rerun["submission"], dtype={config.id_column: str})
    table = pd.read_csv(competition / "hidden" / "test.csv")
    expected = DIRECT[example.name](kernel, table)
    assert list(written.columns) == list(expected.columns)
    assert list(written[config.id_column]) == list(expected[config.id_column])
    targets = list(config.target_columns)
    np.testing.assert_allclose(written[targets].to_numpy(), expected[targets].to_numpy(),
                               atol=2e-6)
    if example.name == "tabular-style":  # three cards on one feature function: computed once, read twice
        shared = rerun["shared_features"]
        assert [(entry["function"], entry["computed_by"], entry["read_by"]) for entry in shared] == [
            ("tabkernel.features:make", ["lgbm"], ["logreg", "net"])], shared
    build_every_way(kernel, tmp_path, out, env=OWNER)  # nothing changed: each way finds the build as it was


# The submit path is the same code for every kernel: tabular-style takes it end to end for all the examples (its
# LightGBM files, pipeline and torch nets uploaded as datasets); the others' dry runs are scored by the same scorer.
@pytest.mark.parametrize("example", ["tabular-style"], indirect=True)
@pytest.mark.loopback
def test_submitted_to_the_local_kaggle_it_scores(example: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "builder.demo", "--kernel", str(example)], capture_output=True, text=True,
                          cwd=KERNELS.parent, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    score = float(done.stdout.rsplit("demo: public score ", 1)[1].split()[0])
    assert EXAMPLES[example.name][1](score), done.stdout
