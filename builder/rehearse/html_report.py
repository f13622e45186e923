"""``report.html`` beside ``report.json``: the dry run for people, one self-contained file.

Per scenario: the verdict and its reason, the isolation and limits that applied, a timeline of the
steps (time and peak memory), the time projection against the competition's limit, a histogram of
each target column of the submission, and how the ensemble members agree (the correlation of their
step outputs, ``kkb_steps.json`` names each step's CSV). Plots are inline SVG
(:mod:`builder.rehearse.svg_plots`): no plotting library is imported. Every text from the run is
HTML-escaped.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.errors import KkbError
from builder.project.compare import aligned_frames
from builder.rehearse import svg_plots
from builder.rehearse.report import DryRunReport, ScenarioReport

if TYPE_CHECKING:  # imported where used: the CLI starts without them (tests/test_dry_run_cost.py)
    import pandas as pd

REPORT_HTML = "report.html"
MAX_HISTOGRAMS = 6
MAX_SCATTERS = 12  # the worst columns of a reference comparison (its table lists them all)
STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:70em;color:#222}
h1{font-size:1.4em} h2{font-size:1.2em;border-bottom:1px solid #ccc;padding-bottom:.2em}
.ok{color:#17702f;font-weight:bold} .bad{color:#b00020;font-weight:bold} .warn{color:#8a5a00}
table{border-collapse:collapse;margin:.5em 0} td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:.85em} svg{max-width:100%;height:auto;display:block}
"""


def write_html_report(report: DryRunReport, path: Path | None = None) -> Path:
    """Write the report next to ``report.json`` (or at ``path``) and return its path."""
    target = path or report.out_dir / REPORT_HTML
    target.write_text(render(report), encoding="utf-8")
    return target


def render(report: DryRunReport) -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>kkb dry run: {_e(report.kernel_name)}</title>"
             f"<style>{STYLE}</style></head><body>",
             f"<h1>kkb dry run: {_e(report.kernel_name)} <small>({_e(report.kernel_id)}, {_e(report.kernel_type)})</small></h1>",
             _summary(report)]
    parts += [_scenario(scenario) for scenario in report.scenarios]
    parts.append(_reference(report.reference))
    parts.append(_inputs(report.inputs))
    parts.append("</body></html>")
    return "\n".join(parts)


def _summary(report: DryRunReport) -> str:
    rows = "".join(f"<tr><td>{_e(s.scenario)}</td><td class='{'ok' if s.ok else 'bad'}'>{_e(s.verdict.name)}</td>"
                   f"<td>{_e(s.verdict.reason)}</td></tr>" for s in report.scenarios)
    return f"<table><tr><th>scenario</th><th>verdict</th><th>reason</th></tr>{rows}</table>"


def _scenario(s: ScenarioReport) -> str:
    parts = [f"<h2>{_e(s.scenario)}: <span class='{'ok' if s.ok else 'bad'}'>{_e(s.verdict.name)}</span></h2>",
             f"<p>{_e(s.verdict.reason)}</p>"]
    parts += [f"<p class='warn'>warning: {_e(warning)}</p>" for warning in s.warnings]
    parts.append(_facts(s))
    parts.append(_timeline(s))
    parts.append(_projection(s))
    parts.append(_metric(s))
    parts.append(_predictions(s))
    parts.append(_environment(s))
    if s.verdict.detail:
        parts.append(f"<details><summary>detail</summary><pre>{_e(s.verdict.detail)}</pre></details>")
    return "\n".join(part for part in parts if part)


def _facts(s: ScenarioReport) -> str:
    facts = [("wall time", f"{s.wall_seconds:.1f} s"), ("rows", str(s.rows)),
             ("peak RAM", _size(s.peak_rss_bytes)), ("RAM limit", f"{_size(s.ram_limit_bytes)}: {s.memory_limit}"),
             ("peak GPU memory", _size(s.peak_gpu_bytes) if s.peak_gpu_bytes else "-"),
             ("/kaggle/working", f"{_size(s.working_bytes)} ({s.working_limit})"),
             ("isolation", f"{s.isolation}: {s.isolation_note}"), ("data", str(s.data or "")),
             ("blocked network", ", ".join(s.blocked_network) or "none"), ("fast commit", s.fast_commit or "-")]
    rows = "".join(f"<tr><th>{_e(name)}</th><td>{_e(value)}</td></tr>" for name, value in facts)
    return f"<table>{rows}</table>"


def _environment(s: ScenarioReport) -> str:
    """The kernel's environment: every variable with its value (a secret's redacted) and where it came from."""
    if not s.variables:
        return ""
    rows = "".join(f"<tr><td>{_e(v['name'])}</td><td>{_e(v['value'])}</td><td>{_e(v['origin'])}</td><td>{_e(v.get('note', ''))}"
                   "</td></tr>" for v in s.variables)
    return (f"<details><summary>kernel environment: {_e(s.variables_summary)}</summary><table><tr><th>name</th>"
            f"<th>value</th><th>from</th><th>what it is</th></tr>{rows}</table></details>")


