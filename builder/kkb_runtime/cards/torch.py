"""Torch cards: the user's ``nn.Module`` over float32 tensors of the feature function's table.

* The features: ``feature_function`` on the test rows (shared with every card naming the same call:
  ``common.features``), then ``feature_columns`` selected in their order: a name, or a glob (``"nn_*"``)
  standing for the columns it matches in the table's order (default: every column the function returns,
  in its order). A column the table lacks, or one that is not numeric, stops the step naming it.
* ``preprocessor``: the fitted preprocessors the training saved (joblib or pickle, the card's
  ``allow_joblib``; ``pickle_main`` for classes saved from a notebook), applied in order: a fitted
  transformer's ``transform`` on the selected columns (a DataFrame when it was fitted on one,
  ``feature_names_in_``, else the array), or a mapping feature → fitted transformer applied per column in
  the mapping's order, as a notebook's ``for col in qt_cols: X[col] = qt[col].transform(X[[col]])`` does.
  Each for every fold, or one per fold (a glob; the build pairs them, recorded in each checkpoint entry).
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
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..card import NetworkBuilt, NetworkCard, NetworkFold, weighted_folds
from ..config import KernelConfig
from ..steps import write_step_meta
from ..typed import JsonValue
from .common import device as devices
from .common import models
from .common.estimators import load_estimator
from .common.features import feature_table, features, shown_features
from .common.tables import card_context, first_rows, table_job, write_table_output
from .common.unit import ViewRows, runtime_card

if TYPE_CHECKING:  # imported where used: importing kkb_runtime stays free of them (kkb_runtime/__init__)
    import numpy as np
    import pandas as pd


@dataclass(frozen=True)
class TorchCard(NetworkCard):
    feature_function: str | None
    feature_args: Mapping[str, JsonValue]  # the feature function's keyword arguments
    feature_columns: tuple[str, ...]  # the net's inputs in its training order (none: every column, in its order)
    preprocessor: str | tuple[str, ...] | None  # the file(s) as kernel.toml names them; each fold's is in its record
    allow_joblib: bool
    pickle_main: str | None


@dataclass(frozen=True)
class TorchFold(NetworkFold):
    preprocessors: tuple[str, ...]  # this fold's fitted preprocessors, applied in this order (none: the features as they are)


@dataclass(frozen=True)
class TorchBuilt(NetworkBuilt):
    checkpoints: tuple[TorchFold, ...]
    preprocessing: Mapping[str, str]  # what the kernel does to the feature table before the net, in words


PATTERN_CHARACTERS = "*?["  # a feature_columns entry with one of them is a glob over the feature table's columns


def is_pattern(entry: str) -> bool:
    return any(character in entry for character in PATTERN_CHARACTERS)


def resolve_columns(card: TorchCard, columns: Sequence[Any]) -> list[str]:
    """``feature_columns`` against the feature table's columns: each name in its place, each glob (``"nn_*"``) as the
    columns it matches in the table's order (a column already taken is not taken again); none: every column."""
    names = [str(column) for column in columns]
    if not card.feature_columns:
        return names
    taken: list[str] = []
    missing = []
    for entry in card.feature_columns:
        matched = [name for name in names if fnmatchcase(name, entry)] if is_pattern(entry) else \
            [entry] if entry in names else []
        if not matched:
            missing.append(entry)
        taken += [name for name in matched if name not in taken]
    if missing:
        raise models.ModelLoadError(
            f"model '{card.name}': feature_columns names {len(missing)} column(s) the feature table lacks: "
            f"{', '.join(_with_match(column, names) for column in missing[:8])} "
            f"(it has: {', '.join(names[:20])}{', ...' if len(names) > 20 else ''})")
    return taken


def select_columns(card: TorchCard, frame: pd.DataFrame) -> pd.DataFrame:
    """``feature_columns`` resolved (:func:`resolve_columns`), in that order."""
    if not card.feature_columns:
        return frame
    return frame[resolve_columns(card, frame.columns)]


def _with_match(column: str, columns: Sequence[Any]) -> str:
    close = difflib.get_close_matches(column, [str(name) for name in columns], n=1, cutoff=0.75)
    return f"{column} (did you mean {close[0]}?)" if close else column


