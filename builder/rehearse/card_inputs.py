"""What each card feeds its model, for the first test rows: ``kkb dry-run --show-inputs [N]`` prints it, and
``report.json`` (``inputs``) always carries it.

The views themselves are the kernel runtime's (each kind's unit, :mod:`builder.kkb_runtime.cards.views`): each card step of the dry
run makes its own, in its process, over the test it ran on (the dry run sets ``$KKB_SHOW_INPUTS``), so the view is
what that process fed its model and costs kkb no import of torch or transformers. A card no step ran (a fast commit
with no rerun, a failed step) gets its view here, beside the sandbox, from the built code and weights
(``kkb_kernel.json``'s cards, as the kernel reads them) and the public test, in a sandbox of its own
(:mod:`builder.rehearse.inputs_guest`): a view runs the user's code, which never runs in kkb's process. A card whose
view cannot be made says why in its entry (one that does not return within the build's bound of a call of the user's
code is named); the dry run goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from builder.build import BuildResult
from builder.bundle.card_run import call_seconds
from builder.kkb_runtime.config_reader import load_config
from builder.project.layout import KERNEL_CONFIG
from builder.run.program import ProgramCall, call_program
from builder.run.sandbox import Mount

DEFAULT_ROWS = 3
GUEST = "builder.rehearse.inputs_guest"
# Who makes the views no step made: (build, data, rows, card names) -> {card: view}
ViewMaker = Callable[[BuildResult, Path, int, list[str]], dict[str, dict[str, Any]]]


def card_inputs(build: BuildResult, data: Path, rows: int = DEFAULT_ROWS, steps: Iterable[Mapping[str, Any]] = (),
                make_views: ViewMaker | None = None) -> list[dict[str, Any]]:
    """One entry per card: ``{"card", "kind", "rows": [...], "lines": [...]}`` (or ``"error"``).

    ``steps``: the dry run's step records, first scenario first; a card's view is the first step's of that card
    with ``rows`` rows, else made over ``data`` by ``make_views`` (default: :func:`sandboxed_views`).
    """
    config_path = build.code_dir / KERNEL_CONFIG
    if rows < 1 or not config_path.is_file():
        return []
    config = load_config(config_path)
    made = _step_views(steps, rows)
    missing = [card.name for card in config.models if card.name not in made]
    if missing:
        made.update((make_views or sandboxed_views)(build, data, rows, missing))
    entries = []
    for card in config.models:
        entry: dict[str, Any] = {"card": card.name, "kind": str(card.kind)}
        entry.update(made[card.name])
        entry["lines"] = lines(entry)
        entries.append(entry)
    return entries


def sandboxed_views(build: BuildResult, data: Path, rows: int, cards: list[str]) -> dict[str, dict[str, Any]]:
    """The views of ``cards``, made by :mod:`builder.rehearse.inputs_guest` in a sandbox over the built datasets and
    ``data``; a card the program gave no view gets the reason as its error."""
    weights = f"datasets/{build.weights_dataset}" if build.weights_dataset else "datasets/kkb/weights"
    code = f"datasets/{build.code_dataset}"
    slug = f"competitions/{build.spec.competition.slug}"
    call = ProgramCall(GUEST, (Mount(build.code_dir, code), Mount(build.weights_dir, weights), Mount(data, slug)),
                       call_seconds=call_seconds(), run_seconds=call_seconds() * (len(cards) + 1))
    answered = call_program(call, lambda where: {"code": str(where(code)), "weights": str(where(weights)),
                                                 "data": str(where(slug)), "rows": rows, "cards": cards})
    views = (answered.answer or {}).get("views")
    views = views if isinstance(views, dict) else {}
    run = answered.run
    stopped = run.timed_out_call or run.open_call
    ended = (f"did not return within {call.call_seconds:g} s" if run.timed_out_call is not None
             else f"ended its process (exit code {run.returncode}): {run.stderr.strip()[-300:]}")

    def why(card: str) -> str:
        if stopped is None or stopped.card in (card, None):
            return f"the view {ended}"
        return f"not made: the view of '{stopped.card}' {ended}"

    return {card: views[card] if isinstance(views.get(card), dict) else {"error": why(card)} for card in cards}


def _step_views(steps: Iterable[Mapping[str, Any]], rows: int) -> dict[str, dict[str, Any]]:
    """``{card name: view}`` from the steps that made one of ``rows`` rows (the first such step of each card)."""
    views: dict[str, dict[str, Any]] = {}
    for step in steps:
        shown = step.get("inputs")
        if isinstance(shown, Mapping) and shown.get("rows_asked") == rows and isinstance(shown.get("card"), str):
            views.setdefault(shown["card"], {key: shown[key] for key in ("rows", "error") if key in shown})
    return views


ROW_CHARACTERS = 199  # a line of values stays under 200 characters, unless every column is asked for (--all-columns)


def clipped(head: str, items: list[str], limit: int | None = ROW_CHARACTERS) -> str:
    """``head`` and ``items`` joined, as many items as fit in ``limit`` characters, then how many are left out."""
    line = head + ", ".join(items)
    if limit is None or len(line) <= limit:
        return line
    shown: list[str] = []
    for item in items:
        rest = len(items) - len(shown) - 1
        tail = f", ... (+{rest} more; --all-columns shows them)"
        if len(head + ", ".join([*shown, item]) + tail) > limit:
            break
        shown.append(item)
    return head + ", ".join(shown) + f", ... (+{len(items) - len(shown)} more; --all-columns shows them)"


def lines(entry: Mapping[str, Any], limit: int | None = ROW_CHARACTERS) -> list[str]:
    """The entry as plain text lines (what the terminal shows): each line of values clipped to ``limit`` characters
    (None: every value)."""
    head = f"{entry['card']} ({entry['kind']})"
    if "error" in entry:
        return [f"{head}: no view of its inputs: {entry['error']}"]
    out = [head]
    for index, row in enumerate(entry.get("rows", [])):
        if "tokens" in row:
            padded = f", padded to {row['padded_to']}" if row.get("padded_to") else ""
            out.append(f"  row {index}: {row['length']} tokens{padded}" + (f"; cut: {row['cut']}" if row.get("cut") else ""))
            out.append(clipped("    ", str(row["tokens"]).split(" "), limit).replace(", ", " "))
        elif "net_input" in row:  # a torch card: what the net receives, after feature_columns and the preprocessors
            values = [f"{value['name']}={value['value']}" for value in row["net_input"]]
            after = f" after {', '.join(row['preprocessors'])}" if row.get("preprocessors") else ""
            out.append(f"  row {index}: the net receives {len(values)} float32 values{after}:")
            out.append(clipped("    ", values, limit))
        elif "features" in row:
            out.append(clipped(f"  row {index}: ", [f"{f['name']}:{f['dtype']}={f['value']}" for f in row["features"]], limit))
        else:
            out.append(f"  row {index}: {row['image']}: tensor {tuple(row['shape'])} {row['dtype']}, mean "
                       f"{row['mean']}, std {row['std']}, range {row['range']}")
    return out


__all__ = ["DEFAULT_ROWS", "ROW_CHARACTERS", "ViewMaker", "card_inputs", "clipped", "lines", "sandboxed_views"]
