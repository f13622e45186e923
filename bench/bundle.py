"""Bench 2: `kkb build` on a realistic weights folder against the machine's floor (sha256sum, cp)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from bench.common import Row, median_seconds
from builder.build import BuildSettings, build_kernel

SPEC = """
[kernel]
title = "{title}"
owner = "bench"
accelerator = "none"
[competition]
slug = "{competition}"
[code]
include = ["predict.py"]
[weights]
include = ["weights/**"]
[[steps]]
name = "noop"
run = "python predict.py --out {{out}}"
"""


def make_project(root: Path, total_mb: int, files: int, title: str = "KKB Bench Weights",
                 competition: str = "kkb-bench") -> Path:
    """A kernel project with ``total_mb`` of generated weights in ``files`` files."""
    kernel = root / "kernel"
    (kernel / "weights").mkdir(parents=True)
    (kernel / "kernel.toml").write_text(SPEC.format(title=title, competition=competition))
    (kernel / "predict.py").write_text("print('noop')\n")
    chunk = os.urandom(1024 * 1024)
    per_file = max(1, total_mb // files)
    for index in range(files):
        with (kernel / "weights" / f"fold{index}.safetensors").open("wb") as handle:
            for block in range(per_file):
                handle.write(chunk[block % 7:] + chunk[: block % 7])  # distinct blocks, cheap to make
    return kernel


QUICK = {"total_mb": 64, "files": 4, "repeat": 1}


def run(total_mb: int = 2048, files: int = 4, repeat: int = 3) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="kkb-bench-bundle-") as tmp:
        root = Path(tmp)
        kernel = make_project(root, total_mb, files)
        weights = sorted((kernel / "weights").iterdir())
        sha = lambda: subprocess.run(["sha256sum", *map(str, weights)], check=True, capture_output=True)  # noqa: E731
        copy_target = root / "cp-target"
        cp = lambda: subprocess.run(["cp", "-r", str(kernel / "weights"), str(copy_target)], check=True)  # noqa: E731
        clean_cp = lambda: shutil.rmtree(copy_target, ignore_errors=True)  # noqa: E731
        out = root / "build"
        cold_build = lambda: build_kernel(BuildSettings(kernel_dir=kernel, out_dir=out))  # noqa: E731
        clean_build = lambda: shutil.rmtree(out, ignore_errors=True)  # noqa: E731
        t_sha = median_seconds(sha, repeat)
        t_cp = median_seconds(cp, repeat, setup=clean_cp)
        t_build = median_seconds(cold_build, repeat, setup=clean_build)
        cold_build()  # the no-change case rebuilds over an existing build
        t_rebuild = median_seconds(cold_build, repeat)
        t_stat = median_seconds(lambda: [p.stat() for p in weights], repeat)
        floor = t_sha + t_cp
        detail = {"total_mb": total_mb, "files": files}
        rows.append(Row("bundle speed", "kkb build, fresh (copy + hash)", t_build, "s", "sha256sum + cp", floor,
                        t_build / floor, "<= 1.3x", detail | {"sha256sum_s": t_sha, "cp_s": t_cp}))
        rows.append(Row("bundle speed", "kkb build, nothing changed", t_rebuild, "s", "fresh build", t_build,
                        t_rebuild / t_build, "little more than stat", detail | {"stat_s": t_stat}))
    return rows
