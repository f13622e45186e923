"""Reads and writes through Kaggle's absolute paths; shuffles its rows (the runtime aligns them to the sample)."""

import argparse
from pathlib import Path

import pandas as pd

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
out = parser.parse_args().out
test = pd.read_csv("/kaggle/input/competitions/kkb-fixture/test.csv", dtype={"id": str})
cache = Path("/kaggle/working/cache")
cache.mkdir(exist_ok=True)
test.to_csv(cache / "features.csv", index=False)
Path("/kaggle/temp/scratch.bin").write_bytes(b"x" * 1024)
preds = pd.DataFrame({"id": test["id"], "target": test["x"] * 2}).sample(frac=1.0, random_state=0)
preds.to_csv(out, index=False)
