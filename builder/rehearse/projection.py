"""Project a rerun's time to the hidden test: fixed cost plus per-row cost, with an honest range.

Multiplying a whole step's time by hidden/public rows counts process start, imports and model
loading once per row: a 6-row public test projected 1,410 s for a rerun that took 29 s, a 1-image
test 507 h. Each component of a run is instead modelled as ``fixed + per_row × rows``:

- **card steps** (``kkb_runtime predict``) record ``load_seconds`` and ``infer_seconds`` for their
  ``rows`` (``write_step_meta``): per-row = inference / rows, fixed = the rest of the step. One run
  is enough.
- the notebook outside steps counts as fixed when every step is a card step (kernel start, installs
  and combining; the card steps carry the per-row work);
- **user steps** and the notebook outside steps (kernel start, installs, cells) are fitted from two
  runs at different sizes: the rerun on the public test and one on a test replicated by
  :func:`builder.rehearse.sandbox.scale_competition_data` (the dry run adds it when the public test has fewer
  than :data:`MIN_FIT_ROWS` rows).

Uncertainty: each measured time is taken to be good to ``max(NOISE_FLOOR_SECONDS, NOISE_FRACTION × t)``
(timer, scheduling and cache noise on a busy machine); the per-row slope's range follows from the two
points moved apart and together by that much. ``low``/``high`` are the projection at both ends. A
component measured at one size only is projected proportionally (an upper bound, said so) and a
verdict is never drawn from that bound alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

MIN_FIT_ROWS = 50  # below this the public test alone cannot separate fixed from per-row cost
MAX_FIT_FACTOR = 20
NOISE_FLOOR_SECONDS = 0.05
NOISE_FRACTION = 0.10
OUTSIDE = "(notebook outside steps)"


@dataclass(frozen=True)
class RunTimes:
    """One run's measured times: the whole run and each kkb step's record (``kkb_steps.json``)."""

    rows: int
    wall_seconds: float
    steps: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class ComponentFit:
    name: str
    fixed_seconds: float
    per_row_seconds: float
    per_row_low: float
    per_row_high: float
    method: str  # "card timings", "two sizes", "one size (proportional upper bound)"
    points: tuple[tuple[int, float], ...]

    def at(self, rows: int, per_row: float | None = None) -> float:
        return self.fixed_seconds + (self.per_row_seconds if per_row is None else per_row) * rows


@dataclass(frozen=True)
class Projection:
    hidden_rows: int
    seconds: float
    low: float
    high: float
    limit_seconds: float | None
    components: tuple[ComponentFit, ...]
    exact: bool  # False: some component had one size only; ``high`` is an upper bound, not a fit
    measured_rows: int = 0  # the largest test measured

    @property
    def fixed_seconds(self) -> float:
        return sum(component.fixed_seconds for component in self.components)

    @property
    def per_row_seconds(self) -> float:
        return sum(component.per_row_seconds for component in self.components)

    def over_limit(self) -> bool:
        """The central value passes the limit, from a fit or from a test large enough for proportional scaling.

        Never from a proportional bound over a tiny test: a 1-row public test must not time out on paper.
        """
        trusted = self.exact or self.measured_rows >= MIN_FIT_ROWS
        return bool(self.limit_seconds) and trusted and self.seconds > float(self.limit_seconds or 0)

    def may_pass_limit(self) -> bool:
        return bool(self.limit_seconds) and not self.over_limit() and self.high > float(self.limit_seconds or 0)

    def summary(self) -> str:
        how = "fit of fixed + per-row time" if self.exact else "partly proportional (upper bound)"
        text = (f"{self.seconds:.1f} s ({self.low:.1f}-{self.high:.1f} s) for {self.hidden_rows} rows: "
                f"{self.fixed_seconds:.1f} s fixed + {self.per_row_seconds * 1000:.3g} ms per row, {how}")
        if self.limit_seconds:  # in the terminal's unit (9 h, not 32400 s), with what is left of it
            limit = float(self.limit_seconds)
            unit, per = ("h", 3600.0) if limit >= 3600 else (("min", 60.0) if limit >= 60 else ("s", 1.0))
            spare = f"{(limit - self.high) / per:.3g} {unit} to spare" if self.high <= limit else "the high end passes it"
            text += f"; limit {limit / per:g} {unit} ({spare})"
        return text

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(fixed_seconds=self.fixed_seconds, per_row_seconds=self.per_row_seconds, summary=self.summary())
        return data


def fit_factor(rows: int) -> int:
    """How many times to replicate a too-small public test for the second size (1: no second run needed)."""
    if rows >= MIN_FIT_ROWS:
        return 1
    return max(2, min(MAX_FIT_FACTOR, -(-MIN_FIT_ROWS // max(rows, 1))))


def project(runs: Sequence[RunTimes], hidden_rows: int, limit_seconds: float | None = None) -> Projection:
    """Fit each component over ``runs`` (one or two sizes) and project it to ``hidden_rows``."""
    if not runs:
        raise ValueError("no run to project from")
    names = _component_names(runs)
    components = [_fit(name, runs) for name in names if name != OUTSIDE]
    cards_only = bool(components) and all(component.method == "card timings" for component in components)
    components.append(_fit(OUTSIDE, runs, cards_only))
    seconds = sum(component.at(hidden_rows) for component in components)
    low = sum(component.at(hidden_rows, component.per_row_low) for component in components)
    high = sum(component.at(hidden_rows, component.per_row_high) for component in components)
    exact = all(not component.method.startswith("one size") for component in components)
    return Projection(hidden_rows=hidden_rows, seconds=round(seconds, 3), low=round(low, 3), high=round(high, 3),
                      limit_seconds=limit_seconds, components=tuple(components), exact=exact,
                      measured_rows=max(run.rows for run in runs))


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


def _fit(name: str, runs: Sequence[RunTimes], cards_only: bool = False) -> ComponentFit:
    card = _card_fit(name, runs)
    if card is not None:
        return card
    points = sorted({(run.rows, seconds) for run in runs if (seconds := _component_seconds(run, name)) is not None})
    sizes = sorted({rows for rows, _ in points})
    if len(sizes) >= 2:
        return _two_sizes(name, points)
    rows, seconds = points[0]
    if cards_only:  # kernel start, installs, combining: the card steps carry the per-row work
        return ComponentFit(name, round(seconds, 4), 0.0, 0.0, 0.0, "fixed (the card steps do the per-row work)",
                            tuple(points))
    per_row = seconds / max(rows, 1)  # everything scales: the safe over-estimate of the old projection
    return ComponentFit(name, 0.0, per_row, 0.0, per_row, "one size (proportional upper bound)", tuple(points))


def _card_fit(name: str, runs: Sequence[RunTimes]) -> ComponentFit | None:
    for run in sorted(runs, key=lambda r: -r.rows):
        for step in run.steps:
            if str(step.get("name")) != name or not step.get("rows") or step.get("infer_seconds") is None:
                continue
            rows, infer, total = int(step["rows"]), float(step["infer_seconds"]), float(step.get("seconds") or 0.0)
            per_row = infer / rows
            noise = _noise(infer) / rows
            fixed = max(total - infer, 0.0)
            return ComponentFit(name, round(fixed, 4), per_row, max(per_row - noise, 0.0), per_row + noise,
                                "card timings", ((rows, total),))
    return None


def _two_sizes(name: str, points: list[tuple[int, float]]) -> ComponentFit:
    (n1, t1), (n2, t2) = _mean_at(points, min(p[0] for p in points)), _mean_at(points, max(p[0] for p in points))
    span = n2 - n1
    slope = max((t2 - t1) / span, 0.0)
    noise = (_noise(t1) + _noise(t2)) / span
    fixed = max(t1 - slope * n1, 0.0)
    return ComponentFit(name, round(fixed, 4), slope, max(slope - noise, 0.0), slope + noise, "two sizes",
                        ((n1, round(t1, 3)), (n2, round(t2, 3))))


def _mean_at(points: list[tuple[int, float]], rows: int) -> tuple[int, float]:
    times = [seconds for n, seconds in points if n == rows]
    return rows, sum(times) / len(times)


def _noise(seconds: float) -> float:
    return max(NOISE_FLOOR_SECONDS, NOISE_FRACTION * seconds)
