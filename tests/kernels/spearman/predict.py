"""Two columns scored by mean column-wise Spearman; --mode says what column 'b' holds.

good: b ranks the rows; constant: b is 0.5 everywhere; public-constant: 0.5 on the ids of public_ids.txt
(hard-coded public ids, as QUEST notebooks had), ranked elsewhere; close: 0.50 and 0.54 alternate, which
1 decimal would round into one value.
"""

import argparse
import os
from pathlib import Path

import pandas as pd

parser = argparse.ArgumentParser()
parser.add_argument("--mode", required=True)
parser.add_argument("--out", required=True)
args = parser.parse_args()
test = pd.read_csv(Path(os.environ["KKB_COMPETITION_DIR"]) / "test.csv", dtype={"id": str})
public = set(Path(__file__).with_name("public_ids.txt").read_text().split())
a = test["x"] / 10
b = {
    "good": 1 - test["x"] / 20,
    "constant": pd.Series(0.5, index=test.index),
    "public-constant": (1 - test["x"] / 20).where(~test["id"].isin(public), 0.5),
    "close": pd.Series([0.5 + 0.04 * (i % 2) for i in range(len(test))], index=test.index),
}[args.mode]
pd.DataFrame({"id": test["id"], "a": a, "b": b}).to_csv(args.out, index=False)
