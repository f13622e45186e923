"""Version skew blamed only where it explains the failure: "Not Rehearsed" exactly when it applies.

A failure is the skew's when the run failed inside the skewed package with an error that not every version raises,
or when the kernel's own frame failed on the package's API (a module's attribute or name gone, a changed call).
A shape, dtype, missing-file, memory or blocked-network error is the kernel's on Kaggle whatever the versions: Kaggle's
verdict, with the skew named beside it. The two held-out cases run for real in the sandbox: a ``timm`` pretrained
download through a skewed huggingface-hub (internet off: "Submission CSV Not Found"), and ``PIL.ImageMath.eval``, which
the local Pillow no longer has ("Not Rehearsed", both versions named).
"""

from __future__ import annotations

import json
import shutil
from importlib import metadata
from pathlib import Path

import pytest
from packaging.version import Version

from builder.kkb_runtime.vocabulary import Scenario
from builder.rehearse.dryrun import DryRunSettings, dry_run
from builder.rehearse.verdict import CSV_NOT_FOUND, NOT_REHEARSED, Limits, judge
from builder.run.execute import ExecutionResult
from builder.run.skew import Skew
from tests.support.files import KERNELS

CAPTURED = "2026-06-17"
TRANSFORMERS = Skew("transformers", "4.57.1", "5.0.0", ("transformers",))
HUB = Skew("huggingface-hub", "0.36.2", "1.10.1", ("huggingface_hub",))
PILLOW = Skew("pillow", "13.0.0", "11.3.0", ("PIL",))
TIMM = Skew("timm", "0.9.16", "1.0.26", ("timm",))
PANDAS = Skew("pandas", "3.1.1", "2.3.3", ("pandas",))
SITE = "/venv/lib/python3.12/site-packages"


def _frames(*frames: tuple[str, str]) -> str:
    return "Traceback (most recent call last):\n" + "".join(f'  File "{path}", line 7, in f\n    {line}\n' for path, line in frames)


def _step(text: str) -> str:
    return f"step 'predict' failed with exit code 1\n--- stderr (last 12 lines) ---\n{text}\n"


# The max_len case of the audit: position embeddings indexed past their end, through a skewed transformers.
SHAPE = _step(_frames(("/kaggle/input/datasets/me/code/predict.py", "logits = model(**batch).logits"),
                      (f"{SITE}/transformers/models/bert/modeling_bert.py", "position_embeddings = self.position_embeddings(position_ids)"),
                      (f"{SITE}/torch/nn/functional.py", "return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)"))
              + "IndexError: index out of range in self")
DTYPE = _step(_frames(("/kaggle/input/datasets/me/code/predict.py", "out = model(x)"),
                      (f"{SITE}/transformers/modeling_utils.py", "return self.classifier(hidden)"))
              + "RuntimeError: expected scalar type Float but found Double")
NETWORK = _step(_frames(("/kaggle/input/datasets/me/code/predict.py", "model = timm.create_model('resnet18', pretrained=True)"),
                        (f"{SITE}/timm/models/_hub.py", "cached_file = hf_hub_download(repo_id=hf_model_id, filename=filename)"),
                        (f"{SITE}/huggingface_hub/file_download.py", "raise LocalEntryNotFoundError("))
                + "huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying to locate the file on the "
                  "Hub and we cannot find the requested files in the local cache.")
MISSING = _step(_frames(("/kaggle/input/datasets/me/code/predict.py", "tok = AutoTokenizer.from_pretrained(path)"),
                        (f"{SITE}/transformers/tokenization_utils_base.py", "resolved = cached_file(path, name)"))
                + "OSError: /kaggle/input/datasets/me/weights/tok does not appear to have a file named tokenizer.json")
IMAGEMATH = _step(_frames(("/kaggle/input/datasets/me/code/predict.py", 'mask = ImageMath.eval("a > 128", a=image)'))
                  + "AttributeError: module 'PIL.ImageMath' has no attribute 'eval'")
IMPORT = _step(_frames(("/kaggle/input/datasets/me/code/predict.py", "from huggingface_hub import cached_download"))
               + "ImportError: cannot import name 'cached_download' from 'huggingface_hub' "
                 f"({SITE}/huggingface_hub/__init__.py)")
SIGNATURE = _step(_frames(("/kaggle/input/datasets/me/code/predict.py", "net = timm.create_model(arch, pretrained_cfg_overlay=cfg)"))
                  + "TypeError: create_model() got an unexpected keyword argument 'pretrained_cfg_overlay'")
