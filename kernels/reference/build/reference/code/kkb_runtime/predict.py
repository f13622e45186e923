"""``python -m kkb_runtime predict --model NAME``: the card read from ``kkb_kernel.json`` as its kind's types, run by
its kind's runner (``kkb_runtime.cards.RUNTIME_CARDS``), and, when the dry run asks, its view of the inputs."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from .cards import RUNTIME_CARDS, views
from .cards.common import models
from .cards.common.tables import PredictError, competition_dir, weights_dir
from .config import KernelConfig
from .config_reader import load_config
from .steps import add_step_meta
from .vocabulary import CardKind


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
        card = config.model(model_name)  # every key as the build resolved it: no default here
    except KeyError as exc:
        raise PredictError(str(exc.args[0])) from None
    started = time.perf_counter()
    written = RUNTIME_CARDS[card.kind].run(card, target, environ, config)
    if card.kind != CardKind.IMAGE:  # the image runner says it with its timings
        print(f"[kkb] {model_name}: wrote {written} in {time.perf_counter() - started:.1f} s", file=sys.stdout, flush=True)
    rows = views.requested_rows(environ)
    if rows:  # the dry run asks: what this card fed its model, made here where its libraries are loaded already
        try:
            weights, data = weights_dir(config, environ), competition_dir(config, environ)
        except PredictError as exc:
            view: dict[str, object] = {"error": str(exc)}
        else:
            view = views.card_view(config, card, weights, data, rows)
        add_step_meta(written, inputs={"card": model_name, "rows_asked": rows, **view})
    return written


__all__ = ["predict"]
