"""The features both models were trained on: the test table in, one row of numbers per row out."""

from __future__ import annotations

import pandas as pd

COLOURS = ("red", "green", "blue")


def make(table: pd.DataFrame) -> pd.DataFrame:
    out = table[["x1", "x2", "x3", "x4"]].astype(float).copy()
    out["x1_x2"] = out["x1"] * out["x2"]
    out["x3_minus_x4"] = out["x3"] - out["x4"]
    for colour in COLOURS:
        out[f"colour_{colour}"] = (table["colour"] == colour).astype(float)
    return out
