"""Bench: what the memory accounting and the writable root cost, as ratios in one run.

Four variants of the sandbox, side by side, each on an empty one-cell notebook (the kernel-start
constant) and on ``kkb dry-run kernels/reference --scenario rerun`` (the public test):

* ``baseline``: no memory accounting while the run goes (``KKB_MEMORY_ACCOUNTING=none``: summed RSS
  sampled for the report) and the read-only root (``KKB_SANDBOX_ROOT_FS=read-only``);
* ``memory``: the accounting this machine allows (a cgroup, else summed PSS sampled every 0.1 s);
* ``overlay``: the writable root this machine allows (overlayfs, fuse-overlayfs or bubblewrap's);
* ``both``: what a dry run uses by default.

Each ratio is the variant's time over the baseline's. Where the machine lacks a mode (no overlay in
the portable sandbox), the variant falls back and its row says which ran.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.common import Row
from bench.reference import OWNER, REPO, clean_environ, copy_reference, empty_notebook_seconds, ensure_assets
from builder.run.isolation import choose_isolation
from builder.run.memory import choose_accounting
from builder.run.overlay import choose_root_filesystem

VARIANTS: dict[str, dict[str, str]] = {
    "baseline": {"KKB_MEMORY_ACCOUNTING": "none", "KKB_SANDBOX_ROOT_FS": "read-only"},
    "memory": {"KKB_SANDBOX_ROOT_FS": "read-only"},
    "overlay": {"KKB_MEMORY_ACCOUNTING": "none"},
    "both": {},
}
QUICK = {"repeat": 1, "reference": False}


@contextmanager
def _variant(variables: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in ("KKB_MEMORY_ACCOUNTING", "KKB_SANDBOX_ROOT_FS")}
    for name in saved:
        os.environ.pop(name, None)
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _reference_seconds(kernel: Path, out: Path, variables: dict[str, str]) -> float:
    argv = [sys.executable, "-m", "builder", "dry-run", str(kernel), "--scenario", "rerun", "--out", str(out),
            "--owner", OWNER, "--json"]
    done = subprocess.run(argv, cwd=REPO, env=clean_environ() | variables, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"kkb dry-run failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return float(json.loads(done.stdout)["scenarios"][0]["wall_seconds"])  # the notebook's own run, sandbox included


def _what_ran(variables: dict[str, str]) -> str:
    with _variant(variables):
        mode = choose_isolation("auto").mode
        return f"{choose_accounting(2**30).kind}, root {choose_root_filesystem(mode).kind or 'host'} ({mode})"


def run(repeat: int = 3, reference: bool = True) -> list[Row]:
    samples: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="kkb-bench-sandbox-") as tmp:
        kernel = None
        if reference:
            ensure_assets()
            kernel = copy_reference(Path(tmp) / "reference")
            _reference_seconds(kernel, Path(tmp) / "build", {})  # the build, once, outside the timings
        empty_notebook_seconds(rerun=True)  # warm-up: the first kernel start pays for cold caches
        for _ in range(repeat):
            for name, variables in VARIANTS.items():  # interleaved: a machine's drift hits every variant alike
                with _variant(variables):
                    samples.setdefault(("empty notebook", name), []).append(empty_notebook_seconds(rerun=True))
                if kernel is not None:
                    started = time.perf_counter()
                    notebook = _reference_seconds(kernel, Path(tmp) / "build", variables)
                    samples.setdefault(("reference rerun", name), []).append(notebook)
                    samples.setdefault(("reference rerun, kkb dry-run", name), []).append(time.perf_counter() - started)
    rows = []
    for (what, name), values in samples.items():
        if name == "baseline":
            continue
        value, base = statistics.median(values), statistics.median(samples[(what, "baseline")])
        rows.append(Row("sandbox cost", f"{what}: {name} ({_what_ran(VARIANTS[name])})", value, "s", "baseline", base,
                        value / base, "< 1.05x", {"repeat": repeat, "samples": values,
                                                  "baseline_samples": samples[(what, "baseline")]}))
    return rows
