"""Where the model runs: CUDA when present, else an XLA device (TPU shapes), else the CPU.

``$KKB_DEVICE`` (``cuda``, ``xla`` or ``cpu``) forces a choice, e.g. to rehearse the CPU path on a
GPU machine. torch and torch_xla are imported only when a device is actually chosen.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

DEVICE_VARIABLE = "KKB_DEVICE"
KINDS = ("cuda", "xla", "cpu")


class DeviceError(RuntimeError):
    """A forced device is not available on this machine."""


@dataclass(frozen=True)
class DeviceChoice:
    kind: str  # "cuda" | "xla" | "cpu"
    reason: str
    count: int = 1  # CUDA devices visible; 1 otherwise

    def describe(self) -> dict[str, Any]:
        return asdict(self)


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def cuda_count() -> int:
    import torch

    return int(torch.cuda.device_count())


def xla_importable() -> bool:
    # find_spec, not import: importing torch_xla on a machine without a TPU is slow and noisy.
    return importlib.util.find_spec("torch_xla") is not None


def choose_device(environ: Mapping[str, str] | None = None) -> DeviceChoice:
    """The device this process should use, and why (the step prints the reason)."""
    forced = (os.environ if environ is None else environ).get(DEVICE_VARIABLE, "").strip().lower()
    if forced:
        return _forced(forced)
    if cuda_available():
        return DeviceChoice("cuda", "torch.cuda.is_available()", cuda_count())
    if xla_importable():
        return DeviceChoice("xla", "no CUDA; torch_xla is importable (TPU)")
    return DeviceChoice("cpu", "no CUDA and no torch_xla")


def _forced(kind: str) -> DeviceChoice:
    if kind not in KINDS:
        raise DeviceError(f"{DEVICE_VARIABLE}={kind!r}: use one of {', '.join(KINDS)}")
    if kind == "cuda" and not cuda_available():
        raise DeviceError(f"{DEVICE_VARIABLE}=cuda but torch.cuda.is_available() is False on this machine")
    if kind == "xla" and not xla_importable():
        raise DeviceError(f"{DEVICE_VARIABLE}=xla but torch_xla is not installed")
    return DeviceChoice(kind, f"forced by {DEVICE_VARIABLE}", cuda_count() if kind == "cuda" else 1)


def torch_device(choice: DeviceChoice) -> Any:
    """The ``torch.device`` for a choice (for XLA, the device torch_xla hands out)."""
    import torch

    if choice.kind == "xla":
        import torch_xla

        # torch_xla >= 2.5 has torch_xla.device(); older releases only xla_model.xla_device().
        if hasattr(torch_xla, "device"):
            return torch_xla.device()
        import torch_xla.core.xla_model as xm

        return xm.xla_device()
    return torch.device("cuda" if choice.kind == "cuda" else "cpu")


def summary(choice: DeviceChoice) -> str:
    """One line for the environment report: which device, and what hardware is behind it."""
    import torch

    if choice.kind == "cuda":
        names = ", ".join(torch.cuda.get_device_name(index) for index in range(choice.count))
        return f"cuda x{choice.count} ({names}); {choice.reason}"
    if choice.kind == "xla":
        return f"xla (torch_xla); {choice.reason}"
    return f"cpu ({os.cpu_count()} cores, torch uses {torch.get_num_threads()} threads); {choice.reason}"


def free_memory(choice: DeviceChoice) -> None:
    """Between folds: the previous model's memory back before the next one loads."""
    import gc

    gc.collect()
    if choice.kind == "cuda":
        import torch

        torch.cuda.empty_cache()

__all__ = ["DEVICE_VARIABLE", "DeviceChoice", "DeviceError", "choose_device", "free_memory", "summary", "torch_device"]
