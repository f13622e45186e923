"""The inference step `kkb init` wrote for the competition kkb-minimal.

kkb runs it as `python predict.py --out FILE` in the kernel: it must write one row per row of the
sample submission, with the id column and the target columns in their types. The competition data is
at $KKB_COMPETITION_DIR, your weights dataset at $KKB_WEIGHTS_DIR. Replace `predict` with your model.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pandas as pd

SAMPLE = 'sample_submission.csv'
ID_COLUMN = 'id'
TARGETS = {'target': 'float64'}


def predict(sample: pd.DataFrame) -> pd.DataFrame:
    """A baseline that scores as generated: the sample submission's own values, in each target's type."""
    out = sample[[ID_COLUMN, *TARGETS]].copy()
    for column, dtype in TARGETS.items():
        out[column] = out[column].astype(dtype)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True, help="where kkb wants this step's predictions (CSV)")
    args = parser.parse_args()
    data = Path(os.environ["KKB_COMPETITION_DIR"])
    read = pd.read_parquet if SAMPLE.endswith(".parquet") else pd.read_csv
    sample = read(data / SAMPLE, dtype={ID_COLUMN: str}) if SAMPLE.endswith(".csv") else read(data / SAMPLE)
    limit = os.environ.get("KKB_ROW_LIMIT")  # [fast_commit] write = "first_rows"
    if limit:
        sample = sample.head(int(limit))
    predict(sample).to_csv(args.out, index=False)
    print(f"predict.py: {len(sample)} rows")


if __name__ == "__main__":
    main()
