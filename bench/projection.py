"""Bench 6: the dry run's time projection against the real rerun, for the example kernels at three scales.

Per card kernel, a 1-row public test (the first row of its public sample and that row's files) is the
projection's only measurement: ``kkb dry-run --scenario rerun --hidden-rows N`` projects N rows from it (the card
steps' timing probe gives the per-row rate). Then the rerun really runs on that row replicated N times
(``--rerun-scale N``, what the hidden test of N rows costs here) and its notebook time is the real one, less the card
steps' timing probe (the probe runs only in dry runs: kkb_runtime.timing). Two more shapes, each projected from its
public test to 10 times its rows and measured at ``--rerun-scale 10``: the evaluation-API example (``kernels/evalapi``:
the first predict call fixed, the later calls per row) and the partitioned example (``tests/kernels/partitioned``,
Optiver's shape: a user step whose second size is replicated along its partitions); and the table example
(``kernels/tabular-style``: three table cards, a per-row time of microseconds) from its 5 rows to 2,000. Reported: projected (central) /
real, and whether the real time is inside the projected range ``[low, high]`` with its high end at most 2x the real
one (the targets). Both sides run in one process, one after the other, on the same machine; the device is this
machine's (a CPU shape is projected as measured, so the device factor is 1 here: the kernels run with
``accelerator = "none"``).
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
# Shapes projected from their public test to this many times its rows. The table kernel's per-row time is
# microseconds: its hidden test, 2,000 rows, is where that fit is tested.
SHAPE_SCALES = {"evalapi": 10, "partitioned": 10, "tabular": 400}
SHAPES = tuple(SHAPE_SCALES)
QUICK = {"kernels": ("cassava-style",), "scales": (10,), "shapes": ("evalapi", "partitioned")}
PARTITIONED = REPO / "tests" / "kernels" / "partitioned"


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


def run(kernels: tuple[str, ...] = KERNELS, scales: tuple[int, ...] = SCALES, shapes: tuple[str, ...] = SHAPES) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="kkb-bench-projection-") as tmp:
        root = Path(tmp)
        for name in kernels:
            kernel = _kernel_copy(name, root)
            data = one_row(kernel, root / f"{name}-one-row")
            for scale in scales:
                rows += _compared(f"{name}: 1 row", kernel, data, scale, scale, root / f"{name}-{scale}")
        for shape in shapes:
            kernel, data = _shape(shape, root)
            public = len(pd.read_csv(data / load_spec(kernel).competition.sample_submission))
            scale = SHAPE_SCALES[shape]
            rows += _compared(f"{shape}: public test ({public} rows)", kernel, data, public * scale, scale,
                              root / f"{shape}-{scale}")
    return rows


def _compared(label: str, kernel: Path, data: Path, hidden: int, scale: int, out: Path) -> list[Row]:
    """The projection from ``data`` to ``hidden`` rows against the rerun measured on ``data`` x ``scale``."""
    projected = dry_run(DryRunSettings(kernel_dir=kernel, data_dir=data, scenario="rerun", hidden_rows=hidden,
                                       out_dir=out / "projected"))
    real = dry_run(DryRunSettings(kernel_dir=kernel, data_dir=data, scenario="rerun", rerun_scale=scale,
                                  hidden_rows=hidden, fit=False, out_dir=out / "real"))
    (p_scenario,), (r_scenario,) = projected.scenarios, real.scenarios
    if not (p_scenario.ok and r_scenario.ok):
        raise RuntimeError(f"{label}: {p_scenario.verdict.name} / {r_scenario.verdict.name}: {r_scenario.verdict.reason}")
    p = p_scenario.projection or {}
    measured = r_scenario.wall_seconds - _probe_seconds(r_scenario)
    high = p.get("high") or 0.0
    inside = p.get("low", 0.0) <= measured <= high
    return [
        Row("projection", f"{label} projected to {hidden} rows", p.get("seconds"), "s", "real rerun", measured,
            (p.get("seconds") or 0.0) / measured if measured else None, "real inside [low, high]",
            {"low": p.get("low"), "high": high, "inside": inside, "basis": p.get("basis"),
             "real_wall_s": r_scenario.wall_seconds, "probe_s": _probe_seconds(r_scenario)}),
        Row("projection", f"{label}: high end at {hidden} rows / real rerun", high, "s", "real rerun", measured,
            high / measured if measured else None, "<= 2x, real inside", {"load": p.get("load"), "summary": p.get("summary")}),
    ]


def _shape(name: str, root: Path) -> tuple[Path, Path]:
    """(a private copy of the kernel, its public test) for the evaluation-API, partitioned and table examples."""
    if name == "tabular":  # tabular-style: three table cards (LightGBM, scikit-learn, a torch net) on 5 rows
        kernel = _kernel_copy("tabular-style", root)
        data = load_spec(kernel).competition.data_dir(kernel)
        assert data is not None
        return kernel, data
    if name == "evalapi":
        source = REPO / "kernels" / "evalapi"
        subprocess.run([sys.executable, str(source / "make_assets.py")], check=True, cwd=REPO, stdout=subprocess.DEVNULL)
        kernel = Path(shutil.copytree(source, root / name, ignore=shutil.ignore_patterns(".kkb", "__pycache__", "build")))
        data = load_spec(kernel).competition.data_dir(kernel)
        assert data is not None
        return kernel, data
    kernel = Path(shutil.copytree(PARTITIONED, root / name, ignore=shutil.ignore_patterns(".kkb", "__pycache__", "build")))
    return kernel, optiver_like(root / f"{name}-public")


def optiver_like(folder: Path, stocks: tuple[int, ...] = (0,), times: tuple[int, ...] = (4, 32, 34)) -> Path:
    """Optiver's public test as the competition ships it (3 rows of stock 0): test.csv rows (stock_id, time_id,
    row_id = "{stock_id}-{time_id}") pointing at book_test.parquet/stock_id=N/ and trade_test.parquet/stock_id=N/
    partitions (100 book rows per time id)."""
    rows = [(s, t) for s in stocks for t in times]
    folder.mkdir(parents=True)
    (folder / "test.csv").write_text("stock_id,time_id,row_id\n" + "".join(f"{s},{t},{s}-{t}\n" for s, t in rows))
    (folder / "sample_submission.csv").write_text("row_id,target\n" + "".join(f"{s}-{t},0.003\n" for s, t in rows))
    for stock in stocks:
        for side in ("book_test.parquet", "trade_test.parquet"):
            part = folder / side / f"stock_id={stock}"
            part.mkdir(parents=True)
            pd.DataFrame({"time_id": [t for t in times for _ in range(100)],
                          "price": [1.0 + stock * 0.1 + t * 0.001 + i * 1e-5 for t in times for i in range(100)]},
                         ).to_parquet(part / "part-0.parquet", index=False)
    return folder