def per_column(stage: Any) -> bool:
    """A mapping feature → fitted transformer (a notebook's ``{column: QuantileTransformer}``), applied per column."""
    return isinstance(stage, Mapping)


def _transformed(transformer: Any, frame: pd.DataFrame) -> Any:
    """``transformer.transform`` on ``frame``: the frame where it was fitted on one (``feature_names_in_``), else its
    array; a sparse result made dense."""
    import numpy as np
    import pandas as pd
    names = getattr(transformer, "feature_names_in_", None)
    values = transformer.transform(frame if names is not None else frame.to_numpy())
    values = values.toarray() if hasattr(values, "toarray") else values
    return values.to_numpy() if isinstance(values, pd.DataFrame) else np.asarray(values)


def apply_stage(card: TorchCard, frame: pd.DataFrame, name: str, stage: Any) -> pd.DataFrame:
    """One preprocessor on the frame: a mapping transforms each of its columns the frame has, in the mapping's order
    (the notebook's loop); a fitted transformer the whole frame (its columns kept where the width is)."""
    import pandas as pd
    try:
        if per_column(stage):
            out = frame.copy()
            for column, transformer in stage.items():
                if column in out.columns:
                    out[column] = _transformed(transformer, out[[column]]).reshape(len(out), -1)[:, 0]
            return out
        values = _transformed(stage, frame)
    except Exception as exc:
        raise models.ModelLoadError(f"model '{card.name}': the preprocessor {name} fails on the {frame.shape[1]} feature "
                                    f"column(s): {type(exc).__name__}: {exc}") from None
    if values.ndim == 2 and values.shape[1] == frame.shape[1]:
        return pd.DataFrame(values, columns=frame.columns, index=frame.index)
    return pd.DataFrame(values.reshape(len(frame), -1), index=frame.index)


def preprocessed(card: TorchCard, frame: pd.DataFrame, stages: Sequence[tuple[str, Any]] = ()) -> pd.DataFrame:
    """The selected features after each preprocessor in order (``stages``: each file's name and what it holds)."""
    for name, stage in stages:
        frame = apply_stage(card, frame, name, stage)
    return frame


def as_inputs(card: TorchCard, frame: pd.DataFrame, stages: Sequence[tuple[str, Any]] = ()) -> np.ndarray:
    """The net's input: the preprocessors applied in order, as a (rows, features) float32 array."""
    import numpy as np
    import pandas as pd
    if not stages:
        text = [str(column) for column, dtype in frame.dtypes.items()
                if not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype))]
        if text:
            raise models.ModelLoadError(f"model '{card.name}': feature column(s) {', '.join(text[:8])} are not numeric: "
                                        "a net reads float32 (encode them in the feature function, or set preprocessor)")
    values = preprocessed(card, frame, stages)
    try:
        array = np.ascontiguousarray(np.asarray(values.to_numpy(), dtype=np.float32))
    except (TypeError, ValueError) as exc:
        raise models.ModelLoadError(f"model '{card.name}': the features are not numbers: {exc}") from None
    if array.ndim != 2 or array.shape[0] != len(frame):
        raise models.ModelLoadError(f"model '{card.name}': the features are shaped {tuple(array.shape)} for "
                                    f"{len(frame)} rows, not (rows, features)")
    return array


def load_preprocessors(card: TorchCard, built: TorchBuilt, weights: Path) -> dict[str, Any]:
    """Each preprocessor file the build recorded, loaded once (the card's allow_joblib and pickle_main)."""
    files = {name for fold in built.checkpoints for name in fold.preprocessors}
    return {name: load_estimator(card, weights / name) for name in sorted(files)}


