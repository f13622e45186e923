"""Where a card step's time goes: its fixed phases apart from its steady-state batches.

A step's wall time is mostly fixed on a small public test: the process start and kkb_runtime's
imports, torch's import and the device choice, reading the sample and indexing the test files, and
per fold the model build with its checkpoint load, the loader's start and the first (warm-up) batch.
Only the batches after the first say what one more row costs. :class:`StepTimer` records each phase
as ``kkb_runtime predict`` runs (``phase``, ``fold``, ``FoldTimer.batches``) and the step writes the
result, a :class:`StepTiming`, into its meta file (``steps.write_step_meta``); the dry run reads it back
(``StepResult.timing``) and projects the rerun from it (``builder.rehearse.projection``).

Each steady batch is split into the wait for the loader (``data_seconds``: reading and decoding
images, CPU work a GPU does not speed up) and the rest (``compute_seconds``: to the device, the
forward passes, back to the CPU, which a GPU does speed up).

A 1-image public test has no steady batch at all. When ``$KKB_TIMING_PROBE`` is set (the dry run and
the rehearsal on Kaggle set it, a real run never does), the first fold times a few more full batches
of the same test files, repeated, through the same pipeline: their predictions are dropped, their
time is recorded apart (``probe``) and is not charged to the rerun. Where the dry run also gives the size it
projects to (``$KKB_TIMING_HIDDEN_ROWS``) and the rate the probe would measure cannot weigh there
(:meth:`StepTimer.probe_can_matter`), the probe is skipped: the warm-up batch bounds the rate from above.

Standard library only: the runtime ships this file in the code dataset.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

PROBE_VARIABLE = "KKB_TIMING_PROBE"  # how many full steady batches the dry run wants per card (0 or unset: none)
HIDDEN_ROWS_VARIABLE = "KKB_TIMING_HIDDEN_ROWS"  # the rows the dry run projects to (unset: the probe always runs)
# The probe runs where the per-row time it measures could weigh at the hidden size: more than this share of the
# step's fixed time when the batches so far (warm-up included: an upper bound of the rate) are taken as the rate.
# Below it, a measured rate could lower the projection by less than the fixed part's own spread already allows
# (the projection's FIXED_SPREAD, x1.5: builder.rehearse.projection).
PROBE_WORTH_SHARE = 0.5
TIMER_KEY = "_timer"  # where predict's timings dict carries the step's timer (popped before the meta is written)
Batch = TypeVar("Batch")


@dataclass(frozen=True)
class BatchTiming:
    rows: int
    data_seconds: float  # waiting for the loader
    compute_seconds: float  # to the device, forward passes (TTA included), back to the CPU

    @property
    def seconds(self) -> float:
        return self.data_seconds + self.compute_seconds


@dataclass(frozen=True)
class FoldTiming:
    load_seconds: float  # model build + checkpoint read and strict load + moved to the device
    loader_start_seconds: float  # the DataLoader made and its iterator (workers) started
    first_batch: BatchTiming | None  # warm-up: lazy initialisation, kernel selection, caches
    steady: tuple[BatchTiming, ...] = ()
    probe: tuple[BatchTiming, ...] = ()  # timing-only batches (``$KKB_TIMING_PROBE``), not in the output
    probe_seconds: float = 0.0  # the probe's whole time (its loader start included): not part of a real run

    @property
    def rows(self) -> int:
        return (self.first_batch.rows if self.first_batch else 0) + sum(batch.rows for batch in self.steady)


@dataclass(frozen=True)
class StepTiming:
    """One card step's phases, as its process measured them."""

    rows: int
    device: str  # "cuda" | "xla" | "cpu": where the model ran
    device_name: str  # "Tesla T4", "cpu (16 cores)", ...
    threads: int | None  # torch's CPU threads (the CPU's share of a measurement made on the CPU)
    startup_seconds: float | None  # process start -> predict(): the interpreter, kkb_runtime's imports (Linux)
    setup_seconds: float  # kernel config, sample submission, test file index
    imports_seconds: float  # torch's import and the device choice
    write_seconds: float  # the output CSV
    folds: tuple[FoldTiming, ...] = ()

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> StepTiming | None:
        """The record a step wrote (``None`` for a step that wrote none, or one this version cannot read)."""
        if not isinstance(data, Mapping):
            return None
        try:
            folds = tuple(_fold(fold) for fold in data.get("folds") or ())
            return cls(rows=int(data["rows"]), device=str(data["device"]), device_name=str(data.get("device_name") or ""),
                       threads=int(data["threads"]) if data.get("threads") is not None else None,
                       startup_seconds=float(data["startup_seconds"]) if data.get("startup_seconds") is not None else None,
                       setup_seconds=float(data.get("setup_seconds") or 0.0),
                       imports_seconds=float(data.get("imports_seconds") or 0.0),
                       write_seconds=float(data.get("write_seconds") or 0.0), folds=folds)
        except (KeyError, TypeError, ValueError):
            return None

    @property
    def probe_seconds(self) -> float:
        return sum(fold.probe_seconds for fold in self.folds)


