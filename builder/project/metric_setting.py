"""``[competition] metric`` read at the boundary: a name kkb knows (aliases included), or the competition's
own metric file; anything else is refused with a did-you-mean among real names. And where the metric comes
from when ``kernel.toml`` does not name it: the competition folder's ``competition.toml``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from builder.kkb_runtime.metric_file import MetricFile, metric_file_reference
from builder.kkb_runtime.metrics import metric_names, parse_metric, unknown_metric
from builder.project.spec_values import relative_path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

COMPETITION_TOML = "competition.toml"
MetricArgument = str | int | float | bool | list[str | int | float | bool]


def check_metric(value: str | None) -> str | None:
    """The pydantic validator's body: a known name or a metric file (a relative path), else a ValueError."""
    if value is None:
        return None
    reference = metric_file_reference(value)
    if reference is not None:
        relative_path(reference.path)
        return value
    if parse_metric(value).known:
        return value
    shown = ", ".join(metric_names(aliases=False))
    raise ValueError(f"{unknown_metric(value)}; use a metric kkb knows ({shown}) or the competition's metric file "
                     f"(metric = \"metric.py\", Kaggle's score(solution, submission, row_id_column_name) format)")


@dataclass(frozen=True)
class ResolvedMetric:
    """The metric a run uses and the folder a metric file is relative to; ``source`` says where it was set."""

    text: str | None
    base_dir: Path
    source: str
    arguments: dict[str, MetricArgument] = field(default_factory=dict)

    @property
    def file(self) -> MetricFile | None:
        return metric_file_reference(self.text)


def resolve_metric(metric: str | None, arguments: dict[str, MetricArgument], kernel_dir: Path,
                   data_dir: Path | None) -> ResolvedMetric:
    """``kernel.toml``'s metric, else the one of the ``competition.toml`` in the data folder or above it (a
    local competition's ``public/`` folder), else none."""
    if metric:
        return ResolvedMetric(metric, kernel_dir, "kernel.toml", dict(arguments))
    for folder in (data_dir, data_dir.parent) if data_dir is not None else ():
        toml = folder / COMPETITION_TOML
        if not toml.is_file():
            continue
        try:
            raw = tomllib.loads(toml.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            continue
        if isinstance(raw.get("metric"), str):
            found_args = raw.get("metric_args")
            return ResolvedMetric(raw["metric"], folder, str(toml), dict(found_args) if isinstance(found_args, dict) else {})
    return ResolvedMetric(None, kernel_dir, "none")


__all__ = ["COMPETITION_TOML", "MetricArgument", "ResolvedMetric", "check_metric", "resolve_metric"]
