"""Lay out kkb's stand-in evaluation-API competition: its ``kaggle_evaluation`` package in both data folders.

A real competition ships one ``kaggle_evaluation/`` in its data, and the scoring rerun finds the same package
next to the hidden test. This example keeps that package once, in ``kernels/evalapi/kaggle_evaluation/``, and
copies it into ``data/competition/public/`` (what ``kkb dry-run kernels/evalapi`` mounts) and
``data/competition/hidden/`` (what the local Kaggle's rerun mounts). The copies are generated, not committed:

    python kernels/evalapi/make_assets.py

Seconds, idempotent: an up-to-date copy is left as it is.
"""

from __future__ import annotations

import filecmp
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE = HERE / "kaggle_evaluation"
FOLDERS = (HERE / "data" / "competition" / "public", HERE / "data" / "competition" / "hidden")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


def same_tree(a: Path, b: Path) -> bool:
    compared = filecmp.dircmp(a, b, ignore=["__pycache__"])
    if compared.left_only or compared.right_only or compared.funny_files:
        return False
    if filecmp.cmpfiles(a, b, compared.common_files, shallow=False)[1:] != ([], []):
        return False
    return all(same_tree(a / name, b / name) for name in compared.common_dirs)


def copy_package(folder: Path) -> bool:
    """Copy the package into ``folder``; False when the copy there was already up to date."""
    target = folder / PACKAGE.name
    if target.is_dir() and same_tree(PACKAGE, target):
        return False
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(PACKAGE, target, ignore=IGNORE)
    return True


def main() -> int:
    for folder in FOLDERS:
        state = "copied" if copy_package(folder) else "up to date"
        print(f"{folder.relative_to(HERE)}/{PACKAGE.name}: {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
