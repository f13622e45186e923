"""Version skew named: what a run imported, compared with Kaggle's image; a failure inside a skewed
package is "Not Rehearsed" naming both versions, never a Kaggle verdict."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.version import Version

from builder.kkb_runtime.vocabulary import Isolation
from builder.project.image import load_image
from builder.project.spec import load_spec
from builder.rehearse.own_imports import own_modules
from builder.rehearse.verdict import CSV_NOT_FOUND, NOT_REHEARSED, Limits, judge
from builder.run.execute import ExecutionResult
from builder.run.sandbox import SandboxSpec, prepare_sandbox
from builder.run.skew import (
    Skew,
    differs,
    local_version,
    module_distributions,
    recorded_imports,
    skew_in_failure,
    skew_records,
    skew_warnings,
    version_skews,
)
from tests.support.files import KERNELS

PANDAS = metadata.version("pandas")
NEXT_MAJOR = f"{Version(PANDAS).major + 1}.0.0"
FAILS_IN_PANDAS = "import pandas as pd\npd.DataFrame({'a': [1]}).loc['missing']\n"


@pytest.fixture()
def image(tmp_path: Path) -> Path:
    """An image whose pandas is one major version ahead of this environment's; numpy as here."""
    path = tmp_path / "image.json"
    path.write_text(json.dumps({"python": "3.12", "captured": "2026-06-17",
                                "packages": {"pandas": NEXT_MAJOR, "numpy": metadata.version("numpy")}}))
    return path


@pytest.mark.parametrize(("local", "there", "distribution", "expected"), [
    ("3.1.1", "2.3.3", "pandas", True),
    ("2.3.1", "2.3.3", "pandas", False),
    ("2.4.6", "2.2.0", "numpy", True),  # a minor difference matters for numpy
    ("1.7.2", "1.6.1", "scikit_learn", True),
    ("4.57.0", "5.0.0", "transformers", True),
    ("1.0.26", "1.1.0", "timm", False),  # elsewhere only the major counts
    ("2.14.1+cu130", "2.10.0", "torch", False),
    ("not-a-version", "1.0", "x", False),
])
def test_a_major_or_for_known_packages_a_minor_difference_is_a_skew(local: str, there: str, distribution: str,
                                                                   expected: bool) -> None:
    assert differs(local, there, distribution) is expected


def test_the_installed_distributions_read_from_their_headers_agree_with_importlib_metadata() -> None:
    expected = {module: tuple(names) for module, names in metadata.packages_distributions().items()}
    assert module_distributions() == expected
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        assert local_version(name) == metadata.version(name), name
    assert local_version("Scikit_Learn") == metadata.version("scikit-learn") and local_version("no-such-dist") is None


