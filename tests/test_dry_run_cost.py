"""What a dry run leaves out of its own time: work whose answer it already has, and imports it does not need yet.

The numbers are ``make bench``'s (``bench/dryrun.py``); these tests pin the behaviour behind them: kkb's CLI and the
kernel's runtime start without pandas, an unchanged rebuild does not check the public data again, the card steps
time a probe only where the rerun is projected, and the header check reads what pandas would read.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from builder.build import BuildSettings, build_kernel
from builder.kkb_runtime import SampleRead, preload
from builder.kkb_runtime.submission import sample_columns
from builder.kkb_runtime.timing import HIDDEN_ROWS_VARIABLE, PROBE_VARIABLE, BatchTiming, FoldTimer, StepTimer
from builder.kkb_runtime.vocabulary import Isolation, Scenario
from builder.project.layout import ON_KAGGLE_DIR, PREFLIGHT_RECORD, REPORT_FILE
from builder.project.spec import KernelSpec
from builder.rehearse import scenarios
from builder.rehearse.dryrun_settings import DryRunSettings, ScenarioRun
from builder.rehearse.metric_run import check_before_rerun
from builder.run import isolation
from tests.support.files import KERNELS, REPO

IMPORTED = "import sys, {module}; print(sorted(m for m in ('pandas', 'numpy', 'torch') if m in sys.modules))"


@pytest.mark.parametrize(("module", "where"), [("builder.cli", REPO), ("kkb_runtime", REPO / "builder")],
                         ids=["kkb's CLI", "the kernel's runtime"])
def test_starts_without_pandas(module: str, where: Path) -> None:
    """The CLI's start and the kernel's first cell: pandas (~0.3 s to import) comes later, off the critical path."""
    done = subprocess.run([sys.executable, "-c", IMPORTED.format(module=module)], cwd=where, capture_output=True,
                          text=True, check=True, env={**os.environ, "PYTHONPATH": str(where)})
    assert done.stdout.strip() == "[]"


def test_the_runtime_reads_its_config_without_pandas(tmp_path: Path) -> None:
    build = build_kernel(BuildSettings(kernel_dir=shutil.copytree(KERNELS / "minimal", tmp_path / "k"),
                                       out_dir=tmp_path / "build"))
    code = "import sys, kkb_runtime; kkb_runtime.load_config('.'); print('pandas' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=build.code_dir, capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(build.code_dir)})
    assert done.stdout.strip() == "False"


def test_an_unreadable_sample_fails_the_run_where_it_is_needed(tmp_path: Path) -> None:
    missing = SampleRead(tmp_path / "no_sample.csv", "id", {})
    with pytest.raises(FileNotFoundError, match="no_sample.csv"):
        missing.frame()
    assert isinstance(missing.failed(), FileNotFoundError)  # run_steps raises it before the next step
    (tmp_path / "sample.csv").write_text("id,target\n007,0.5\n")
    read = SampleRead(tmp_path / "sample.csv", "id", {})
    assert read.frame()["id"].tolist() == ["007"] and read.failed() is None


def test_pip_waits_for_the_background_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module imported while pip rewrites its folder could load half of each version: installs wait."""
    finished: list[float] = []

    def slow_import() -> None:
        time.sleep(0.3)
        finished.append(time.monotonic())

    preload.in_background(slow_import, "test")
    from builder.kkb_runtime import install

    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, "", ""))
    install.run_pip(["true"])
    assert finished  # the background work ended before pip ran


@pytest.mark.parametrize("header", ["id,target\n1,0\n", "\ufeffid,target\n", "id,a,a,a.1,a\n", ",x,\n1,2,3\n",
                                    '"i,d","t""q"\n1,2\n', "id\r\nx\r\n", "a,a.1,a,a\n", ",,a,,a\n", "id,target"])
def test_the_header_check_reads_the_columns_pandas_reads(tmp_path: Path, header: str) -> None:
    sample = tmp_path / "sample.csv"
    sample.write_text(header, encoding="utf-8")
    assert sample_columns(sample) == [str(column) for column in pd.read_csv(sample, nrows=0).columns]


def test_an_unchanged_rebuild_reuses_the_public_data_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = shutil.copytree(KERNELS / "minimal", tmp_path / "k")
    settings = BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build")
    calls: list[str] = []
    import builder.build as build_module
    from builder.bundle.preflight import CardCheck, check_against_public_data

    def counted(spec: KernelSpec, kernel_dir: Path) -> tuple[CardCheck, ...]:
        calls.append("checked")
        return check_against_public_data(spec, kernel_dir)

    monkeypatch.setattr(build_module, "check_against_public_data", counted)
    build_kernel(settings)
    build_kernel(settings)
    assert calls == ["checked"] and (tmp_path / "build" / PREFLIGHT_RECORD).is_file()
    sample = kernel / "data" / "competition" / "public" / "sample_submission.csv"
    sample.write_text(sample.read_text() + "\n")  # the sample changed: checked again
    build_kernel(settings)
    (kernel / "kernel.toml").write_text((kernel / "kernel.toml").read_text().replace("decimals = 4", "decimals = 5"))
    build_kernel(settings)  # the spec changed: checked again
    assert calls == ["checked"] * 3
    record = json.loads((tmp_path / "build" / PREFLIGHT_RECORD).read_text())
    assert record["key"].startswith("sha256:") and set(record) == {"key", "checks"}


