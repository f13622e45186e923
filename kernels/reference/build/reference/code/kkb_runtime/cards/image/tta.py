"""Test-time augmentation on batches: flips, rotations and the user's own, averaged.

A TTA is a function of an NCHW tensor that returns an NCHW tensor. The card names them:
``hflip``, ``vflip``, ``hvflip``, ``transpose``, ``rot90``, ``rot180``, ``rot270``, or a user
function in the code bundle as ``package.module:function``. The plain image (``identity``) always
runs. Each view counts with its weight in the card's ``tta_weights`` (default 1). A card's
``tta_random`` adds N seeded random passes of an albumentations pipeline, made on the images by the
data loader (the batch then has a view axis: ``[B, 1 + N, C, H, W]``); each pass counts with the
weight of ``random``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Tta = Callable[[Any], Any]


class TtaError(ValueError):
    """A TTA name that is neither built in nor an importable ``module:function``."""


def _builtins() -> dict[str, Tta]:
    import torch

    return {
        "hflip": lambda x: x.flip(-1),
        "vflip": lambda x: x.flip(-2),
        "hvflip": lambda x: x.flip(-2, -1),
        "transpose": lambda x: x.transpose(-2, -1),
        "rot90": lambda x: torch.rot90(x, 1, (-2, -1)),
        "rot180": lambda x: torch.rot90(x, 2, (-2, -1)),
        "rot270": lambda x: torch.rot90(x, 3, (-2, -1)),
    }


BUILTIN_NAMES = ("hflip", "vflip", "hvflip", "transpose", "rot90", "rot180", "rot270")


def resolve(names: Sequence[str]) -> list[tuple[str, Tta]]:
    """``[("identity", f), (name, f), ...]`` for a card's ``tta`` list."""
    builtins = _builtins()
    resolved: list[tuple[str, Tta]] = [("identity", lambda x: x)]
    for name in names:
        resolved.append((name, builtins[name] if name in builtins else _user_tta(name)))
    return resolved


def _user_tta(name: str) -> Tta:
    module, sep, attribute = name.partition(":")
    if not sep or not module or not attribute:
        raise TtaError(f"unknown TTA '{name}': use one of {', '.join(BUILTIN_NAMES)} or 'package.module:function'")
    try:
        function: Tta = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise TtaError(f"TTA '{name}': cannot import {attribute} from module '{module}' ({exc})") from None
    if not callable(function):
        raise TtaError(f"TTA '{name}': {module}.{attribute} is not callable")
    return function


def averaged(forward: Callable[[Any], Any], batch: Any, ttas: Sequence[tuple[str, Tta]],
             weights: Mapping[str, float] | None = None) -> Any:
    """The weighted mean of ``forward`` over the TTA views of ``batch`` (``forward`` applies the activation).

    A 5-D batch carries the random passes after the plain view (see the module docstring).
    """
    weights = weights or {}
    stacked = batch.ndim == 5
    plain = batch[:, 0] if stacked else batch
    parts: list[tuple[float, Callable[[Any], Any] | None, Any]] = [(float(weights.get(name, 1.0)), tta, plain) for name, tta in ttas]
    if stacked:
        parts += [(float(weights.get("random", 1.0)), None, batch[:, k]) for k in range(1, batch.shape[1])]
    total, weight_sum = None, 0.0
    for weight, tta, images in parts:
        if weight == 0:
            continue
        output = forward(images if tta is None else tta(images)) * weight
        total = output if total is None else total + output
        weight_sum += weight
    if total is None:
        raise TtaError("every TTA view has weight 0: give at least one a positive weight")
    return total / weight_sum


__all__ = ["BUILTIN_NAMES", "TtaError", "averaged", "resolve"]
