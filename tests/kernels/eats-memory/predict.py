"""Loads "the whole hidden test" into one array: 4 GiB, past any small memory limit."""

import argparse

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.parse_args()
everything = np.ones(4 * 2**30, dtype=np.uint8)
raise SystemExit("unreachable: the allocation above must fail under the limit")
