"""Hardcodes the old mount point of the competition data (/kaggle/input/<slug>)."""

import argparse
import os
from pathlib import Path

import pandas as pd

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
out = parser.parse_args().out
KAGGLE = Path(os.environ.get("KKB_KAGGLE_ROOT", "/kaggle"))
test = pd.read_csv(KAGGLE / "input" / "kkb-fixture" / "test.csv", dtype={"id": str})
pd.DataFrame({"id": test["id"], "target": test["x"]}).to_csv(out, index=False)
