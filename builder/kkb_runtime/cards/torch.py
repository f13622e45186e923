"""Torch cards: the user's ``nn.Module`` over float32 tensors of the feature function's table.

* The features: ``feature_function`` on the test rows (shared with every card naming the same function:
  ``common.features``), then ``feature_columns`` selected in their order (default: every column
  the function returns, in its order). A column the table lacks, or one that is not numeric, stops the
  step naming it.
* ``preprocessor``: the fitted scaler / encoder the training saved (joblib, the card's ``allow_joblib``;
  ``pickle_main`` for classes saved from a notebook), its ``transform`` on those columns: given a
  DataFrame when it was fitted on one (``feature_names_in_``), else the array. One for every fold, or
  one per fold (the build pairs them, recorded in each checkpoint entry).
* The net: ``factory(**model_kwargs)`` with each fold's state dict loaded strictly (the build wrote
  them as safetensors, ``{fold: state_dict}`` files split), in eval mode, on CUDA when there; batches of
  ``batch_size`` rows, ``activation`` on the output, autocast only with ``amp``. Folds are averaged by
  ``fold_weights``.
"""

from __future__ import annotations

import contextlib
import difflib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..config import KernelConfig
from ..steps import write_step_meta
from .common import device as devices
from .common import models
from .common.checkpoints import checkpoint_entries
from .common.estimators import load_estimator
from .common.features import feature_table
from .common.tables import table_job, write_table_output


def select_columns(card: Mapping[str, Any], frame: pd.DataFrame) -> pd.DataFrame:
    """``feature_columns`` in their order (all columns without it); every one numeric."""
    wanted = [str(column) for column in card["feature_columns"]]
    if wanted:
        missing = [column for column in wanted if column not in frame.columns]
        if missing:
            raise models.ModelLoadError(
                f"model '{card['name']}': feature_columns names {len(missing)} column(s) the feature table lacks: "
                f"{', '.join(_with_match(column, frame.columns) for column in missing[:8])} "
                f"(it has: {', '.join(map(str, list(frame.columns)[:20]))})")
        frame = frame[wanted]
    return frame


def _with_match(column: str, columns: Sequence[Any]) -> str:
    close = difflib.get_close_matches(column, [str(name) for name in columns], n=1, cutoff=0.75)
    return f"{column} (did you mean {close[0]}?)" if close else column


def as_inputs(card: Mapping[str, Any], frame: pd.DataFrame, preprocessor: Any = None) -> np.ndarray:
    """The net's input: the preprocessor's transform when there is one, as a (rows, features) float32 array."""
    if preprocessor is not None:
        names = getattr(preprocessor, "feature_names_in_", None)
        try:
            values = preprocessor.transform(frame if names is not None else frame.to_numpy())
        except Exception as exc:
            raise models.ModelLoadError(f"model '{card['name']}': the preprocessor's transform fails on the "
                                        f"{frame.shape[1]} feature column(s): {type(exc).__name__}: {exc}") from None
        values = values.toarray() if hasattr(values, "toarray") else values  # a sparse one-hot encoder
        values = values.to_numpy() if isinstance(values, pd.DataFrame) else values
    else:
        text = [str(column) for column, dtype in frame.dtypes.items()
                if not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype))]
        if text:
            raise models.ModelLoadError(f"model '{card['name']}': feature column(s) {', '.join(text[:8])} are not numeric: "
                                        "a net reads float32 (encode them in the feature function, or set preprocessor)")
        values = frame.to_numpy()
    try:
        array = np.ascontiguousarray(np.asarray(values, dtype=np.float32))
    except (TypeError, ValueError) as exc:
        raise models.ModelLoadError(f"model '{card['name']}': the features are not numbers: {exc}") from None
    if array.ndim != 2 or array.shape[0] != len(frame):
        raise models.ModelLoadError(f"model '{card['name']}': the features are shaped {tuple(array.shape)} for "
                                    f"{len(frame)} rows, not (rows, features)")
    return array


def load_preprocessors(card: Mapping[str, Any], weights: Path) -> dict[str, Any]:
    """Each preprocessor file the build recorded, loaded once (the card's allow_joblib and pickle_main)."""
    files = {str(entry["preprocessor"]) for entry in checkpoint_entries(card) if entry.get("preprocessor")}
    return {name: load_estimator(card, weights / name) for name in sorted(files)}


def predict_array(card: Mapping[str, Any], model: Any, inputs: np.ndarray, choice: devices.DeviceChoice,
                  target: Any) -> np.ndarray:
    """The net over ``inputs`` in batches: (rows, num_classes) after the card's activation."""
    import torch

    model = model.to(target)
    finish = models.activation(str(card["activation"]))
    batch = int(card["batch_size"])
    autocast = torch.autocast("cuda") if card["amp"] and choice.kind == "cuda" else contextlib.nullcontext()
    parts = []
    with torch.inference_mode(), autocast:
        for start in range(0, len(inputs), batch):
            output = model(torch.from_numpy(inputs[start:start + batch]).to(target))
            if not isinstance(output, torch.Tensor):
                raise models.ModelLoadError(f"model '{card['name']}': forward returned {type(output).__name__}, "
                                            "not a tensor of (rows, num_classes)")
            output = output.float().reshape(len(output), -1)
            parts.append(finish(output).cpu().numpy())
    values = np.concatenate(parts).astype(np.float64) if parts else np.zeros((0, int(card["num_classes"])))
    if values.shape != (len(inputs), int(card["num_classes"])):
        raise models.ModelLoadError(f"model '{card['name']}': the net outputs {values.shape[1]} value(s) per row, "
                                    f"num_classes = {card['num_classes']}")
    return values


def run(name: str, out: Path, environ: Mapping[str, str], config: KernelConfig) -> Path:
    """``predict --model NAME`` for a torch card: features (once per run), each fold, averaged, written."""
    job = table_job(name, out, environ, config)
    card = job.card
    started = time.perf_counter()
    frame, shared = feature_table(job, environ)
    frame = select_columns(card, frame)
    choice = devices.choose_device(environ)
    target = devices.torch_device(choice)
    entries = checkpoint_entries(card)
    print(f"[kkb] {name}: torch net on {devices.summary(choice)}; {len(job.ids)} rows x {frame.shape[1]} features, "
          f"{len(entries)} fold(s)" + (f"; features {'computed' if shared['computed'] else 'read from step ' + shared['computed_by']}"
                                       if shared else ""), flush=True)
    scalers = load_preprocessors(card, job.weights_dir)
    inputs: dict[str | None, np.ndarray] = {}
    weighted, load_seconds = [], 0.0
    for entry in entries:
        loaded = time.perf_counter()
        model = models.load_model(card, job.weights_dir, str(entry["file"]))
        load_seconds += time.perf_counter() - loaded
        key = entry.get("preprocessor")
        if key not in inputs:
            inputs[key] = as_inputs(card, frame, scalers[key] if key else None)
        weighted.append(predict_array(card, model, inputs[key], choice, target) * float(entry["weight"]))
        del model
        devices.free_memory(choice)
    values = np.sum(weighted, axis=0) / sum(float(entry["weight"]) for entry in entries)
    written = write_table_output(job, values)
    write_step_meta(written, rows=len(job.ids), load_seconds=round(load_seconds, 4),
                    infer_seconds=round(time.perf_counter() - started - load_seconds, 4),
                    features=shared)
    return written


__all__ = ["as_inputs", "load_preprocessors", "predict_array", "run", "select_columns"]
