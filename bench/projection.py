"""Bench 6: the dry run's time projection against the real rerun, for the example kernels at three scales.

Per kernel, a 1-row public test (the first row of its public sample and that row's files) is the
projection's only measurement: ``kkb dry-run --scenario rerun --hidden-rows N`` projects N rows from it.
Then the rerun really runs on that row replicated N times (``--rerun-scale N``, what the hidden test of
N rows costs here) and its notebook time is the real one, less the card steps' timing probe (the probe
runs only in dry runs: kkb_runtime.timing). Reported: projected (central) / real, and whether the real
time is inside the projected range ``[low, high]`` (the target: always). Both sides run in one process,
one after the other, on the same machine; the device is this machine's (a CPU shape is projected as
measured, so the device factor is 1 here: the kernels are run with ``accelerator = "none"``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from bench.common import Row
from bench.reference import REPO
from builder.project.spec import load_spec
from builder.rehearse.dryrun import DryRunSettings, dry_run

KERNELS = ("reference", "cassava-style")
SCALES = (10, 30, 100)
QUICK = {"kernels": ("cassava-style",), "scales": (10,)}


def _kernel_copy(name: str, root: Path) -> Path:
    """A private copy with its assets, on a CPU shape (the projection then uses this machine's time as is)."""
    source = REPO / "kernels" / name
    subprocess.run([sys.executable, str(source / "make_assets.py")], check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    kernel = Path(shutil.copytree(source, root / name, ignore=shutil.ignore_patterns(".kkb", "__pycache__", "build")))
    toml = kernel / "kernel.toml"
    # The value only: a comment after it (`accelerator = "gpu"  # T4 on Kaggle`) stays, and the key is really replaced.
    text, count = re.subn(r'(?m)^accelerator\s*=\s*"[^"]*"', 'accelerator = "none"', toml.read_text())
    toml.write_text(text if count else text.replace("[kernel]\n", '[kernel]\naccelerator = "none"\n', 1))
    if load_spec(kernel).kernel.accelerator != "none":
        raise RuntimeError(f"{toml}: could not set [kernel] accelerator = \"none\"")
    return kernel


def one_row(kernel: Path, dest: Path) -> Path:
    """The kernel's public test cut to its first row (that row's test files kept, the rest removed)."""
    spec = load_spec(kernel)
    data = spec.competition.data_dir(kernel)
    assert data is not None
    shutil.copytree(data, dest)
    sample_path = dest / spec.competition.sample_submission
    sample = pd.read_csv(sample_path, dtype=str)
    keep, drop = str(sample.iloc[0, 0]), set(sample.iloc[1:, 0].astype(str))
    sample.iloc[:1].to_csv(sample_path, index=False)
    for path in sorted(dest.rglob("*"), reverse=True):
        if path.is_file() and path != sample_path and (path.stem in drop or path.name in drop) and keep not in path.name:
            path.unlink()
    for table in dest.rglob("*.csv"):  # test tables listing the ids: only the kept row
        frame = pd.read_csv(table, dtype=str)
        if table != sample_path and spec.submission.id_column in frame.columns:
            frame[frame[spec.submission.id_column] == keep].to_csv(table, index=False)
    return dest


def _probe_seconds(scenario: object) -> float:
    steps = getattr(scenario, "steps", [])
    return sum(float(fold.get("probe_seconds") or 0.0) for step in steps for fold in ((step.get("timing") or {}).get("folds") or ()))


def run(kernels: tuple[str, ...] = KERNELS, scales: tuple[int, ...] = SCALES) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="kkb-bench-projection-") as tmp:
        root = Path(tmp)
        for name in kernels:
            kernel = _kernel_copy(name, root)
            data = one_row(kernel, root / f"{name}-one-row")
            for scale in scales:
                projected = dry_run(DryRunSettings(kernel_dir=kernel, data_dir=data, scenario="rerun", hidden_rows=scale,
                                                   out_dir=root / f"build-{name}-p{scale}"))
                real = dry_run(DryRunSettings(kernel_dir=kernel, data_dir=data, scenario="rerun", rerun_scale=scale,
                                              hidden_rows=scale, fit=False, out_dir=root / f"build-{name}-r{scale}"))
                (p_scenario,), (r_scenario,) = projected.scenarios, real.scenarios
                p = p_scenario.projection or {}
                measured = r_scenario.wall_seconds - _probe_seconds(r_scenario)
                inside = p.get("low", 0.0) <= measured <= p.get("high", 0.0)
                rows.append(Row("projection", f"{name}: 1 row projected to {scale} rows", p.get("seconds"), "s",
                                "real rerun", measured, (p.get("seconds") or 0.0) / measured if measured else None,
                                "real inside [low, high]", {"low": p.get("low"), "high": p.get("high"), "inside": inside,
                                                            "basis": p.get("basis"), "real_wall_s": r_scenario.wall_seconds,
                                                            "probe_s": _probe_seconds(r_scenario)}))
                high = p.get("high") or 0.0
                rows.append(Row("projection", f"{name}: high end at {scale} rows / real rerun", high, "s", "real rerun",
                                measured, high / measured if measured else None, "<= 3x, real inside",
                                {"load": p.get("load"), "summary": p.get("summary")}))
    return rows
