"""kkb: turn a Kaggle kernel project into a scored code-competition submission."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
