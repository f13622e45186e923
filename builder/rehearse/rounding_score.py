"""Rounding judged by the score: with the answers at hand, the expected score of the file before and after
``[submission] decimals``; a rounding that moves it by more than :data:`SCORE_TOLERANCE` (either way) is a
warning naming the columns that moved it and the digits that would keep it.

The runtime keeps the predictions before rounding in ``/kaggle/temp`` (``kkb_runtime.rounding.UNROUNDED_FILE``);
in the dry run's sandbox that is the ``temp`` folder beside the working dir.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.kkb_runtime.metrics import PartScores
from builder.kkb_runtime.rounding import MAX_DECIMALS, UNROUNDED_FILE, round_column

if TYPE_CHECKING:  # imported where used: the CLI starts without them (tests/test_dry_run_cost.py)
    import pandas as pd

SCORE_TOLERANCE = 1e-6

Scorer = Callable[["pd.DataFrame"], PartScores]


@dataclass(frozen=True)
class RoundingEffect:
    unrounded: PartScores
    rounded: PartScores
    culprits: tuple[tuple[str, int | None, str], ...] = ()  # (column, digits that keep the score or None, kind)

    @property
    def moved(self) -> float:
        return max(abs(self.rounded.public - self.unrounded.public), abs(self.rounded.private - self.unrounded.private))

    def to_json(self) -> dict[str, Any]:
        return {"unrounded": {"public": self.unrounded.public, "private": self.unrounded.private},
                "rounded": {"public": self.rounded.public, "private": self.rounded.private}, "moved": self.moved,
                "columns": [{"column": c, "digits": d, "kind": k} for c, d, k in self.culprits]}

    def warning(self, label: str) -> str | None:
        if self.moved <= SCORE_TOLERANCE:
            return None
        named = ", ".join(f"'{c}' (keeps it at {d} {k})" if d is not None else f"'{c}' (no rounding keeps it)"
                          for c, d, k in self.culprits[:6]) + (", ..." if len(self.culprits) > 6 else "")
        kept = [d for _, d, _ in self.culprits if d is not None]
        fix = f"; set [submission] decimals = {max(kept)}" if kept and len(kept) == len(self.culprits) else ""
        return (f"{label}: {ROUNDING_MOVES} by {self.moved:.2g} (public {self.unrounded.public:.7g} -> "
                f"{self.rounded.public:.7g}, private {self.unrounded.private:.7g} -> {self.rounded.private:.7g}): "
                f"columns {named or '(none alone)'}{fix}")


ROUNDING_MOVES = "rounding moves the expected score"  # what :meth:`RoundingEffect.warning` says


def metric_roundings(path: Path) -> list[str]:
    """Where a metric file rounds numbers itself (``round(x, 6)``, ``frame.round(6)``, ``np.round(x, 6)``): each
    ``file:line: call``, read from its source (``ast``: nothing of it runs here)."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else \
            node.func.attr if isinstance(node.func, ast.Attribute) else None
        digits = node.args[1:] if isinstance(node.func, ast.Name) or _module_call(node.func) else node.args[:1]
        keywords = [keyword for keyword in node.keywords if keyword.arg in ("decimals", "ndigits")]
        if name in ("round", "around") and (digits or keywords):
            found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)[:80]}")
    return found


def _module_call(func: ast.expr) -> bool:
    """``np.round(x, 6)``: a module's function, whose first argument is the values (not the digits)."""
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("np", "numpy")


def with_metric_rounding(warnings: Sequence[str], metric_file: Path | None) -> list[str]:
    """A rounding warning names the metric file's own rounding as the cause where the file rounds its inputs."""
    if not any(ROUNDING_MOVES in warning for warning in warnings):  # most runs: the metric file is not parsed
        return list(warnings)
    where = metric_roundings(metric_file) if metric_file is not None and metric_file.is_file() else []
    if not where:
        return list(warnings)
    cause = (f"; the metric file rounds numbers itself ({'; '.join(where[:3])}): the score sees its rounding, so "
             "more [submission] decimals cannot keep what it cuts")
    return [warning + cause if ROUNDING_MOVES in warning else warning for warning in warnings]


def unrounded_file(working_dir: Path) -> Path:
    return working_dir.parent / "temp" / UNROUNDED_FILE


def rounding_effect(score: Scorer, unrounded: pd.DataFrame, rounded: pd.DataFrame,
                    records: Sequence[Mapping[str, Any]]) -> RoundingEffect:
    """The score of both files; where it moved, each rounded column's own move and the fewest digits (at least
    the used ones) that keep it within the tolerance."""
    before, after = score(unrounded), score(rounded)
    effect = RoundingEffect(before, after)
    if effect.moved <= SCORE_TOLERANCE:
        return effect
    culprits = []
    for record in records:
        column, used, kind = str(record["column"]), record.get("used"), str(record.get("kind") or "decimals")
        if used is None or column not in unrounded.columns:
            continue
        if _moves(score, before, unrounded, column, int(used), kind):
            keeps = next((d for d in range(int(used) + 1, MAX_DECIMALS + 1)
                          if not _moves(score, before, unrounded, column, d, kind)), None)
            culprits.append((column, keeps, kind))
    return RoundingEffect(before, after, tuple(culprits))


def _moves(score: Scorer, before: PartScores, unrounded: pd.DataFrame, column: str, digits: int, kind: str) -> bool:
    trial = unrounded.copy()
    trial[column] = round_column(unrounded[column].astype(float), digits, kind)
    after = score(trial)
    return max(abs(after.public - before.public), abs(after.private - before.private)) > SCORE_TOLERANCE


__all__ = ["ROUNDING_MOVES", "SCORE_TOLERANCE", "RoundingEffect", "Scorer", "metric_roundings", "rounding_effect",
           "unrounded_file", "with_metric_rounding"]