def test_a_sandboxed_process_records_its_imports_and_the_skew_is_named(tmp_path: Path, image: Path) -> None:
    box = prepare_sandbox(SandboxSpec(mounts=(), rerun=True, isolation=Isolation.PYTHON), tmp_path / "root")
    out = subprocess.run([sys.executable, "-c", FAILS_IN_PANDAS], env=box.env, cwd=box.working_dir, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 1 and "KeyError" in out.stderr

    imported = recorded_imports(box.private_dir)
    skews = version_skews(imported, load_image(image))

    assert {"pandas", "numpy"} <= imported and "json" not in imported  # site-packages only, not the standard library
    assert skews == (Skew("pandas", PANDAS, NEXT_MAJOR, ("pandas",)),)
    assert skew_in_failure(out.stderr, skews) == skews[0]
    assert skew_warnings(skews) == [f"version skew with Kaggle's image (a failure one of these explains is not rehearsed; "
                                    f"kkb env builds the image's versions): pandas {PANDAS} here, {NEXT_MAJOR} on Kaggle's image"]


def _result(tmp_path: Path, evalue: str, skews: tuple[Skew, ...]) -> ExecutionResult:
    (tmp_path / "working").mkdir(exist_ok=True)
    return ExecutionResult(root=tmp_path, working_dir=tmp_path / "working", executed_notebook=tmp_path / "nb.ipynb",
                           ok=False, timed_out=False, failed_cell=5, ename="StepFailed", evalue=evalue, traceback_tail=None,
                           wall_seconds=1.0, peak_rss_bytes=0, peak_gpu_bytes=None, log=[], steps=[], version_skew=skews)


STEP_FAILED = ("step 'predict' failed with exit code 1\n--- stderr (last 4 lines) ---\n"
               '  File "/venv/lib/python3.12/site-packages/pandas/core/indexing.py", line 1191, in __getitem__\n'
               "KeyError: 'missing'\n")


def test_a_failure_inside_a_skewed_package_is_not_rehearsed_naming_both_versions(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                                 image: Path) -> None:
    monkeypatch.setenv("KKB_KAGGLE_IMAGE", str(image))
    skew = Skew("pandas", "3.1.1", "2.3.3", ("pandas",))
    verdict = judge(_result(tmp_path, STEP_FAILED, (skew,)), kernel_type="notebook", submission_file="submission.csv",
                    sample_submission=tmp_path / "sample.csv", id_column="id", target_columns=["target"], limits=Limits())
    assert verdict.name == NOT_REHEARSED
    assert verdict.reason == ("not rehearsed: step 'predict' failed inside pandas, which is 3.1.1 here and 2.3.3 on "
                              "Kaggle's image (2026-06-17); rehearse it with the image's versions (kkb env, then kkb "
                              "dry-run --image-env)")
    # without the skew, or for a missing file, the same failure is Kaggle's verdict
    plain = judge(_result(tmp_path, STEP_FAILED, ()), kernel_type="notebook", submission_file="submission.csv",
                  sample_submission=tmp_path / "sample.csv", id_column="id", target_columns=["target"], limits=Limits())
    missing = judge(_result(tmp_path, STEP_FAILED + "FileNotFoundError: [Errno 2] No such file or directory: 'x.csv'\n",
                            (skew,)), kernel_type="notebook", submission_file="submission.csv",
                    sample_submission=tmp_path / "sample.csv", id_column="id", target_columns=["target"], limits=Limits())
    assert plain.name == CSV_NOT_FOUND and missing.name == CSV_NOT_FOUND


def test_pandas_copy_on_write_read_only_arrays_are_the_skew_not_the_kernel() -> None:
    """pandas 3 hands out read-only arrays; the write fails in the kernel's own frame (no pandas frame in the traceback)."""
    skew = Skew("pandas", "3.1.1", "2.3.3", ("pandas",))
    text = 'File "/kaggle/input/datasets/me/code/predict.py", line 9\n    ids[0] = 1\nValueError: assignment destination is read-only'
    assert skew_in_failure(text, (skew,)) == skew
    assert skew_in_failure(text, (Skew("numpy", "2.4.6", "2.2.0", ("numpy",)),)) is None


def test_the_summary_names_only_the_skews_of_what_the_kernel_imports_and_the_report_keeps_every_one() -> None:
    skews = (Skew("pandas", "3.0.0", "2.3.3", ("pandas",)), Skew("pytz", "2026.6", "2025.2", ("pytz",)))
    assert skew_warnings(skews, {"pandas", "numpy"}) == [
        "version skew with Kaggle's image (a failure one of these explains is not rehearsed; kkb env builds the image's versions): "
        "pandas 3.0.0 here, 2.3.3 on Kaggle's image (1 more in report.json: packages your code does not import)"]
    assert skew_warnings(skews[1:], {"pandas"}) == []  # pytz alone: no line
    assert [record["kernel_imports"] for record in skew_records(skews, {"pandas"})] == [True, False]


def test_a_pandas_only_kernel_imports_pandas_and_a_text_card_its_library() -> None:
    spec = load_spec(KERNELS / "minimal")
    assert "pandas" in own_modules(KERNELS / "minimal", spec)
    assert not {"pyarrow", "pytz", "dateutil"} & own_modules(KERNELS / "minimal", spec)
    assert "transformers" in own_modules(KERNELS / "text-style", load_spec(KERNELS / "text-style"))
