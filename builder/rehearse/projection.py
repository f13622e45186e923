"""Project a rerun's time to the hidden test: a range of fixed + per-row cost, with its basis, on Kaggle's device.

Multiplying a whole step's time by hidden/public rows counts process start, imports and model loading
once per row (a 1-image test projected 507 h). Each component of a run is modelled as
``fixed + per_row × rows``, every number a range ``low <= central <= high``:

- **card steps** (``kkb_runtime predict``) record their phases (``kkb_runtime.timing``): process start,
  imports, setup, per fold the model load, the loader's start and the first (warm-up) batch, then the
  steady batches, each split into data (waiting for the loader) and compute. Per-row cost comes only from
  full steady batches (the dry run's probe adds a few when the public test has none); everything else the
  step spent is fixed. One run is enough.
- **user steps** and the notebook outside steps are fitted from two runs at different sizes (the public
  test and one replicated by :func:`builder.run.sandbox.scale_competition_data`); a component
  measured at one size is one point: its range runs from "all fixed" to "all per row" and is said so.
- when every step is a card step, the notebook outside them is fixed (kernel start, installs, combining).

**Device**: the measured per-row compute (a card's; any user step's, at most) is multiplied by the device
factor of :mod:`builder.rehearse.device_factor` (1 when measured on the device Kaggle uses), the rest is
CPU time projected as measured; a GPU step process gets a start allowance.

**Verdict**: "Notebook Timeout" only when the *lower* end passes the limit; an upper end past it is a
warning naming what would decide it (:meth:`Projection.decider`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from builder.kkb_runtime.timing import BatchTiming, FoldTiming, StepTiming
from builder.rehearse.device_factor import ENDS, TABLE, DeviceFactor, End, compute_rate, device_factor, measured_here
from builder.run.limits import duration_text
from builder.run.load import Load, machine_load, on_own_cpus

PROBE_BATCHES = 3  # full steady batches a card step times when its test gives fewer ($KKB_TIMING_PROBE)
MIN_FIT_ROWS = 50  # below this the public test alone cannot separate fixed from per-row cost
MAX_FIT_FACTOR = 20
NOISE_FLOOR_SECONDS = 0.05
NOISE_FRACTION = 0.10
# A shared or busy machine runs the same batch faster or slower from one minute to the next; the range of a
# measured rate or fixed cost allows this much either way (on top of the spread between batches).
RATE_SPREAD = 1.5
FIXED_SPREAD = 1.5
WIDE_RANGE = 3.0  # a high end past this many times the central is named with what would narrow it
OUTSIDE = "(notebook outside steps)"
CARD = "card timings"
CARD_BOUND = "card timings (warm-up batches only: the rate bounded from above)"
TWO_SIZES = "two sizes"
ONE_SIZE = "one size (one point: from all fixed to all per row)"
CARD_FIXED = "fixed (the card steps do the per-row work)"
DECLARED_FIXED = "fixed"  # a step record's own word ("fit": "fixed"): the first predict call, a model load
RATE = "measured rate"  # a step record's "fit": "measured rate": per-row seconds of many calls within the run
# A step record may say how it is fitted (the evaluation API's predict: the first call apart from the rest).
FIT_KEY = "fit"


@dataclass(frozen=True)
class RunTimes:
    """One run's measured times: the whole run and each kkb step's record (``kkb_steps.json``)."""

    rows: int
    wall_seconds: float
    steps: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class Span:
    low: float
    central: float
    high: float

    def end(self, end: End) -> float:
        return {"low": self.low, "central": self.central, "high": self.high}[end]

    def scaled(self, factor: float) -> Span:
        return Span(self.low * factor, self.central * factor, self.high * factor)


ZERO = Span(0.0, 0.0, 0.0)


@dataclass(frozen=True)
class ComponentFit:
    """One step (or the notebook outside steps) as measured: fixed, per-row CPU and per-row accelerable time."""

    name: str
    method: str
    points: tuple[tuple[int, float], ...]
    fixed: Span
    per_row_host: Span  # CPU work: loading and decoding, pandas, Python
    per_row_device: Span  # work a GPU speeds up: a card's compute; a user step's per-row time (its share unknown)
    basis: str  # what was measured and what is extrapolated
    uses_device: bool = False  # a step process that may start the accelerator (the start allowance)
    share_known: bool = True  # False for user steps: the GPU may speed up all or none of their per-row time

    def at(self, rows: int, factor: DeviceFactor, end: End) -> float:
        fixed, host, device = (span.end(end) for span in (self.fixed, self.per_row_host, self.per_row_device))
        multiplier = factor.end(end) if factor.applies else 1.0
        if end != "low" and not self.share_known:
            multiplier = 1.0  # a user step may not use the GPU at all: only the lower end assumes it does
        start = factor.start(end) if self.uses_device and factor.applies else 0.0
        return fixed + start + rows * (host + device * multiplier)

    def to_json(self, factor: DeviceFactor) -> dict[str, Any]:
        data = asdict(self)
        per_row = [self.at(1, factor, end) - self.at(0, factor, end) for end in ENDS]
        data.update(fixed_seconds=round(self.fixed.central, 4), per_row_low=per_row[0], per_row_seconds=per_row[1],
                    per_row_high=per_row[2])
        return data


@dataclass(frozen=True)
class Projection:
    hidden_rows: int
    seconds: float  # central
    low: float
    high: float
    limit_seconds: float | None
    components: tuple[ComponentFit, ...]
    exact: bool  # False: some component was measured at one size only (its range is wide, said so)
    measured_rows: int = 0  # the largest test measured
    device: DeviceFactor | None = None
    load: Load | None = None  # the machine was oversubscribed: low and central from CPU time (builder.run.load)

    @property
    def factor(self) -> DeviceFactor:
        return self.device or measured_here("CPU", "cpu")

    @property
    def fixed_seconds(self) -> float:
        return sum(c.at(0, self.factor, "central") for c in self.components)

    @property
    def per_row_seconds(self) -> float:
        return sum(c.at(1, self.factor, "central") - c.at(0, self.factor, "central") for c in self.components)

    def over_limit(self) -> bool:
        """The *lower* end passes the limit: even the fastest the measurements allow is too slow."""
        return bool(self.limit_seconds) and self.low > float(self.limit_seconds or 0)

    def may_pass_limit(self) -> bool:
        return bool(self.limit_seconds) and not self.over_limit() and self.high > float(self.limit_seconds or 0)

    def decider(self) -> str:
        """What would narrow the range: the biggest source of its width first."""
        ways = []
        if self.factor.applies and self.factor.source in ("table", "kkb image --on-kaggle"):
            ways.append("a rehearsal on Kaggle's machine (kkb dry-run --on-kaggle) measures the device factor")
        if not self.exact or self.measured_rows < MIN_FIT_ROWS:
            ways.append("a larger stand-in (--rerun-data DIR) or --rerun-scale N measures more rows")
        return "; ".join(ways) or "a larger stand-in (--rerun-data DIR) or --rerun-scale N measures more rows"

    def basis(self) -> list[str]:
        lines = [f"{c.name}: {c.basis}" for c in self.components]
        lines.append(f"device: {self.factor.basis}")
        return lines + ([f"load: {self.load.basis()}"] if self.load is not None else [])

    def summary(self) -> str:
        target = self.factor.target
        text = (f"{self.seconds:.1f} s ({self.low:.1f}-{self.high:.1f} s) for {self.hidden_rows} rows on {target}: "
                f"{self.fixed_seconds:.1f} s fixed + {self.per_row_seconds * 1000:.3g} ms per row; basis: "
                + "; ".join(self.basis()))
        if self.limit_seconds:  # in the terminal's unit (9 h, not 32400 s), with what is left of it
            limit = float(self.limit_seconds)
            unit, per = ("h", 3600.0) if limit >= 3600 else (("min", 60.0) if limit >= 60 else ("s", 1.0))
            spare = f"{(limit - self.high) / per:.3g} {unit} to spare" if self.high <= limit else "the high end passes it"
            text += f"; limit {limit / per:g} {unit} ({spare})"
        if self.high > WIDE_RANGE * self.seconds:  # a range that informs little says what would narrow it
            text += f"; the high end is {self.high / max(self.seconds, 1e-9):.1f}x the central: to narrow it, {self.decider()}"
        return text

    def to_json(self) -> dict[str, Any]:
        return {"hidden_rows": self.hidden_rows, "seconds": self.seconds, "low": self.low, "high": self.high,
                "limit_seconds": self.limit_seconds, "exact": self.exact, "measured_rows": self.measured_rows,
                "components": [c.to_json(self.factor) for c in self.components],
                "device": asdict(self.factor), "basis": self.basis(), "fixed_seconds": self.fixed_seconds,
                "per_row_seconds": self.per_row_seconds, "summary": self.summary(),
                "over_limit": self.over_limit(), "may_pass_limit": self.may_pass_limit(),
                "load": asdict(self.load) if self.load is not None else None}


def fit_factor(rows: int) -> int:
    """How many times to replicate a too-small public test for the second size (1: no second run needed)."""
    if rows >= MIN_FIT_ROWS:
        return 1
    return max(2, min(MAX_FIT_FACTOR, -(-MIN_FIT_ROWS // max(rows, 1))))


def hidden_per_row(small: RunTimes, large: RunTimes) -> float | None:
    """The per-row seconds two sizes' times could hide in their noise, where their difference is no more than it
    (a table model's microseconds a row over a few dozen rows); None where the difference shows the per-row time."""
    span = large.rows - small.rows
    difference = large.wall_seconds - small.wall_seconds
    noise = _noise(small.wall_seconds) + _noise(large.wall_seconds)
    if span <= 0 or difference > noise:
        return None
    return (max(difference, 0.0) + noise) / span


def project(runs: Sequence[RunTimes], hidden_rows: int, limit_seconds: float | None = None,
            device: DeviceFactor | None = None) -> Projection:
    """Fit each component over ``runs`` (one or two sizes) and project it to ``hidden_rows`` on ``device``."""
    if not runs:
        raise ValueError("no run to project from")
    names = _component_names(runs)
    components = [_fit(name, runs) for name in names if name != OUTSIDE]
    cards_only = bool(components) and all(component.method in (CARD, CARD_BOUND, DECLARED_FIXED, RATE)
                                          for component in components)
    components.append(_fit(OUTSIDE, runs, cards_only))
    factor = device or measured_here("CPU", "cpu")
    low, central, high = (sum(c.at(hidden_rows, factor, end) for c in components) for end in ENDS)
    exact = all(component.method not in (ONE_SIZE, CARD_BOUND) for component in components)
    low, high = min(low, central), max(high, central)
    return Projection(hidden_rows=hidden_rows, seconds=round(central, 3), low=round(low, 3), high=round(high, 3),
                      limit_seconds=limit_seconds, components=tuple(components), exact=exact,
                      measured_rows=max(run.rows for run in runs), device=device)


def project_rerun(runs: Sequence[RunTimes], hidden_rows: int, limit_seconds: float | None, machine_shape: str | None,
                  out_dir: Path | None = None, on_target: bool = False) -> Projection:
    """:func:`project` on the device Kaggle will use: the factor from where the card steps ran, the machine shape
    and what was measured on Kaggle for this kernel (``out_dir``, the build folder). ``on_target``: the runs
    were made on Kaggle's machine itself (a rehearsal on Kaggle), their times stand as measured."""
    measured_on, threads = measured_device(runs)
    if on_target:
        target = TABLE[machine_shape][0] if machine_shape in TABLE else machine_shape or "CPU"
        return project(runs, hidden_rows, limit_seconds, measured_here(target, "Kaggle's machine"))
    if measured_on == "cpu" and not any(_timing(step) for run in runs for step in run.steps) and local_gpu():
        measured_on = "cuda"  # user steps only, on a machine with a GPU: taken to have used it
    factor = device_factor(machine_shape, measured_on, out_dir=out_dir, local_steps=card_compute_rates(runs),
                           threads=threads)
    load = machine_load([step for run in runs for step in run.steps])
    if load is None:
        return project(runs, hidden_rows, limit_seconds, factor)
    # Oversubscribed: the range as if the steps had their CPUs, its high end at least the wall clock's central
    # (what the same run takes on this machine as loaded; its spread on top would count the load twice).
    quiet = project([_on_own_cpus(run) for run in runs], hidden_rows, limit_seconds, factor)
    loud = project(runs, hidden_rows, limit_seconds, factor)
    return replace(quiet, high=round(max(quiet.high, loud.seconds), 3), load=load)


def _on_own_cpus(run: RunTimes) -> RunTimes:
    steps = tuple(on_own_cpus(step) for step in run.steps)
    saved = sum(float(a.get("seconds") or 0.0) - float(b.get("seconds") or 0.0) for a, b in zip(run.steps, steps, strict=True))
    return replace(run, wall_seconds=run.wall_seconds - saved, steps=steps)


def local_gpu() -> bool:
    """An NVIDIA GPU on this machine (the driver's listing; no torch import in kkb's process)."""
    gpus = Path("/proc/driver/nvidia/gpus")
    return gpus.is_dir() and any(gpus.iterdir())


def timeout_reason(projection: Projection) -> str:
    """The reason of a projected "Notebook Timeout": the lower end, the range and its basis."""
    return (f"even the lower end of the projection, {duration_text(projection.low)} for {projection.hidden_rows} hidden rows "
            f"(range {duration_text(projection.low)}-{duration_text(projection.high)}, central {duration_text(projection.seconds)}), "
            f"passes the competition's limit of {duration_text(float(projection.limit_seconds or 0))}; basis: "
            + "; ".join(projection.basis()))


def limit_warning(projection: Projection) -> str:
    return (f"the projected rerun may pass the limit: its upper end {duration_text(projection.high)} is over "
            f"{duration_text(float(projection.limit_seconds or 0))} (range {duration_text(projection.low)}-"
            f"{duration_text(projection.high)}, central {duration_text(projection.seconds)}); to decide: {projection.decider()}")


def measured_device(runs: Sequence[RunTimes]) -> tuple[str, int | None]:
    """Where the card steps ran ("cuda" when any did) and their CPU threads; ("cpu", None) without card steps."""
    timings = [timing for run in runs for step in run.steps if (timing := _timing(step)) is not None]
    kinds = {timing.device for timing in timings}
    threads = [timing.threads for timing in timings if timing.threads]
    return ("cuda" if "cuda" in kinds else "xla" if "xla" in kinds else "cpu"), (max(threads) if threads else None)


def card_compute_rates(runs: Sequence[RunTimes]) -> dict[str, float]:
    """Per card step, its measured compute seconds per row (what a rehearsal on Kaggle is compared with)."""
    rates: dict[str, float] = {}
    for run in sorted(runs, key=lambda r: r.rows):
        for step in run.steps:
            timing = _timing(step)
            rate = compute_rate(timing) if timing is not None else None
            if rate:
                rates[str(step.get("name"))] = rate
    return rates


# --- fitting ---------------------------------------------------------------------------------------

def _component_names(runs: Sequence[RunTimes]) -> list[str]:
    names: dict[str, None] = {}
    for run in runs:
        for step in run.steps:
            names.setdefault(str(step.get("name")), None)
    return [*names, OUTSIDE]


def _component_seconds(run: RunTimes, name: str) -> float | None:
    if name == OUTSIDE:
        inside = sum(float(step.get("seconds") or 0.0) for step in run.steps)
        return max(run.wall_seconds - inside, 0.0)
    for step in run.steps:
        if str(step.get("name")) == name:
            return float(step.get("seconds") or 0.0)
    return None


def _timing(step: Mapping[str, Any]) -> StepTiming | None:
    timing = step.get("timing")
    return timing if isinstance(timing, StepTiming) else StepTiming.from_json(timing)


def times_itself(step: Mapping[str, Any]) -> bool:
    """Whether a step's own record tells its fixed from its per-row time (an image card's phases and steady batches,
    or a declared fit), so that one run projects it. A table or text card's record has its seconds and rows only:
    it needs a second size as user code does, or its model load would be counted per row."""
    timing = _timing(step)
    return bool(timing is not None and timing.folds) or step.get(FIT_KEY) in (DECLARED_FIXED, RATE)


def _fit(name: str, runs: Sequence[RunTimes], cards_only: bool = False) -> ComponentFit:
    card = _card_fit(name, runs) or declared_fit(name, runs)
    if card is not None:
        return card
    points = sorted({(run.rows, seconds) for run in runs if (seconds := _component_seconds(run, name)) is not None})
    sizes = sorted({rows for rows, _ in points})
    user = name != OUTSIDE
    if len(sizes) >= 2:
        return _two_sizes(name, points, user)
    rows, seconds = points[0]
    if cards_only:  # kernel start, installs, combining: the card steps carry the per-row work
        return ComponentFit(name, CARD_FIXED, tuple(points), _fixed_span(seconds), ZERO, ZERO,
                            f"{seconds:.2f} s at {rows} rows, fixed (kernel start, installs, combining: the parts "
                            "above do the per-row work)")
    # One point: anywhere from all fixed (low) to all per row (central and high, the safe over-estimate).
    per_row = seconds / max(rows, 1)
    host, device = (ZERO, Span(0.0, per_row, per_row)) if user else (Span(0.0, per_row, per_row), ZERO)
    return ComponentFit(name, ONE_SIZE, tuple(points), Span(seconds, 0.0, 0.0), host, device,
                        f"one point ({seconds:.2f} s at {rows} rows): low end all fixed, central and high all per row",
                        uses_device=user, share_known=not user)


def _card_fit(name: str, runs: Sequence[RunTimes]) -> ComponentFit | None:
    for run in sorted(runs, key=lambda r: -r.rows):
        for step in run.steps:
            timing = _timing(step) if str(step.get("name")) == name else None
            if timing is not None and timing.folds:
                return card_fit(name, float(step.get("seconds") or 0.0), timing)
    return None


def declared_fit(name: str, runs: Sequence[RunTimes]) -> ComponentFit | None:
    """A step whose record says how it grows (``"fit": "fixed"`` or ``"measured rate"``), from the largest run that has it.

    ``rate``: ``seconds`` over ``rows`` is the central per-row cost; ``rates`` (a sample of per-call seconds per row)
    give the spread, as a card's steady batches do; user code, so the accelerator may speed up all of it or none."""
    for run in sorted(runs, key=lambda r: -r.rows):
        for step in run.steps:
            if str(step.get("name")) != name or step.get(FIT_KEY) not in (DECLARED_FIXED, RATE):
                continue
            seconds = float(step.get("seconds") or 0.0)
            point = ((run.rows, round(seconds, 3)),)
            if step[FIT_KEY] == DECLARED_FIXED:
                return ComponentFit(name, DECLARED_FIXED, point, _fixed_span(seconds), ZERO, ZERO,
                                    f"{seconds:.2f} s, fixed ({step.get('why') or 'once per run'})")
            rows = int(step.get("rows") or 0)
            if rows <= 0:
                return None
            central = seconds / rows
            rates = sorted(float(rate) for rate in step.get("rates") or () if rate is not None) or [central]
            low, high = rates[int(0.1 * (len(rates) - 1))], rates[-1 - int(0.1 * (len(rates) - 1))]
            span = Span(min(low, central) / RATE_SPREAD, central, max(high, central) * RATE_SPREAD)
            host, device = (span, ZERO) if step.get("host") else (ZERO, span)
            return ComponentFit(name, RATE, point, ZERO, host, device,
                                f"{central * 1000:.3g} ms per row over {rows} rows ({step.get('why') or 'measured'})",
                                uses_device=not step.get("host"), share_known=bool(step.get("host")))
    return None


def card_fit(name: str, step_seconds: float, timing: StepTiming) -> ComponentFit:
    """A card step from its phases: per-row cost from full steady batches, every other second fixed."""
    rates = [_fold_rates(fold) for fold in timing.folds]
    donor = next((rate for rate in rates if rate is not None), None)
    if donor is None:  # no batch after the warm-up anywhere: the first batch bounds the rate from above
        return _first_batch_only(name, step_seconds, timing)
    filled = [rate if rate is not None else donor for rate in rates]
    data = Span(*(sum(rate[0][i] for rate in filled) for i in range(3)))
    compute = Span(*(sum(rate[1][i] for rate in filled) for i in range(3)))
    rows_run = sum(fold.rows for fold in timing.folds)  # rows through a model: rows x folds
    explained = sum((rate[0][1] + rate[1][1]) * fold.rows for rate, fold in zip(filled, timing.folds, strict=True))
    fixed = max(step_seconds - timing.probe_seconds - explained, 0.0)
    device_kind = timing.device
    host, per_row_device = (data, compute)
    steady = sum(len(_samples(fold)) for fold in timing.folds)
    probed = any(fold.probe for fold in timing.folds)
    basis = (f"{fixed:.2f} s fixed ({_phases(timing)}) + {(data.central + compute.central) * 1000:.3g} ms per row "
             f"({compute.central * 1000:.3g} compute on {device_kind}, {data.central * 1000:.3g} data) from {steady} "
             f"steady batch(es)" + (" of a timing probe" if probed else "")
             + (f"; {len(timing.folds) - sum(r is not None for r in rates)} fold(s) without steady batches counted "
                "as the first (same architecture and pipeline)" if any(r is None for r in rates) else "")
             + f"; {rows_run} rows x folds measured")
    return ComponentFit(name, CARD, ((timing.rows, round(step_seconds, 3)),), _fixed_span(fixed), host, per_row_device,
                        basis, uses_device=True)


def _samples(fold: FoldTiming) -> list[BatchTiming]:
    """The fold's steady batches of full size, else its probe's (past the probe loader's first), else its
    partial steady batches (a per-batch overhead over fewer rows: an over-estimate)."""
    sizes = [batch.rows for batch in (fold.first_batch, *fold.steady, *fold.probe) if batch is not None]
    full = max(sizes, default=0)
    return ([batch for batch in fold.steady if batch.rows == full] or list(fold.probe[1:]) or list(fold.steady))


def _fold_rates(fold: FoldTiming) -> tuple[tuple[float, float, float], tuple[float, float, float]] | None:
    """((data low, central, high), (compute low, central, high)) seconds per row, or None without samples."""
    samples = [batch for batch in _samples(fold) if batch.rows]
    if not samples:
        return None
    rows = sum(batch.rows for batch in samples)

    def span(part: str) -> tuple[float, float, float]:
        # The 10th and 90th percentile of the batches (min and max of a few): one stalled batch among 70 does
        # not move a long run's rate; RATE_SPREAD then allows for the machine's load drifting over the run.
        each = sorted(getattr(batch, part) / batch.rows for batch in samples)
        mean = sum(getattr(batch, part) for batch in samples) / rows
        low, high = each[int(0.1 * (len(each) - 1))], each[-1 - int(0.1 * (len(each) - 1))]
        return min(low, mean) / RATE_SPREAD, mean, max(high, mean) * RATE_SPREAD

    return span("data_seconds"), span("compute_seconds")


def _first_batch_only(name: str, step_seconds: float, timing: StepTiming) -> ComponentFit:
    """A card step with warm-up batches only (no probe): their rate bounds the steady one from above, its wait for
    the loader kept on the CPU (a GPU does not read images faster), the rest on the device."""
    firsts = [fold.first_batch for fold in timing.folds if fold.first_batch is not None and fold.first_batch.rows]
    scale = len(timing.folds) / max(len(firsts), 1)  # a fold without a batch counts as the others
    data = sum(batch.data_seconds / batch.rows for batch in firsts) * scale
    compute = sum(batch.compute_seconds / batch.rows for batch in firsts) * scale
    fixed = max(step_seconds - sum(batch.seconds for batch in firsts), 0.0)
    return ComponentFit(name, CARD_BOUND, ((timing.rows, round(step_seconds, 3)),), Span(fixed, fixed, fixed * FIXED_SPREAD),
                        Span(0.0, data, data), Span(0.0, compute, compute),
                        f"{fixed:.2f} s fixed ({_phases(timing)}); only warm-up batches ran: their "
                        f"{(data + compute) * 1000:.3g} ms per row ({compute * 1000:.3g} compute, {data * 1000:.3g} data) "
                        "bounds the rate from above", uses_device=True)


def _phases(timing: StepTiming) -> str:
    loads = sum(fold.load_seconds for fold in timing.folds)
    warm = sum(fold.first_batch.seconds for fold in timing.folds if fold.first_batch is not None)
    start = f"start {timing.startup_seconds:.2f} s, " if timing.startup_seconds is not None else ""
    return (f"{start}imports {timing.imports_seconds:.2f} s, setup {timing.setup_seconds:.2f} s, model load "
            f"{loads:.2f} s over {len(timing.folds)} fold(s), loader start "
            f"{sum(fold.loader_start_seconds for fold in timing.folds):.2f} s, warm-up batches {warm:.2f} s")


def _fixed_span(seconds: float) -> Span:
    return Span(max(seconds / FIXED_SPREAD - NOISE_FLOOR_SECONDS, 0.0), seconds, seconds * FIXED_SPREAD + NOISE_FLOOR_SECONDS)


def _two_sizes(name: str, points: list[tuple[int, float]], user: bool) -> ComponentFit:
    (n1, t1), (n2, t2) = _mean_at(points, min(p[0] for p in points)), _mean_at(points, max(p[0] for p in points))
    span = n2 - n1
    slope = max((t2 - t1) / span, 0.0)
    noise = (_noise(t1) + _noise(t2)) / span
    fixed = max(t1 - slope * n1, 0.0)
    slopes = Span(max(slope - noise, 0.0) / RATE_SPREAD, slope, (slope + noise) * RATE_SPREAD)
    # The fixed part moves against the slope: at the low slope the whole of t1 may be fixed.
    fixeds = Span(max(t1 - slopes.high * n1, 0.0) / FIXED_SPREAD, fixed, max(t1 - slopes.low * n1, fixed) * FIXED_SPREAD)
    host, device = (ZERO, slopes) if user else (slopes, ZERO)
    return replace(ComponentFit(name, TWO_SIZES, ((n1, round(t1, 3)), (n2, round(t2, 3))), fixeds, host, device,
                                f"two points ({t1:.2f} s at {n1} rows, {t2:.2f} s at {n2}): {fixed:.2f} s fixed + "
                                f"{slope * 1000:.3g} ms per row"),
                   uses_device=user, share_known=not user)


def _mean_at(points: list[tuple[int, float]], rows: int) -> tuple[int, float]:
    times = [seconds for n, seconds in points if n == rows]
    return rows, sum(times) / len(times)


def _noise(seconds: float) -> float:
    return max(NOISE_FLOOR_SECONDS, NOISE_FRACTION * seconds)
