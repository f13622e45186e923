"""Bench 3: the commit run's notebook time with the fast-commit short-circuit against every step, reference kernel.

Two copies of ``kernels/reference``: as shipped (``[fast_commit] enabled = true``) and with the fast
commit disabled, so the same notebook runs both inference steps. Each repetition runs, side by side,
the dry run's commit scenario of both (``builder.rehearse.dryrun.dry_run``, the executor's
``ExecutionResult.wall_seconds``: kernel start to last cell) and an empty one-cell notebook in the
same sandbox (the kernel-start constant, which the executor does not report on its own).
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from bench.common import Row
from bench.reference import OWNER, copy_reference, empty_notebook_seconds, ensure_assets
from builder.rehearse.dryrun import DryRunSettings, dry_run


def commit_seconds(kernel: Path, out: Path, expect_fast: bool) -> tuple[float, dict]:
    report = dry_run(DryRunSettings(kernel_dir=kernel, scenario="commit", out_dir=out, owner=OWNER))
    scenario = report.scenarios[0]
    if not scenario.ok:
        raise RuntimeError(f"commit dry run of {kernel} failed: {scenario.verdict.name}: {scenario.verdict.reason}")
    taken = (scenario.fast_commit or "").startswith("commit run (")
    if taken != expect_fast:
        raise RuntimeError(f"{kernel}: expected the fast commit {'taken' if expect_fast else 'not taken'}, "
                           f"the kernel printed: {scenario.fast_commit}")
    steps = {str(step.get("name")): float(step.get("seconds") or 0) for step in scenario.steps}
    return scenario.wall_seconds, {"decision": scenario.fast_commit, "steps_s": steps, "rows": scenario.rows}


QUICK = {"repeat": 1, "warmup": 0}


def run(repeat: int = 3, warmup: int = 1) -> list[Row]:
    ensure_assets()
    with tempfile.TemporaryDirectory(prefix="kkb-bench-fast-commit-") as tmp:
        root = Path(tmp)
        fast_kernel = copy_reference(root / "fast", fast_commit=True)
        full_kernel = copy_reference(root / "full", fast_commit=False)
        samples: dict[str, list[float]] = {"fast": [], "full": [], "empty": []}
        info: dict[str, dict] = {}
        for index in range(warmup + repeat):
            fast_s, info["fast"] = commit_seconds(fast_kernel, root / "build-fast", expect_fast=True)
            full_s, info["full"] = commit_seconds(full_kernel, root / "build-full", expect_fast=False)
            empty_s = empty_notebook_seconds()
            if index >= warmup:
                for name, value in (("fast", fast_s), ("full", full_s), ("empty", empty_s)):
                    samples[name].append(value)
    fast, full, empty = (statistics.median(samples[name]) for name in ("fast", "full", "empty"))
    detail = {"repeat": repeat, "kernel": "kernels/reference", "samples": samples, "fast": info["fast"],
              "every_step": info["full"]}
    return [
        Row("fast commit", "commit run, notebook time", fast, "s", "every step", full, fast / full,
            "<= 0.10x (10x less)", detail),
        Row("fast commit", "commit run beyond kernel start", fast - empty, "s", "empty notebook", empty, None,
            "< 10 s", {"repeat": repeat, "empty_notebook_s": empty, "samples": samples["empty"]}),
    ]
