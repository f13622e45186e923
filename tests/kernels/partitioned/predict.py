"""Features per (stock_id, time_id) from the book partitions, joined back on row_id: Optiver's pattern."""

import argparse
import os
from pathlib import Path

import pandas as pd

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
out = parser.parse_args().out
data = Path(os.environ["KKB_COMPETITION_DIR"])
test = pd.read_csv(data / "test.csv")
features = []
for stock_id in test["stock_id"].unique():
    book = pd.read_parquet(data / "book_test.parquet" / f"stock_id={stock_id}")
    wap = book.groupby("time_id")["price"].agg(["mean", "std"]).reset_index()
    wap["row_id"] = f"{stock_id}-" + wap["time_id"].astype(str)
    features.append(wap[["row_id", "mean", "std"]])
joined = test.merge(pd.concat(features, ignore_index=True), on="row_id", how="left")
joined["target"] = joined["mean"] * 0.01 + joined["std"].fillna(0)
joined[["row_id", "target"]].to_csv(out, index=False)
