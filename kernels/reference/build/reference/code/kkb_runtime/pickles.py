"""Pickles saved from a notebook: their classes are named ``__main__.Class``.

A notebook that pickled an ``OptimizedRounder`` or a scikit-learn pipeline with its own transformer
wrote ``__main__.OptimizedRounder`` into the file. In the kernel, ``__main__`` is the notebook kkb
rendered, which defines no such class: ``pickle_main = "module"`` (on a tabular card, or on a
``[[postprocess]]`` function stage) names the module of the code dataset that defines it, and
:func:`main_module` makes it ``__main__`` while the pickle loads.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def main_module(name: str | None) -> Iterator[None]:
    """While the block runs, ``sys.modules["__main__"]`` is module ``name`` (nothing changes when None)."""
    if not name:
        yield
        return
    saved = sys.modules["__main__"]
    sys.modules["__main__"] = importlib.import_module(name)
    try:
        yield
    finally:
        sys.modules["__main__"] = saved


__all__ = ["main_module"]