def _timeline(s: ScenarioReport) -> str:
    if not s.steps:
        return "<p>no kkb steps ran</p>"
    rows = "".join(f"<tr><td>{_e(str(step.get('name')))}</td><td>{float(step.get('seconds') or 0):.2f} s</td>"
                   f"<td>{_size(int(step.get('peak_rss_bytes') or 0))}</td></tr>" for step in s.steps)
    table = f"<table><tr><th>step</th><th>time</th><th>peak memory</th></tr>{rows}</table>"
    shared = "".join(f"<p>{_e(entry['line'])}</p>" for entry in s.shared_features)  # feature tables computed once
    plot = svg_plots.timeline([str(step.get("name")) for step in s.steps], [float(step.get("seconds") or 0.0) for step in s.steps],
                              [_size(int(step.get("peak_rss_bytes") or 0)) for step in s.steps])
    return "<h3>steps</h3>" + table + shared + plot


def _projection(s: ScenarioReport) -> str:
    if not s.projection:
        return ""
    p = s.projection
    rows = "".join(f"<tr><td>{_e(c['name'])}</td><td>{c['fixed_seconds']:.2f} s</td><td>{c['per_row_seconds'] * 1000:.3g} ms "
                   f"({c['per_row_low'] * 1000:.3g}-{c['per_row_high'] * 1000:.3g})</td><td>{_e(c['method'])}</td>"
                   f"<td>{_e(', '.join(f'{n} rows: {t:.2f} s' for n, t in c['points']))}</td></tr>" for c in p["components"])
    table = (f"<table><tr><th>component</th><th>fixed</th><th>per row (range)</th><th>how</th><th>measured</th></tr>{rows}</table>")
    basis = "".join(f"<li>{_e(line)}</li>" for line in p.get("basis") or ())  # what was measured, what extrapolated
    room = f" {headroom(float(p['high']), float(p['limit_seconds']))}." if p.get("limit_seconds") else ""
    return (f"<h3>time projection</h3><p>{_e(p['summary'])}{_e(room)}</p>{table}" + (f"<ul>{basis}</ul>" if basis else "")
            + _projection_plot(p))


def _projection_plot(p: dict[str, Any]) -> str:
    """On a log scale, in the terminal's unit: a 6.5 s run beside a 9 h limit is visible, and so is the headroom."""
    limit = float(p.get("limit_seconds") or 0)
    unit, per = time_unit(limit or float(p["high"]))
    low, mid, high = (max(float(p[key]), 1e-3) / per for key in ("low", "seconds", "high"))
    caption = (f"projected {_duration(float(p['seconds']))}, range {_duration(float(p['low']))} to "
               f"{_duration(float(p['high']))}")
    return svg_plots.projection(low, mid, high, limit / per if limit else None, unit, f"{p['hidden_rows']} rows", caption,
                                f"limit {_duration(limit)}" if limit else "", headroom(float(p["high"]), limit) if limit else "")


def time_unit(seconds: float) -> tuple[str, float]:
    """The unit the terminal says a duration in: h from an hour on, min from a minute, else s."""
    if seconds >= 3600:
        return "h", 3600.0
    return ("min", 60.0) if seconds >= 60 else ("s", 1.0)


def _duration(seconds: float) -> str:
    unit, per = time_unit(seconds)
    return f"{seconds / per:.3g} {unit}"


def headroom(high: float, limit: float) -> str:
    """``headroom 8.99 h (x4985)``, or how far past the limit the high end of the projection goes."""
    if high > limit:
        return f"over the limit by {_duration(high - limit)}"
    ratio = limit / high if high > 0 else 0.0
    times = (f" (x{ratio:,.0f})" if ratio >= 10 else f" (x{ratio:.2g})") if ratio else ""
    return f"headroom {_duration(limit - high)}{times}"


