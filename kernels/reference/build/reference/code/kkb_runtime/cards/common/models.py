"""Rebuild a model from its card, offline, and load its checkpoint strictly.

The same functions normalise checkpoints at build time (``builder.bundle.models`` imports them) and load
them inside the kernel, so "it loaded at build time" means "it loads in the kernel". A mismatch is
reported as lists of missing keys, unexpected keys and shape mismatches: the three facts needed to
fix a card, which ``load_state_dict``'s own message buries.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...card import NetworkCard
from . import checkpoints

# timm's order (timm.models._helpers.load_state_dict, use_ema=True), plus the common spellings.
CHECKPOINT_KEYS = ("state_dict_ema", "model_ema", "ema", "state_dict", "model", "model_state_dict", "net")
# DataParallel/DDP ("module.") and torch.compile ("_orig_mod.") wrappers, nested in either order.
WRAPPER_PREFIXES = ("module.", "_orig_mod.")
# Bookkeeping that wrappers add next to the weights: torch.optim.swa_utils.AveragedModel.
WRAPPER_KEYS = ("n_averaged",)
LIST_LIMIT = 8


class ModelLoadError(RuntimeError):
    """A checkpoint cannot be read, or does not fit the architecture its card names."""


def offline() -> None:
    """No download may even be attempted: the rerun has no internet, and a timeout costs minutes.

    Call it before anything imports huggingface_hub (it reads the variable at import time).
    """
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")  # albumentations' PyPI version check at import


def read_checkpoint(path: Path, allow_pickle: bool = False) -> Any:
    """A ``.safetensors`` file, or a torch pickle read with ``weights_only=True`` and numpy's safe types
    allowed (no code runs), unless the card opted in with ``allow_pickle``."""
    if not path.is_file():
        raise ModelLoadError(f"checkpoint not found: {path}")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path), device="cpu")
    try:
        return checkpoints.load_pickle(path, allow_pickle)
    except checkpoints.CheckpointRefused as exc:
        raise ModelLoadError(str(exc)) from None


def pick_state_dict(checkpoint: Any, key: str | None = None) -> tuple[Mapping[str, Any], str | None]:
    """The weights inside a training checkpoint, and the key they were under (None: the file is a state dict)."""
    if key is not None:
        if not isinstance(checkpoint, Mapping) or key not in checkpoint:
            found = ", ".join(map(str, checkpoint)) if isinstance(checkpoint, Mapping) else type(checkpoint).__name__
            raise ModelLoadError(f"checkpoint has no key '{key}' (top-level keys: {_clip(found.split(', '))})")
        return _as_state_dict(checkpoint[key]), key
    if isinstance(checkpoint, Mapping):
        for candidate in CHECKPOINT_KEYS:
            if checkpoint.get(candidate) is not None:
                return _as_state_dict(checkpoint[candidate]), candidate
    return _as_state_dict(checkpoint), None


def _as_state_dict(value: Any) -> Mapping[str, Any]:
    if hasattr(value, "state_dict") and callable(value.state_dict):  # a pickled nn.Module or ModelEma
        value = value.state_dict()
    if not isinstance(value, Mapping):
        raise ModelLoadError(f"expected a state dict (a mapping of names to tensors), found {type(value).__name__}")
    return value


def strip_wrappers(state_dict: Mapping[str, Any]) -> dict[str, Any]:
    """Remove ``module.``/``_orig_mod.`` prefixes (DataParallel, DDP, torch.compile) however deeply nested."""
    cleaned: dict[str, Any] = {}
    for name, value in state_dict.items():
        while name.startswith(WRAPPER_PREFIXES):
            name = name.split(".", 1)[1]
        if name not in WRAPPER_KEYS:
            cleaned[name] = value
    return cleaned


def strip_common_prefix(state_dict: Mapping[str, Any], expected: Sequence[str]) -> tuple[dict[str, Any], str | None]:
    """Drop a prefix every key shares (Lightning's ``model.``) only when that makes the keys match exactly."""
    heads = {name.split(".", 1)[0] for name in state_dict}
    if len(heads) != 1 or set(state_dict) == set(expected):
        return dict(state_dict), None
    prefix = f"{heads.pop()}."
    stripped = {name[len(prefix):]: value for name, value in state_dict.items()}
    if set(stripped) == set(expected):
        return stripped, prefix
    return dict(state_dict), None


def tensors_only(state_dict: Mapping[str, Any]) -> dict[str, Any]:
    import torch

    bad = [name for name, value in state_dict.items() if not isinstance(value, torch.Tensor)]
    if bad:
        raise ModelLoadError(f"not a state dict: {len(bad)} value(s) are not tensors ({_clip(bad)})")
    return dict(state_dict)


def clean_state_dict(checkpoint: Any, key: str | None = None) -> tuple[dict[str, Any], str | None]:
    """A training checkpoint as a clean state dict of tensors, and the key it came from."""
    picked, used = pick_state_dict(checkpoint, key)
    return tensors_only(strip_wrappers(picked)), used


@dataclass(frozen=True)
class StateDictDiff:
    missing: tuple[str, ...]
    unexpected: tuple[str, ...]
    mismatched: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...]  # name, checkpoint shape, model shape

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unexpected or self.mismatched)

    def lines(self) -> list[str]:
        out = []
        if self.missing:
            out.append(f"missing keys ({len(self.missing)}): {_clip(self.missing)}")
        if self.unexpected:
            out.append(f"unexpected keys ({len(self.unexpected)}): {_clip(self.unexpected)}")
        if self.mismatched:
            shapes = [f"{name} checkpoint {_shape(got)} != model {_shape(want)}" for name, got, want in self.mismatched]
            out.append(f"shape mismatches ({len(self.mismatched)}): {_clip(shapes)}")
        return out


