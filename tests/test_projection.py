"""Time projection: a range of fixed + per-row cost from card phases or two sizes, on the device Kaggle uses.

The generated kernels at the end have known costs (a sleep at start, per row, per fold): the projected range
must contain the real time of a run at 10x the public size, and the known cost at 100x.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builder.kkb_runtime.timing import BatchTiming, FoldTiming, StepTimer, StepTiming
from builder.rehearse import device_factor as factors
from builder.rehearse.projection import (
    CARD,
    CARD_BOUND,
    CARD_FIXED,
    MIN_FIT_ROWS,
    OUTSIDE,
    TWO_SIZES,
    RunTimes,
    fit_factor,
    limit_warning,
    project,
    project_rerun,
    timeout_reason,
    times_itself,
)
from tests.support.cards import image_built, kernel_card

if TYPE_CHECKING:  # torch, imported only where a test runs a card
    from builder.kkb_runtime.cards.image.predict import Job

HOUR = 3600.0


def _step(name: str, seconds: float, **meta: object) -> dict[str, object]:
    return {"name": name, "seconds": seconds, **meta}


def _card_timing(rows: int, folds: int, per_row: float, load: float = 1.0, warm: float = 0.5, batch: int = 16,
                 device: str = "cpu", probe: int = 0, data_share: float = 0.0) -> StepTiming:
    """A card step as the runtime records it: ``rows`` rows in batches of ``batch`` per fold, at ``per_row``."""
    def batch_of(n: int, extra: float = 0.0) -> BatchTiming:
        return BatchTiming(n, n * per_row * data_share, n * per_row * (1 - data_share) + extra)

    sizes = [min(batch, rows - start) for start in range(0, rows, batch)]
    fold_list = []
    for index in range(folds):
        probes = tuple(batch_of(batch) for _ in range(probe + 1)) if index == 0 and probe else ()
        fold_list.append(FoldTiming(load, 0.01, batch_of(sizes[0], warm), tuple(batch_of(n) for n in sizes[1:]), probes,
                                    sum(b.seconds for b in probes)))
    return StepTiming(rows, device, device, 2 if device == "cpu" else None, 1.0, 0.05, 2.0, 0.01, tuple(fold_list))


def _card_seconds(timing: StepTiming) -> float:
    phases = (timing.startup_seconds or 0) + timing.setup_seconds + timing.imports_seconds + timing.write_seconds
    return phases + sum(fold.load_seconds + fold.loader_start_seconds + fold.probe_seconds
                        + sum(b.seconds for b in (fold.first_batch, *fold.steady) if b) for fold in timing.folds)


# --- fitting -------------------------------------------------------------------------------------

def test_two_sizes_separate_model_loading_from_per_row_time() -> None:
    # 6 public rows: 29 s, almost all of it loading; 60 rows: 30 s. The old projection said 1,410 s+.
    runs = [RunTimes(6, 29.0, (_step("infer", 25.0),)), RunTimes(60, 30.5, (_step("infer", 26.35),))]
    projection = project(runs, hidden_rows=300, limit_seconds=9 * HOUR)
    infer, outside = projection.components
    assert (infer.name, infer.method, outside.name) == ("infer", TWO_SIZES, OUTSIDE)
    assert infer.per_row_device.central == pytest.approx(1.35 / 54)
    assert infer.fixed.central == pytest.approx(25.0 - 6 * 1.35 / 54, abs=1e-3)
    assert projection.seconds == pytest.approx(29.0 + 294 * (1.35 + 0.15) / 54, abs=0.01)
    assert projection.low <= projection.seconds <= projection.high
    assert projection.exact and not projection.over_limit() and not projection.may_pass_limit()
    assert "two points (25.00 s at 6 rows, 26.35 s at 60)" in projection.summary()


def test_card_phases_put_only_steady_batches_per_row() -> None:
    # 3 folds of 40 rows in batches of 16: load and warm-up are fixed, 10 ms a row from the steady batches.
    timing = _card_timing(rows=40, folds=3, per_row=0.01, load=2.0, warm=1.5)
    step = _step("resnet", _card_seconds(timing), timing=timing.to_json())
    projection = project([RunTimes(40, _card_seconds(timing) + 5.0, (step,))], hidden_rows=10_000)
    card, outside = projection.components
    assert (card.method, outside.method) == (CARD, "fixed (the card steps do the per-row work)")
    assert card.per_row_device.central == pytest.approx(0.03)  # 10 ms x 3 folds
    assert card.fixed.central == pytest.approx(_card_seconds(timing) - 0.03 * 40, abs=1e-6)
    assert projection.seconds == pytest.approx(card.fixed.central + 5.0 + 0.03 * 10_000, rel=1e-6)
    assert "model load 6.00 s over 3 fold(s)" in card.basis and "from 3 steady batch(es)" in card.basis  # full ones only


def test_a_one_image_card_uses_its_timing_probe_and_never_charges_it() -> None:
    # 1 image: the warm-up batch is all there is; the probe's full batches give the rate, its time is no cost.
    timing = _card_timing(rows=1, folds=5, per_row=0.02, load=3.0, warm=2.0, probe=3)
    seconds = _card_seconds(timing)
    projection = project([RunTimes(1, seconds + 4.0, (_step("effnet", seconds, timing=timing.to_json()),))], 15_000)
    card = projection.components[0]
    assert card.per_row_device.central == pytest.approx(0.1)  # 20 ms x 5 folds, fold 1's rate for all
    assert card.fixed.central == pytest.approx(seconds - timing.probe_seconds - 0.1, abs=1e-6)
    assert "of a timing probe" in card.basis and "4 fold(s) without steady batches counted as the first" in card.basis


def test_warm_up_batches_alone_are_an_upper_bound_that_never_times_out() -> None:
    timing = _card_timing(rows=1, folds=2, per_row=0.5, warm=2.0)  # no probe: only the first batches ran
    seconds = _card_seconds(timing)
    projection = project([RunTimes(1, seconds + 0.9, (_step("m", seconds, timing=timing.to_json()),))], 100_000, 2 * HOUR)
    card, outside = projection.components
    # the notebook around the steps stays fixed: the card step bounds the per-row work
    assert (card.method, outside.method) == (CARD_BOUND, CARD_FIXED) and not projection.exact
    assert outside.fixed.central == pytest.approx(0.9) and outside.per_row_host.high == 0.0
    assert not projection.over_limit() and projection.may_pass_limit()
    assert "--rerun-scale N" in limit_warning(projection)


def test_one_tiny_run_is_one_point_and_never_a_timeout_on_its_own() -> None:
    projection = project([RunTimes(1, 30.0, (_step("infer", 28.0),))], hidden_rows=10_000, limit_seconds=HOUR)
    assert not projection.exact and projection.high == pytest.approx(300_000)
    assert projection.low == pytest.approx(30.0)  # all fixed: the least the measurement allows
    assert not projection.over_limit() and projection.may_pass_limit()
    assert "one point (28.00 s at 1 rows)" in projection.summary()
    big = project([RunTimes(MIN_FIT_ROWS, 30.0, ())], hidden_rows=10_000, limit_seconds=HOUR)
    assert not big.over_limit()  # one point of any size: its lower end is the run itself


def test_a_kernel_that_needs_3_hours_per_1000_rows_times_out() -> None:
    # 10.8 s a row measured at two sizes on a CPU shape: even the lower end of 15,000 rows is far past 9 h.
    runs = [RunTimes(1, 20.0, (_step("predict", 15.8),)), RunTimes(20, 225.2, (_step("predict", 221.0),))]
    projection = project(runs, hidden_rows=15_000, limit_seconds=9 * HOUR)
    assert projection.low > 9 * HOUR and projection.over_limit()
    assert timeout_reason(projection).startswith("even the lower end of the projection, ")


def test_noise_cannot_make_the_per_row_cost_negative() -> None:
    projection = project([RunTimes(5, 10.0, ()), RunTimes(50, 9.5, ())], hidden_rows=1000)
    (outside,) = projection.components
    assert outside.per_row_host.central == 0.0 and outside.per_row_host.low == 0.0 and outside.per_row_host.high > 0
    assert projection.seconds == pytest.approx(10.0)


@pytest.mark.parametrize(("record", "alone"), [
    ({"infer_seconds": 1.7, "load_seconds": 0.0}, False),  # a table card: seconds and rows, no phases
    ({"infer_seconds": 2.1, "load_seconds": 0.9}, False),  # a text card
    ({}, False),  # user code
    ({"timing": _card_timing(rows=8, folds=2, per_row=0.01).to_json()}, True),  # an image card's phases
    ({"fit": "fixed", "why": "the first predict call"}, True),
    ({"fit": "measured rate", "rows": 10, "rates": [0.1]}, True),
])
def test_only_a_step_that_splits_its_own_time_goes_without_a_second_size(record: dict[str, object], alone: bool) -> None:
    assert times_itself(_step("s", 2.0, **record)) is alone


@pytest.mark.parametrize(("rows", "factor"), [(1, 20), (5, 10), (15, 4), (49, 2), (50, 1), (5000, 1)])
def test_a_small_public_test_gets_a_second_size(rows: int, factor: int) -> None:
    assert fit_factor(rows) == factor


# --- the device ----------------------------------------------------------------------------------

def _one_image_card(device: str = "cpu", data_share: float = 0.0) -> list[RunTimes]:
    timing = _card_timing(rows=1, folds=5, per_row=0.5, load=3.0, probe=3, device=device, data_share=data_share)
    seconds = _card_seconds(timing)
    return [RunTimes(1, seconds + 4.0, (_step("effnet", seconds, timing=timing.to_json()),))]


def test_cpu_seconds_are_never_gpu_seconds_the_table_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(factors, "stored_image_path", lambda: None)
    runs = _one_image_card()
    on_cpu = project_rerun(runs, 30_000, 9 * HOUR, None, tmp_path)
    on_t4 = project_rerun(runs, 30_000, 9 * HOUR, "NvidiaTeslaT4", tmp_path)
    assert on_cpu.factor.source == "measured here" and on_cpu.over_limit()  # 2.5 s a row on a CPU: 21 h
    assert on_t4.factor.source == "table" and on_t4.factor.target == "T4 x2"
    assert on_t4.low < on_t4.seconds < on_cpu.seconds and on_t4.high == pytest.approx(on_cpu.high + 30.0)
    assert not on_t4.over_limit() and on_t4.may_pass_limit()
    assert "kkb dry-run --on-kaggle" in on_t4.decider() and "no measurement on Kaggle's T4 x2" in on_t4.summary()


def test_data_loading_is_cpu_time_on_any_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(factors, "stored_image_path", lambda: None)
    runs = _one_image_card(data_share=1.0)  # every per-row second waits for the loader: no GPU helps
    projection = project_rerun(runs, 30_000, 9 * HOUR, "NvidiaTeslaT4", tmp_path)
    assert projection.over_limit()


def test_measured_on_a_gpu_is_used_as_is(tmp_path: Path) -> None:
    projection = project_rerun(_one_image_card(device="cuda"), 15_000, 9 * HOUR, "NvidiaTeslaT4", tmp_path)
    assert projection.factor.source == "measured here" and projection.seconds == project(_one_image_card("cuda"), 15_000).seconds


def test_a_rehearsal_on_kaggle_gives_this_kernels_factor(tmp_path: Path) -> None:
    kaggle = _card_timing(rows=20, folds=5, per_row=0.01, probe=0, device="cuda", batch=4)  # 50x faster
    report = {"steps": [_step("effnet", _card_seconds(kaggle), timing=kaggle.to_json())]}
    (tmp_path / "dryrun-kaggle").mkdir()
    (tmp_path / "dryrun-kaggle" / "report.json").write_text(json.dumps(report))
    projection = project_rerun(_one_image_card(), 15_000, 9 * HOUR, "NvidiaTeslaT4", tmp_path)
    assert projection.factor.source == "rehearsal on Kaggle" and projection.factor.central == pytest.approx(0.02)
    assert "measured by kkb dry-run --on-kaggle (effnet" in projection.summary()


def test_the_captured_forward_pass_gives_a_factor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    image = tmp_path / "image.json"
    image.write_text(json.dumps({"benchmark": {"gpu_seconds": 0.004, "gpu": "Tesla T4", "captured": "2026-12-01"}}))
    monkeypatch.setattr(factors, "stored_image_path", lambda: image)
    monkeypatch.setattr(factors, "local_reference_seconds", lambda threads=None: 0.2)
    projection = project_rerun(_one_image_card(), 15_000, 9 * HOUR, "NvidiaTeslaT4", tmp_path)
    assert projection.factor.source == "kkb image --on-kaggle" and projection.factor.central == pytest.approx(0.02)
    assert "on Kaggle's Tesla T4 (captured 2026-12-01)" in projection.factor.basis


def test_every_gpu_shape_has_a_table_entry() -> None:
    from builder.project.spec import MACHINE_SHAPES

    assert set(factors.TABLE) == set(MACHINE_SHAPES)
    assert all(low <= central <= high <= 1.0 for _, low, central, high in factors.TABLE.values())


# --- generated kernels with known costs: the range holds the real time ------------------------------

START_S, PER_ROW_S = 0.3, 0.002
USER_STEP = "import sys, time; time.sleep({start}); n = int(sys.argv[1]); [time.sleep({per_row}) for _ in range(n)]"


def _user_step(rows: int) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-S", "-c", USER_STEP.format(start=START_S, per_row=PER_ROW_S), str(rows)], check=True)
    return time.perf_counter() - started


def test_a_user_step_with_known_costs_is_inside_its_range_at_10x_and_100x() -> None:
    public, fit = 1, fit_factor(1)
    runs = [RunTimes(rows, seconds, (_step("predict", seconds),)) for rows in (public, public * fit)
            for seconds in [_user_step(rows)]]
    real = _user_step(10 * public)
    at_10 = project(runs, 10 * public)
    assert at_10.low <= real <= at_10.high
    at_100 = project(runs, 100 * public)  # against the cost model: interpreter start, the sleep, the rows
    assert at_100.low <= START_S + 100 * public * PER_ROW_S <= at_100.high


FACTORY = """
import time
import torch

