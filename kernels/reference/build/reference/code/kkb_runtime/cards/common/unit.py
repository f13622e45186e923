"""One card kind in the kernel, as a unit: its card (the keys), its record (what the build recorded), its runner
(``python -m kkb_runtime predict --model NAME``) and its view (what it feeds its model, ``--show-inputs``).

:func:`runtime_card` takes the runner and the view typed with the kind's own card and record, and gives the
functions ``kkb_runtime.cards.RUNTIME_CARDS`` calls with any card of ``kkb_kernel.json``, narrowed to the kind's
types once, here (the build side's ``builder.bundle.cards.unit.build_card`` does the same with the spec's cards).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ...card import Built, BuiltCard, Card
from ...config import KernelConfig

C = TypeVar("C", bound=Card)
B = TypeVar("B", bound=Built)

# The rows of a view: plain JSON values, one mapping per test row (report.json's ``inputs``).
ViewRows = list[dict[str, Any]]


@dataclass(frozen=True)
class RuntimeCard:
    """A card kind's kernel side: its types, and its runner and view taking any card of ``kkb_kernel.json``."""

    card: type[Card]
    built: type[Built]
    # The card over the test rows: its CSV (the id column and the step's columns) at ``out``, and the step's record.
    run: Callable[[BuiltCard, Path, Mapping[str, str], KernelConfig], Path]
    # What the card feeds its model for the first ``rows`` test rows (weights folder, competition data folder).
    view: Callable[[BuiltCard, KernelConfig, Path, Path, int], ViewRows]


def narrowed(entry: BuiltCard, card: type[C], built: type[B]) -> tuple[C, B]:
    if not isinstance(entry.card, card) or not isinstance(entry.built, built):
        raise TypeError(f"card '{entry.name}' is {type(entry.card).__name__} built as {type(entry.built).__name__}, not "
                        f"{card.__name__} built as {built.__name__}")
    return entry.card, entry.built


def runtime_card(card: type[C], built: type[B], run: Callable[[C, B, Path, Mapping[str, str], KernelConfig], Path],
                 view: Callable[[C, B, KernelConfig, Path, Path, int], ViewRows]) -> RuntimeCard:
    """The table's entry of one kind: its runner and view called with the card narrowed to ``card`` and ``built``."""

    def _run(entry: BuiltCard, out: Path, environ: Mapping[str, str], config: KernelConfig) -> Path:
        return run(*narrowed(entry, card, built), out, environ, config)

    def _view(entry: BuiltCard, config: KernelConfig, weights: Path, data: Path, rows: int) -> ViewRows:
        return view(*narrowed(entry, card, built), config, weights, data, rows)

    return RuntimeCard(card, built, _run, _view)


__all__ = ["RuntimeCard", "ViewRows", "narrowed", "runtime_card"]
