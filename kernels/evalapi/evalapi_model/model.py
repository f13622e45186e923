from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


@dataclass(frozen=True)
class LinearModel:
    coefficients: dict[str, float]
    intercept: float

    @classmethod
    def load(cls, path: Path) -> LinearModel:
        raw = json.loads(path.read_text())
        return cls(coefficients=raw["coefficients"], intercept=raw["intercept"])

    def predict(self, frame: pd.DataFrame) -> pd.Series:
        total = pd.Series(self.intercept, index=frame.index, dtype=float)
        for column, weight in self.coefficients.items():
            total += weight * frame[column].astype(float)
        return total