def test_a_failing_check_is_never_recorded_as_passed(tmp_path: Path) -> None:
    kernel = shutil.copytree(KERNELS / "minimal", tmp_path / "k")
    settings = BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build")
    build_kernel(settings)
    toml = kernel / "kernel.toml"
    toml.write_text(toml.read_text().replace('target_columns = ["target"]', 'target_columns = ["target"]\n'
                                             'column_types = { nope = "int" }'))
    for _ in range(2):  # refused every time, not only the first
        with pytest.raises(Exception, match="submission.column_types.nope"):
            build_kernel(settings)


def test_the_public_data_checks_read_a_data_folder_under_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``data = "~/..."`` is the sample the checks read (and the record's key stats), not a folder named ``~``."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    kernel = shutil.copytree(KERNELS / "minimal", tmp_path / "k")
    shutil.copytree(kernel / "data" / "competition" / "public", tmp_path / "home" / "public")
    toml = kernel / "kernel.toml"
    text = re.sub(r'(?m)^data = "[^"]*"', 'data = "~/public"', toml.read_text())
    toml.write_text(text.replace('target_columns = ["target"]', 'target_columns = ["target"]\n'
                                 'column_types = { nope = "int" }'))
    with pytest.raises(Exception, match="submission.column_types.nope"):
        build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))


@pytest.mark.parametrize(("hidden_rows", "rehearsed", "env"), [
    (None, False, {}),
    (300, False, {PROBE_VARIABLE: "3", HIDDEN_ROWS_VARIABLE: "300"}),  # the step may skip a probe that cannot weigh
    (300, True, {PROBE_VARIABLE: "3"}),  # Kaggle's per-row rates are set against these: always probed
])
def test_card_steps_time_a_probe_only_where_the_rerun_is_projected(tmp_path: Path, hidden_rows: int | None,
                                                                     rehearsed: bool, env: dict[str, str]) -> None:
    kernel = shutil.copytree(KERNELS / "minimal", tmp_path / "k")
    toml = kernel / "kernel.toml"
    toml.write_text(toml.read_text().replace("hidden_rows = 200\n", ""))
    build = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=tmp_path / "build"))
    if rehearsed:
        (build.out_dir / ON_KAGGLE_DIR).mkdir()
        (build.out_dir / ON_KAGGLE_DIR / REPORT_FILE).write_text("{}")
    settings = DryRunSettings(kernel_dir=kernel, hidden_rows=hidden_rows)
    data = kernel / "data" / "competition" / "public"
    run = ScenarioRun(scenario=Scenario.RERUN, settings=settings, build=build, data=data, source=data, public=data,
                      out=tmp_path / "out", work=tmp_path / "work", scored_file="submission.csv")
    given = scenarios.scenario_sandbox(run, data).extra_env
    assert {name: value for name, value in given.items() if name.startswith("KKB_TIMING")} == env


def _fold(load: float, first: BatchTiming) -> FoldTimer:
    fold = FoldTimer(load_seconds=load)
    fold.batches.append(first)
    return fold


@pytest.mark.parametrize(("hidden_rows", "folds", "matters"), [
    (None, 1, True),  # no size given (a rehearsal on Kaggle): always
    (300, 1, False),  # 8 rows in 0.03 s: at most 1.1 s at 300 rows, beside 3.3 s fixed (half: 1.65 s)
    (300, 5, True),  # five folds: 5.6 s per row at most, beside 9.3 s fixed
    (600, 1, True),  # 2.25 s: more than half the fixed time
    (15_000, 1, True),
])
def test_the_probe_runs_where_its_rate_could_weigh_at_the_hidden_size(hidden_rows: int | None, folds: int,
                                                                       matters: bool) -> None:
    timer = StepTimer(startup_seconds=0.2, hidden_rows=hidden_rows, phases={"imports": 1.3, "setup": 0.3})
    fold = _fold(1.5, BatchTiming(8, 0.008, 0.022))
    assert timer.probe_can_matter(fold, folds) is matters
    assert timer.probe_can_matter(FoldTimer(load_seconds=1.5), folds)  # no batch yet: nothing bounds the rate


def test_the_rerun_check_reads_the_sample_only_for_the_answers(tmp_path: Path) -> None:
    kernel = shutil.copytree(KERNELS / "minimal", tmp_path / "k")
    from builder.project.spec import load_spec

    data = tmp_path / "data"
    data.mkdir()
    (data / "sample_submission.csv").write_bytes(b"\xff\xfe not a csv")  # read: it would fail
    check_before_rerun(load_spec(kernel), kernel, data, None)


def test_the_sandbox_probe_runs_once_however_many_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def slow(mode: str) -> None:
        calls.append(mode)
        time.sleep(0.2)

    monkeypatch.setattr(isolation, "_probe", functools.cache(slow))
    monkeypatch.setattr(isolation, "_PROBING", threading.Lock())
    monkeypatch.delenv("KKB_SANDBOX_ISOLATION", raising=False)
    isolation.probe_soon()
    time.sleep(0.05)
    assert isolation.probe(Isolation.BWRAP) is None and calls == [Isolation.BWRAP]