def _batch(data: Any) -> BatchTiming:
    return BatchTiming(int(data["rows"]), float(data["data_seconds"]), float(data["compute_seconds"]))


def _fold(data: Mapping[str, Any]) -> FoldTiming:
    first = data.get("first_batch")
    return FoldTiming(load_seconds=float(data["load_seconds"]), loader_start_seconds=float(data["loader_start_seconds"]),
                      first_batch=_batch(first) if first else None,
                      steady=tuple(_batch(batch) for batch in data.get("steady") or ()),
                      probe=tuple(_batch(batch) for batch in data.get("probe") or ()),
                      probe_seconds=float(data.get("probe_seconds") or 0.0))


def process_age_seconds() -> float | None:
    """Seconds since this process started (``/proc``: clock ticks since boot), or None where it cannot be read."""
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            # the command name (field 2) may contain spaces: the fields after it start past its ")"
            started_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
            now = float(uptime.read().split()[0])
        return round(max(now - started_ticks / os.sysconf("SC_CLK_TCK"), 0.0), 3)
    except (OSError, ValueError, IndexError):
        return None


def rows_of(batch: Any) -> int:
    """Rows in a batch: a tensor's or array's first dimension, a dict's (a tokenizer's output) first value's,
    else its length."""
    if hasattr(batch, "shape") and len(batch.shape):
        return int(batch.shape[0])
    if isinstance(batch, Mapping) and batch:
        return rows_of(next(iter(batch.values())))
    return len(batch)


def probe_batches(environ: Mapping[str, str]) -> int:
    """How many full steady batches the dry run asks for (``$KKB_TIMING_PROBE``; 0 in a real run)."""
    try:
        return max(int(environ.get(PROBE_VARIABLE, "0") or 0), 0)
    except ValueError:
        return 0


def hidden_rows(environ: Mapping[str, str]) -> int | None:
    """The hidden test's size the dry run projects to (``$KKB_TIMING_HIDDEN_ROWS``), or None."""
    try:
        rows = int(environ.get(HIDDEN_ROWS_VARIABLE, "") or 0)
    except ValueError:
        return None
    return rows if rows > 0 else None


@dataclass
class FoldTimer:
    """One fold's load, loader start and batches, as they happen."""

    load_seconds: float = 0.0
    loader_start_seconds: float = 0.0
    batches: list[BatchTiming] = field(default_factory=list)
    probe: list[BatchTiming] = field(default_factory=list)
    probe_seconds: float = 0.0

    @contextmanager
    def loading(self) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.load_seconds += time.perf_counter() - started

    def timed(self, loader: Iterable[Batch], rows: Callable[[Batch], int] | None = None,
              probe: bool = False) -> Iterator[Batch]:
        """The loader's batches, each timed: the wait for it (data) and the time until the next is asked for
        (compute; a CUDA caller's ``.cpu()`` synchronises before it asks)."""
        started = time.perf_counter()
        iterator = iter(loader)
        if not probe:
            self.loader_start_seconds += time.perf_counter() - started
        sink = self.probe if probe else self.batches
        try:
            while True:
                waited = time.perf_counter()
                try:
                    batch = next(iterator)
                except StopIteration:
                    return
                got = time.perf_counter()
                yield batch
                count = rows(batch) if rows is not None else rows_of(batch)
                sink.append(BatchTiming(int(count), round(got - waited, 6), round(time.perf_counter() - got, 6)))
        finally:
            if probe:
                self.probe_seconds += time.perf_counter() - started

    def full_steady(self) -> int:
        """Steady batches (after the first) as large as the largest: what the probe tops up to."""
        steady = self.batches[1:]
        largest = max((batch.rows for batch in self.batches), default=0)
        return sum(1 for batch in steady if batch.rows == largest)

    def result(self) -> FoldTiming:
        return FoldTiming(round(self.load_seconds, 6), round(self.loader_start_seconds, 6),
                          self.batches[0] if self.batches else None, tuple(self.batches[1:]), tuple(self.probe),
                          round(self.probe_seconds, 6))