INSIDE = _step(_frames(("/kaggle/input/datasets/me/code/predict.py", "df.loc['missing']"),
                       (f"{SITE}/pandas/core/indexing.py", "return self._getitem_axis(maybe_callable, axis=axis)"))
               + "KeyError: 'missing'")
ELSEWHERE = _step(_frames(("/kaggle/input/datasets/me/code/predict.py", "mask = ImageMath.eval('a', a=image)"))
                  + "AttributeError: module 'PIL.ImageMath' has no attribute 'eval'")

NOT_REHEARSED_TAIL = "rehearse it with the image's versions (kkb env, then kkb dry-run --image-env)"


@pytest.fixture(autouse=True)
def image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "image.json"
    path.write_text(json.dumps({"python": "3.12", "captured": CAPTURED, "packages": {}}))
    monkeypatch.setenv("KKB_KAGGLE_IMAGE", str(path))


def _result(tmp_path: Path, evalue: str, skews: tuple[Skew, ...]) -> ExecutionResult:
    (tmp_path / "working").mkdir(exist_ok=True)
    return ExecutionResult(root=tmp_path, working_dir=tmp_path / "working", executed_notebook=tmp_path / "nb.ipynb",
                           ok=False, timed_out=False, failed_cell=5, ename="StepFailed", evalue=evalue, traceback_tail=None,
                           wall_seconds=1.0, peak_rss_bytes=0, peak_gpu_bytes=None, log=[], steps=[], version_skew=skews)


def _judged(tmp_path: Path, evalue: str, skews: tuple[Skew, ...], kernel_type: str = "notebook") -> tuple[str, str]:
    verdict = judge(_result(tmp_path, evalue, skews), kernel_type=kernel_type, submission_file="submission.csv",
                    sample_submission=tmp_path / "sample.csv", id_column="id", target_columns=["target"], limits=Limits())
    return str(verdict.name), verdict.reason


STOPPED = "the notebook stopped before writing submission.csv: StepFailed in cell 5 (step 'predict'): step 'predict' failed with exit code 1"


@pytest.mark.parametrize(("evalue", "skews", "verdict", "reason"), [
    # The kernel's own errors: Kaggle's verdict, the skew beside it.
    (SHAPE, (TRANSFORMERS,), CSV_NOT_FOUND,
     f"{STOPPED}; version skew beside it: transformers 4.57.1 here, 5.0.0 on Kaggle's image, but a shape mismatch fails "
     "the same with any version"),
    (DTYPE, (TRANSFORMERS,), CSV_NOT_FOUND,
     f"{STOPPED}; version skew beside it: transformers 4.57.1 here, 5.0.0 on Kaggle's image, but a dtype mismatch fails "
     "the same with any version"),
    (NETWORK, (HUB, TIMM), CSV_NOT_FOUND,
     f"{STOPPED}; version skew beside it: huggingface-hub 0.36.2 here, 1.10.1 on Kaggle's image, but a blocked network "
     "access fails the same with any version"),
    (MISSING, (TRANSFORMERS,), CSV_NOT_FOUND,
     f"{STOPPED}; version skew beside it: transformers 4.57.1 here, 5.0.0 on Kaggle's image, but a missing file fails "
     "the same with any version"),
    # The skew's: the kernel's frame failed on the package's API, or an error inside it no version spares.
    (IMAGEMATH, (PILLOW,), NOT_REHEARSED,
     "not rehearsed: step 'predict' failed on an API of pillow (module 'PIL.ImageMath' has no attribute 'eval'), which "
     f"is 13.0.0 here and 11.3.0 on Kaggle's image ({CAPTURED}); {NOT_REHEARSED_TAIL}"),
    (IMPORT, (HUB,), NOT_REHEARSED,
     "not rehearsed: step 'predict' failed on an API of huggingface-hub (cannot import name 'cached_download' from "
     f"'huggingface_hub'), which is 0.36.2 here and 1.10.1 on Kaggle's image ({CAPTURED}); {NOT_REHEARSED_TAIL}"),
    (SIGNATURE, (TIMM,), NOT_REHEARSED,
     "not rehearsed: step 'predict' failed on an API of timm (create_model() got an unexpected keyword argument "
     "'pretrained_cfg_overlay' in `net = timm.create_model(arch, pretrained_cfg_overlay=cfg)`), which is 0.9.16 here and "
     f"1.0.26 on Kaggle's image ({CAPTURED}); {NOT_REHEARSED_TAIL}"),
    (INSIDE, (PANDAS,), NOT_REHEARSED,
     f"not rehearsed: step 'predict' failed inside pandas, which is 3.1.1 here and 2.3.3 on Kaggle's image ({CAPTURED}); "
     f"{NOT_REHEARSED_TAIL}"),
    # A skew the failure does not touch is not listed, and blames nothing.
    (ELSEWHERE, (PANDAS,), CSV_NOT_FOUND, STOPPED),
    (SHAPE, (), CSV_NOT_FOUND, STOPPED),
], ids=["shape", "dtype", "network", "missing-file", "removed-attribute", "removed-name", "changed-signature",
        "inside-the-package", "unrelated-skew", "no-skew"])
