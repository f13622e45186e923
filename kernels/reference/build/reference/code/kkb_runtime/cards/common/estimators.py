"""A fitted scikit-learn object saved with joblib (an sklearn card's estimator, a torch card's preprocessor): a
pickle, so it loads only with the card's ``allow_joblib``; ``pickle_main`` names the module that stands in for
the notebook's ``__main__`` while it loads."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Protocol

from ...pickles import main_module
from . import models


class Pickled(Protocol):
    """The keys of a card that loads a pickle (sklearn, torch)."""

    @property
    def name(self) -> str: ...

    @property
    def allow_joblib(self) -> bool: ...

    @property
    def pickle_main(self) -> str | None: ...


def load_estimator(card: Pickled, path: Path) -> Any:
    if not card.allow_joblib:
        raise models.ModelLoadError(f"model '{card.name}': {path.name} is a pickle: loading it needs allow_joblib = true")
    joblib = _joblib(card)
    with main_module(card.pickle_main):
        try:
            return joblib.load(path)
        except AttributeError as exc:
            raise models.ModelLoadError(f"model '{card.name}': {path.name} does not unpickle: {exc} (a class saved "
                                        "from a notebook: set pickle_main to the module of your code that defines it)") from None


def _joblib(card: Pickled) -> Any:
    try:
        return importlib.import_module("joblib")
    except ImportError:
        raise models.ModelLoadError(f"model '{card.name}': joblib is not installed here: install scikit-learn") from None


__all__ = ["Pickled", "load_estimator"]
