"""Loads "the whole hidden test" a chunk at a time: its real memory grows to 4 GiB, past any small limit."""

import argparse
import time

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.parse_args()
chunks = []
for _ in range(128):  # 32 MiB each, touched (np.ones), so the pages are really in use
    chunks.append(np.ones(32 * 2**20, dtype=np.uint8))
    time.sleep(0.02)
raise SystemExit("unreachable: the run must be ended by the memory limit before this")
