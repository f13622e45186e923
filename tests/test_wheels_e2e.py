"""kkb wheels --on-kaggle end to end, against the local Kaggle (real client over loopback, real sandbox runs).

The helper kernel is pushed with internet on, runs in the local Kaggle's sandbox (where "the image" is
kkb's own environment, so numpy is already there), builds the wheels of ``delta`` and compiles
``tinyext`` with ``--cpp_ext``, and its output is kept. The inference kernel then attaches that output
through ``kernel_sources``, installs from it in both runs, and its steps import what was installed.
The helper's pip reads the test's folder of wheels (``helper_pip_args``) instead of the internet.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import replace
from importlib import metadata
from pathlib import Path

import pytest

from builder.bundle.wheels import HELPER_RECORD
from builder.local_kaggle import LocalKaggle
from builder.project.layout import HELPER_DIR
from builder.remote.session import Waits
from builder.remote.submit import SubmitSettings, submit
from builder.remote.wheels import WheelsSettings, build_wheels
from tests.support.demo_kaggle import DEMO_USER, demo_adapter, serve_local_kaggle
from tests.support.kernels import kernel_with
from tests.support.wheels import write_tinyext

pytestmark = [pytest.mark.slow, pytest.mark.loopback, pytest.mark.usefixtures("hermetic_pip"),
              pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="needs a C compiler")]

HELPER = "kkb-demo/kkb-minimal-inference-wheels"
CODE = "kkb-demo/kkb-minimal-inference-code"
FAST = Waits(poll_initial_s=0.1, poll_max_s=0.5, dataset_timeout_s=60, run_timeout_s=120, scoring_timeout_s=120)

SPEC = '''\
[install]
requirements = ["delta"]
on_kaggle = true

[[install.source_packages]]
name = "tinyext"
path = "vendor/tinyext"
cpp_ext = true
'''
# The steps prove the install: the wheel from the helper and the extension it compiled are importable.
PREDICT_PRELUDE = '''\
import delta
import tinyext

assert delta.VERSION == "1.0" and tinyext.compiled(), "kkb e2e: the helper's wheels were not installed"
'''


@pytest.fixture
def local_kaggle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, index: Path) -> Iterator[LocalKaggle]:
    # The helper kernel has internet on: here its "internet" is the local package index, and nothing else.
    yield from serve_local_kaggle(tmp_path, monkeypatch, None, internet=(index,))


def test_helper_kernel_builds_wheels_on_kaggle_and_the_inference_kernel_uses_them(
        tmp_path: Path, index: Path, local_kaggle: LocalKaggle) -> None:
    kernel = kernel_with(tmp_path, SPEC)
    write_tinyext(kernel / "vendor" / "tinyext")
    predict = kernel / "predict.py"
    predict.write_text(predict.read_text().replace("from __future__ import annotations\n",
                                                   "from __future__ import annotations\n\n" + PREDICT_PRELUDE, 1))
    out = tmp_path / "build"
    settings = WheelsSettings(kernel_dir=kernel, out_dir=out, on_kaggle=True, adapter=demo_adapter(local_kaggle),
                              helper_pip_args=("--no-index", "--find-links", str(index)), waits=FAST, run_timeout_s=120)

    result = build_wheels(replace(settings, wait=False))  # push and return: kkb wheels --on-kaggle --no-wait
    assert (result.mode, result.ref, result.action, result.kernel_version) == ("kernel", HELPER, "pushed", 1)
    # Asked again while (or after) it runs: the same version is awaited, not pushed a second time.
    settled = build_wheels(settings)
    assert (settled.action, settled.kernel_version, settled.key) == ("unchanged", 1, result.key)

    # Server-side: what the helper was pushed as (internet on, a script, not a competition kernel) ...
    version = local_kaggle.kernels.version("kkb-demo", "kkb-minimal-inference-wheels", None, DEMO_USER)
    meta = version.meta
    assert meta["enableInternet"] is True and meta["kernelType"] == "script" and meta["language"] == "python"
    assert meta["competitionSources"] == [] and meta["datasetSources"] == [CODE]  # the source tree rides in the code
    assert version.session["status"] == "COMPLETE", version.session
    # ... and its output, kept: the wheels it built in "Kaggle's image" and its record.
    kept = sorted(p.name for p in (version.output_dir / "wheels").iterdir())
    assert "delta-1.0-py3-none-any.whl" in kept and "beta-1.2-py3-none-any.whl" in kept
    assert any(name.startswith("tinyext-0.1-cp") and "linux" in name for name in kept), kept
    assert not any(name.startswith("numpy") for name in kept)  # the image has it: never replaced
    record = json.loads((version.output_dir / "wheels" / "kkb_wheelhouse.json").read_text())
    assert record["id"] == HELPER and record["key"] == result.key and record["sources"]["tinyext"].startswith("tinyext-")

    # Unchanged: no second push, no second run, not even a status poll.
    again = build_wheels(replace(settings, wait=False))
    assert again.action == "unchanged" and again.kernel_version == 1
    assert json.loads((out / HELPER_DIR / HELPER_RECORD).read_text())["status"] == "complete"

    # The inference kernel attaches the helper's output and installs from it in the commit run and the rerun.
    submitted = submit(SubmitSettings(kernel_dir=kernel, out_dir=out, adapter=demo_adapter(local_kaggle), waits=FAST))
    assert submitted.public_score
    pushed = json.loads((out / "kernel" / "kernel-metadata.json").read_text())
    assert pushed["kernel_sources"] == [HELPER] and pushed["enable_internet"] is False
    inference = local_kaggle.kernels.version("kkb-demo", "kkb-minimal-inference", None, DEMO_USER)
    assert inference.meta["kernelSources"] == [HELPER]
    assert (out / HELPER_DIR / "kernel-metadata.json").is_file()  # kkb build (inside submit) kept the helper folder
    # The sandbox installed into its own layered venv: kkb's environment (this process's) never got delta.
    with pytest.raises(metadata.PackageNotFoundError):
        metadata.version("delta")
