"""``kkb submit`` keeps the run's submission file; ``kkb compare --kernel`` compares a new file with it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from builder.cli import main
from builder.errors import EXIT_KERNEL, EXIT_OK
from builder.local_kaggle import LocalKaggle
from builder.remote.history import History
from builder.remote.outputs import OUTPUT, last_scored_output
from builder.remote.submit import SubmitSettings, submit
from tests.support.demo_kaggle import LOOPBACK_WAITS, demo_adapter, serve_local_kaggle
from tests.support.files import KERNELS

pytestmark = [pytest.mark.slow, pytest.mark.loopback]


@pytest.fixture
def sandbox_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    yield from serve_local_kaggle(tmp_path, monkeypatch, None)


def test_submit_keeps_the_scored_runs_output_and_compare_uses_it(sandbox_server: LocalKaggle, tmp_path: Path) -> None:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))
    result = submit(SubmitSettings(kernel_dir=kernel, out_dir=tmp_path / "build", adapter=demo_adapter(sandbox_server),
                                   waits=LOOPBACK_WAITS))
    assert result.status == "complete"
    kept = last_scored_output(kernel)
    assert kept.kernel_version == result.kernel_version and kept.score == result.public_score
    assert kept.file == kernel / ".kkb" / "outputs" / f"kkb-minimal-inference-v{result.kernel_version}.submission.csv"
    records = [r for r in History.for_kernel(kernel).all_records() if r["event"] == OUTPUT]
    assert [r["file"] for r in records] == [str(kept.file.relative_to(kernel))]
    frame = pd.read_csv(kept.file)
    assert list(frame.columns) == ["id", "target"] and len(frame) == 5
    same = tmp_path / "v2.csv"
    frame.to_csv(same, index=False)
    assert main(["compare", str(same), "--kernel", str(kernel)]) == EXIT_OK
    frame.assign(target=frame["target"] + 0.01).to_csv(same, index=False)
    assert main(["compare", str(same), "--kernel", str(kernel)]) == EXIT_KERNEL
