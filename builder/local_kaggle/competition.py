"""Competition folders (``competition.toml``, ``public/``, ``hidden/``, ``answers.csv``) → a checked config.

Format (docs/ARCHITECTURE.md, "Competition folders")::

    slug = "tiny-digits"              # lower-case letters, digits, '-'
    title = "Tiny Digits"
    metric = "accuracy"               # a kkb metric (builder.kkb_runtime.metrics: spearman, auc, map@5, ...) | "metric.py"
    metric_args = {}                  # the metric file's keyword arguments: score(solution, submission, row_id_column_name, **kwargs)
    id_column = "id"
    target_columns = ["label"]        # or one string
    daily_submission_limit = 5
    time_limit_hours = 9
"""

from __future__ import annotations

import difflib
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.errors import LocalKaggleError
from builder.kkb_runtime.metric_file import metric_file_reference
from builder.kkb_runtime.metrics import metric_names, parse_metric, unknown_metric

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

METRICS = tuple(metric_names(aliases=False))  # map@k, ndcg@k and fbeta@beta are written with their parameter
_KEYS = ("slug", "title", "metric", "metric_args", "id_column", "target_columns", "daily_submission_limit", "time_limit_hours",
         "description", "evaluation_api", "column_types")
# An evaluation-API competition names its gateway: the scoring rerun runs the notebook as serve() and
# drives it from another process with that gateway, as Kaggle does from another container.
_GATEWAY_KEYS = ("gateway_module", "gateway_paths", "startup_limit_seconds", "response_timeout_seconds")
_SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")


@dataclass(frozen=True)
class CompetitionConfig:
    slug: str
    title: str
    metric: str
    id_column: str
    target_columns: tuple[str, ...]
    daily_submission_limit: int = 5
    time_limit_hours: float = 9.0
    description: str = ""
    evaluation_api: dict[str, Any] | None = None  # gateway_module, gateway_paths, startup/response limits
    # column -> "int"/"float"/"str" ("*": every target): overrides the hidden sample's types when scoring
    column_types: dict[str, str] | None = None
    metric_args: dict[str, Any] | None = None  # the metric file's keyword arguments

    def to_json(self) -> dict[str, Any]:
        return {"slug": self.slug, "title": self.title, "metric": self.metric, "id_column": self.id_column,
                "target_columns": list(self.target_columns), "daily_submission_limit": self.daily_submission_limit,
                "time_limit_hours": self.time_limit_hours, "description": self.description,
                "evaluation_api": self.evaluation_api, "column_types": self.column_types, "metric_args": self.metric_args}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CompetitionConfig:
        return cls(**{**data, "target_columns": tuple(data["target_columns"])})


def load_competition(folder: Path) -> CompetitionConfig:
    """Read and check a competition folder; raises :class:`LocalKaggleError` naming the file and key."""
    folder = Path(folder)
    toml_path = folder / "competition.toml"
    if not toml_path.is_file():
        raise LocalKaggleError(f"{folder} is not a competition folder: {toml_path.name} is missing",
                               hint="a competition folder holds competition.toml, public/, hidden/ and answers.csv")
    try:
        raw = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise LocalKaggleError(f"failed to parse {toml_path}: {exc}") from None
    for key in raw:
        close = difflib.get_close_matches(key, _KEYS, n=1, cutoff=0.8)
        if key not in _KEYS and close:
            raise LocalKaggleError(f"{toml_path}: unknown key {key!r}", hint=f"did you mean {close[0]!r}?")
    config = _config(raw, toml_path)
    _check_files(folder, config)
    return config


def _column_types(raw: Any, toml_path: Path) -> dict[str, str] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or any(value not in ("int", "float", "str") for value in raw.values()):
        raise LocalKaggleError(f"{toml_path}: column_types must map column names to \"int\", \"float\" or \"str\"")
    return {str(key): str(value) for key, value in raw.items()}


def _config(raw: dict[str, Any], toml_path: Path) -> CompetitionConfig:
    def required(key: str) -> Any:
        if key not in raw:
            raise LocalKaggleError(f"{toml_path}: missing key {key!r}")
        return raw[key]

    slug = str(required("slug"))
    if not _SLUG.match(slug):
        raise LocalKaggleError(f"{toml_path}: slug {slug!r} is not a Kaggle slug",
                               hint="use lower-case letters, digits and '-'")
    metric = str(required("metric"))
    if not parse_metric(metric).known and metric_file_reference(metric) is None:
        raise LocalKaggleError(f"{toml_path}: {unknown_metric(metric)}",
                               hint=f"use one of {', '.join(METRICS)} or the competition's metric file (metric.py)")
    metric_args = raw.get("metric_args")
    if metric_args is not None and not isinstance(metric_args, dict):
        raise LocalKaggleError(f"{toml_path}: metric_args must be a table of the metric's keyword arguments")
    targets = required("target_columns")
    targets = (targets,) if isinstance(targets, str) else tuple(str(t) for t in targets)
    if not targets:
        raise LocalKaggleError(f"{toml_path}: target_columns is empty")
    limit = raw.get("daily_submission_limit", 5)
    hours = raw.get("time_limit_hours", 9)
    if not isinstance(limit, int) or limit < 1:
        raise LocalKaggleError(f"{toml_path}: daily_submission_limit must be a positive integer")
    if not isinstance(hours, (int, float)) or hours <= 0:
        raise LocalKaggleError(f"{toml_path}: time_limit_hours must be a positive number")
    return CompetitionConfig(slug=slug, title=str(raw.get("title") or slug), metric=metric,
                             id_column=str(required("id_column")), target_columns=targets,
                             daily_submission_limit=limit, time_limit_hours=float(hours),
                             description=str(raw.get("description", "")),
                             evaluation_api=_gateway(raw.get("evaluation_api"), toml_path),
                             column_types=_column_types(raw.get("column_types"), toml_path), metric_args=metric_args)


def _gateway(raw: Any, toml_path: Path) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("gateway_module"), str):
        raise LocalKaggleError(f"{toml_path}: [evaluation_api] needs gateway_module (e.g. 'kaggle_evaluation.<comp>_gateway')")
    unknown = sorted(set(raw) - set(_GATEWAY_KEYS))
    if unknown:
        raise LocalKaggleError(f"{toml_path}: [evaluation_api] unknown key {unknown[0]!r}", hint=f"known: {', '.join(_GATEWAY_KEYS)}")
    return {"gateway_module": raw["gateway_module"], "gateway_paths": [str(p) for p in raw.get("gateway_paths", [])],
            "startup_limit_seconds": int(raw.get("startup_limit_seconds", 900)),
            "response_timeout_seconds": raw.get("response_timeout_seconds")}


def _check_files(folder: Path, config: CompetitionConfig) -> None:
    import pandas as pd

    for rel in ("public/sample_submission.csv", "hidden/sample_submission.csv", "answers.csv"):
        if not (folder / rel).is_file():
            raise LocalKaggleError(f"competition {config.slug}: {folder / rel} is missing",
                                   hint="public/ is what the commit run sees, hidden/ what the scoring rerun sees")
    reference = metric_file_reference(config.metric)
    if reference is not None and not (folder / reference.path).is_file():
        raise LocalKaggleError(f"competition {config.slug}: metric file {folder / reference.path} is missing")
    columns = list(pd.read_csv(folder / "answers.csv", nrows=0).columns)
    missing = [c for c in (config.id_column, *config.target_columns) if c not in columns]
    if missing:
        raise LocalKaggleError(f"competition {config.slug}: answers.csv lacks columns {missing}",
                               hint=f"it has {columns}")
