"""A model that needs scikit-learn (preinstalled on Kaggle)."""

import argparse

from sklearn.linear_model import LinearRegression  # noqa: F401

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.parse_args()
