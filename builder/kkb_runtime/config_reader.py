"""The one reader of ``kkb_kernel.json``: :func:`load_config` (the whole file), :func:`read_card` (one card as it holds
it), :func:`read_built` (what the build recorded for a card of a kind).

Each card is read as its kind's types (``kkb_runtime.cards.RUNTIME_CARDS``: the kind's card and record, from the
same object), each ``[[postprocess]]`` stage as its kind's (``kkb_runtime.postprocess.STAGES``). The reader refuses
a key the file lacks, a key it does not know and a value of another type, naming them (``kkb_runtime.typed``): the
kernel was built by another kkb, and guessing would run something the build never decided.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from .card import Built, BuiltCard, Card
from .cards import RUNTIME_CARDS
from .config import KernelConfig, PostprocessStage, config_path, default_config_path
from .postprocess import stage_type
from .typed import CONFIG_FILE, ConfigMalformed, Variants, read
from .vocabulary import CardKind


def _kind(raw: Mapping[str, object]) -> CardKind:
    kind = raw.get("kind")
    if kind not in CardKind.values():
        raise ConfigMalformed(f"card '{raw.get('name', '?')}' in {CONFIG_FILE} has kind {kind!r}, not one of "
                              f"{', '.join(CardKind.values())}")
    return CardKind(str(kind))


VARIANTS: Variants = {
    Card: lambda raw: RUNTIME_CARDS[_kind(raw)].card,
    Built: lambda raw: RUNTIME_CARDS[_kind(raw)].built,
    PostprocessStage: stage_type,
}


def load_config(path: str | os.PathLike[str] | None = None) -> KernelConfig:
    """Read ``kkb_kernel.json`` from ``path`` (the file or its folder), else ``$KKB_KERNEL_CONFIG``, else the code
    dataset this package is in."""
    file = config_path(Path(path) if path is not None else default_config_path())
    raw = json.loads(file.read_text(encoding="utf-8"))
    return read_config(raw, file)


def read_config(raw: object, path: Path = Path(CONFIG_FILE)) -> KernelConfig:
    """What ``json.loads`` gave of ``kkb_kernel.json`` (at ``path``) as the config."""
    return replace(read(KernelConfig, raw, "", VARIANTS), path=path)


def read_card(raw: Mapping[str, object]) -> BuiltCard:
    """One card as ``kkb_kernel.json`` holds it: its kind's card and record, and its origins."""
    return read(BuiltCard, dict(raw), f"card '{raw.get('name', '?')}'", VARIANTS)


def read_built(kind: CardKind, raw: Mapping[str, object], name: str) -> Built:
    """What the build recorded for a card of ``kind`` (named ``name``), as that kind's record."""
    return read(RUNTIME_CARDS[kind].built, dict(raw), f"card '{name}'")


__all__ = ["VARIANTS", "load_config", "read_built", "read_card", "read_config"]
