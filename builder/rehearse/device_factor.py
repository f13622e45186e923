"""How much faster the machine Kaggle will use runs what the dry run measured: a device factor and its source.

A dry run on a CPU for a GPU machine shape measures CPU seconds; charging them to a T4 would time out
kernels that take minutes on Kaggle. The projection (:mod:`builder.rehearse.projection`) multiplies the
part of the per-row time a GPU speeds up (a card step's compute: to the device, forward passes, back)
by a factor ``low <= central <= high`` (GPU time / measured time) and adds a per-process GPU start
allowance. The CPU's part (loading and decoding images, process start, imports, the notebook outside the
steps) is projected at the measured speed. The factor comes from, best first:

1. **a rehearsal on Kaggle** of this kernel (``kkb dry-run --on-kaggle``: ``build/NAME/dryrun-kaggle/
   report.json``, whose steps carry their timings): per step, Kaggle's per-row time over the local one;
2. **the capture** of ``kkb image --on-kaggle`` (its ``benchmark``: the reference forward pass of
   :func:`builder.kkb_runtime.timing.reference_forward_seconds` timed on Kaggle's accelerator), over the
   same pass timed here on the CPU;
3. **a conservative table** per accelerator (:data:`TABLE`, reasoning below).

On a machine with a GPU (a card step recorded ``cuda``) the measured time is used as is (factor 1). A user
step's share of GPU work is unknown: its lower end takes every per-row second to speed up like a card's
compute, its central value and upper end none (factor 1).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from builder.kkb_runtime.timing import StepTiming
from builder.project.image_store import stored_image_path
from builder.project.jsonfile import read_object
from builder.project.layout import ON_KAGGLE_DIR, REPORT_FILE

End = Literal["low", "central", "high"]  # one end of a range, or its centre
ENDS: tuple[End, ...] = ("low", "central", "high")


@dataclass(frozen=True)
class DeviceFactor:
    """Target time / measured time for the GPU's share of the work, with where the numbers come from."""

    target: str  # the accelerator Kaggle will run ("T4", "CPU", ...)
    measured_on: str  # "cpu" | "cuda" | "xla"
    low: float
    central: float
    high: float
    source: str  # "measured here" | "rehearsal on Kaggle" | "kkb image --on-kaggle" | "table"
    basis: str  # one line: the numbers and where they were read
    start_low: float = 0.0  # per step process that uses the accelerator: CUDA context, first-kernel warm-up
    start_central: float = 0.0
    start_high: float = 0.0

    @property
    def applies(self) -> bool:
        return self.source != "measured here"

    def end(self, end: End) -> float:
        """The factor at one end of its range."""
        return {"low": self.low, "central": self.central, "high": self.high}[end]

    def start(self, end: End) -> float:
        """The accelerator's start allowance at one end of its range."""
        return {"low": self.start_low, "central": self.start_central, "high": self.start_high}[end]


# GPU time / time on the few CPU cores a dry run measures on, for conv-net inference (fp16 autocast on the
# GPU, as kkb's cards run; fp32 on the CPU). Reasoning, from vendor peak throughput: a T4 has 65 TFLOPS fp16
# (tensor cores) and 8.1 fp32; P100 18.7 fp16 (no tensor cores); L4 121 fp16 dense; A100 312 fp16; H100
# ~990 fp16 dense; RTX Pro 6000 (Blackwell) ~500 fp16 dense; 2-8 AVX2/AVX-512 cores reach 0.1-0.5 TFLOPS
# fp32. Real inference reaches 10-40 % of a GPU's peak and about half a CPU's, so a T4 is ~20x faster on
# typical models (central) and at most ~100x (low). Small, launch-bound models (a few ms per batch) gain
# little: a GPU is never assumed slower than the measured CPU, nor faster than its column says (high = 1).
# kkb's T4 x2 runs one card on both GPUs (DataParallel): already inside the central factor's range.
TABLE: dict[str, tuple[str, float, float, float]] = {
    # machine shape: (accelerator, low, central, high)
    "NvidiaTeslaT4": ("T4 x2", 1 / 100, 1 / 20, 1.0),
    "NvidiaTeslaT4Highmem": ("T4 x2", 1 / 100, 1 / 20, 1.0),
    "NvidiaTeslaP100": ("P100", 1 / 60, 1 / 10, 1.0),
    "NvidiaL4": ("L4 x4", 1 / 150, 1 / 30, 1.0),
    "NvidiaL4X1": ("L4", 1 / 150, 1 / 30, 1.0),
    "NvidiaTeslaA100": ("A100", 1 / 300, 1 / 60, 1.0),
    "NvidiaH100": ("H100", 1 / 500, 1 / 100, 1.0),
    "NvidiaRtxPro6000": ("RTX Pro 6000", 1 / 400, 1 / 80, 1.0),
    # TPUs: XLA compiles per input shape (a fixed cost the allowance covers); speed-up as a T4's, no better known.
    "TpuV38": ("TPU v3-8", 1 / 100, 1 / 20, 1.0),
    "Tpu1VmV38": ("TPU v3-8", 1 / 100, 1 / 20, 1.0),
    "TpuV5E8": ("TPU v5e-8", 1 / 100, 1 / 20, 1.0),
    "TpuV6E8": ("TPU v6e-8", 1 / 100, 1 / 20, 1.0),
}
# Per step process on an accelerator: CUDA context creation, cuDNN/cuBLAS handles, the first kernels'
# selection (1-5 s on a T4 is common; torch_xla's first compile can take longer).
START_ALLOWANCE = (0.0, 3.0, 30.0)
# A measured factor stands for this kernel's own model, but not exactly for every batch: its range.
MEASURED_SPREAD = 1.5
CAPTURED_SPREAD = 3.0  # the reference pass is not the user's model
REFERENCE_TIMEOUT_S = 120


