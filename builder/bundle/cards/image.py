"""Image cards at build time: ``builder.bundle.models`` prepares them; the public test's ids must resolve to images."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from builder.bundle.models import prepare_model
from builder.errors import BundleError
from builder.kkb_runtime import predict as runtime_predict
from builder.project.spec import SPEC_FILE, KernelSpec, ModelCard


def prepare(card: ModelCard, kernel_dir: Path, weights_stage: Path, written: dict[str, str]) -> dict[str, Any]:
    return prepare_model(card, kernel_dir, weights_stage, written)


def extra_files(card: ModelCard, kernel_dir: Path) -> list[str]:
    return []  # transforms files travel through [weights] include, as before


def check_public_data(spec: KernelSpec, kernel_dir: Path, data: Path, card: ModelCard, columns: list[str],
                      sample: pd.DataFrame) -> None:
    """Every id of the public sample resolves to a test image the way the runtime resolves it."""
    configured = spec.competition.test
    folder = data / (configured or runtime_predict.DEFAULT_TEST_DIR)
    if not folder.exists():
        if configured:
            raise BundleError(f"{kernel_dir / SPEC_FILE}: competition.test: {folder} does not exist in the public data",
                              hint="name the test images folder (or the CSV listing them) relative to [competition] data")
        folder = data
    ids = sample[spec.submission.id_column].astype(str).tolist()
    try:
        runtime_predict.image_paths(ids, folder, spec.submission.id_column)
    except (runtime_predict.PredictError, pd.errors.ParserError, OSError) as exc:
        raise BundleError(f"{kernel_dir / SPEC_FILE}: the public test's ids do not resolve to images: {exc}",
                          hint="set [competition] test to the folder of test images or to a CSV with the id column "
                               "and a column of image paths; a card over a table of text or features is kind = "
                               "'text', 'gbdt' or 'sklearn'") from None
