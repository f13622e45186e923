"""report.html: the projection on a log scale in the terminal's units with the headroom; every target's histogram;
plots as inline SVG, with no plotting library imported."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pandas as pd
import pytest

from builder.kkb_runtime.vocabulary import Scenario
from builder.rehearse.html_report import headroom, render, time_unit
from builder.rehearse.report import DryRunReport, ScenarioReport
from builder.rehearse.svg_plots import MAX_POINTS, nice_ticks, scatters
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
        scenario=Scenario.RERUN, verdict=Judgement("OK", "submission.csv matches the sample submission", None), wall_seconds=1.0,
        peak_rss_bytes=1, peak_gpu_bytes=None, timed_out=False, failed_cell=None, failing_step=None, ename=None,
        evalue=None, traceback_tail=None, stderr_tail=None, steps=[], rows=3, hidden_rows=1000, projected_seconds=6.5,
        time_limit_seconds=32400, ram_limit_bytes=1, gpu_limit_bytes=None, fast_commit=None, blocked_network=[],
        notebook=tmp_path / "n.ipynb", log=tmp_path / "n.log.json", submission=submission, projection=projection)
    return DryRunReport("k", "o/k", "notebook", tmp_path, tmp_path / "report.json", (scenario,))


def test_every_target_has_a_histogram_beyond_a_few_collapsed(tmp_path: Path) -> None:
    page = render(_report(tmp_path, 11))
    assert "<details><summary>5 more target column(s)</summary><svg" in page
    assert page.count("<svg ") == 3  # the projection, the first six targets, the other five
    assert page.count("aria-label='target column histograms'") == 2
    assert "6.5 s (6.0-7.2 s) for 1000 rows headroom 9 h (x4,500)." in page
    assert "limit 9 h; headroom 9 h (x4,500)" in page  # beside the limit's line in the projection plot
    for svg in re.findall(r"<svg .*?</svg>", page, re.S):  # each plot is well-formed XML, as a browser needs it
        assert ElementTree.fromstring(svg).tag == "{http://www.w3.org/2000/svg}svg"
    few = render(_report(tmp_path, 2))
    assert "more target column" not in few


def test_the_report_imports_no_plotting_library(tmp_path: Path) -> None:
    code = ("import sys; from pathlib import Path; sys.path.insert(0, {tests!r}); "
            "from test_html_report_plots import _report; from builder.rehearse.html_report import render; "
            "render(_report(Path({tmp!r}), 3)); print('matplotlib' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code.format(tests=str(Path(__file__).parent), tmp=str(tmp_path))],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_labels_are_escaped_and_a_large_scatter_is_thinned() -> None:
    rows = MAX_POINTS * 3
    x = pd.Series(range(rows), dtype=float)
    plot = scatters([("<b>&col", x, x + 1)])
    assert "&lt;b&gt;&amp;col" in plot and "<b>" not in plot
    assert plot.count("<circle") == MAX_POINTS
    assert f"{MAX_POINTS} of {rows} rows drawn" in plot


@pytest.mark.parametrize(("low", "high", "ticks"), [
    (0, 10, [0, 2, 4, 6, 8, 10]),
    (0.1, 0.9, [0.2, 0.4, 0.6, 0.8]),
    (0, 37.5, [0, 10, 20, 30]),
    (5, 5, [5]),
])
def test_nice_ticks(low: float, high: float, ticks: list[float]) -> None:
    assert nice_ticks(low, high) == pytest.approx(ticks)
