"""The time fit's sizes: where two sizes took the same time within their noise (a table model's per-row time over a
few dozen rows), the dry run measures larger replicated tests, each within the hidden size and, at the per-row time
the noise could hide, within the first run's time (``rehearse.scenarios._larger_sizes``).

The kernel runs are stood in for (their wall time a function of their rows), so the sizes chosen are exact."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from builder.build import BuildSettings, build_kernel
from builder.kkb_runtime.vocabulary import Scenario
from builder.rehearse import scenarios
from builder.rehearse.dryrun_settings import DryRunSettings, ScenarioRun
from builder.rehearse.projection import RunTimes, hidden_per_row
from tests.support.files import KERNELS


@pytest.fixture(scope="module")
def public_run(tmp_path_factory: pytest.TempPathFactory) -> ScenarioRun:
    """The minimal kernel's rerun scenario on its 5-row public test."""
    root = tmp_path_factory.mktemp("fit")
    kernel = shutil.copytree(KERNELS / "minimal", root / "k")
    build = build_kernel(BuildSettings(kernel_dir=kernel, out_dir=root / "build"))
    data = kernel / "data" / "competition" / "public"
    return ScenarioRun(scenario=Scenario.RERUN, settings=DryRunSettings(kernel_dir=kernel), build=build, data=data,
                       source=data, public=data, out=root / "out", work=root / "work", scored_file="submission.csv")


def _measured(monkeypatch: pytest.MonkeyPatch, seconds: Callable[[int], float], ok: bool = True) -> list[int]:
    """Stand-ins for the replication and the run; the rows of each run made."""
    made: list[int] = []

    def replicated(spec: object, source: Path, dest: Path, factor: int, kernel_dir: object = None) -> SimpleNamespace:
        return SimpleNamespace(path=dest, rows=5 * factor)

    def execute(notebook: Path, kind: object, sandbox: object, work: Path, **_: object) -> SimpleNamespace:
        rows = made[-1]
        return SimpleNamespace(ok=ok, wall_seconds=seconds(rows), steps=[], ename=None if ok else "MemoryError")

    def replicated_and_counted(*args: object, **kwargs: object) -> SimpleNamespace:
        scaled = replicated(*args, **kwargs)  # type: ignore[arg-type]
        made.append(scaled.rows)
        return scaled

    monkeypatch.setattr(scenarios, "replicated_test", replicated_and_counted)
    monkeypatch.setattr(scenarios, "execute_kernel", execute)
    return made


def _flat(rows: int) -> float:
    return 8.0 + rows * 1e-5  # 10 us a row beside 8 s fixed: invisible at 50 rows


@pytest.mark.parametrize(("seconds", "hidden", "expected"), [
    # bound (1.6 s of noise) / 45 rows = 35.6 ms a row: 224 more rows cost the first run's 8 s -> 274, replicated as
    # 5 x 54 = 270; then 1.6 s / 265 rows = 6.0 ms: 1,322 more -> 1,592 -> 5 x 318 = 1,590; two larger runs at most
    (_flat, 2000, [270, 1590]),
    (_flat, 100, [100]),  # the hidden size caps it, and the next would not double the largest
    (_flat, 80, []),  # under twice the largest (50): not worth a run
    (lambda rows: 8.0 + rows * 0.1, 2000, []),  # 4.5 s between 5 and 50 rows: the per-row time shows
])
def test_larger_runs_only_where_the_noise_hides_the_per_row_time(
        public_run: ScenarioRun, monkeypatch: pytest.MonkeyPatch, seconds: Callable[[int], float], hidden: int,
        expected: list[int]) -> None:
    made = _measured(monkeypatch, seconds)
    runs = scenarios._larger_sizes(public_run, [RunTimes(5, seconds(5), ()), RunTimes(50, seconds(50), ())], hidden)
    assert made == expected and [run.rows for run in runs] == [5, 50, *expected]


def test_a_failed_larger_run_leaves_the_sizes_before_it(public_run: ScenarioRun, monkeypatch: pytest.MonkeyPatch) -> None:
    made = _measured(monkeypatch, _flat, ok=False)
    runs = scenarios._larger_sizes(public_run, [RunTimes(5, _flat(5), ()), RunTimes(50, _flat(50), ())], 2000)
    assert made == [270] and [run.rows for run in runs] == [5, 50]


@pytest.mark.parametrize(("small", "large", "bound"), [
    ((5, 8.0), (50, 8.0), 1.6 / 45),
    ((5, 8.0), (50, 9.0), (1.0 + 1.7) / 45),  # within 0.8 + 0.9 s of noise
    ((5, 8.0), (50, 10.0), None),  # 2 s apart, noise 1.8 s: shown
    ((5, 0.1), (50, 0.1), 0.1 / 45),  # the noise floor, 0.05 s a run
])
def test_the_per_row_time_two_sizes_can_hide(small: tuple[int, float], large: tuple[int, float],
                                            bound: float | None) -> None:
    found = hidden_per_row(RunTimes(small[0], small[1], ()), RunTimes(large[0], large[1], ()))
    assert found == (pytest.approx(bound) if bound is not None else None)
