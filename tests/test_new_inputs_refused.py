"""The bad inputs an audit tried on the newer surfaces (the Python API, tolerances, ``--show-inputs``, stand-ins, the
sandbox's own settings), each refused naming the option or setting and the fix; a progress callback that raises passes
its error through and leaves no sandbox; ``column_types = { target = "int" }`` is kkb's word on the column again."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import psutil
import pytest

import kkb
from builder import cli
from builder.kkb_runtime.submission import check_submission
from builder.kkb_runtime.vocabulary import Scenario
from tests.support.cli import kkb as kkb_command
from tests.support.cli import said
from tests.support.files import KERNELS


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    return Path(shutil.copytree(KERNELS / "minimal", tmp_path / "my kernel", ignore=shutil.ignore_patterns(".kkb", "build")))


API: list[tuple[str, Callable[[], Any], str, str]] = [
    ("kernel_dir None", lambda: kkb.DryRunSettings(kernel_dir=None),  # type: ignore[arg-type]
     "DryRunSettings.kernel_dir: None is not a path (a pathlib.Path or a str)",
     "set kernel_dir to a path (a pathlib.Path or a str)"),
    ("rerun_scale text", lambda: kkb.DryRunSettings(kernel_dir=Path("k"), rerun_scale="2"),  # type: ignore[arg-type]
     "DryRunSettings.rerun_scale: '2' (a str) is not a whole number (an int)", "set rerun_scale to a whole number (an int)"),
    ("memory text", lambda: kkb.DryRunSettings(kernel_dir=Path("k"), memory_bytes="800M"),  # type: ignore[arg-type]
     "DryRunSettings.memory_bytes: '800M' (a str) is not a whole number (an int) or None",
     "set memory_bytes to a whole number (an int) or None"),
    ("progress not a function", lambda: kkb.DryRunSettings(kernel_dir=Path("k"), progress=3),  # type: ignore[arg-type]
     "DryRunSettings.progress: 3 (an int) is not a function or None", "set progress to a function or None"),
    ("env values", lambda: kkb.DryRunSettings(kernel_dir=Path("k"), env={"SEED": 1}),  # type: ignore[dict-item]
     "DryRunSettings.env: {'SEED': 1} (a dict) is not a mapping of a string (a str) to a string (a str)",
     "set env to a mapping of a string (a str) to a string (a str)"),
    ("scenario", lambda: kkb.DryRunSettings(kernel_dir=Path("k"), scenario=["rerun"]),  # type: ignore[arg-type]
     "DryRunSettings.scenario: ['rerun'] (a list) is not one of 'commit', 'rerun', 'both'",
     "set scenario to one of 'commit', 'rerun', 'both'"),
    ("show_inputs below 0", lambda: kkb.DryRunSettings(kernel_dir=Path("k"), show_inputs=-1),
     "--show-inputs must be at least 0 (the test rows to show), got -1",
     "--show-inputs N shows the first N rows (--show-inputs alone: 3); 0 shows none"),
    ("call_seconds text", lambda: kkb.BuildSettings(kernel_dir=Path("k"), call_seconds="fast"),  # type: ignore[arg-type]
     "BuildSettings.call_seconds: 'fast' (a str) is not a number or None", "set call_seconds to a number or None"),
    ("no settings", lambda: kkb.dry_run(None),  # type: ignore[arg-type]
     "expected a DryRunSettings, got None", "pass kkb.DryRunSettings(kernel_dir=...) (the settings object of this call)"),
    ("build settings for a dry run", lambda: kkb.dry_run(kkb.BuildSettings(kernel_dir=Path("k"))),  # type: ignore[arg-type]
     "expected a DryRunSettings, got a BuildSettings",
     "pass kkb.DryRunSettings(kernel_dir=...) (the settings object of this call)"),
]


@pytest.mark.parametrize(("made", "message", "hint"), [case[1:] for case in API], ids=[case[0] for case in API])
def test_the_apis_settings_of_the_wrong_type_are_refused_naming_them(made: Callable[[], Any], message: str,
                                                                     hint: str) -> None:
    with pytest.raises(kkb.KkbError) as caught:
        made()
    assert (caught.value.message, caught.value.hint) == (message, hint)


TOLERANCE_HINT = "or leave it out for what rounding to [submission] decimals explains"
CLI = [
    ("compare nan", ["compare", "left.csv", "right.csv", "--tolerance", "nan"],
     "error: --tolerance nan: the largest difference allowed per value must be a number of at least 0",
     f"hint: give --tolerance a number such as 1e-4, {TOLERANCE_HINT}"),
    ("compare negative", ["compare", "left.csv", "right.csv", "--tolerance=-1"],
     "error: --tolerance -1.0: the largest difference allowed per value must be a number of at least 0",
     f"hint: give --tolerance a number such as 1e-4, {TOLERANCE_HINT}"),
    ("show-inputs below 0", ["dry-run", ".", "--show-inputs", "-1"],
     "error: --show-inputs must be at least 0 (the test rows to show), got -1",
     "hint: --show-inputs N shows the first N rows (--show-inputs alone: 3); 0 shows none"),
    ("reference tolerance nan", ["dry-run", ".", "--reference", "left.csv", "--reference-tolerance", "nan"],
     "error: --reference-tolerance nan: the largest difference allowed per value must be a number of at least 0",
     f"hint: give --reference-tolerance a number such as 1e-4, {TOLERANCE_HINT}"),
    ("rerun-scale past the rows kkb replicates", ["dry-run", ".", "--rerun-scale", "1000000000"],
     "error: --rerun-scale 1000000000: 5 test rows x 1000000000 = 5000000000 rows, more than kkb replicates (20000000)",
     "hint: --rerun-scale 40 reaches [competition] hidden_rows (200)"),
]


@pytest.mark.parametrize(("argv", "error", "hint"), [case[1:] for case in CLI], ids=[case[0] for case in CLI])
def test_the_new_options_bad_values_are_refused_with_exit_1(kernel: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str], argv: list[str],
                                                            error: str, hint: str) -> None:
    pd.DataFrame({"id": ["a", "b"], "target": [1.0, 2.0]}).to_csv(kernel / "left.csv", index=False)
    pd.DataFrame({"id": ["a", "b"], "target": [1.0, 3.0]}).to_csv(kernel / "right.csv", index=False)
    monkeypatch.chdir(kernel)
    assert cli.main(argv) == 1
    said_there = [line for line in capsys.readouterr().err.splitlines() if line.startswith(("error:", "hint:"))]
    assert " ".join(said_there) == f"{error} {hint}"


def test_a_task_limit_that_is_no_positive_number_is_refused(kernel: Path) -> None:
    ran = kkb_command("dry-run", ".", "--scenario", "commit", cwd=kernel, env={"KKB_SANDBOX_PROCESSES": "0"})
    assert ran.returncode == 1, said(ran)
    assert ("error: KKB_SANDBOX_PROCESSES='0' is not a positive number of tasks\nhint: give the most processes and "
            "threads a sandboxed run may have (default 8192)\n") in ran.stderr, said(ran)


@pytest.mark.loopback
def test_a_progress_callback_that_raises_passes_its_error_through_and_leaves_no_sandbox(kernel: Path) -> None:
    class Refused(Exception):
        pass

    def progress(line: str) -> None:
        if "step linear started" in line:  # inside the run: the kernel and its steps are going
            raise Refused(line)

    temp = Path(os.environ["TMPDIR"])
    with pytest.raises(Refused, match="step linear started"):
        kkb.dry_run(kkb.DryRunSettings(kernel_dir=kernel, scenario=Scenario.RERUN, progress=progress))
    assert not [path.name for path in temp.iterdir() if path.name.startswith("kkb-")]  # no sandbox left behind
    mine = psutil.Process().children(recursive=True)
    assert not [child for child in mine if child.is_running() and child.status() != psutil.STATUS_ZOMBIE]


def test_column_types_int_wins_over_the_metrics_guess() -> None:
    """A regression metric scores floats, but kernel.toml declared the column "int": fractions are refused again."""
    sample = pd.DataFrame({"id": ["a", "b"], "target": [0.0, 0.0]})
    frame = pd.DataFrame({"id": ["a", "b"], "target": [0.25, 1.0]})
    assert check_submission(frame, sample, "id", float_targets=True) == []
    (problem,) = check_submission(frame, sample, "id", column_types={"target": "int"}, float_targets=True)
    assert problem == ("float values in column 'target', where the sample submission holds integers: 2 rows (e.g. 0.25); "
                       "write integers (post-process with argmax or threshold)")


@pytest.mark.loopback
@pytest.mark.slow
def test_a_column_declared_int_is_refused_by_the_notebooks_check(kernel: Path) -> None:
    spec = kernel / "kernel.toml"
    spec.write_text(spec.read_text().replace("decimals = 4", 'decimals = 4\ncolumn_types = { target = "int" }'))
    ran = kkb_command("dry-run", ".", "--scenario", "rerun", "--json", cwd=kernel)
    assert ran.returncode == 2, said(ran)
    (rerun,) = json.loads(ran.stdout)["scenarios"]
    assert rerun["verdict"]["name"] == "Submission CSV Not Found"
    assert "float values in column 'target', where the sample submission holds integers" in rerun["verdict"]["reason"]
