"""An evaluation-API competition on the local Kaggle: kkb submit → the scoring rerun serves the notebook to the
competition's own gateway (another process) over hidden/ → the gateway's submission.parquet is scored."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.errors import KernelFailed
from builder.local_kaggle import LocalKaggle
from builder.remote.submit import SubmitSettings, submit
from tests.support.demo_kaggle import LOOPBACK_WAITS, demo_adapter, serve_local_kaggle
from tests.support.files import KERNELS
from tests.support.kernels import evalapi_variant

pytestmark = pytest.mark.loopback  # every test talks to a local Kaggle over HTTP



@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    yield from serve_local_kaggle(tmp_path, monkeypatch, None, KERNELS / "evalapi" / "data" / "competition")


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    return Path(shutil.copytree(KERNELS / "evalapi", tmp_path / "evalapi", ignore=shutil.ignore_patterns("__pycache__", ".kkb")))


def _submit(kernel: Path, server: LocalKaggle):
    return submit(SubmitSettings(kernel_dir=kernel, out_dir=kernel.parent / "build", adapter=demo_adapter(server), waits=LOOPBACK_WAITS))


@pytest.mark.slow
def test_an_evaluation_api_submission_is_served_to_the_gateway_and_scored(kernel: Path, server: LocalKaggle) -> None:
    result = _submit(kernel, server)
    assert result.status == "complete"
    assert float(result.public_score) < 0.2  # RMSE against hidden answers


@pytest.mark.slow
def test_a_wrong_row_count_is_the_gateways_invalid_submission(kernel: Path, server: LocalKaggle) -> None:
    # Right in the commit run (the local gateway would stop it there), wrong only in the scoring rerun.
    evalapi_variant(kernel, "import os\nfrom evalapi_model.serve import predict as real\n\n\ndef predict(test):\n"
                     "    rerun = 'KAGGLE_IS_COMPETITION_RERUN' in os.environ\n    return real(test).iloc[1:] if rerun else real(test)\n")
    with pytest.raises(KernelFailed) as caught:
        _submit(kernel, server)
    assert "failed: Submission Scoring Error" in str(caught.value)  # all Kaggle tells the user
    record = server.store.read(server.store.path("submissions", "1", "submission.json"))
    assert record["reason"] == "INVALID_SUBMISSION: Invalid predictions: expected 4 rows but received 3"
