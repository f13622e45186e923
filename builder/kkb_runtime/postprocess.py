"""Post-processing: what turns the combined model outputs into the columns the sample submission holds.

The steps write *prediction columns* (``[submission] prediction_columns``, by default the sample's
target columns) and combine averages them; the ``[[postprocess]]`` stages then run in order on the
combined frame (id column included):

* ``argmax``: the index of the largest of ``columns`` (default: every prediction column), mapped
  through ``labels`` (default 0, 1, 2, ...), into the column ``into``; ``columns`` are dropped.
  Cassava-style: five class probabilities become one integer ``label``.
* ``threshold``: ``columns`` become 1 where the value is at least ``value``, else 0 (integers).
* ``clip``: ``columns`` clipped to ``[min, max]``.
* ``function``: ``module:function`` from the code dataset, called with a copy of the frame (ids typed
  as in the sample: integers where the sample's ids are integers) and, when it takes a second
  parameter (or a parameter named ``ctx``), the kernel's :class:`~.context.Context` (``weights_dir``,
  ``code_dir``, ``competition_dir``, the steps' outputs, the attached inputs by name, the kernel's config);
  ``args = {...}`` on the stage are its keyword arguments. It returns a DataFrame, or ``(frame, columns)``
  naming the columns it discretised: kkb does not round those.

Rounding, the cast to the sample's column types and the check come after, in the notebook's next
cells. :func:`output_columns` is the same chain on column names only, which is how the build checks
a model's width against the sample before anything runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .config import ArgmaxStage, ClipStage, FunctionStage, PostprocessStage, ThresholdStage
from .context import Context
from .pickles import main_module
from .typed import JsonValue, read
from .user_calls import POSITIONAL, ArgumentsRefused, Parameter, call_with, parameters_of, takes_context
from .user_errors import raised
from .vocabulary import PostprocessKind

if TYPE_CHECKING:  # imported where used: importing kkb_runtime stays free of them (kkb_runtime/__init__)
    import pandas as pd

KINDS = PostprocessKind.values()


DISCRETISED = "kkb_discretised"  # frame.attrs key: the columns a function discretised (not rounded after)


class PostprocessError(ValueError):
    """A post-processing stage cannot run on the frame it was given."""


def apply(frame: pd.DataFrame, stages: Sequence[PostprocessStage], id_column: str,
          prediction_columns: Sequence[str], context: Context | None = None) -> pd.DataFrame:
    """Run every stage in order; returns a new frame (``attrs[DISCRETISED]``: what a function discretised)."""
    out = frame.copy()
    discretised: list[str] = []
    for index, stage in enumerate(stages):
        where = f"postprocess[{index}] ({stage.kind})"
        out = _apply_one(out, stage, id_column, list(prediction_columns), where, context)
        discretised += [column for column in out.attrs.pop(DISCRETISED, []) if column not in discretised]
    out.attrs[DISCRETISED] = discretised
    return out


def id_type(ids: pd.Series) -> str:
    """``int`` when every id of the sample is written as an integer (no leading zeros), else ``str``."""
    text = ids.astype(str)
    return "int" if len(text) and bool(text.str.fullmatch(r"-?(0|[1-9]\d*)").all()) else "str"


def _apply_one(frame: pd.DataFrame, stage: PostprocessStage, id_column: str, predictions: list[str],
               where: str, context: Context | None = None) -> pd.DataFrame:
    handler = STAGES[stage.kind]
    if handler.default_columns is None:  # a stage that names no columns (a user function sees the whole frame)
        return handler.run(frame, stage, [], where, context)
    columns = list(stage.columns) or (predictions if handler.default_columns == "predictions" else
                        [c for c in frame.columns if c != id_column])
    if id_column in columns:
        raise PostprocessError(f"{where}: columns names the id column '{id_column}': its values are ids, not "
                               "predictions (list prediction columns only)")
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise PostprocessError(f"{where}: the frame has no column(s) {', '.join(missing)} "
                               f"(it has: {', '.join(map(str, frame.columns))})")
    return handler.run(frame, stage, columns, where, context)


def _argmax_stage(frame: pd.DataFrame, stage: ArgmaxStage, columns: list[str], where: str,
                  context: Context | None) -> pd.DataFrame:
    return argmax(frame, columns, stage.into, stage.labels)


def _threshold_stage(frame: pd.DataFrame, stage: ThresholdStage, columns: list[str], where: str,
                     context: Context | None) -> pd.DataFrame:
    import numpy as np
    out = frame.copy()
    for column in columns:
        out[column] = (frame[column].astype(float) >= stage.value).astype(np.int64)
    return out


def _clip_stage(frame: pd.DataFrame, stage: ClipStage, columns: list[str], where: str,
                context: Context | None) -> pd.DataFrame:
    out = frame.copy()
    out[columns] = frame[columns].astype(float).clip(lower=stage.min, upper=stage.max)
    return out


def _function_stage(frame: pd.DataFrame, stage: FunctionStage, columns: list[str], where: str,
                    context: Context | None) -> pd.DataFrame:
    """The user's function, with the context; the columns it says it discretised ride in ``attrs`` to :func:`apply`."""
    with main_module(stage.pickle_main):  # a pickle the function loads names its classes __main__.X
        result, discretised = _call_user(frame, stage.function, stage.args, where, context)
    result.attrs[DISCRETISED] = discretised
    return result


