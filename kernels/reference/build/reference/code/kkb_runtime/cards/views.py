"""What each card feeds its model, for the first test rows: the dry run's ``--show-inputs`` view (``report.json``'s
``inputs``).

A card step makes its own view when ``$KKB_SHOW_INPUTS`` asks for it (the dry run's sandbox sets it to the number of
rows), after its output is written: the step has already imported its libraries and read its data, so the view costs
it a few milliseconds where kkb's own process would spend seconds importing torch or transformers. It is written into
the step's meta file (``inputs``), and the dry run makes it itself only for a card no step ran
(``builder.rehearse.card_inputs``). Each kind's view is its runtime unit's (``RUNTIME_CARDS``): the tokens a text card
gives its model, the feature row of a table card in the model's order (a torch card's after its preprocessor too),
the tensor an image card's pipeline makes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..card import BuiltCard
from ..config import KernelConfig
from . import RUNTIME_CARDS

ROWS_VARIABLE = "KKB_SHOW_INPUTS"  # how many rows a step shows (unset or 0: none; the dry run sets it)


def requested_rows(environ: Mapping[str, str]) -> int:
    """The rows ``$KKB_SHOW_INPUTS`` asks a step to show (0: no view)."""
    value = str(environ.get(ROWS_VARIABLE) or "0")
    return int(value) if value.isdigit() else 0


def card_view(config: KernelConfig, card: BuiltCard, weights: Path, data: Path, rows: int) -> dict[str, Any]:
    """``{"rows": [...]}``, or ``{"error": "..."}`` when the view cannot be made: a view is a report, never a failure."""
    try:
        return {"rows": RUNTIME_CARDS[card.kind].view(card, config, weights, data, rows)}
    except Exception as exc:  # the user's code and libraries raise anything; the run goes on
        return {"error": f"{type(exc).__name__}: {exc}"}


__all__ = ["ROWS_VARIABLE", "card_view", "requested_rows"]