def _metric(s: ScenarioReport) -> str:
    """The metric: its lines (split, expected score), and per column the decimals and ties of rounding."""
    if not s.metric:
        return ""
    lines = "".join(f"<li>{_e(line)}</li>" for line in s.metric.get("lines", []))
    rows = "".join(f"<tr><td>{_e(r['column'])}</td><td>{_e(r['requested'])}</td>"
                   f"<td>{_e(_used(r))}</td>"
                   f"<td>{r['ties_before']}</td>"
                   f"<td>{r['ties_after']}</td><td>{r['rows']}</td><td>{_e(r['why'])}</td></tr>" for r in s.metric.get("rounding", []))
    table = (f"<table><tr><th>column</th><th>decimals requested</th><th>used</th><th>ties before</th><th>ties after</th>"
             f"<th>rows</th><th>why</th></tr>{rows}</table>") if rows else ""
    chances = "".join(f"<tr><td>{_e(c['column'])}</td><td>{c['public_rows']}</td><td>{c['public_chance']:.3%}</td>"
                      f"<td>{c['private_chance']:.3%}</td></tr>" for c in s.metric.get("constant_chance", []))
    chance_table = (f"<p>chance that a random part is constant (the split is not known)</p><table><tr><th>column</th>"
                    f"<th>public rows</th><th>public part</th><th>private part</th></tr>{chances}</table>") if chances else ""
    effect = (s.metric.get("expected") or {}).get("rounding")
    scores = (f"<p>expected score before rounding: public {effect['unrounded']['public']:.7g}, private "
              f"{effect['unrounded']['private']:.7g}; after: public {effect['rounded']['public']:.7g}, private "
              f"{effect['rounded']['private']:.7g}</p>") if effect else ""
    return f"<h3>metric</h3><ul>{lines}</ul>{scores}{table}{chance_table}"


def _used(record: dict[str, Any]) -> str:
    return "unrounded" if record["used"] is None else f"{record['used']} {record.get('kind', 'decimals')}"


def _predictions(s: ScenarioReport) -> str:
    import pandas as pd
    parts = []
    if s.submission is not None and Path(s.submission).is_file() and Path(s.submission).suffix == ".csv":
        frame = pd.read_csv(s.submission)
        numeric = [c for c in frame.columns[1:] if pd.api.types.is_numeric_dtype(frame[c])]
        if numeric:
            parts.append("<h3>target columns</h3>" + _histogram_grid(frame[numeric[:MAX_HISTOGRAMS]]))
        if len(numeric) > MAX_HISTOGRAMS:  # every target has its histogram; beyond a few they wait behind a click
            rest = numeric[MAX_HISTOGRAMS:]
            parts.append(f"<details><summary>{len(rest)} more target column(s)</summary>"
                         f"{_histogram_grid(frame[rest])}</details>")
    members = _member_predictions(s)
    if len(members) >= 2:
        corr = pd.DataFrame(members).corr()
        parts.append("<h3>ensemble members: correlation</h3>" + corr.round(3).to_html(border=0))
    return "\n".join(parts)


def _inputs(inputs: list[dict[str, Any]]) -> str:
    """What each card fed its model for the first test rows (``kkb dry-run --show-inputs`` prints the same)."""
    if not inputs:
        return ""
    text = "\n".join(line for entry in inputs for line in entry.get("lines", []))
    return f"<h2>inputs: what each card feeds its model</h2><pre>{_e(text)}</pre>"


def _reference(reference: dict[str, Any] | None) -> str:
    """``--reference``: the comparison table and, per compared file, one scatter per column, worst first."""
    if reference is None:
        return ""
    verdict = "<span class='ok'>equal</span>" if reference.get("ok") else "<span class='bad'>differs</span>"
    parts = [f"<h2>reference ({_e(reference.get('scenario'))}): {verdict}</h2>",
             f"<pre>{_e(chr(10).join(map(str, reference.get('lines', []))))}</pre>"]
    for comparison in reference.get("comparisons", []):
        try:
            left_file, right_file = (Path(f) for f in comparison["files"])
            left, right, _ = aligned_frames(left_file, right_file, comparison["id_column"])
        except (KkbError, KeyError, TypeError, ValueError):
            continue
        pairs = [(str(c["column"]), left[c["column"]], right[c["column"]])
                 for c in sorted(comparison.get("columns", []), key=lambda c: (-c["beyond"], -(c["max_abs"] or 0.0)))
                 if c.get("numeric")][:MAX_SCATTERS]
        if pairs:
            parts.append(f"<h3>{_e(comparison.get('left'))} (x) vs {_e(comparison.get('right'))} (y)</h3>"
                         + svg_plots.scatters(pairs))
    return "\n".join(parts)


def _histogram_grid(frame: pd.DataFrame) -> str:
    """One small histogram per column, three to a row."""
    return svg_plots.histograms(frame)


def _member_predictions(s: ScenarioReport) -> dict[str, pd.Series]:
    """Each step's predictions, flattened over its target columns (the dry run keeps each step's CSV)."""
    import pandas as pd
    members: dict[str, pd.Series] = {}
    for name, output in s.member_outputs.items():
        try:
            frame = pd.read_csv(output)
        except Exception:
            continue
        values = frame.iloc[:, 1:].select_dtypes("number")
        if not values.empty:
            members[name] = pd.Series(values.to_numpy().ravel())
    return members


def _size(value: int | None) -> str:
    if not value:
        return "0 MiB"
    return f"{value / 2**30:.2f} GiB" if value >= 2**30 else f"{value / 2**20:.0f} MiB"


def _e(text: object) -> str:
    return html.escape(str(text))
