"""Script kernels (``[kernel] type = "script"``): the same cells as one script, run as Kaggle runs a script kernel.

As people call kkb: the CLI from inside the kernel folder (a path with a space), ``kkb build .`` and ``kkb dry-run .``
in a subprocess; the verdicts of three failing cases in both forms; ``kkb submit`` scored by the local Kaggle.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.cli import main
from builder.errors import EXIT_OK, SpecError
from builder.kkb_runtime.vocabulary import KernelForm, Scenario
from builder.local_kaggle import LocalKaggle
from builder.project.spec import load_spec
from builder.project.spec_renames import SpecDeprecation
from builder.rehearse.dryrun import DryRunSettings, dry_run
from builder.rehearse.verdict import CSV_NOT_FOUND, SCORING_ERROR, THREW, TIMEOUT
from builder.run.script_run import KAGGLE_SCRIPT, script_exception
from tests.support.demo_kaggle import serve_local_kaggle
from tests.support.files import KERNELS, REPO
from tests.support.golden import normalize_provenance

GOLDEN = Path(__file__).parent / "golden" / "minimal.script.py"
FIXTURES = REPO / "tests" / "kernels"
PUBLIC = FIXTURES / "competition" / "public"


def as_script(kernel: Path) -> Path:
    """``kernel`` with ``[kernel] type = "script"`` (its other keys as written)."""
    spec = kernel / "kernel.toml"
    text = spec.read_text()
    assert "\ntype = " not in text
    spec.write_text(text.replace("[kernel]\n", '[kernel]\ntype = "script"\n', 1))
    return kernel


def kkb(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The kkb command in a subprocess, run from ``cwd`` (as a person types it)."""
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)


