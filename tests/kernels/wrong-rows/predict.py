"""Drops rows it cannot predict instead of predicting something for every id."""

import argparse
import os
from pathlib import Path

import pandas as pd

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
out = parser.parse_args().out
test = pd.read_csv(Path(os.environ["KKB_COMPETITION_DIR"]) / "test.csv", dtype={"id": str})
test = test[test["x"] > 0.6]  # 3 of 5 rows
predictions = pd.DataFrame({"id": test["id"], "target": test["x"] * 2})
predictions.to_csv(out, index=False)
predictions.to_csv("submission.csv", index=False)
