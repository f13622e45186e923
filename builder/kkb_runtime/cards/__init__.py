"""``python -m kkb_runtime predict --model NAME``: one runner per card kind (:data:`RUNNERS`).

Image cards run through :mod:`kkb_runtime.predict` (test images); text and tabular cards read the
test table (:mod:`kkb_runtime.tables`). Every runner writes the step's CSV (the id column and the
step's prediction columns) and the step's measurements, fold after fold, averaged by ``fold_weights``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .. import device as devices
from .. import models
from ..checkpoints import checkpoint_entries
from ..config import KernelConfig, load_config
from ..predict import PredictError, competition_dir, free_memory, row_limit, weights_dir
from ..predict import predict as predict_images
from ..steps import write_step_meta
from ..tables import TableJob, make_table_job, write_table_output
from ..vocabulary import CardKind
from . import tabular, text, text_inputs

Runner = Callable[[str, Path, Mapping[str, str], KernelConfig], Path]


def _table_job(name: str, out: Path, environ: Mapping[str, str], config: KernelConfig) -> TableJob:
    card = config.model(name)
    return make_table_job(card, out, config, competition_dir(config, environ), weights_dir(config, environ), environ,
                          row_limit(environ))


def _averaged(job: TableJob, fold: Callable[[dict[str, Any]], np.ndarray]) -> np.ndarray:
    entries = checkpoint_entries(job.card)
    total = sum(fold(entry) * float(entry["weight"]) for entry in entries)
    return np.asarray(total, dtype=np.float64) / sum(float(entry["weight"]) for entry in entries)


def run_text(name: str, out: Path, environ: Mapping[str, str], config: KernelConfig) -> Path:
    job = _table_job(name, out, environ, config)
    choice = devices.choose_device(environ)
    target = devices.torch_device(choice)
    tokenizer = text.load_tokenizer(job.card, job.weights_dir)
    encoded = text_inputs.encode_rows(tokenizer, job.card, job.table)  # kkb's tokenization or the notebook's
    timings: dict[str, Any] = {"rows": len(job.ids), "load_seconds": 0.0, "infer_seconds": 0.0}
    print(f"[kkb] {name}: text model on {devices.summary(choice)}; {len(job.ids)} rows, "
          f"{len(checkpoint_entries(job.card))} fold(s), columns {', '.join(job.columns)}", flush=True)

    def fold(entry: dict[str, Any]) -> np.ndarray:
        started = time.perf_counter()
        model = text.load_model(job.card, job.weights_dir, job.weights_dir, str(entry["file"])).to(target)
        loaded = time.perf_counter()
        forward = text.make_forward(model, job.card, choice, target)
        values = text.predict_encoded(forward, encoded, int(job.card.get("batch_size", 32)), text.pad_id(tokenizer),
                                      len(job.columns), text_inputs.padding_length(job.card))
        timings["load_seconds"] += round(loaded - started, 4)
        timings["infer_seconds"] += round(time.perf_counter() - loaded, 4)
        del model, forward
        free_memory(choice)
        return values

    written = write_table_output(job, _averaged(job, fold))
    write_step_meta(written, **timings)
    return written


def run_tabular(name: str, out: Path, environ: Mapping[str, str], config: KernelConfig) -> Path:
    job = _table_job(name, out, environ, config)
    started = time.perf_counter()
    frame = tabular.features(job.card, job.table, job.id_column)
    print(f"[kkb] {name}: {job.card.get('library') or 'scikit-learn'} on {len(job.ids)} rows x "
          f"{frame.shape[1]} features, {len(checkpoint_entries(job.card))} fold(s)", flush=True)
    values = _averaged(job, lambda entry: tabular.predict_fold(job.card, job.weights_dir / str(entry["file"]), frame,
                                                               job.columns))
    written = write_table_output(job, values)
    write_step_meta(written, rows=len(job.ids), load_seconds=0.0, infer_seconds=round(time.perf_counter() - started, 4))
    return written


def run_image(name: str, out: Path, environ: Mapping[str, str], config: KernelConfig) -> Path:
    return predict_images(name, out, environ, config)


# One runner per kind (tests/test_card_kinds.py checks that it covers CardKind).
RUNNERS: dict[CardKind, Runner] = {
    CardKind.IMAGE: run_image,
    CardKind.TEXT: run_text,
    CardKind.GBDT: run_tabular,
    CardKind.SKLEARN: run_tabular,
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
        card = config.model(model_name)
    except KeyError as exc:
        raise PredictError(str(exc.args[0])) from None
    started = time.perf_counter()
    written = RUNNERS[CardKind(card.get("kind") or CardKind.IMAGE)](model_name, target, environ, config)
    if card.get("kind", CardKind.IMAGE) != CardKind.IMAGE:
        print(f"[kkb] {model_name}: wrote {written} in {time.perf_counter() - started:.1f} s", file=sys.stdout, flush=True)
    return written


__all__ = ["RUNNERS", "predict", "run_tabular", "run_text"]
