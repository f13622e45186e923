"""Model cards at build time, one module per kind: prepare (checkpoints normalised, the model proven to load),
the files a kind ships besides its checkpoints, and the checks against the public data.

Each stage keeps one registry keyed by :class:`CardKind` (``tests/test_card_kinds.py`` checks that
each covers every kind).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from builder.bundle.cards import image, tabular, text
from builder.bundle.cards import torch as torch_card
from builder.kkb_runtime.vocabulary import CardKind
from builder.project.spec import KernelSpec, ModelCard

Preparer = Callable[[ModelCard, Path, Path, dict[str, str]], dict[str, Any]]
ExtraFiles = Callable[[ModelCard, Path], list[str]]
PublicDataCheck = Callable[[KernelSpec, Path, Path, ModelCard, list[str], pd.DataFrame], None]

PREPARERS: dict[CardKind, Preparer] = {
    CardKind.IMAGE: image.prepare,
    CardKind.TEXT: text.prepare,
    CardKind.GBDT: tabular.prepare,
    CardKind.SKLEARN: tabular.prepare,
    CardKind.TORCH: torch_card.prepare,
}
EXTRA_FILES: dict[CardKind, ExtraFiles] = {
    CardKind.IMAGE: image.extra_files,
    CardKind.TEXT: text.extra_files,
    CardKind.GBDT: tabular.extra_files,
    CardKind.SKLEARN: tabular.extra_files,
    CardKind.TORCH: torch_card.extra_files,
}
PUBLIC_DATA_CHECKS: dict[CardKind, PublicDataCheck] = {
    CardKind.IMAGE: image.check_public_data,
    CardKind.TEXT: text.check_public_data,
    CardKind.GBDT: tabular.check_public_data,
    CardKind.SKLEARN: tabular.check_public_data,
    CardKind.TORCH: torch_card.check_public_data,
}


def prepare_models(spec: KernelSpec, kernel_dir: Path, weights_stage: Path) -> list[dict[str, Any]]:
    """Every card prepared by its kind into ``weights_stage``; the cards for ``kkb_kernel.json``."""
    written: dict[str, str] = {}  # output path -> sha256, so cards sharing a checkpoint do not clobber each other
    return [PREPARERS[card.kind](card, kernel_dir, weights_stage, written) for card in spec.models]


def card_files(card: ModelCard, kernel_dir: Path) -> list[str]:
    """What the card ships in the weights besides its checkpoints (a text model's config and tokenizer)."""
    return EXTRA_FILES[card.kind](card, kernel_dir)


__all__ = ["EXTRA_FILES", "PREPARERS", "PUBLIC_DATA_CHECKS", "card_files", "prepare_models"]
