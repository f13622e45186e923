"""Predictions with NaN where the model divides by zero, written to submission.csv as the old notebook did."""

import argparse
import os
from pathlib import Path

import numpy as np
import pandas as pd

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
out = parser.parse_args().out
test = pd.read_csv(Path(os.environ["KKB_COMPETITION_DIR"]) / "test.csv", dtype={"id": str})
with np.errstate(divide="ignore", invalid="ignore"):
    predictions = pd.DataFrame({"id": test["id"], "target": np.log(test["x"])})  # log of -0.25 -> NaN
predictions.loc[predictions.index[:2], "target"] = np.nan
predictions.to_csv(out, index=False)
predictions.to_csv("submission.csv", index=False)
