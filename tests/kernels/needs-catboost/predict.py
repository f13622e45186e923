"""A model that needs CatBoost (preinstalled on Kaggle)."""

import argparse

from catboost import CatBoostRegressor  # noqa: F401

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.parse_args()
