"""What each card feeds its model, for the first test rows: ``kkb dry-run --show-inputs [N]`` prints it, and
``report.json`` (``inputs``) always carries it.

The views themselves are the kernel runtime's (each kind's unit, :mod:`builder.kkb_runtime.cards.views`): each card step of the dry
run makes its own, in its process, over the test it ran on (the dry run sets ``$KKB_SHOW_INPUTS``), so the view is
what that process fed its model and costs kkb no import of torch or transformers. A card no step ran (a fast commit
with no rerun, a failed step) gets its view here, beside the sandbox, from the built code and weights
(``kkb_kernel.json``'s cards, as the kernel reads them) and the public test. A card whose view cannot be made says
why in its entry; the dry run goes on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from builder.build import BuildResult
from builder.bundle.models import offline_environment, user_code_importable
from builder.kkb_runtime.cards.views import card_view
from builder.kkb_runtime.config_reader import load_config
from builder.project.layout import KERNEL_CONFIG

DEFAULT_ROWS = 3


def card_inputs(build: BuildResult, data: Path, rows: int = DEFAULT_ROWS,
                steps: Iterable[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """One entry per card: ``{"card", "kind", "rows": [...], "lines": [...]}`` (or ``"error"``).

    ``steps``: the dry run's step records, first scenario first; a card's view is the first step's of that card
    with ``rows`` rows, else made here over ``data``.
    """
    config_path = build.code_dir / KERNEL_CONFIG
    if rows < 1 or not config_path.is_file():
        return []
    config = load_config(config_path)
    made = _step_views(steps, rows)
    entries = []
    for card in config.models:
        entry: dict[str, Any] = {"card": card.name, "kind": str(card.kind)}
        view = made.get(card.name)
        if view is None:
            with user_code_importable(build.code_dir), offline_environment():
                view = card_view(config, card, build.weights_dir, data, rows)
        entry.update(view)
        entry["lines"] = lines(entry)
        entries.append(entry)
    return entries


def _step_views(steps: Iterable[Mapping[str, Any]], rows: int) -> dict[str, dict[str, Any]]:
    """``{card name: view}`` from the steps that made one of ``rows`` rows (the first such step of each card)."""
    views: dict[str, dict[str, Any]] = {}
    for step in steps:
        shown = step.get("inputs")
        if isinstance(shown, Mapping) and shown.get("rows_asked") == rows and isinstance(shown.get("card"), str):
            views.setdefault(shown["card"], {key: shown[key] for key in ("rows", "error") if key in shown})
    return views


def lines(entry: Mapping[str, Any]) -> list[str]:
    """The entry as plain text lines (what the terminal shows)."""
    head = f"{entry['card']} ({entry['kind']})"
    if "error" in entry:
        return [f"{head}: no view of its inputs: {entry['error']}"]
    out = [head]
    for index, row in enumerate(entry.get("rows", [])):
        if "tokens" in row:
            padded = f", padded to {row['padded_to']}" if row.get("padded_to") else ""
            out.append(f"  row {index}: {row['length']} tokens{padded}" + (f"; cut: {row['cut']}" if row.get("cut") else ""))
            out.append(f"    {row['tokens']}")
        elif "features" in row:
            out.append(f"  row {index}: " + ", ".join(f"{f['name']}:{f['dtype']}={f['value']}" for f in row["features"]))
            if "net_input" in row:  # a torch card's features after its preprocessor
                out.append(f"    net input (float32, after the preprocessor): {row['net_input']}")
        else:
            out.append(f"  row {index}: {row['image']}: tensor {tuple(row['shape'])} {row['dtype']}, mean "
                       f"{row['mean']}, std {row['std']}, range {row['range']}")
    return out


__all__ = ["DEFAULT_ROWS", "card_inputs", "lines"]