def test_skew_is_blamed_exactly_when_it_explains_the_failure(tmp_path: Path, evalue: str, skews: tuple[Skew, ...],
                                                             verdict: str, reason: str) -> None:
    assert _judged(tmp_path, evalue, skews) == (verdict, reason)


def test_a_script_kernels_exception_lists_the_skew_beside_kaggles_verdict(tmp_path: Path) -> None:
    name, reason = _judged(tmp_path, SHAPE, (TRANSFORMERS,), kernel_type="script")
    assert name == "Notebook Threw Exception"
    assert reason.endswith("; version skew beside it: transformers 4.57.1 here, 5.0.0 on Kaggle's image, but a shape "
                           "mismatch fails the same with any version")


# --- the two held-out cases, run in the sandbox ------------------------------------------------------------------


def _major_ahead(distribution: str) -> str:
    return f"{Version(metadata.version(distribution)).major + 1}.0.0"


def _kernel_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_lines: str, skewed: str) -> Path:
    """The minimal kernel whose step runs ``first_lines`` first; the image has ``skewed`` one major ahead of here."""
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "minimal", ignore=shutil.ignore_patterns(".kkb")))
    predict = kernel / "predict.py"
    predict.write_text(predict.read_text().replace("def main() -> None:\n", f"def main() -> None:\n{first_lines}"))
    image = tmp_path / "skewed-image.json"
    image.write_text(json.dumps({"python": "3.12", "captured": CAPTURED, "packages": {skewed: _major_ahead(skewed)}}))
    monkeypatch.setenv("KKB_KAGGLE_IMAGE", str(image))
    return kernel


def _rerun(kernel: Path) -> tuple[str, str, list[str]]:
    report = dry_run(DryRunSettings(kernel_dir=kernel, out_dir=kernel.parent / "build", scenario=Scenario.RERUN, fit=False))
    scenario = report.scenarios[0]
    return str(scenario.verdict.name), scenario.verdict.reason, list(scenario.warnings)


@pytest.mark.slow
@pytest.mark.loopback
def test_a_pretrained_download_through_a_skewed_hub_is_kaggles_csv_not_found(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("timm")
    # huggingface-hub retries each failed request 5 times with waits of up to 8 s; the step skips the waits only
    # (the requests, their failures and the final error are the same).
    kernel = _kernel_with(tmp_path, monkeypatch, "    import time\n    time.sleep = lambda seconds: None\n"
                          "    import timm\n    timm.create_model('resnet18', pretrained=True)\n", "huggingface-hub")
    verdict, reason, warnings = _rerun(kernel)
    assert verdict == CSV_NOT_FOUND
    assert reason.startswith("the notebook stopped before writing submission.csv: ")
    hub = f"huggingface-hub {metadata.version('huggingface-hub')} here, {_major_ahead('huggingface-hub')} on Kaggle's image"
    assert f"version skew beside it: {hub}, but a blocked network access fails the same with any version" in reason
    # the summary's skew line names the packages the kernel's own code imports (timm); the hub is in the reason
    assert not any(hub in warning for warning in warnings)


@pytest.mark.slow
@pytest.mark.loopback
def test_an_api_the_local_pillow_lacks_is_not_rehearsed_naming_both_versions(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from PIL import ImageMath
    if hasattr(ImageMath, "eval"):
        pytest.skip("this Pillow still has ImageMath.eval")
    kernel = _kernel_with(tmp_path, monkeypatch, "    from PIL import Image, ImageMath\n"
                          "    ImageMath.eval('a + 1', a=Image.new('L', (2, 2)))\n", "pillow")
    verdict, reason, _ = _rerun(kernel)
    assert verdict == NOT_REHEARSED
    assert reason == ("not rehearsed: step 'linear' failed on an API of pillow (module 'PIL.ImageMath' has no attribute "
                      f"'eval'), which is {metadata.version('pillow')} here and {_major_ahead('pillow')} on Kaggle's image "
                      f"({CAPTURED}); {NOT_REHEARSED_TAIL}")
