"""Resources and faults named as Kaggle names them: memory written to ``/dev/shm`` counts (the container's cgroup
charges it), and a full disk inside the run is the run's failure with Kaggle's verdict and the reason, never kkb's
internal error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from builder.kkb_runtime.vocabulary import Isolation, Verdict
from builder.run.isolation import probe
from tests.support.cli import kkb, said
from tests.support.files import KERNELS

pytestmark = [pytest.mark.loopback, pytest.mark.slow]  # dry runs

SHM = '''
if os.environ.get("KKB_STEP_NAME") == "linear":  # 1.5 GB into /dev/shm: no process maps it, the container counts it
    with open("/dev/shm/kkb-big", "wb") as big:
        for _ in range(1536):
            big.write(bytes(1 << 20))
'''
FULL = '''
if os.environ.get("KKB_STEP_NAME") == "ridge":  # a disk with no room left answers as a full one does
    with open("/dev/full", "wb") as full:
        full.write(b"x" * 100)
        full.flush()
'''


def _kernel(tmp_path: Path, code: str) -> Path:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "res kernel", ignore=shutil.ignore_patterns(".kkb", "build")))
    predict = kernel / "predict.py"
    predict.write_text(predict.read_text().replace('if __name__ == "__main__":', code + '\n\nif __name__ == "__main__":'))
    return kernel


@pytest.mark.parametrize("mode", ["bwrap", "namespace"])
def test_memory_written_to_dev_shm_counts(tmp_path: Path, mode: str) -> None:
    if probe(Isolation(mode)) is not None:
        pytest.skip(f"{mode} isolation is not available here: {probe(Isolation(mode))}")
    kernel = _kernel(tmp_path, SHM)
    ran = kkb("dry-run", ".", "--scenario", "rerun", "--memory", "800M", "--json", cwd=kernel,
              env={"KKB_SANDBOX_ISOLATION": mode})
    assert ran.returncode == 2, said(ran)
    (rerun,) = json.loads(ran.stdout)["scenarios"]
    assert rerun["verdict"]["name"] == Verdict.COMPUTE, rerun["verdict"]
    assert rerun["verdict"]["reason"].startswith("step 'linear' was ended by the memory limit"), rerun["verdict"]


def test_a_full_disk_inside_the_run_is_kaggles_verdict_with_the_reason(tmp_path: Path) -> None:
    kernel = _kernel(tmp_path, FULL)
    ran = kkb("dry-run", ".", "--scenario", "rerun", "--json", cwd=kernel)
    assert ran.returncode == 2, said(ran)
    (rerun,) = json.loads(ran.stdout)["scenarios"]
    assert rerun["verdict"]["name"] == Verdict.COMPUTE, rerun["verdict"]
    assert rerun["verdict"]["reason"].startswith("step 'ridge' ran out of disk: step 'ridge' failed with exit code 1: "
                                                 "OSError: [Errno 28] No space left on device"), rerun["verdict"]
    assert "internal error" not in ran.stderr