def fold_stages(fold: TorchFold, loaded: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return [(name, loaded[name]) for name in fold.preprocessors]


def predict_array(card: TorchCard, model: Any, inputs: np.ndarray, choice: devices.DeviceChoice,
                  target: Any) -> np.ndarray:
    """The net over ``inputs`` in batches: (rows, num_classes) after the card's activation."""
    import numpy as np
    import torch

    model = model.to(target)
    finish = models.activation(card.activation)
    batch = card.batch_size
    autocast = torch.autocast("cuda") if card.amp and choice.kind == "cuda" else contextlib.nullcontext()
    parts = []
    with torch.inference_mode(), autocast:
        for start in range(0, len(inputs), batch):
            output = model(torch.from_numpy(inputs[start:start + batch]).to(target))
            if not isinstance(output, torch.Tensor):
                raise models.ModelLoadError(f"model '{card.name}': forward returned {type(output).__name__}, "
                                            "not a tensor of (rows, num_classes)")
            output = output.float().reshape(len(output), -1)
            parts.append(finish(output).cpu().numpy())
    values = np.concatenate(parts).astype(np.float64) if parts else np.zeros((0, card.num_classes))
    if values.shape != (len(inputs), card.num_classes):
        raise models.ModelLoadError(f"model '{card.name}': the net outputs {values.shape[1]} value(s) per row, "
                                    f"num_classes = {card.num_classes}")
    return values


def run(card: TorchCard, built: TorchBuilt, out: Path, environ: Mapping[str, str], config: KernelConfig) -> Path:
    """``predict --model NAME`` for a torch card: features (once per run), each fold, averaged, written."""
    import numpy as np
    job = table_job(card, out, environ, config)
    started = time.perf_counter()
    frame, shared = feature_table(card, job, environ, job.context(card, config))
    frame = select_columns(card, frame)
    choice = devices.choose_device(environ)
    target = devices.torch_device(choice)
    folds = weighted_folds(card, built.checkpoints)
    print(f"[kkb] {card.name}: torch net on {devices.summary(choice)}; {len(job.ids)} rows x {frame.shape[1]} features, "
          f"{len(folds)} fold(s)" + (f"; features {'computed' if shared['computed'] else 'read from step ' + shared['computed_by']}"
                                     if shared else ""), flush=True)
    scalers = load_preprocessors(card, built, job.weights_dir)
    inputs: dict[tuple[str, ...], np.ndarray] = {}
    weighted, load_seconds = [], 0.0
    for fold, weight in folds:
        loaded = time.perf_counter()
        model = models.load_weights(models.from_factory(card), card, job.weights_dir, fold.file, built.checkpoint_key)
        load_seconds += time.perf_counter() - loaded
        key = fold.preprocessors
        if key not in inputs:
            inputs[key] = as_inputs(card, frame, fold_stages(fold, scalers))
        weighted.append(predict_array(card, model, inputs[key], choice, target) * weight)
        del model
        devices.free_memory(choice)
    values = np.sum(weighted, axis=0) / sum(weight for _, weight in folds)
    written = write_table_output(job, values)
    write_step_meta(written, rows=len(job.ids), load_seconds=round(load_seconds, 4),
                    infer_seconds=round(time.perf_counter() - started - load_seconds, 4),
                    features=shared)
    return written


def view(card: TorchCard, built: TorchBuilt, config: KernelConfig, weights: Path, data: Path, rows: int) -> ViewRows:
    """What the net receives: the selected feature columns (``feature_columns`` resolved) after the first fold's
    preprocessors, in the net's order, as float32; and the values before them."""
    frame = select_columns(card, features(card, first_rows(config, data, rows), config.submission.id_column,
                                          card_context(card, config, weights, data)))
    first = built.checkpoints[0]
    stages = [(name, load_estimator(card, weights / name)) for name in first.preprocessors]
    inputs = as_inputs(card, frame, stages)
    names = [str(column) for column in preprocessed(card, frame, stages).columns]
    return [{"features": row,
             "net_input": [{"name": name, "value": round(float(value), 6)}
                           for name, value in zip(names, inputs[index], strict=True)],
             "preprocessors": list(first.preprocessors)}
            for index, row in enumerate(shown_features(frame))]


UNIT = runtime_card(TorchCard, TorchBuilt, run, view)

__all__ = ["UNIT", "TorchBuilt", "TorchCard", "TorchFold", "apply_stage", "as_inputs", "fold_stages", "is_pattern",
           "load_preprocessors", "per_column", "predict_array", "preprocessed", "resolve_columns", "run", "select_columns",
           "view"]
