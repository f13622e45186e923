"""`python -m bench --quick` for the cheap benchmarks: the table has its rows and the JSON is written.

No timing assertions: numbers are whatever this machine measures. The reference-kernel benchmarks
(fast_commit, dryrun, inference) need torch and tens of seconds even when quick; `make bench` runs them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