@pytest.fixture(scope="module")
def script_kernel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kernels/minimal as a script kernel, in a folder whose path has a space."""
    root = tmp_path_factory.mktemp("script kernels")
    return as_script(Path(shutil.copytree(KERNELS / "minimal", root / "my minimal", ignore=shutil.ignore_patterns(".kkb"))))


def test_build_renders_one_script_of_the_notebook_s_cells(script_kernel: Path, update_golden: bool) -> None:
    done = kkb(script_kernel, "build", ".")
    assert done.returncode == 0, done.stderr
    kernel = script_kernel / "build" / "my minimal" / "kernel"
    metadata = json.loads((kernel / "kernel-metadata.json").read_text())
    assert (metadata["kernel_type"], metadata["code_file"]) == ("script", "kkb-minimal-inference.py")
    assert sorted(p.name for p in kernel.iterdir()) == ["kernel-metadata.json", "kkb-minimal-inference.py"]
    script = (kernel / "kkb-minimal-inference.py").read_text()
    compile(script, "script.py", "exec")
    # the notebook's cells, in the notebook's order, from the same templates
    notebook = json.loads((REPO / "tests" / "golden" / "minimal.ipynb").read_text())
    assert [line[5:] for line in script.splitlines() if line.startswith("# %% ")] == [c["id"] for c in notebook["cells"]]
    for cell in notebook["cells"][1:]:
        assert "".join(cell["source"]) in script
    rendered = normalize_provenance(script.replace(str(script_kernel.name), "minimal"))
    if update_golden:
        GOLDEN.write_text(rendered)
    assert rendered == GOLDEN.read_text(), "rendered script changed: check it, then run pytest --update-golden"


@pytest.mark.slow
@pytest.mark.loopback
def test_dry_run_runs_the_script_as_kaggle_does_and_both_scenarios_pass(script_kernel: Path) -> None:
    done = kkb(script_kernel, "dry-run", ".", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["kernel_type"] == "script"
    assert [(s["scenario"], s["verdict"]["name"]) for s in report["scenarios"]] == [("commit", "OK"), ("rerun", "OK")]
    out = script_kernel / "build" / "my minimal" / "dryrun"
    assert (out / "commit.py").is_file() and (out / "rerun.py").is_file()  # the script as it ran
    rerun = json.loads((out / "rerun.log.json").read_text())
    assert any("[kkb] step linear" in entry["data"] for entry in rerun)
    assert [s["name"] for s in report["scenarios"][1]["steps"]] == ["linear", "ridge"]


SLEEPS = '\n[[steps]]\nname = "slow"\nrun = "python -c \\"import time; time.sleep(60)\\""\n'
# (case, fixture, what to change, the notebook's verdict, the script's verdict, what both reasons say, the forms run
# here: the notebook's verdict of wrong-column is tests/test_dryrun.py's, a notebook killed at its timeout test_execute's)
FAILING = [
    # Kaggle: "Notebook Threw Exception ... is currently only possible with scripts (not notebooks)": a notebook that
    # raised is judged by the file it left (none here).
    pytest.param("script-raises", "", CSV_NOT_FOUND, THREW, "StepFailed in {where} (step 'predict'): step 'predict' failed",
                 ("notebook", "script"), id="exception"),
    # The step wrote submission.csv with the wrong columns, then kkb's check stopped the run: the notebook is judged by
    # that file, the script by its exception.
    pytest.param("wrong-column", "", SCORING_ERROR, THREW, None, ("script",), id="wrong-columns"),
    pytest.param("slow-rerun", SLEEPS, TIMEOUT, TIMEOUT, "killed after ", ("script",), id="timeout"),
]


@pytest.mark.slow
@pytest.mark.loopback
@pytest.mark.parametrize(("fixture", "extra", "notebook_verdict", "script_verdict", "reason", "forms"), FAILING)
def test_failing_kernels_get_kaggle_s_verdict_for_each_form(tmp_path: Path, fixture: str, extra: str, notebook_verdict: str,
                                                            script_verdict: str, reason: str | None,
                                                            forms: tuple[str, ...]) -> None:
    verdicts = {}
    for form in forms:
        kernel = Path(shutil.copytree(FIXTURES / fixture, tmp_path / form))
        (kernel / "kernel.toml").write_text((kernel / "kernel.toml").read_text().replace('type = "script"\n', "") + extra)
        if form == "script":
            as_script(kernel)
        report = dry_run(DryRunSettings(kernel_dir=kernel, data_dir=PUBLIC, scenario=Scenario.RERUN, out_dir=tmp_path / "build" / form,
                                        timeout_seconds=3 if extra else None))
        (result,) = report.scenarios
        verdicts[form] = result.verdict
        if reason is not None:
            where = "the script" if form == "script" else "cell 5"
            assert reason.format(where=where) in result.verdict.reason, result.verdict
    expected = {"notebook": notebook_verdict, "script": script_verdict}
    assert {form: verdict.name for form, verdict in verdicts.items()} == {form: expected[form] for form in forms}


@pytest.fixture
def sandbox_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalKaggle]:
    yield from serve_local_kaggle(tmp_path, monkeypatch, None)


@pytest.mark.slow
@pytest.mark.loopback
def test_submit_scores_a_script_kernel_on_the_local_kaggle(sandbox_server: LocalKaggle, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    kernel = as_script(Path(shutil.copytree(KERNELS / "minimal", tmp_path / "my minimal", ignore=shutil.ignore_patterns(".kkb"))))
    monkeypatch.chdir(kernel)
    assert main(["submit", ".", "--json", "--wait-run", "120", "--wait-score", "120"]) == EXIT_OK
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "complete" and float(result["public_score"]) >= 0
    pushed = next((tmp_path / "kaggle").glob("kernels/*/*/versions/1/version.json"))
    assert json.loads(pushed.read_text())["kernelType"] == "script"


def test_the_script_s_exception_is_read_from_its_own_traceback() -> None:
    step = ('Traceback (most recent call last):\n  File "/kaggle/working/predict.py", line 3, in <module>\n'
            "ValueError: could not convert string to float: 'n/a'\n")
    stderr = (f"{step}[kkb] step 'predict' peak memory: 1 bytes\nTraceback (most recent call last):\n"
              f'  File "{KAGGLE_SCRIPT}", line 9, in <module>\n    run.run_steps()\n'
              f"kkb_runtime.steps.StepFailed: step 'predict' failed with exit code 1:\n{step}")
    name, message, traceback = script_exception(stderr, KAGGLE_SCRIPT)  # type: ignore[misc]
    assert name == "StepFailed"  # the class, as a notebook's error names it; not the step's ValueError it quotes
    assert message == f"step 'predict' failed with exit code 1:\n{step.rstrip()}"
    assert traceback.startswith("Traceback (most recent call last):\n  File \"/kaggle/src/script.py\"")
    assert script_exception(step, KAGGLE_SCRIPT) is None  # the script itself raised nothing
    assert script_exception(f'Traceback (most recent call last):\n  File "{KAGGLE_SCRIPT}", line 1\nKeyboardInterrupt\n',
                            KAGGLE_SCRIPT)[:2] == ("KeyboardInterrupt", "")  # type: ignore[index]


def test_kernel_type_is_read_as_type_with_a_warning_and_a_wrong_form_is_refused(tmp_path: Path) -> None:
    kernel = Path(shutil.copytree(KERNELS / "minimal", tmp_path / "k", ignore=shutil.ignore_patterns(".kkb")))
    spec = kernel / "kernel.toml"
    written = spec.read_text()
    spec.write_text(written.replace("[kernel]\n", '[kernel]\nkernel_type = "script"\n', 1))
    with pytest.warns(SpecDeprecation) as caught:
        assert load_spec(kernel).kernel.type is KernelForm.SCRIPT
    assert [str(w.message) for w in caught] == [
        "kernel.toml: [kernel] kernel_type is deprecated: write type = 'script' (the same value)"]
    spec.write_text(written.replace("[kernel]\n", '[kernel]\ntype = "scripts"\n', 1))
    with pytest.raises(SpecError) as refused:
        load_spec(kernel)
    assert refused.value.message.startswith(f"{spec}: kernel.type: ")
    assert "'notebook' or 'script'" in refused.value.message
