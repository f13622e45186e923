"""The competition's own metric file, in Kaggle's format, as the dry run and the local Kaggle's scorer run it.

Kaggle publishes a competition's metric as Python: ``score(solution, submission, row_id_column_name,
**annotated_kwargs) -> float``. The solution holds the answers of one part (public or private; ``Usage``
dropped), the submission the participant's rows in the same order. ``ParticipantVisibleError`` (by class name:
each metric file defines its own) is what the participant must fix: Kaggle shows its message with
"Submission Scoring Error" (here :class:`~.metric_scores.MetricError`). Any other exception is the metric's own
failure (:class:`MetricFileError`, naming the file and line), never blamed on the submission.

``[competition] metric`` names the file: ``metric.py`` (function ``score``), ``metric.py:fn``, or
``module:function`` (``pkg.mod:fn`` is ``pkg/mod.py``), relative to the kernel folder (to the competition
folder in ``competition.toml``); ``python:metric.py`` is the older spelling. The file may import
``kaggle_metric_utilities``: where its folder holds no copy, kkb's stand-in is provided while it loads.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import math
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from . import kaggle_metric_utilities
from .metric_checks import PRIVATE, PUBLIC, WHOLE
from .metric_scores import MetricError
from .metrics import PartScores, align, parts_from_ids, parts_from_usage

if TYPE_CHECKING:  # imported where used: importing kkb_runtime stays free of them (kkb_runtime/__init__)
    import pandas as pd

UTILITIES = "kaggle_metric_utilities"
PARTICIPANT_ERROR = "ParticipantVisibleError"


class MetricFileError(Exception):
    """The metric file itself failed (it does not load, lacks its function, or raised something other than
    ParticipantVisibleError): the competition's problem, not the submission's."""


@dataclass(frozen=True)
class MetricFile:
    """A ``metric`` setting that names a file: its path (relative to the folder it was set in) and function."""

    path: str
    function: str = "score"

    @property
    def text(self) -> str:
        return self.path if self.function == "score" else f"{self.path}:{self.function}"


def metric_file_reference(text: str | None) -> MetricFile | None:
    """``metric.py`` / ``metric.py:fn`` / ``pkg.mod:fn`` / ``python:metric.py`` → a :class:`MetricFile`;
    a metric name (``rmse``, ``map@5``) → None."""
    name = (text or "").strip()
    if name.startswith("python:"):
        name = name[len("python:"):]
    path, _, function = name.partition(":")
    if not path.endswith(".py") and not function:
        return None
    if not path.endswith(".py"):
        path = path.replace(".", "/") + ".py"
    return MetricFile(path, function or "score")


def signature_of(file: Path, function: str) -> tuple[list[str], bool] | None:
    """The keyword arguments ``function`` takes beyond the first three (solution, submission, row id column),
    and whether it takes ``**kwargs``, read from the source (``ast``: nothing runs). None: no such function."""
    tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
            positional = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
            return positional[3:] + [a.arg for a in node.args.kwonlyargs], node.args.kwarg is not None
    return None


def load_metric(reference: MetricFile, base_dir: Path) -> Callable[..., Any]:
    """The metric function, its file loaded with its folder importable (and kkb's ``kaggle_metric_utilities``
    where the folder holds none)."""
    file = (base_dir / reference.path).resolve()
    if not file.is_file():
        raise MetricFileError(f"the metric file {file} does not exist")
    module = _load(file)
    function = getattr(module, reference.function, None)
    if not callable(function):
        raise MetricFileError(f"the metric file {file.name} defines no function {reference.function}()")
    return cast("Callable[..., Any]", function)


def _load(file: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"kkb_metric_{abs(hash(str(file)))}", file)
    if spec is None or spec.loader is None:
        raise MetricFileError(f"cannot load the metric file {file}")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(file.parent))
    stand_in = UTILITIES not in sys.modules and importlib.util.find_spec(UTILITIES) is None
    if stand_in:
        sys.modules[UTILITIES] = kaggle_metric_utilities
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise MetricFileError(f"the metric file {file.name} failed to load: {_where(exc, file)}") from None
    finally:
        sys.path.remove(str(file.parent))
        if stand_in:
            sys.modules.pop(UTILITIES, None)
    return module


def _where(exc: BaseException, file: Path) -> str:
    """``line N: KeyError: 'x'``: the deepest frame of the traceback that is in the metric file."""
    lines = [frame.lineno for frame in traceback.extract_tb(exc.__traceback__) if Path(frame.filename) == file]
    at = f"line {lines[-1]}: " if lines else ""
    return f"{at}{type(exc).__name__}: {exc}"


def call_metric(function: Callable[..., Any], solution: pd.DataFrame, submission: pd.DataFrame, id_column: str,
                arguments: Mapping[str, Any], file: Path) -> float:
    """One call, Kaggle's way; a ParticipantVisibleError is :class:`MetricError` with its message, any other
    exception :class:`MetricFileError` naming the file and the line."""
    takes_id = _positional(function) >= 3
    try:
        value = function(solution, submission, id_column, **arguments) if takes_id else function(solution, submission)
    except Exception as exc:
        if type(exc).__name__ == PARTICIPANT_ERROR:
            raise MetricError(str(exc)) from None
        raise MetricFileError(f"the metric {file.name} failed ({_where(exc, file.resolve())}); the competition's "
                              f"metric, not the submission") from None
    # Kaggle's scorer takes a number: text (even "0.5"), None or a list is no score, and the file is not scored
    number = _number(value)
    if number is None:
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise MetricError(f"the metric {file.name} returned {shown} ({type(value).__name__}), not a number: no score")
    if not math.isfinite(number):
        raise MetricError(f"the metric {file.name} scored {number}: no score")
    return number


def _number(value: object) -> float | None:
    """A score as Kaggle takes one: a number (numpy's too); None for text, None, a list, an object float() refuses."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
        return None
    try:
        return float(cast("float", value))
    except (TypeError, ValueError, OverflowError):
        return None


def _positional(function: Callable[..., Any]) -> int:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return 3
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return 3
    return sum(1 for p in parameters if p.kind in kinds)


def score_with_file(reference: MetricFile, base_dir: Path, submission: pd.DataFrame, answers: pd.DataFrame,
                    id_column: str, targets: Sequence[str], arguments: Mapping[str, Any] | None = None,
                    public_ids: set[str] | None = None, function: Callable[..., Any] | None = None) -> PartScores:
    """The metric file's score of each part (the answers' ``Usage``, else ``public_ids``; else the whole file),
    ``Usage`` dropped from the solution as Kaggle does. A ParticipantVisibleError is :class:`MetricError`
    ("Submission Scoring Error") with its message; the metric's own failure is :class:`MetricFileError`.
    ``function``: the file's function already loaded (:func:`load_metric`), for repeated scoring."""
    function = function or load_metric(reference, base_dir)
    file = (base_dir / reference.path).resolve()
    solution, aligned = align(submission, answers, id_column, targets)
    parts = parts_from_usage(solution["Usage"]) if "Usage" in solution.columns else None
    if parts is None and public_ids:
        parts = parts_from_ids(solution[id_column], public_ids)
    solution = solution.drop(columns=["Usage"], errors="ignore")
    if parts is None:
        value = _call_part(function, file, solution, aligned, id_column, arguments or {}, WHOLE)
        return PartScores(value, value, split=False)
    public, private = (_call_part(function, file, solution[parts[part]], aligned[parts[part]], id_column, arguments or {},
                                  part) for part in (PUBLIC, PRIVATE))
    return PartScores(public, private, split=True)


def _call_part(function: Callable[..., Any], file: Path, solution: pd.DataFrame, submission: pd.DataFrame, id_column: str,
               arguments: Mapping[str, Any], part: str) -> float:
    on = "" if part == WHOLE else f" on the {part} part"
    try:
        return call_metric(function, solution.reset_index(drop=True), submission.reset_index(drop=True), id_column,
                           arguments, file)
    except MetricError as exc:
        raise MetricError(f"{file.name}{on}: {exc}") from None


__all__ = ["MetricFile", "MetricFileError", "call_metric", "load_metric", "metric_file_reference", "score_with_file",
           "signature_of"]
