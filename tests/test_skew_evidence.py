"""Skew verdicts by evidence: a package Kaggle's image has and this machine lacks is "Not Rehearsed" naming it and the
fix (also when only an ImportError's own words name it, as tqdm's "IProgress not found ... ipywidgets" does); an
attribute the run missed in a skewed package is Kaggle's failure where the image's version lacks it too (asked in a
``kkb env`` environment of the image's version, in a sandbox), "Not Rehearsed" where it has it or nobody can tell."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from builder.rehearse.verdict import CSV_NOT_FOUND, NOT_REHEARSED, Limits, judge
from builder.run.env_check import PTH_FILE, site_packages
from builder.run.execute import ExecutionResult
from builder.run.image_env import STAMP
from builder.run.skew import Skew
from tests.support.cli import kkb, said
from tests.support.files import KERNELS

OPENCV = Skew("kkbfakecv", "5.1.0", "4.13.0", ("kkbfakecv",))
STEP = "step 'predict' failed with exit code 1\n--- stderr (last 6 lines) ---\nTraceback (most recent call last):\n"
FRAME = '  File "/kaggle/input/datasets/me/code/predict.py", line 9, in <module>\n    {line}\n'


def _judged(tmp_path: Path, evalue: str, skews: tuple[Skew, ...] = ()) -> tuple[str, str]:
    (tmp_path / "working").mkdir(parents=True, exist_ok=True)
    result = ExecutionResult(root=tmp_path, working_dir=tmp_path / "working", executed_notebook=tmp_path / "nb.ipynb",
                             ok=False, timed_out=False, failed_cell=5, ename="StepFailed", evalue=evalue,
                             traceback_tail=None, wall_seconds=1.0, peak_rss_bytes=0, peak_gpu_bytes=None, log=[], steps=[],
                             version_skew=skews)
    verdict = judge(result, kernel_type="notebook", submission_file="submission.csv", sample_submission=tmp_path / "s.csv",
                    id_column="id", target_columns=["target"], limits=Limits())
    return str(verdict.name), verdict.reason


def test_an_import_error_naming_a_package_of_the_image_missing_here_is_not_rehearsed(tmp_path: Path) -> None:
    pytest.importorskip("jupyter_core")  # the message names jupyter too, which is installed: not the one missing
    if __import__("importlib").util.find_spec("ipywidgets") is not None:
        pytest.skip("ipywidgets is installed here")
    evalue = (STEP + FRAME.format(line="for row in tqdm(rows):") + "ImportError: IProgress not found. Please update jupyter "
              "and ipywidgets. See https://ipywidgets.readthedocs.io/en/stable/user_install.html")
    name, reason = _judged(tmp_path, evalue)
    assert name == NOT_REHEARSED
    assert reason.startswith("not rehearsed: Kaggle's image has ipywidgets ")
    assert reason.endswith("step 'predict' needs it (IProgress not found. Please update jupyter and ipywidgets. See "
                           "https://ipywidgets.readthedocs.io/en/stable/user_install.html), and it is not installed here; "
                           "install it here to rehearse (pip install ipywidgets==8.1.5, the image's version; or kkb env, "
                           "then kkb dry-run --image-env)")


def _image_environment(cache: Path, attributes: str) -> Path:
    """A kkb env environment pinning kkbfakecv 4.13.0 (the image's version), whose module defines ``attributes``."""
    root = cache / "fakecv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, capture_output=True)
    site = site_packages(root)
    site.mkdir(parents=True, exist_ok=True)
    (site / PTH_FILE).write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    files = {"kkbfakecv/__init__.py": attributes.encode(),
             "kkbfakecv-4.13.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: kkbfakecv\nVersion: 4.13.0\n"}
    record = []
    for relative, data in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{relative},sha256={digest},{len(data)}")
    (site / "kkbfakecv-4.13.0.dist-info" / "RECORD").write_text("\n".join([*record, "kkbfakecv-4.13.0.dist-info/RECORD,,"]) + "\n")
    (root / STAMP).write_text(json.dumps({"pins": ["kkbfakecv==4.13.0"]}))
    return root


def test_an_attribute_the_image_version_lacks_too_is_kaggles_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "envs"
    monkeypatch.setenv("KKB_IMAGE_ENV_CACHE", str(cache))
    missing = STEP + FRAME.format(line="mask = cv2.{name}") + "AttributeError: module 'kkbfakecv' has no attribute '{name}'"
    no_evidence = _judged(tmp_path, missing.format(name="COLOR_GONE"), (OPENCV,))
    assert no_evidence[0] == NOT_REHEARSED and no_evidence[1].endswith("(kkb env, then kkb dry-run --image-env)")
    root = _image_environment(cache, "COLOR_KEPT = 1\n")
    name, reason = _judged(tmp_path / "lacks", missing.format(name="COLOR_GONE"), (OPENCV,))
    assert name == CSV_NOT_FOUND
    assert reason.endswith("; version skew beside it: kkbfakecv 5.1.0 here, 4.13.0 on Kaggle's image, but the image's "
                           "version lacks it too (module 'kkbfakecv' has no attribute 'COLOR_GONE'; asked in kkb env's "
                           f"{root}): Kaggle fails the same"), reason
    name, reason = _judged(tmp_path / "has", missing.format(name="COLOR_KEPT"), (OPENCV,))
    assert name == NOT_REHEARSED
    assert (f"failed on an API of kkbfakecv (module 'kkbfakecv' has no attribute 'COLOR_KEPT'; the image's version has it "
            f"(asked in kkb env's {root})), which is 5.1.0 here and 4.13.0 on Kaggle's image") in reason


@pytest.mark.slow
@pytest.mark.loopback
def test_a_step_needing_a_package_of_the_image_missing_here_is_not_rehearsed_in_a_dry_run(tmp_path: Path) -> None:
    pytest.importorskip("tqdm")
    if __import__("importlib").util.find_spec("ipywidgets") is not None:
        pytest.skip("ipywidgets is installed here")
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb", "build")))
    script = (kernel / "predict.py").read_text()
    (kernel / "predict.py").write_text(script.replace("    out = pd.DataFrame(", "    from tqdm.notebook import tqdm\n"
                                                      "    list(tqdm(range(2)))\n    out = pd.DataFrame(", 1))
    run = kkb("dry-run", ".", "--scenario", "rerun", "--json", cwd=kernel)
    assert run.returncode == 5, said(run)
    verdict = json.loads(run.stdout)["scenarios"][0]["verdict"]
    assert verdict["name"] == NOT_REHEARSED
    assert verdict["reason"].startswith("not rehearsed: Kaggle's image has ipywidgets 8.1.5"), verdict
