"""Core kkb as a pip user gets it: ``pip install kkb`` (no extras) into a fresh venv, from the package registry.

Measured: what the install adds to the venv (disk use as ``du`` counts it, and the bytes of the files), beside
the fresh venv's own pip and setuptools; that torch is not there; that the installed ``kkb`` builds and dry-runs
the minimal kernel (both runs OK) and refuses an image card naming ``kkb[vision]``.

Target: under 300 MB. Not a test: it needs the package registry and a minute or two.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import Row

REPO = Path(__file__).resolve().parent.parent
MB = 1e6
TARGET_MB = 300.0
IMAGE_CARD = '\n[[models]]\nname = "net"\narch = "resnet18"\ncheckpoint = "weights/net.pt"\nnum_classes = 1\n'


def run() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="kkb-bench-install-") as work:
        root = Path(work)
        wheel = _wheel(root)
        empty, venv = root / "empty", root / "venv"
        for folder in (empty, venv):
            subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
        _call([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)], root)
        used, written = _sizes(venv)
        own_used, own_written = _sizes(empty)
        torch_absent = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch"], capture_output=True).returncode != 0
        dry_ok = _dry_run_ok(venv, root)
        refused = _image_card_refused(venv, root)
    added_used, added_written = (used - own_used) / MB, (written - own_written) / MB
    detail = {"venv_du_mb": round(used / MB, 1), "fresh_venv_du_mb": round(own_used / MB, 1),
              "torch_absent": torch_absent, "minimal_dry_run_ok": dry_ok, "image_card_refused_naming_extra": refused}
    return [
        Row("install", "core install: disk use it adds (du)", added_used, "MB", "fresh venv (pip, setuptools)",
            own_used / MB, added_used / (own_used / MB), target=f"< {TARGET_MB:.0f} MB", detail=detail),
        Row("install", "core install: bytes of the files it adds", added_written, "MB", "", None, None,
            target=f"< {TARGET_MB:.0f} MB"),
        Row("install", "core install: torch absent, minimal dry run OK", float(torch_absent and dry_ok), "", "", None,
            None, target="1 (both)"),
        Row("install", "core install: image card refused naming kkb[vision]", float(refused), "", "", None, None,
            target="1"),
    ]


def _wheel(root: Path) -> Path:
    _call([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(root / "dist"),
           str(REPO)], root)
    return next((root / "dist").glob("kkb-*.whl"))


def _sizes(venv: Path) -> tuple[int, int]:
    """(disk use in bytes as du counts it: allocated blocks, hard links once; the files' own bytes)."""
    used = written = 0
    seen: set[tuple[int, int]] = set()
    for top, _, files in os.walk(venv):
        for name in files:
            info = os.lstat(os.path.join(top, name))
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            used += info.st_blocks * 512
            written += info.st_size
    return used, written


def _dry_run_ok(venv: Path, root: Path) -> bool:
    kernel = Path(shutil.copytree(REPO / "kernels" / "minimal", root / "minimal", ignore=shutil.ignore_patterns(".kkb")))
    done = _kkb(venv, root, "dry-run", str(kernel), "--out", str(root / "build-minimal"), "--scenario", "both")
    return done.returncode == 0 and done.stdout.count("OK") >= 2


def _image_card_refused(venv: Path, root: Path) -> bool:
    kernel = Path(shutil.copytree(REPO / "kernels" / "minimal", root / "card", ignore=shutil.ignore_patterns(".kkb")))
    with (kernel / "kernel.toml").open("a", encoding="utf-8") as spec:
        spec.write(IMAGE_CARD)
    done = _kkb(venv, root, "build", str(kernel), "--out", str(root / "build-card"))
    return done.returncode != 0 and 'pip install "kkb[vision]"' in done.stderr


def _kkb(venv: Path, root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["COLUMNS"] = "200"
    return subprocess.run([str(venv / "bin" / "kkb"), *argv], cwd=root, env=env, capture_output=True, text=True,
                          timeout=600)


def _call(argv: list[str], cwd: Path) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} failed: {done.stderr[-2000:]}")
