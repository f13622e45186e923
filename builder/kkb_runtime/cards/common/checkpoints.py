"""Checkpoints as training scripts save them: safe loading, key remapping, folds.

* :func:`load_pickle` reads a torch pickle with ``weights_only=True`` and an allow-list of numpy's
  safe types (arrays, dtypes, scalars: ``{"model": sd, "preds": ndarray, "best_auc": np.float64}``)
  plus ``argparse.Namespace`` (timm's ``args``). Anything else is refused quoting the line torch gives
  that names the class (``GLOBAL mypackage.Config``), without torch's terminal colour codes. Only a
  card's explicit ``allow_pickle = true`` loads such a file with ``weights_only=False``; the build
  records that it did.
* :func:`remap_keys`: a checkpoint saved by another wrapper (``backbone.`` vs ``model.``, a renamed
  head) is renamed with the card's ``strip_prefix``, ``key_rename`` (regex, replacement) pairs and
  ``add_prefix``, in that order, after kkb's own ``module.``/``_orig_mod.`` stripping.
* :func:`averaged_folds`: every fold the build wrote (``Built.checkpoints``), averaged with ``fold_weights``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...card import Built, Card, Fold, NetworkCard, weighted_folds

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
UNSUPPORTED_GLOBAL = re.compile(r"Unsupported global: GLOBAL ([\w.]+)")


class CheckpointRefused(RuntimeError):
    """A pickle that needs a class outside the allow-list (``allowed`` says which class)."""

    def __init__(self, message: str, global_name: str | None) -> None:
        super().__init__(message)
        self.global_name = global_name


def plain(text: str) -> str:
    """No terminal colour codes: messages end up in logs, JSON and Kaggle's web page."""
    return ANSI.sub("", text)


def numpy_safe_globals() -> list[Any]:
    """numpy's data-only types: what ``np.save``-free pickles of arrays and scalars reference."""
    import numpy as np

    core = getattr(np, "_core", None) or np.core  # numpy 2 renamed np.core to np._core
    found: list[Any] = [np.ndarray, np.dtype, core.multiarray._reconstruct, core.multiarray.scalar]
    dtypes = getattr(np, "dtypes", None)
    if dtypes is not None:
        found += [getattr(dtypes, name) for name in dir(dtypes) if name.endswith("DType")]
    # numpy 1.x pickles dtypes and scalars through these module paths too
    found += [getattr(np, name) for name in ("float64", "float32", "float16", "int64", "int32", "bool_")]
    return found


def safe_globals() -> list[Any]:
    import argparse

    return [argparse.Namespace, *numpy_safe_globals()]


def load_pickle(path: Path, allow_pickle: bool = False) -> Any:
    """``torch.load`` on the CPU: data only, unless the card opted in to running the pickle's code."""
    import pickle

    import torch

    if allow_pickle:
        return torch.load(path, map_location="cpu", weights_only=False)  # the card's explicit, recorded opt-in
    try:
        with torch.serialization.safe_globals(safe_globals()):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        text = plain(str(exc))
        match = UNSUPPORTED_GLOBAL.search(text)
        line = next((part.strip() for part in text.splitlines() if "Unsupported global" in part), None)
        quoted = line or (text.strip().splitlines()[0] if text.strip() else type(exc).__name__)
        raise CheckpointRefused(f"{path}: torch.load(weights_only=True) refused it: {quoted}",
                                match.group(1) if match else None) from None


def remap_keys(state: Mapping[str, Any], card: NetworkCard) -> dict[str, Any]:
    """The card's ``strip_prefix``, ``key_rename`` and ``add_prefix``, in that order."""
    strip = card.strip_prefix or ""
    renames = [(re.compile(pattern), replacement) for pattern, replacement in card.key_rename]
    add = card.add_prefix or ""
    out: dict[str, Any] = {}
    for name, value in state.items():
        if strip and name.startswith(strip):
            name = name[len(strip):]
        for pattern, replacement in renames:
            name = pattern.sub(replacement, name)
        out[add + name] = value
    return out


class FoldsMalformed(ValueError):
    """A file of several folds (``{fold: state_dict}`` or a list) with an entry that is not a state dict."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


def _is_fold_key(key: Any) -> bool:
    return (isinstance(key, int) and not isinstance(key, bool)) or (isinstance(key, str) and key.isdigit())


def fold_states(checkpoint: Any) -> list[tuple[str, Any]] | None:
    """The folds of a file that holds several (``{0: sd, 1: sd}``, ``{"fold0": ...}`` is not one, a list of state
    dicts), in fold order, as ``(key, value)``; None for a file of one model. A malformed entry raises
    :class:`FoldsMalformed` naming its key."""
    if isinstance(checkpoint, (list, tuple)):
        if not checkpoint:
            raise FoldsMalformed("the file holds an empty list, not the folds' state dicts", "[]")
        entries = [(str(index), value) for index, value in enumerate(checkpoint)]
    elif isinstance(checkpoint, Mapping) and checkpoint and any(_is_fold_key(key) for key in checkpoint):
        other = [str(key) for key in checkpoint if not _is_fold_key(key)]
        if other:
            raise FoldsMalformed(f"the file mixes fold numbers with other keys ({', '.join(other[:8])}): "
                                 "a file of folds holds only {fold: state_dict}", other[0])
        entries = [(str(key), checkpoint[key]) for key in sorted(checkpoint, key=lambda key: int(key))]
    else:
        return None
    for key, value in entries:
        if not (isinstance(value, Mapping) or hasattr(value, "state_dict")):
            raise FoldsMalformed(f"fold {key} holds {type(value).__name__}, not a state dict", key)
        if isinstance(value, Mapping) and not value:
            raise FoldsMalformed(f"fold {key} is an empty mapping, not a state dict", key)
    return entries


def averaged_folds(card: Card, built: Built, fold: Callable[[Fold], Any]) -> Any:
    """Every fold's predictions (``fold(entry)``, a numpy array) averaged with the fold weights."""
    import numpy as np
    weighted = weighted_folds(card, built.checkpoints)
    total = sum(fold(entry) * weight for entry, weight in weighted)
    return np.asarray(total, dtype=np.float64) / sum(weight for _, weight in weighted)


__all__ = [
    "CheckpointRefused", "FoldsMalformed", "averaged_folds", "fold_states",
    "load_pickle", "numpy_safe_globals", "plain", "remap_keys",
]