def _shape(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(size) for size in shape) + "]"


def _clip(items: Sequence[str], limit: int = LIST_LIMIT) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")


def diff_state_dicts(model_state: Mapping[str, Any], checkpoint: Mapping[str, Any]) -> StateDictDiff:
    """What keeps ``checkpoint`` from loading strictly into a model whose state dict is ``model_state``."""
    missing = tuple(name for name in model_state if name not in checkpoint)
    unexpected = tuple(name for name in checkpoint if name not in model_state)
    mismatched = tuple(
        (name, tuple(checkpoint[name].shape), tuple(model_state[name].shape))
        for name in model_state
        if name in checkpoint and tuple(checkpoint[name].shape) != tuple(model_state[name].shape)
    )
    return StateDictDiff(missing, unexpected, mismatched)


def load_factory(reference: str) -> Any:
    """``package.module:function`` from the code dataset (on ``sys.path`` in every step)."""
    module, _, name = reference.partition(":")
    try:
        function = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise ModelLoadError(f"factory '{reference}': cannot import module '{module}' ({exc})") from None
    except AttributeError:
        raise ModelLoadError(f"factory '{reference}': module '{module}' has no attribute '{name}'") from None
    if not callable(function):
        raise ModelLoadError(f"factory '{reference}' is not callable")
    return function


def from_factory(card: NetworkCard) -> Any:
    """The card's ``factory(**model_kwargs)`` on the CPU: an ``nn.Module``."""
    offline()
    if not card.factory:
        raise ModelLoadError(f"model '{card.name}': no factory ('package.module:function' returning the nn.Module)")
    model = load_factory(card.factory)(**dict(card.model_kwargs))
    if not hasattr(model, "state_dict") or not hasattr(model, "load_state_dict"):
        raise ModelLoadError(f"factory '{card.factory}' returned {type(model).__name__}, not a torch nn.Module")
    return model


def load_into(model: Any, state_dict: Mapping[str, Any], card: NetworkCard, source: str) -> Any:
    """Strict load; a mismatch raises with the keys named. ``strict = false`` on the card tolerates missing and
    unexpected keys (the build listed them), never a shape mismatch."""
    diff = diff_state_dicts(model.state_dict(), state_dict)
    if not diff.ok and (card.strict or diff.mismatched):
        raise ModelLoadError(mismatch_message(card, source, diff))
    model.load_state_dict({name: value for name, value in state_dict.items() if name not in diff.unexpected},
                          strict=card.strict)
    return model


def mismatch_message(card: NetworkCard, source: str, diff: StateDictDiff) -> str:
    head = f"model '{card.name}': checkpoint {source} does not fit {card.describe()}"
    return head + "".join(f"\n  {line}" for line in diff.lines())


def load_weights(model: Any, card: NetworkCard, weights_dir: Path, checkpoint: str, key: str | None) -> Any:
    """``model`` (fresh, on the CPU) with a fold the build wrote (``checkpoint``, under the weights), in eval mode."""
    state_dict, _ = clean_state_dict(read_checkpoint(weights_dir / checkpoint), key)
    state_dict, _ = strip_common_prefix(state_dict, list(model.state_dict()))
    return load_into(model, state_dict, card, checkpoint).eval()


def activation(name: str) -> Callable[[Any], Any]:
    import torch

    return {"softmax": lambda x: torch.softmax(x, dim=1), "sigmoid": torch.sigmoid, "none": lambda x: x}[name]


__all__ = [
    "activation",
    "ModelLoadError",
    "StateDictDiff",
    "clean_state_dict",
    "diff_state_dicts",
    "from_factory",
    "load_into",
    "load_weights",
    "mismatch_message",
    "offline",
    "read_checkpoint",
    "strip_common_prefix",
]
