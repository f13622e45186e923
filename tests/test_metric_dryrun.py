"""The metric in the dry run and on the local Kaggle, end to end with a Spearman-scored kernel (the QUEST trap):
a constant column, a column constant on the public part only, decimals that would make a column constant, the
expected score, and ``kkb submit`` naming the column and the part from the local Kaggle's reason."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from builder import cli
from builder.cli import views
from builder.errors import KernelFailed
from builder.kkb_runtime.vocabulary import Scenario
from builder.local_kaggle import LocalKaggle
from builder.local_kaggle.scoring import score_submission
from builder.rehearse.dryrun import DryRunSettings, dry_run
from builder.remote.submit import SubmitSettings, submit
from tests.support.demo_kaggle import LOOPBACK_WAITS, demo_adapter, serve_local_kaggle
from tests.support.files import REPO

pytestmark = [pytest.mark.slow, pytest.mark.loopback]

FIXTURE = REPO / "tests" / "kernels" / "spearman"
COMPETITION = FIXTURE / "data" / "competition"


def spearman_kernel(tmp_path: Path, mode: str, decimals: int = 6, public_ids: bool = False, owner: str = "kkb-tests") -> Path:
    kernel = Path(shutil.copytree(FIXTURE, tmp_path / "spearman"))
    spec = (kernel / "kernel.toml").read_text().replace("--mode good", f"--mode {mode}")
    spec = spec.replace("decimals = 6", f"decimals = {decimals}").replace('owner = "kkb-tests"', f'owner = "{owner}"')
    if public_ids:
        spec = spec.replace('metric = "spearman"', 'metric = "spearman"\npublic_ids = "public_ids.txt"')
    (kernel / "kernel.toml").write_text(spec)
    return kernel


def stand_in(tmp_path: Path) -> Path:
    """The hidden test in a folder of another name: no answers beside it, so only public_ids tells the split."""
    return Path(shutil.copytree(COMPETITION / "hidden", tmp_path / "stand-in"))


def test_a_constant_column_fails_the_dry_run_naming_the_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kernel = spearman_kernel(tmp_path, "constant")
    code = cli.main(["dry-run", str(kernel), "--scenario", "rerun", "--out", str(tmp_path / "build")])
    out = capsys.readouterr()
    assert code == 2, out
    report = json.loads((tmp_path / "build" / "dryrun" / "report.json").read_text())
    verdict = report["scenarios"][0]["verdict"]
    assert verdict["name"] == "Submission Scoring Error"
    assert verdict["reason"] == ("spearman: column 'b': constant predictions (0.5 in all 5 rows): spearman is undefined "
                                 "for a constant column (Kaggle's scorer fails)")
    assert "column 'b': constant predictions" in out.out


def test_a_column_constant_on_the_public_part_only_fails_where_the_split_is_known(tmp_path: Path) -> None:
    kernel = spearman_kernel(tmp_path, "public-constant", public_ids=True)
    report = dry_run(DryRunSettings(kernel_dir=kernel, scenario=Scenario.RERUN, rerun_data_dir=stand_in(tmp_path),
                                    out_dir=tmp_path / "build"))
    (rerun,) = report.scenarios
    assert rerun.verdict.name == "Submission Scoring Error", rerun.verdict
    assert rerun.verdict.reason == ("spearman: column 'b' on the public part: constant predictions (0.5 in all 5 rows): "
                                    "spearman is undefined for a constant column (Kaggle's scorer fails)")
    assert rerun.metric is not None and rerun.metric["split"] == "[competition] public_ids"


def test_decimals_that_would_make_a_column_constant_are_raised_and_reported(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    kernel = spearman_kernel(tmp_path, "close", decimals=1)
    code = cli.main(["dry-run", str(kernel), "--scenario", "rerun", "--rerun-data", str(stand_in(tmp_path)),
                     "--out", str(tmp_path / "build")])
    out = capsys.readouterr().out
    assert code == 0, out
    report = json.loads((tmp_path / "build" / "dryrun" / "report.json").read_text())
    (rerun,) = report["scenarios"]
    assert rerun["verdict"]["name"] == "OK"
    kept = {r["column"]: (r["requested"], r["used"], r["distinct_after"]) for r in rerun["metric"]["rounding"]}
    assert kept == {"a": (1, 3, 20), "b": (1, 2, 2)}  # a: x / 10 needs 3 decimals for 20 distinct values
    # one terminal line; the per-column reason is in the report
    assert "rounding: 2 columns kept more decimals than requested (no two predictions merged)" in " ".join(out.split())
    written = pd.read_csv(tmp_path / "build" / "dryrun" / "rerun.submission.csv")
    assert sorted(written["b"].unique()) == [0.5, 0.54]
    html = (tmp_path / "build" / "dryrun" / "report.html").read_text()
    assert "ties before" in html and ("1 decimals would merge its 2 distinct values into 1, and spearman ranks them "
                                      "(a column constant on a part fails the scorer)") in html


def test_with_answers_the_expected_score_is_the_local_kaggles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kernel = spearman_kernel(tmp_path, "good")
    code = cli.main(["dry-run", str(kernel), "--scenario", "rerun", "--rerun-data", str(COMPETITION / "hidden"),
                     "--out", str(tmp_path / "build")])
    out = capsys.readouterr().out
    assert code == 0, out
    report = json.loads((tmp_path / "build" / "dryrun" / "report.json").read_text())
    expected = report["scenarios"][0]["metric"]["expected"]
    scored = score_submission(tmp_path / "build" / "dryrun" / "rerun.submission.csv", COMPETITION / "answers.csv",
                              "spearman", "id", ["a", "b"], COMPETITION)
    assert (f"{expected['public']:.5f}", f"{expected['private']:.5f}") == (f"{scored.public:.5f}", f"{scored.private:.5f}")
    assert expected["split"] is True
    line = f"expected score (spearman): public {scored.public:.5f}, private {scored.private:.5f}"
    assert line in out
    assert line in (tmp_path / "build" / "dryrun" / "report.html").read_text()


@pytest.fixture
def spearman_kaggle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    yield from serve_local_kaggle(tmp_path, monkeypatch, None, competition=COMPETITION)


def test_submit_of_a_file_the_local_kaggle_refuses_prints_the_column_and_part(
        tmp_path: Path, spearman_kaggle: LocalKaggle, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    kernel = spearman_kernel(tmp_path, "public-constant", owner="kkb-demo")
    with pytest.raises(KernelFailed) as caught:
        submit(SubmitSettings(kernel_dir=kernel, out_dir=tmp_path / "build", adapter=demo_adapter(spearman_kaggle),
                              waits=LOOPBACK_WAITS))
    message, hint = caught.value.message, caught.value.hint or ""
    assert message.endswith("failed: Submission Scoring Error: spearman: column 'b' on the public part: constant "
                            "predictions (0.5 in all 5 rows): spearman is undefined for a constant column (Kaggle's "
                            "scorer fails)"), message
    assert hint.startswith("the server names the reason above; kkb dry-run"), hint
    monkeypatch.setenv("COLUMNS", "400")  # rich folds long cells: keep the reason on one line
    monkeypatch.setattr(views.console, "_width", None)  # a width rich took from COLUMNS at import would win
    for command in ("status", "history"):
        assert cli.main([command, str(kernel)]) == 0
        assert "column 'b' on the public part" in capsys.readouterr().out, command