def measured_here(target: str, measured_on: str) -> DeviceFactor:
    return DeviceFactor(target, measured_on, 1.0, 1.0, 1.0, "measured here",
                        f"measured on {measured_on} for a {target} shape: the time as measured")


def device_factor(machine_shape: str | None, measured_on: str, *, out_dir: Path | None = None,
                  local_steps: Mapping[str, float] | None = None, threads: int | None = None) -> DeviceFactor:
    """The factor for a run measured on ``measured_on`` ("cpu", "cuda") that Kaggle runs on ``machine_shape``.

    ``local_steps`` (step name -> local per-row seconds) lets a rehearsal on Kaggle (in ``out_dir``) give a
    factor measured for this kernel; ``threads`` is the CPU threads the measurement used (the reference pass
    runs with as many).
    """
    entry = TABLE.get(machine_shape or "")
    if entry is None:  # a CPU shape (or one kkb has no numbers for): Kaggle runs what the dry run ran
        return measured_here("CPU" if not machine_shape else machine_shape, measured_on)
    name, low, central, high = entry
    if measured_on != "cpu":
        return measured_here(name, measured_on)
    found = _from_rehearsal(name, out_dir, local_steps or {}) if out_dir is not None else None
    return found or _from_capture(name, threads) or DeviceFactor(
        name, "cpu", low, central, high, "table",
        f"no measurement on Kaggle's {name}: kkb's table (GPU time / CPU time {low:.3g}-{central:.3g}-{high:.3g}, "
        f"from peak throughput; builder/rehearse/device_factor.py); kkb dry-run --on-kaggle measures it",
        *START_ALLOWANCE)


def rehearsal_report(out_dir: Path) -> Path:
    """Where the last ``kkb dry-run --on-kaggle`` of the build in ``out_dir`` left its report."""
    return out_dir / ON_KAGGLE_DIR / REPORT_FILE


def _from_rehearsal(name: str, out_dir: Path, local: Mapping[str, float]) -> DeviceFactor | None:
    """Kaggle's per-row time over the local one, per card step, from the last ``kkb dry-run --on-kaggle``."""
    report = read_object(rehearsal_report(out_dir))
    ratios: list[str] = []
    values: list[float] = []
    for step in report.get("steps") or ():
        timing = StepTiming.from_json(step.get("timing")) if isinstance(step, Mapping) else None
        here = local.get(str(step.get("name"))) if isinstance(step, Mapping) else None
        if timing is None or not here or timing.device == "cpu":
            continue
        there = compute_rate(timing)
        if there is None:
            continue
        values.append(there / here)
        ratios.append(f"{step.get('name')} {there * 1000:.3g} ms/row of compute on {timing.device_name or timing.device} "
                      f"vs {here * 1000:.3g} here")
    if not values:
        return None
    factor = max(values)  # the slowest step's: a kernel's steps share the machine
    return DeviceFactor(name, "cpu", factor / MEASURED_SPREAD, factor, min(factor * MEASURED_SPREAD, 1.0),
                        "rehearsal on Kaggle", f"measured by kkb dry-run --on-kaggle ({'; '.join(ratios)}): "
                        f"factor {factor:.3g}", 0.0, 0.0, 0.0)  # its fixed costs were in the measured steps


def compute_rate(timing: StepTiming) -> float | None:
    """Compute seconds per row of a card step's steady batches, summed over its folds (a fold without steady
    batches counts as the first one that has them: the same architecture and pipeline)."""
    rates = []
    for fold in timing.folds:
        batches = list(fold.steady) or list(fold.probe[1:])
        rows = sum(batch.rows for batch in batches)
        rates.append(sum(batch.compute_seconds for batch in batches) / rows if rows else None)
    known = [rate for rate in rates if rate is not None]
    return sum(rate if rate is not None else known[0] for rate in rates) if known else None


def _from_capture(name: str, threads: int | None) -> DeviceFactor | None:
    """``kkb image --on-kaggle``'s timed reference pass on Kaggle's GPU over the same pass on this CPU."""
    path = stored_image_path()
    bench = read_object(path).get("benchmark") if path is not None else None
    if not isinstance(bench, Mapping) or not bench.get("gpu_seconds"):
        return None
    local = local_reference_seconds(threads)
    if not local:
        return None
    factor = min(float(bench["gpu_seconds"]) / local, 1.0)
    return DeviceFactor(name, "cpu", factor / CAPTURED_SPREAD, factor, min(factor * CAPTURED_SPREAD, 1.0),
                        "kkb image --on-kaggle",
                        f"the reference forward pass took {float(bench['gpu_seconds']) * 1000:.3g} ms on Kaggle's "
                        f"{bench.get('gpu') or name} (captured {bench.get('captured') or '?'}) and "
                        f"{local * 1000:.3g} ms on this CPU ({threads or 'all'} threads): factor {factor:.3g}, "
                        f"x/{CAPTURED_SPREAD:g} for a model that is not the reference", *START_ALLOWANCE)


def local_reference_seconds(threads: int | None = None) -> float | None:
    """The reference pass on this CPU, in a fresh interpreter (torch is not imported into kkb's process)."""
    code = ("import json, sys; from builder.kkb_runtime.timing import reference_forward_seconds as f; "
            f"print(json.dumps(f('cpu', {int(threads) if threads else None})))")
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=REFERENCE_TIMEOUT_S)
        return float(json.loads(done.stdout.strip().splitlines()[-1])) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None


__all__ = ["TABLE", "DeviceFactor", "compute_rate", "device_factor", "local_reference_seconds", "measured_here"]
