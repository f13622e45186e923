"""The kernel's context, what a user's function gets in its ``ctx`` parameter (``kkb_runtime.user_calls``).

Feature, encode and post-processing functions run where the kernel put the data: the competition's folder, the
weights dataset, the code dataset each have their own mount (and another one in the dry run, and another one at
build). The context names them, so a port's function reads ``ctx.weights_dir / "thresholds.json"`` instead of
rebuilding ``/kaggle/input/...`` paths; a card's function also gets the card (its name and every setting, as the
kernel reads them), and a post-processing function the steps' outputs (one CSV per step, by step name).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .card import Card
from .config import KernelConfig


@dataclass(frozen=True)
class Context:
    """What a user's function may need besides its data. ``weights_dir`` is None in a kernel without weights."""

    competition_dir: Path
    weights_dir: Path | None
    code_dir: Path
    card: Card | None = None  # the card whose function this is (None: a post-processing function)
    steps: Mapping[str, Path] = field(default_factory=dict)  # post-processing: each step's output CSV, by step name
    inputs: Mapping[str, Path] = field(default_factory=dict)  # the attached [[inputs]], by name
    config: KernelConfig | None = None  # the kernel's kkb_kernel.json, typed
    id_column: str = "id"
    id_type: str = "str"  # "int" where every id of the sample is an integer

    @property
    def card_name(self) -> str | None:
        return self.card.name if self.card is not None else None

    # The names a post-processing function's context had before: kept for the functions written against them.
    @property
    def weights(self) -> Path | None:
        return self.weights_dir

    @property
    def code(self) -> Path:
        return self.code_dir

    @property
    def competition(self) -> Path:
        return self.competition_dir


__all__ = ["Context"]
