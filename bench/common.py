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
    value: float | None  # None: not measured here (the target column says why)
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
    width = max([38, *(len(row.measure) for row in rows)])
    header = f"{'benchmark':22} {'measure':{width}} {'value':>12} {'baseline':>12} {'ratio':>8}  target"
    lines = [header, "-" * len(header)]
    for row in rows:
        baseline = "" if row.baseline_value is None else f"{row.baseline_value:.3f}"
        value = "-" if row.value is None else f"{row.value:.3f}"
        lines.append(f"{row.benchmark:22} {row.measure:{width}} {value:>10}{row.unit:>2} {baseline:>12} {_ratio(row.ratio):>8}  {row.target}")
    return "\n".join(lines)


def _ratio(ratio: float | None) -> str:
    if ratio is None:
        return ""
    return f"{ratio:.2f}x" if ratio == 0 or ratio >= 0.01 else f"{ratio:.2g}x"  # 0.0095x, 6.4e-05x: not 0.00x


def write_json(rows: list[Row], path: Path | str = "bench.json") -> Path:
    """Write ``rows`` to ``path`` (a bare name goes into bench/results/)."""
    path = Path(path)
    path = path if path.parent != Path(".") else RESULTS / path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"machine": machine(), "rows": [asdict(row) for row in rows]}, indent=1))
    return path
