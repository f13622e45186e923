"""A model that takes 40 ms per row."""

import argparse
import os
import time
from pathlib import Path

import pandas as pd

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
out = parser.parse_args().out
test = pd.read_csv(Path(os.environ["KKB_COMPETITION_DIR"]) / "test.csv", dtype={"id": str})
time.sleep(0.04 * len(test))
pd.DataFrame({"id": test["id"], "target": test["x"] * 2}).to_csv(out, index=False)
