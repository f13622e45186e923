"""A text card's step: the tokenizer and each fold's model over the test table's encoded rows (``predict --model NAME``).

Apart from :mod:`.text` (the model, kkb's own tokenization) because the notebook's own tokenization
(:mod:`.text_inputs`) builds on that module: the step uses both.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..config import KernelConfig
from ..steps import write_step_meta
from . import text, text_inputs
from .common import checkpoints
from .common import device as devices
from .common.device import free_memory
from .common.tables import table_job, write_table_output


def run(name: str, out: Path, environ: Mapping[str, str], config: KernelConfig) -> Path:
    job = table_job(name, out, environ, config)
    choice = devices.choose_device(environ)
    target = devices.torch_device(choice)
    tokenizer = text.load_tokenizer(job.card, job.weights_dir)
    encoded = text_inputs.encode_rows(tokenizer, job.card, job.table)  # kkb's tokenization or the notebook's
    timings: dict[str, Any] = {"rows": len(job.ids), "load_seconds": 0.0, "infer_seconds": 0.0}
    print(f"[kkb] {name}: text model on {devices.summary(choice)}; {len(job.ids)} rows, "
          f"{len(checkpoints.checkpoint_entries(job.card))} fold(s), columns {', '.join(job.columns)}", flush=True)

    def fold(entry: dict[str, Any]) -> np.ndarray:
        started = time.perf_counter()
        model = text.load_model(job.card, job.weights_dir, job.weights_dir, str(entry["file"])).to(target)
        loaded = time.perf_counter()
        forward = text.make_forward(model, job.card, choice, target)
        values = text.predict_encoded(forward, encoded, int(job.card["batch_size"]), text.pad_id(tokenizer),
                                      len(job.columns), text_inputs.padding_length(job.card))
        timings["load_seconds"] += round(loaded - started, 4)
        timings["infer_seconds"] += round(time.perf_counter() - loaded, 4)
        del model, forward
        free_memory(choice)
        return values

    written = write_table_output(job, checkpoints.averaged_folds(job.card, fold))
    write_step_meta(written, **timings)
    return written


__all__ = ["run"]
