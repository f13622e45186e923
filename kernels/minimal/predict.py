"""One inference step of the minimal kernel: a linear model read from the weights dataset."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pandas as pd
from minimal.model import LinearModel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--weights", required=True, help="file name in the weights dataset")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    competition = Path(os.environ["KKB_COMPETITION_DIR"])
    model = LinearModel.load(Path(os.environ["KKB_WEIGHTS_DIR"]) / "weights" / args.weights)
    test = pd.read_csv(competition / "test.csv", dtype={"id": str})
    limit = os.environ.get("KKB_ROW_LIMIT")
    if limit:
        test = test.head(int(limit))
    out = pd.DataFrame({"id": test["id"], "target": model.predict(test)})
    out.to_csv(args.out, index=False)
    print(f"{args.weights}: {len(out)} rows")


if __name__ == "__main__":
    main()
