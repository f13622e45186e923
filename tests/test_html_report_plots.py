"""report.html: the projection on a log scale in the terminal's units with the headroom; every target's histogram."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from builder.rehearse.html_report import headroom, render, time_unit
from builder.rehearse.report import DryRunReport, ScenarioReport
from builder.rehearse.verdict import Judgement


@pytest.mark.parametrize(("high", "limit", "text"), [
    (7.2, 32400, "headroom 9 h (x4,500)"),
    (30000, 32400, "headroom 40 min (x1.1)"),
    (40000, 32400, "over the limit by 2.11 h"),
    (20, 90, "headroom 1.17 min (x4.5)"),
])
def test_headroom_in_the_terminals_units(high: float, limit: float, text: str) -> None:
    assert headroom(high, limit) == text


def test_units() -> None:
    assert [time_unit(s)[0] for s in (5, 60, 3599, 3600, 32400)] == ["s", "min", "min", "h", "h"]


def _report(tmp_path: Path, targets: int) -> DryRunReport:
    submission = tmp_path / "rerun.submission.csv"
    pd.DataFrame({"id": ["a", "b", "c"], **{f"t{i}": [0.1, 0.5, 0.9] for i in range(targets)}}).to_csv(submission,
                                                                                                      index=False)
    projection = {"seconds": 6.5, "low": 6.0, "high": 7.2, "limit_seconds": 32400, "hidden_rows": 1000,
                  "summary": "6.5 s (6.0-7.2 s) for 1000 rows", "components": []}
    scenario = ScenarioReport(
        scenario="rerun", verdict=Judgement("OK", "submission.csv matches the sample submission", None), wall_seconds=1.0,
        peak_rss_bytes=1, peak_gpu_bytes=None, timed_out=False, failed_cell=None, failing_step=None, ename=None,
        evalue=None, traceback_tail=None, stderr_tail=None, steps=[], rows=3, hidden_rows=1000, projected_seconds=6.5,
        time_limit_seconds=32400, ram_limit_bytes=1, gpu_limit_bytes=None, fast_commit=None, blocked_network=[],
        notebook=tmp_path / "n.ipynb", log=tmp_path / "n.log.json", submission=submission, projection=projection)
    return DryRunReport("k", "o/k", "notebook", tmp_path, tmp_path / "report.json", (scenario,))


def test_every_target_has_a_histogram_beyond_a_few_collapsed(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    page = render(_report(tmp_path, 11))
    assert "<details><summary>5 more target column(s)</summary><img" in page
    assert page.count("data:image/png;base64,") == 3  # the projection, the first six targets, the other five
    assert "6.5 s (6.0-7.2 s) for 1000 rows headroom 9 h (x4,500)." in page
    few = render(_report(tmp_path, 2))
    assert "more target column" not in few


def test_the_plots_say_when_matplotlib_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real = builtins.__import__

    def no_matplotlib(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    report = _report(tmp_path, 1)
    page = render(replace(report, scenarios=report.scenarios))
    assert 'plots missing: matplotlib is not installed (pip install "kkb[report]")' in page
