"""Calls the target column 'prediction': the sample submission says 'target'."""

import argparse
import os
from pathlib import Path

import pandas as pd

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
out = parser.parse_args().out
test = pd.read_csv(Path(os.environ["KKB_COMPETITION_DIR"]) / "test.csv", dtype={"id": str})
predictions = pd.DataFrame({"id": test["id"], "prediction": test["x"] * 2})
predictions.to_csv(out, index=False)
predictions.to_csv("submission.csv", index=False)
