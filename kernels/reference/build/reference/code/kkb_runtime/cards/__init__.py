"""The card kinds in the kernel: one runtime unit per kind (:data:`RUNTIME_CARDS`).

Each kind is one unit here: ``image/`` (test images: ``predict``, ``transforms``, ``tta``; its types in ``card``),
``text`` (its types and the model; ``text_inputs``, ``text_run``), ``tabular`` and ``torch`` (the test table). Each
exports its card (the keys of ``kernel.toml``'s card of that kind), its record (what the build recorded), its
runner (``python -m kkb_runtime predict --model NAME``: the step's CSV of the id column and its prediction columns,
fold after fold, averaged by ``fold_weights``) and its view (what it feeds its model, ``--show-inputs``). What the
kinds share (the device, checkpoints and folds, the network's loading and activation, the test table and the step's
columns, the unit itself) is ``common/``; a kind never imports another kind.
"""

from __future__ import annotations

from ..vocabulary import CardKind
from . import tabular, text_run
from . import torch as torch_card
from .common.unit import RuntimeCard
from .image import predict as image

# One unit per kind (tests/test_vocabulary.py checks that it covers CardKind).
RUNTIME_CARDS: dict[CardKind, RuntimeCard] = {
    CardKind.IMAGE: image.UNIT,
    CardKind.TEXT: text_run.UNIT,
    CardKind.GBDT: tabular.GBDT,
    CardKind.SKLEARN: tabular.SKLEARN,
    CardKind.TORCH: torch_card.UNIT,
}

__all__ = ["RUNTIME_CARDS", "RuntimeCard"]
