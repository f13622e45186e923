"""A step that rounds its own output, judged as kkb judges its own rounding under a relative-error metric.

kkb rounds a relative-error metric's columns (RMSPE, MAPE, SMAPE; RMSLE below 1) to significant digits, never to
decimals (:mod:`builder.kkb_runtime.rounding`): under RMSPE with answers near 1e-3, 4 decimals keep one or two digits
and cost the score. A step can do that to itself (``df.round(4)`` before ``to_csv``), and no later rounding gives the
digits back. The step's output shows it: every value of a column a multiple of ``10**-d``. Its effect on the score is
measured without the answers: the metric between the step's values and the same values off by the rounding's typical
error (the root mean square of an error spread evenly over one unit, ``10**-d / sqrt(12)``, alternating in sign).
Where that is more than the same measure of kkb's own rounding (``[submission] decimals`` significant digits) and
more than the tolerance kkb's rounding is judged by (:data:`builder.rehearse.rounding_score.SCORE_TOLERANCE`), the
dry run warns, naming the step, the column, the decimals and what the rounding costs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.kkb_runtime.metric_scores import SCORES, MetricError
from builder.kkb_runtime.metrics import MetricName, rules
from builder.kkb_runtime.rounding import DECIMALS, SIGNIFICANT
from builder.rehearse.rounding_score import SCORE_TOLERANCE
from builder.run.sandbox_files import in_working

if TYPE_CHECKING:  # imported where used: the CLI starts without them (tests/test_dry_run_cost.py)
    import pandas as pd

MAX_STEP_DECIMALS = 8  # beyond this a step's values are not rounded on purpose (float32 prints ~7 digits)
REFERENCE_DIGITS = 6  # [submission] decimals' default: what kkb's own rounding keeps


def own_decimals(values: pd.Series) -> int | None:
    """The fewest decimals every value has (they are multiples of ``10**-d``), or None: not rounded to 8 or fewer."""
    import numpy as np
    array = values.dropna().to_numpy(dtype=float)
    array = array[np.isfinite(array)]
    if not len(array):
        return None
    for decimals in range(MAX_STEP_DECIMALS + 1):
        scaled = array * 10.0**decimals
        if np.allclose(scaled, np.round(scaled), rtol=0, atol=1e-6):
            return decimals
    return None


def rounding_cost(metric: MetricName, values: pd.Series, digits: int, kind: str = DECIMALS) -> float | None:
    """The metric between ``values`` and the same values off by the typical error of rounding to ``digits``
    (decimals, or significant digits: kkb's own rounding under a relative-error metric)."""
    import numpy as np
    import pandas as pd
    if metric.metric is None:
        return None
    truth = values.dropna().astype(float)
    truth = truth[(truth != 0) & np.isfinite(truth)].to_numpy()
    if not len(truth):
        return None
    unit = (10.0**-digits if kind == DECIMALS else 10.0 ** (np.floor(np.log10(np.abs(truth))) - digits + 1))
    error = unit / math.sqrt(12) * np.where(np.arange(len(truth)) % 2 == 0, 1.0, -1.0)
    try:
        return SCORES[metric.metric](pd.DataFrame({"v": truth}), pd.DataFrame({"v": truth + error}), ["v"], metric.param)
    except (MetricError, ValueError, ZeroDivisionError):
        return None


def step_rounding_warnings(metric: MetricName, steps: Sequence[Mapping[str, Any]], working_dir: Path,
                           float_columns: Sequence[str], kkb_digits: int | None = REFERENCE_DIGITS) -> list[str]:
    """One warning per step column rounded by the step itself in a way that costs a relative-error metric's score more
    than kkb's own rounding would (``kkb_digits`` significant digits: ``[submission] decimals``), and more than the
    tolerance kkb's rounding is judged by."""
    import numpy as np
    import pandas as pd
    found = rules(metric)
    if found is None or not found.significant_below:
        return []
    warnings = []
    for step in steps:
        frame = _output(step, working_dir)
        for column in float_columns:
            if frame is None or column not in frame.columns or not pd.api.types.is_numeric_dtype(frame[column]):
                continue
            values = frame[column]
            largest = float(np.nanmax(np.abs(values.to_numpy(dtype=float)))) if values.notna().any() else 0.0
            decimals = own_decimals(values)
            if decimals is None or largest >= found.significant_below or values[values != 0].nunique() < 2:
                continue  # a constant (a default) is no rounding
            cost = rounding_cost(metric, values, decimals)
            own = rounding_cost(metric, values, kkb_digits, SIGNIFICANT) if kkb_digits is not None else None
            if cost is not None and cost > max(SCORE_TOLERANCE, own or 0.0):
                warnings.append(_words(str(step.get("name")), column, decimals, values, cost, metric, kkb_digits))
    return warnings


def _words(step: str, column: str, decimals: int, values: pd.Series, cost: float, metric: MetricName,
           kkb_digits: int | None) -> str:
    nonzero = values[values != 0].abs()
    smallest = float(nonzero.min()) if len(nonzero) else 0.0
    kept = max(decimals + math.floor(math.log10(smallest)) + 1, 0) if smallest else 0
    return (f"step '{step}': column '{column}' is rounded by the step itself to {decimals} decimals (every value a multiple "
            f"of 1e-{decimals}); {metric.label} scores relative errors and its values reach down to {smallest:.3g}, "
            f"where {decimals} decimals keep {kept} significant digit{'s' if kept != 1 else ''}: the rounding alone "
            f"costs about {cost:.2g} of the score, more than kkb's own rounding "
            f"({kkb_digits if kkb_digits is not None else 'no'} significant digits) would; write the step's output "
            f"unrounded and let [submission] decimals round it (to significant digits under {metric.label})")


def _output(step: Mapping[str, Any], working_dir: Path) -> pd.DataFrame | None:
    import pandas as pd
    source = in_working(str(step.get("output") or ""), working_dir)  # the kernel's record: only a file of the run
    if source is None or source.suffix != ".csv" or not source.is_file():
        return None
    try:
        return pd.read_csv(source)
    except (OSError, ValueError):
        return None


__all__ = ["own_decimals", "rounding_cost", "step_rounding_warnings"]
