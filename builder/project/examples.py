"""The example kernel kkb ships (``kernels/minimal``, installed as ``builder.examples.minimal``).

A pip user has no checkout: hints point at this copy, which every install has, rather than at a path of
the repository."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def example_kernel() -> Path:
    """The pandas-only example kernel project, as installed."""
    try:  # a folder without __init__.py: a namespace package, so its path, not importlib.resources' MultiplexedPath
        spec = importlib.util.find_spec("builder.examples.minimal")
    except ModuleNotFoundError:
        spec = None
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    # an editable install made before the example was mapped: the checkout's copy
    return Path(__file__).resolve().parents[2] / "kernels" / "minimal"


def example_spec_hint() -> str:
    """``see the example …/kernel.toml, or start a project with kkb init``: for a missing or unreadable spec."""
    return (f"start a project with kkb init DIR --competition SLUG, or see the example kkb ships: "
            f"{example_kernel() / 'kernel.toml'}")
