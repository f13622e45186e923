"""The plots of ``report.html`` as inline SVG: drawn by string formatting, so the report costs no plotting library's
import (matplotlib's is most of a second, on every dry run) and its text stays text (selectable, searchable).

Four kinds: the steps' timeline, the time projection on a log scale against the limit, one histogram per target
column, and a reference comparison's scatter per column. Every label is escaped; a scatter draws at most
:data:`MAX_POINTS` points (evenly picked, in row order) and says so under the panel.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: the CLI starts without them (tests/test_dry_run_cost.py)
    import pandas as pd

BLUE, GREY, RED, INK = "#4477aa", "#999999", "#b00020", "#222222"
FONT = "font-family='system-ui,sans-serif' font-size='11'"
MAX_POINTS = 4000
BINS = 30
PANEL_W, PANEL_H = 230, 150  # one small multiple (histogram, scatter)
PANELS_PER_ROW = 3


@dataclass(frozen=True)
class Box:
    """The plotting area inside an SVG: left, top, width, height, in pixels."""

    x: float
    y: float
    w: float
    h: float


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _svg(width: float, height: float, body: Sequence[str], label: str) -> str:
    return (f"<svg xmlns='http://www.w3.org/2000/svg' role='img' aria-label='{_e(label)}' width='{width:.0f}' "
            f"height='{height:.0f}' viewBox='0 0 {width:.0f} {height:.0f}' {FONT}>" + "".join(body) + "</svg>")


def _text(x: float, y: float, text: object, anchor: str = "start", extra: str = "") -> str:
    return f"<text x='{x:.1f}' y='{y:.1f}' text-anchor='{anchor}' {extra}>{_e(text)}</text>"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round ticks (1, 2, 5 x 10^k apart) covering ``[low, high]``."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low] if math.isfinite(low) else []
    raw = (high - low) / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    return [round(first + i * step, 12) for i in range(int((high - first) / step + 1e-9) + 1)]


def _label(value: float) -> str:
    return f"{value:.4g}"


def _x_axis(box: Box, low: float, high: float, ticks: Sequence[float], caption: str = "", log: bool = False) -> list[str]:
    def at(value: float) -> float:
        span = (math.log10(high) - math.log10(low)) if log else (high - low)
        offset = (math.log10(value) - math.log10(low)) if log else (value - low)
        return box.x + box.w * offset / span if span else box.x

    parts = [f"<line x1='{box.x}' y1='{box.y + box.h}' x2='{box.x + box.w}' y2='{box.y + box.h}' stroke='{GREY}'/>"]
    for tick in ticks:
        x = at(tick)
        parts.append(f"<line x1='{x:.1f}' y1='{box.y + box.h}' x2='{x:.1f}' y2='{box.y + box.h + 4}' stroke='{GREY}'/>")
        parts.append(_text(x, box.y + box.h + 15, _label(tick), "middle"))
    if caption:
        parts.append(_text(box.x + box.w / 2, box.y + box.h + 31, caption, "middle"))
    return parts


def timeline(names: Sequence[str], seconds: Sequence[float], notes: Sequence[str]) -> str:
    """The steps one after the other: a bar per step from where the last ended, its note (peak memory) at the right."""
    total = sum(seconds) or 1.0
    row = 22
    box = Box(110, 8, 520, row * len(names))
    body: list[str] = []
    start = 0.0
    for index, (name, length, note) in enumerate(zip(names, seconds, notes, strict=True)):
        x, y, w = box.x + box.w * start / total, box.y + index * row + 3, max(box.w * length / total, 1.0)
        body.append(f"<rect x='{x:.1f}' y='{y:.1f}' width='{w:.1f}' height='{row - 6}' fill='{BLUE}'/>")
        body.append(_text(box.x - 6, y + row / 2 + 1, name, "end"))
        body.append(_text(box.x + box.w + 6, y + row / 2 + 1, note))  # a column of its own: never over a bar
        start += length
    body += _x_axis(box, 0.0, total, nice_ticks(0.0, total), "seconds (steps in order)")
    return _svg(box.x + box.w + 70, box.y + box.h + 40, body, "steps timeline")


def projection(low: float, mid: float, high: float, limit: float | None, unit: str, row_label: str, caption: str,
               limit_label: str, headroom: str) -> str:
    """The projected time (bar) with its range (whiskers) on a log scale, and the limit (dashed red line)."""
    right = max(high, limit or 0.0) * 3
    left = low / 10
    box = Box(110, 10, 520, 40)
    ticks = [10.0 ** k for k in range(math.ceil(math.log10(left)), math.floor(math.log10(right)) + 1)]

    def at(value: float) -> float:
        return box.x + box.w * (math.log10(value) - math.log10(left)) / (math.log10(right) - math.log10(left))

    y = box.y + box.h / 2
    body = [f"<rect x='{box.x}' y='{y - 10}' width='{at(mid) - box.x:.1f}' height='20' fill='{BLUE}'/>",
            f"<line x1='{at(low):.1f}' y1='{y}' x2='{at(high):.1f}' y2='{y}' stroke='{INK}'/>",
            *(f"<line x1='{at(v):.1f}' y1='{y - 8}' x2='{at(v):.1f}' y2='{y + 8}' stroke='{INK}'/>" for v in (low, high)),
            _text(box.x - 6, y + 4, row_label, "end")]
    if limit:
        x = at(limit)
        body += [f"<line x1='{x:.1f}' y1='{box.y - 4}' x2='{x:.1f}' y2='{box.y + box.h}' stroke='{RED}' stroke-dasharray='5,3'/>",
                 _text(x - 4, box.y + 6, f"{limit_label}; {headroom}", "end", f"fill='{RED}'")]
    body += _x_axis(box, left, right, ticks, f"{unit} (log scale): {caption}", log=True)
    return _svg(box.x + box.w + 30, box.y + box.h + 40, body, "time projection")


def _panel_grid(count: int) -> tuple[int, int]:
    columns = min(PANELS_PER_ROW, max(count, 1))
    return columns, (count + columns - 1) // columns


def histograms(frame: pd.DataFrame) -> str:
    """One small histogram per column (:data:`BINS` bins over its range), three to a row."""
    import numpy as np
    import pandas as pd
    columns, rows = _panel_grid(len(frame.columns))
    body: list[str] = []
    for index, column in enumerate(frame.columns):
        left, top = (index % columns) * PANEL_W, (index // columns) * PANEL_H
        box = Box(left + 12, top + 18, PANEL_W - 24, PANEL_H - 46)
        body.append(_text(left + PANEL_W / 2, top + 12, column, "middle"))
        values = pd.to_numeric(frame[column], errors="coerce").dropna().to_numpy(dtype=float)
        values = values[np.isfinite(values)]
        if not len(values):
            body.append(_text(box.x + box.w / 2, box.y + box.h / 2, "no finite values", "middle"))
            continue
        low, high = float(values.min()), float(values.max())
        counts, _ = np.histogram(values, bins=BINS, range=(low, high) if high > low else (low - 0.5, high + 0.5))
        peak = int(counts.max()) or 1
        width = box.w / BINS
        for k, n in enumerate(counts):
            if n:
                h = box.h * int(n) / peak
                body.append(f"<rect x='{box.x + k * width:.1f}' y='{box.y + box.h - h:.1f}' width='{max(width - 1, 0.5):.1f}' "
                            f"height='{h:.1f}' fill='{BLUE}'><title>{int(n)}</title></rect>")
        body += _x_axis(box, low, high if high > low else low + 1, [low, high] if high > low else [low])
    return _svg(columns * PANEL_W, rows * PANEL_H, body, "target column histograms")


def scatters(pairs: Sequence[tuple[str, pd.Series, pd.Series]]) -> str:
    """Per column, x against y, with the line y = x: where two files agree, the points lie on it."""
    import numpy as np
    import pandas as pd
    columns, rows = _panel_grid(len(pairs))
    body: list[str] = []
    for index, (name, x_values, y_values) in enumerate(pairs):
        left, top = (index % columns) * PANEL_W, (index // columns) * PANEL_H
        box = Box(left + 14, top + 18, PANEL_W - 28, PANEL_H - 46)
        x = pd.to_numeric(x_values, errors="coerce")
        y = pd.to_numeric(y_values.reindex(x_values.index), errors="coerce")
        both = pd.DataFrame({"x": x, "y": y}).replace([np.inf, -np.inf], np.nan).dropna()
        body.append(_text(left + PANEL_W / 2, top + 12, name, "middle"))
        if both.empty:
            body.append(_text(box.x + box.w / 2, box.y + box.h / 2, "no numeric pairs", "middle"))
            continue
        shown = both.iloc[np.linspace(0, len(both) - 1, MAX_POINTS).astype(int)] if len(both) > MAX_POINTS else both
        low, high = float(min(both["x"].min(), both["y"].min())), float(max(both["x"].max(), both["y"].max()))
        high = high if high > low else low + 1

        def sx(v: float, box: Box = box, low: float = low, high: float = high) -> float:
            return box.x + box.w * (v - low) / (high - low)

        def sy(v: float, box: Box = box, low: float = low, high: float = high) -> float:
            return box.y + box.h - box.h * (v - low) / (high - low)

        body.append(f"<line x1='{sx(low):.1f}' y1='{sy(low):.1f}' x2='{sx(high):.1f}' y2='{sy(high):.1f}' stroke='{GREY}'/>")
        body.append("<g fill='" + BLUE + "' fill-opacity='0.5'>" + "".join(
            f"<circle cx='{sx(a):.1f}' cy='{sy(b):.1f}' r='1.6'/>" for a, b in zip(shown["x"], shown["y"], strict=True)) + "</g>")
        body += _x_axis(box, low, high, [low, high])
        if len(shown) < len(both):
            body.append(_text(left + PANEL_W / 2, top + PANEL_H - 2, f"{len(shown)} of {len(both)} rows drawn", "middle"))
    return _svg(columns * PANEL_W, rows * PANEL_H, body, "reference scatter plots")


__all__ = ["histograms", "nice_ticks", "projection", "scatters", "timeline"]
