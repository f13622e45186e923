"""`python -m bench --quick` for the cheap benchmarks: the table has its rows and the JSON is written.

No timing assertions: numbers are whatever this machine measures. The reference-kernel benchmarks
(fast_commit, dryrun, inference) need torch and tens of seconds even when quick; `make bench` runs them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.files import REPO

pytestmark = pytest.mark.slow  # it runs the local Kaggle (a few seconds)


def test_quick_bench_writes_table_and_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, "-m", "bench", "push", "bundle", "--quick", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    for measure in ("nothing changed: uploaded", "code changed: uploaded", "code changed: uploaded vs code alone",
                    "nothing changed: wall time", "code changed: wall time",
                    "kkb build, fresh (copy + hash)", "kkb build, nothing changed"):
        assert measure in done.stdout
    data = json.loads(out.read_text())
    rows = {(row["benchmark"], row["measure"]): row for row in data["rows"]}
    assert len(rows) == 7 and data["machine"]["cpu_count"]
    noop = rows[("incremental push", "nothing changed: uploaded")]
    assert noop["unit"] == "MB" and noop["baseline_value"] > 0 and noop["ratio"] is not None
    assert all(row["value"] is not None for row in data["rows"])


def test_render_table_shows_skipped_rows_and_small_ratios() -> None:
    from bench.common import Row, render_table

    table = render_table([Row("inference", "vs forward ceiling (CUDA)", None, "/s", target="skipped: no CUDA"),
                          Row("incremental push", "code changed: uploaded", 0.137, "MB", "plain", 2147.6, 0.137 / 2147.6)])
    assert "skipped: no CUDA" in table and "6.4e-05x" in table


def test_dry_run_ratios_are_medians_of_pairs_run_back_to_back() -> None:
    """The machine slows down between pairs (direct 10 s, then 14 s): each pair's ratio is kept, and the target's
    ratio is their median, not the ratio of the two sides' medians taken minutes apart."""
    from bench.dryrun import _rows

    dry, direct, empty = [12.0, 15.0, 16.8], [10.0, 14.0, 12.0], [1.0, 1.0, 1.0]
    samples = {"dry_run": dry, "direct": direct, "empty": empty, "notebook": [11.0, 14.0, 15.0], "build": [],
               "own": [0.5, 0.5, 0.5]}
    info: dict[str, dict[str, Any]] = {"dry_run": {"rows": 3000, "notebook_s": 15.0, "steps_s": {}}, "direct": {"steps_s": {}}}
    rows = {row.measure: row for row in _rows("hidden-x10", samples, info, repeat=3)}
    run = rows["rerun (hidden-x10, 3000 rows): kkb dry-run"]
    overhead = rows["rerun (hidden-x10, 3000 rows): overhead - kernel start"]
    assert run.ratio == pytest.approx(1.2) and run.detail["ratio_of_medians"] == pytest.approx(15.0 / 12.0)
    assert overhead.ratio == pytest.approx(0.1) and overhead.baseline_value == 12.0
    assert overhead.detail["of_medians"] == pytest.approx((15.0 - 12.0 - 1.0) / 12.0)
