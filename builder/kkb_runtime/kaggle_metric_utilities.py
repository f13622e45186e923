"""A stand-in for Kaggle's ``kaggle_metric_utilities``, the helpers competition metric files import.

Kaggle's metric notebooks import this module (https://www.kaggle.com/code/metric/kaggle-metric-utilities); a
downloaded metric file imports it too, so kkb provides it under that name while it loads a metric file whose
folder holds no copy of its own. The API is Kaggle's: the two error classes, ``treat_as_participant_error``,
``safe_call_score``, ``verify_valid_probabilities`` and ``adjust_predictions``, with Kaggle's semantics (an
error is recognised by its class *name*, so a metric file's own ``ParticipantVisibleError`` counts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: importing kkb_runtime stays free of them (kkb_runtime/__init__)
    import numpy as np
    import pandas as pd


class ParticipantVisibleError(Exception):
    """What the participant must fix; Kaggle shows its message with "Submission Scoring Error"."""


class HostVisibleError(Exception):
    """The competition's own failure; Kaggle shows it to the host only."""


def treat_as_participant_error(error_message: str, solution: pd.DataFrame | np.ndarray) -> bool:
    """Whether an unexpected error may be shown to the participant without leaking the answers: only when the
    solution is all numbers and the message holds no digit (nor true/false where the solution holds booleans)."""
    import numpy as np
    import pandas as pd
    if isinstance(solution, pd.DataFrame):
        numeric = all(pd.api.types.is_numeric_dtype(dtype) for dtype in solution.dtypes.values)
        booleans = any(pd.api.types.is_bool_dtype(dtype) for dtype in solution.dtypes.values)
    elif isinstance(solution, np.ndarray):
        numeric, booleans = pd.api.types.is_numeric_dtype(solution), pd.api.types.is_bool_dtype(solution)
    else:
        return False
    if not numeric or any(char.isnumeric() for char in error_message):
        return False
    lowered = error_message.lower()
    return not (booleans and ("true" in lowered or "false" in lowered))


def safe_call_score(metric_function: Callable[..., Any], solution: Any, submission: Any, **metric_func_kwargs: Any) -> Any:
    """``metric_function(solution, submission, **kwargs)``; an error it raises becomes a ParticipantVisibleError
    when it is one by name or :func:`treat_as_participant_error` says it is safe, else it propagates."""
    try:
        return metric_function(solution, submission, **metric_func_kwargs)
    except Exception as err:
        message = str(err)
        if type(err).__name__ == "ParticipantVisibleError":
            raise ParticipantVisibleError(message) from err
        if type(err).__name__ == "HostVisibleError":
            raise HostVisibleError(message) from err
        if treat_as_participant_error(message, solution):
            raise ParticipantVisibleError(message) from err
        raise


def verify_valid_probabilities(df: pd.DataFrame, df_name: str) -> None:
    """Every value a number in [0, 1] and every row summing to one (pass the target columns only)."""
    import numpy as np
    import pandas as pd
    if not pd.api.types.is_numeric_dtype(df.values):
        raise ParticipantVisibleError(f"All target values in {df_name} must be numeric")
    if df.min().min() < 0:
        raise ParticipantVisibleError(f"All target values in {df_name} must be at least zero")
    if df.max().max() > 1:
        raise ParticipantVisibleError(f"All target values in {df_name} must be no greater than one")
    if not np.allclose(df.sum(axis=1), 1):
        raise ParticipantVisibleError(f"Target values in {df_name} do not add to one within all rows")


def adjust_predictions(score: Any, label: Any, threshold: float | None = None, pred: Any = None,
                       calc_latency: bool = False) -> Any:
    """Point-adjusted anomaly predictions: a detected anomaly segment counts as detected from its start.
    A point is predicted anomalous where ``score < threshold`` (or as ``pred`` says); ``label > 0.1`` is truth."""
    import numpy as np
    if len(score) != len(label):
        raise ValueError("score and label must have the same length")
    predict = np.asarray(score) < threshold if pred is None else np.asarray(pred).copy()
    actual = np.asarray(label) > 0.1
    in_anomaly, anomalies, latency = False, 0, 0
    for i in range(len(actual)):
        if actual[i] and predict[i] and not in_anomaly:
            in_anomaly, anomalies = True, anomalies + 1
            j = i
            while j > 0 and actual[j]:
                if not predict[j]:
                    predict[j] = True
                    latency += 1
                j -= 1
        elif not actual[i]:
            in_anomaly = False
        if in_anomaly:
            predict[i] = True
    return (predict, latency / (anomalies + 1e-4)) if calc_latency else predict


__all__ = ["HostVisibleError", "ParticipantVisibleError", "adjust_predictions", "safe_call_score",
           "treat_as_participant_error", "verify_valid_probabilities"]
