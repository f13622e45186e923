"""kkb: turn a Kaggle kernel project into a scored code-competition submission."""

from __future__ import annotations

from importlib import metadata

# The version is written once, in pyproject.toml; a source tree that was never installed has none.
try:
    __version__ = metadata.version("kkb")
except metadata.PackageNotFoundError:  # pragma: no cover (a checkout used without `pip install -e .`)
    __version__ = "0+unknown"

__all__ = ["__version__"]
