"""Shared benchmark plumbing: side-by-side timings in one run, medians, a table of ratios, JSON out."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Row:
    benchmark: str
    measure: str
    value: float
    unit: str
    baseline: str = ""
    baseline_value: float | None = None
    ratio: float | None = None
    target: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


def median_seconds(action: Callable[[], Any], repeat: int, warmup: int = 1, setup: Callable[[], Any] | None = None) -> float:
    """Median wall time of ``action`` over ``repeat`` runs after ``warmup`` untimed ones."""
    samples = []
    for index in range(warmup + repeat):
        if setup is not None:
            setup()
        started = time.perf_counter()
        action()
        elapsed = time.perf_counter() - started
        if index >= warmup:
            samples.append(elapsed)
    return statistics.median(samples)


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "cpu_count": os.cpu_count(), "processor": platform.processor() or platform.machine(),
            "platform": platform.platform()}


def render_table(rows: list[Row]) -> str:
    header = f"{'benchmark':22} {'measure':38} {'value':>12} {'baseline':>12} {'ratio':>8}  target"
    lines = [header, "-" * len(header)]
    for row in rows:
        baseline = "" if row.baseline_value is None else f"{row.baseline_value:.3f}"
        ratio = "" if row.ratio is None else f"{row.ratio:.2f}x"
        lines.append(f"{row.benchmark:22} {row.measure:38} {row.value:>10.3f}{row.unit:>2} {baseline:>12} {ratio:>8}  {row.target}")
    return "\n".join(lines)


def write_json(rows: list[Row], name: str = "bench.json") -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / name
    path.write_text(json.dumps({"machine": machine(), "rows": [asdict(row) for row in rows]}, indent=1))
    return path