@dataclass
class StepTimer:
    """A card step's phases; ``predict`` fills it and writes :meth:`result` into the step's meta file."""

    startup_seconds: float | None = field(default_factory=process_age_seconds)
    probe_batches: int = 0  # full steady batches the dry run asks for ($KKB_TIMING_PROBE)
    hidden_rows: int | None = None  # the size the dry run projects to ($KKB_TIMING_HIDDEN_ROWS)
    phases: dict[str, float] = field(default_factory=dict)
    folds: list[FoldTimer] = field(default_factory=list)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - started

    def fold(self) -> FoldTimer:
        timer = FoldTimer()
        self.folds.append(timer)
        return timer

    def probe_can_matter(self, fold: FoldTimer, folds: int) -> bool:
        """Whether a probe's rate could move the projection: the first fold's batches so far, warm-up included,
        bound the per-row time from above; at the hidden size over ``folds`` folds that bound is set against the
        step's fixed time (start, imports, setup, and per fold the load and the loader's start). Unknown hidden
        size or no batch yet: it could."""
        rows = sum(batch.rows for batch in fold.batches)
        if self.hidden_rows is None or not rows:
            return True
        bound = sum(batch.seconds for batch in fold.batches) / rows
        fixed = ((self.startup_seconds or 0.0) + sum(self.phases.values())
                 + folds * (fold.load_seconds + fold.loader_start_seconds))
        return bound * self.hidden_rows * folds > PROBE_WORTH_SHARE * fixed

    def result(self, rows: int, device: str, device_name: str, threads: int | None) -> StepTiming:
        return StepTiming(rows=rows, device=device, device_name=device_name, threads=threads,
                          startup_seconds=self.startup_seconds, setup_seconds=round(self.phases.get("setup", 0.0), 6),
                          imports_seconds=round(self.phases.get("imports", 0.0), 6),
                          write_seconds=round(self.phases.get("write", 0.0), 6),
                          folds=tuple(fold.result() for fold in self.folds))


def finish(timings: dict[str, Any], rows: int, device: str, device_name: str) -> dict[str, Any]:
    """The step's :class:`StepTiming` as JSON, its timer taken out of ``timings`` (which becomes the meta file)."""
    timer = timings.pop(TIMER_KEY, None) or StepTimer()
    threads = None
    if device == "cpu":
        import torch

        threads = int(torch.get_num_threads())
    return timer.result(rows, device, device_name, threads).to_json()


def timer_of(timings: dict[str, Any]) -> StepTimer:
    """The step's timer inside predict's ``timings`` dict (one is made for a caller that passed none)."""
    timer = timings.setdefault(TIMER_KEY, StepTimer())
    assert isinstance(timer, StepTimer)
    return timer


# --- the reference workload: the same few forward passes here and on Kaggle's GPU -----------------
# ``kkb image --on-kaggle`` runs it on Kaggle's accelerator (builder.remote.image embeds this function's
# source in its capture script) and the dry run on the local CPU: their ratio is a device factor
# measured on Kaggle's machine. Keep it self-contained: only torch, imported inside.

def reference_forward_seconds(device: str = "cpu", threads: int | None = None, repeats: int = 5) -> float:
    """Median seconds of one forward pass of a small conv net over a batch of 16 images at 128 px (fp32)."""
    import statistics
    import time as clock

    import torch

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    layers: list[Any] = []
    channels = 3
    for width in (32, 64, 128, 256):
        layers += [torch.nn.Conv2d(channels, width, 3, padding=1), torch.nn.BatchNorm2d(width), torch.nn.ReLU(),
                   torch.nn.Conv2d(width, width, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2)]
        channels = width
    model = torch.nn.Sequential(*layers, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(channels, 5))
    model = model.eval().to(device)
    batch = torch.randn(16, 3, 128, 128, device=device)
    times = []
    with torch.inference_mode():
        for index in range(repeats + 2):  # two warm-up passes: kernel selection, caches
            started = clock.perf_counter()
            model(batch).cpu()
            if index >= 2:
                times.append(clock.perf_counter() - started)
    return float(statistics.median(times))


__all__ = ["HIDDEN_ROWS_VARIABLE", "PROBE_VARIABLE", "PROBE_WORTH_SHARE", "BatchTiming", "FoldTiming", "FoldTimer",
           "StepTimer", "StepTiming", "finish", "hidden_rows", "probe_batches", "process_age_seconds",
           "reference_forward_seconds", "rows_of", "timer_of"]
