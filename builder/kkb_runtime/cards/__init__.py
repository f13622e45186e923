"""``python -m kkb_runtime predict --model NAME``: one runner per card kind (:data:`RUNNERS`).

Each kind is one unit here: ``image/`` (test images: ``predict``, ``transforms``, ``tta``), ``text``,
``tabular`` and ``torch`` (the test table), each with its runner; what they share (the device, checkpoints and folds, the
network's loading and activation, the test table and the step's columns) is ``common/``. Every runner writes
the step's CSV (the id column and the step's prediction columns) and the step's measurements, fold after fold,
averaged by ``fold_weights``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ..config import KernelConfig, load_config
from ..steps import add_step_meta
from ..vocabulary import CardKind
from . import tabular, text_run, views
from . import torch as torch_card
from .common import models
from .common.card import read_card
from .common.tables import PredictError, competition_dir, weights_dir
from .image import predict as image

Runner = Callable[[str, Path, Mapping[str, str], KernelConfig], Path]

# One runner per kind (tests/test_vocabulary.py checks that it covers CardKind).
RUNNERS: dict[CardKind, Runner] = {
    CardKind.IMAGE: image.predict,
    CardKind.TEXT: text_run.run,
    CardKind.GBDT: tabular.run,
    CardKind.SKLEARN: tabular.run,
    CardKind.TORCH: torch_card.run,
}


def predict(model_name: str, out: Path | None = None, environ: Mapping[str, str] | None = None,
            config: KernelConfig | None = None) -> Path:
    """Run one card over the test rows and write its CSV to ``out`` (default ``$KKB_STEP_OUT``)."""
    models.offline()  # before the user's code can import transformers or huggingface_hub
    environ = os.environ if environ is None else environ
    target = out or (Path(environ["KKB_STEP_OUT"]) if environ.get("KKB_STEP_OUT") else None)
    if target is None:
        raise PredictError("no output file: pass --out FILE or set KKB_STEP_OUT")
    config = config or load_config(environ.get("KKB_KERNEL_CONFIG") or None)
    try:
        card = read_card(config.model(model_name))  # every key as the build resolved it: no default here
    except KeyError as exc:
        raise PredictError(str(exc.args[0])) from None
    started = time.perf_counter()
    written = RUNNERS[card.kind](model_name, target, environ, config)
    if card.kind != CardKind.IMAGE:
        print(f"[kkb] {model_name}: wrote {written} in {time.perf_counter() - started:.1f} s", file=sys.stdout, flush=True)
    rows = views.requested_rows(environ)
    if rows:  # the dry run asks: what this card fed its model, made here where its libraries are loaded already
        try:
            weights, data = weights_dir(config, environ), competition_dir(config, environ)
        except PredictError as exc:
            view: dict[str, object] = {"error": str(exc)}
        else:
            view = views.card_view(config, config.model(model_name), weights, data, rows)
        add_step_meta(written, inputs={"card": model_name, "rows_asked": rows, **view})
    return written


__all__ = ["RUNNERS", "predict"]