def argmax(frame: pd.DataFrame, columns: Sequence[str], into: str, labels: Sequence[Any] | None = None) -> pd.DataFrame:
    """The label of the largest of ``columns`` per row (ties: the first), in the column ``into``."""
    import numpy as np
    import pandas as pd
    labels = list(labels) if labels else list(range(len(columns)))
    if len(labels) != len(columns):
        raise PostprocessError(f"argmax: {len(labels)} labels for {len(columns)} columns")
    values = frame[list(columns)].to_numpy(dtype=float)
    if np.isnan(values).any():
        raise PostprocessError(f"argmax: NaN in the columns {', '.join(columns)}: a model produced no number")
    picked = np.asarray(labels, dtype=object)[values.argmax(axis=1)] if len(values) else np.asarray([], dtype=object)
    out = frame.drop(columns=list(columns))
    series = pd.Series(list(picked), index=out.index)
    if all(isinstance(label, (int, np.integer)) and not isinstance(label, bool) for label in labels):
        series = series.astype(np.int64)
    out[into] = series
    return out


def load_function(reference: str) -> Any:
    module, _, name = reference.partition(":")
    try:
        function = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise PostprocessError(f"post-processing function '{reference}': cannot import {name} from '{module}' ({exc})") from None
    if not callable(function):
        raise PostprocessError(f"post-processing function '{reference}' is not callable")
    return function


def passed_names(parameters: Sequence[Parameter], args: Mapping[str, object]) -> list[str]:
    """kkb's positional arguments to a post-processing function: the frame, and the context as the second one where
    the function takes it that way (a second parameter that is neither ``ctx`` nor one of ``args``, without a
    default: the older form)."""
    second = parameters[1] if len(parameters) > 1 else None
    if (second is not None and second.kind == POSITIONAL and not second.has_default and second.name not in args
            and not takes_context(parameters)):
        return ["frame", second.name]
    return ["frame"]


def _call_user(frame: pd.DataFrame, reference: str, args: Mapping[str, JsonValue], where: str,
               context: Context | None = None) -> tuple[pd.DataFrame, list[str]]:
    import numpy as np
    import pandas as pd
    function = load_function(reference)
    typed = frame.copy()
    id_column = context.id_column if context is not None and context.id_type == "int" else None
    integer_ids = id_column is not None and id_column in typed.columns
    if integer_ids:
        typed[id_column] = typed[id_column].astype(np.int64)
    names = passed_names(parameters_of(function), args)
    passed: dict[str, object] = {"frame": typed, **({names[1]: context} if len(names) > 1 else {})}
    try:
        result = call_with(function, reference, passed, args, "args", context)
    except ArgumentsRefused as exc:  # the stage's args, not the function's own error
        raise PostprocessError(f"{where}: {exc}") from None
    except Exception as exc:  # the user's own error: named with its file and line, its traceback chained below
        raise PostprocessError(f"{where}: {reference} raised {raised(exc, context.code if context else None)}") from exc
    columns: list[str] = []
    if isinstance(result, tuple) and len(result) == 2:
        result, columns = result[0], [str(column) for column in result[1]]
    if not isinstance(result, pd.DataFrame):
        raise PostprocessError(f"{where}: {reference} returned {type(result).__name__}, not a pandas DataFrame "
                               "(or a DataFrame and the list of columns it discretised)")
    if integer_ids and id_column in result.columns:
        result = result.copy()
        result[id_column] = result[id_column].astype(str)
    return result, columns


def output_columns(stages: Sequence[PostprocessStage], prediction_columns: Sequence[str]) -> list[str] | None:
    """The target columns after the stages, from the prediction columns; None after a user function (unknowable)."""
    columns = list(prediction_columns)
    for stage in stages:
        after = STAGES[stage.kind].outputs(columns, stage, prediction_columns)
        if after is None:
            return None
        columns = after
    return columns