class Slow(torch.nn.Module):
    def __init__(self):
        super().__init__()
        time.sleep({load})  # per fold: the model build
        self.head = torch.nn.Linear(3, 2)

    def forward(self, x):
        time.sleep({per_row} * x.shape[0])
        return self.head(x.mean(dim=(2, 3)))

def make():
    return Slow()
"""
LOAD_S, CARD_ROW_S, FOLDS = 0.1, 0.001, 2
PIPELINE_ROW_S = 0.001


def _slow_card(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: int) -> tuple[Job, list[Path]]:
    import numpy as np
    import torch
    from PIL import Image
    from safetensors.torch import save_file

    from builder.kkb_runtime.cards.image import predict

    (tmp_path / "slowmodel.py").write_text(FACTORY.format(load=LOAD_S, per_row=CARD_ROW_S))
    monkeypatch.syspath_prepend(str(tmp_path))
    save_file({f"head.{k}": v for k, v in torch.nn.Linear(3, 2).state_dict().items()}, str(tmp_path / "fold.safetensors"))
    Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(tmp_path / "0.png")
    card = kernel_card({"name": "slow", "factory": "slowmodel:make", "num_classes": 2, "batch_size": 8, "num_workers": 0,
                        "activation": "none", "checkpoint": "fold.safetensors"})
    built = image_built(*["fold.safetensors"] * FOLDS, input_size=(8, 8))
    paths = [tmp_path / "0.png"] * rows
    job = predict.Job(card, built, [str(i) for i in range(rows)], paths, "id", ["a", "b"], tmp_path,  # type: ignore[arg-type]
                      tmp_path / "out.csv")
    return job, paths


def _run_card(job: Job, probe: int) -> tuple[float, StepTiming]:
    from builder.kkb_runtime import timing
    from builder.kkb_runtime.cards.common import device as devices
    from builder.kkb_runtime.cards.image import predict

    timer = StepTimer(startup_seconds=None, probe_batches=probe)
    timings: dict[str, object] = {timing.TIMER_KEY: timer}
    started = time.perf_counter()
    predict.run_model(job, devices.DeviceChoice("cpu", "test"), timings)  # type: ignore[arg-type]
    seconds = time.perf_counter() - started
    recorded = StepTiming.from_json(timing.finish(timings, len(job.ids), "cpu", "cpu"))  # type: ignore[attr-defined]
    assert recorded is not None
    return seconds, recorded


def test_a_card_with_known_costs_is_inside_its_range_at_10x_and_100x(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    one, _ = _slow_card(tmp_path, monkeypatch, rows=1)
    _run_card(one, probe=0)  # the first model build imports and caches: not what the test measures
    seconds, timing = _run_card(one, probe=3)
    assert timing.folds[0].probe and not timing.folds[1].probe and len(timing.folds) == FOLDS
    runs = [RunTimes(1, seconds, (_step("slow", seconds, timing=timing.to_json()),))]
    real, _ = _run_card(dataclasses.replace(one, ids=[str(i) for i in range(10)], paths=one.paths * 10), probe=0)
    at_10 = project(runs, 10)
    assert at_10.low <= real <= at_10.high
    at_100 = project(runs, 100)
    # The known cost model: the 10x run, plus 90 rows at the per-row sleep of each fold, plus at most
    # PIPELINE_ROW_S a row for decoding an 8-pixel image and the loader (both ends must be inside the range).
    truth = (real + 90 * FOLDS * CARD_ROW_S, real + 90 * FOLDS * (CARD_ROW_S + PIPELINE_ROW_S))
    assert at_100.low <= truth[0] and truth[1] <= at_100.high
    assert at_100.components[0].per_row_device.central >= FOLDS * CARD_ROW_S  # the sleep is a floor of the rate


def test_a_user_steps_share_of_gpu_work_is_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from builder.rehearse import projection as projections

    monkeypatch.setattr(factors, "stored_image_path", lambda: None)
    monkeypatch.setattr(projections, "local_gpu", lambda: False)
    runs = [RunTimes(1, 20.0, (_step("predict", 15.8),)), RunTimes(20, 225.2, (_step("predict", 221.0),))]
    on_cpu, on_t4 = project(runs, 15_000, 9 * HOUR), project_rerun(runs, 15_000, 9 * HOUR, "NvidiaTeslaT4", tmp_path)
    assert on_t4.seconds == pytest.approx(on_cpu.seconds + 3.0, abs=0.01)  # as measured, plus the GPU start allowance
    assert on_t4.low < on_cpu.low / 50 and not on_t4.over_limit() and on_t4.may_pass_limit()  # it may use the T4