def _argmax_outputs(columns: list[str], stage: ArgmaxStage, predictions: Sequence[str]) -> list[str]:
    used = list(stage.columns or predictions)
    kept = [column for column in columns if column not in used]
    return kept if stage.into in kept else [*kept, stage.into]


def _same_columns(columns: list[str], stage: PostprocessStage, predictions: Sequence[str]) -> list[str]:
    return columns


def _unknowable(columns: list[str], stage: PostprocessStage, predictions: Sequence[str]) -> None:
    return None


# What a stage of each kind lacks, on kernel.toml's values (the spec's check, before the stage is built).

def _argmax_lacks(stage: Mapping[str, object]) -> str | None:
    labels, columns = stage.get("labels"), stage.get("columns")
    if isinstance(labels, list) and isinstance(columns, list) and columns and len(labels) != len(columns):
        return f"argmax has {len(labels)} labels for {len(columns)} columns"
    return None


def _clip_lacks(stage: Mapping[str, object]) -> str | None:
    return "kind = 'clip' needs min, max or both" if stage.get("min") is None and stage.get("max") is None else None


def _function_lacks(stage: Mapping[str, object]) -> str | None:
    if not stage.get("function"):
        return "kind = 'function' needs function = 'package.module:function' (DataFrame in, DataFrame out)"
    return None


def _complete(stage: Mapping[str, object]) -> str | None:
    return None


S = TypeVar("S", bound=PostprocessStage)


@dataclass(frozen=True)
class Stage(Generic[S]):
    """One post-processing kind: its stage as the kernel reads it, how it runs, what it leaves.

    ``type`` is the stage's dataclass (``kkb_runtime.config``): its fields besides ``kind`` and ``round`` are the
    ``[[postprocess]]`` keys the kind takes (:attr:`keys`; the spec refuses the others); ``lacks`` says what a stage
    of this kind is missing on kernel.toml's values (None: complete); ``default_columns`` the columns it works on when
    ``columns`` is not given ("predictions", "all" but the id, or None: it takes no columns); ``run`` applies it;
    ``outputs`` maps the column names (None: unknowable).
    """

    type: type[S]
    lacks: Callable[[Mapping[str, object]], str | None]
    default_columns: str | None
    apply: Callable[[pd.DataFrame, S, list[str], str, Context | None], pd.DataFrame]
    names: Callable[[list[str], S, Sequence[str]], list[str] | None]

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(entry.name for entry in fields(self.type)) - {"kind", "round"}

    def run(self, frame: pd.DataFrame, stage: PostprocessStage, columns: list[str], where: str,
            context: Context | None) -> pd.DataFrame:
        return self.apply(frame, self._narrowed(stage), columns, where, context)

    def outputs(self, columns: list[str], stage: PostprocessStage, predictions: Sequence[str]) -> list[str] | None:
        return self.names(columns, self._narrowed(stage), predictions)

    def _narrowed(self, stage: PostprocessStage) -> S:
        if not isinstance(stage, self.type):
            raise TypeError(f"a {stage.kind} stage is {type(stage).__name__}, not {self.type.__name__}")
        return stage


# The one table of post-processing kinds: the spec's key check, the build's column check and the kernel's run.
STAGES: dict[PostprocessKind, Stage[Any]] = {
    PostprocessKind.ARGMAX: Stage(ArgmaxStage, _argmax_lacks, "predictions", _argmax_stage, _argmax_outputs),
    PostprocessKind.THRESHOLD: Stage(ThresholdStage, _complete, "all", _threshold_stage, _same_columns),
    PostprocessKind.CLIP: Stage(ClipStage, _clip_lacks, "all", _clip_stage, _same_columns),
    PostprocessKind.FUNCTION: Stage(FunctionStage, _function_lacks, None, _function_stage, _unknowable),
}


def stage_type(raw: Mapping[str, object]) -> type[PostprocessStage]:
    """The dataclass of a written stage, by its ``kind`` (an unknown kind: the base, which refuses its keys)."""
    kind = raw.get("kind")
    return STAGES[PostprocessKind(kind)].type if kind in KINDS else PostprocessStage


def read_stage(raw: Mapping[str, object], where: str = "postprocess") -> PostprocessStage:
    """A stage as ``kkb_kernel.json`` holds it (every key of its kind, resolved) as its kind's dataclass."""
    return read(PostprocessStage, dict(raw), where, {PostprocessStage: stage_type})


__all__ = ["DISCRETISED", "KINDS", "STAGES", "Context", "PostprocessError", "Stage", "apply", "id_type", "argmax",
           "load_function", "output_columns", "passed_names", "read_stage", "stage_type"]
