"""The runtime's phase timer (kkb_runtime.timing): what a card step records for the projection."""

from __future__ import annotations

import json
import time
from pathlib import Path

from builder.kkb_runtime import steps, timing
from builder.kkb_runtime.timing import FoldTimer, StepTimer, StepTiming


def test_batches_are_split_into_the_wait_for_data_and_the_compute() -> None:
    def slow_loader():
        for size in (4, 4, 2):
            time.sleep(0.02)  # decoding
            yield [0] * size

    fold = FoldTimer()
    for _batch in fold.timed(slow_loader()):
        time.sleep(0.01)  # the forward pass
    first, *steady = fold.batches
    assert [b.rows for b in fold.batches] == [4, 4, 2] and fold.full_steady() == 1
    assert all(b.data_seconds >= 0.02 and b.compute_seconds >= 0.01 for b in fold.batches)
    for _batch in fold.timed(slow_loader(), probe=True):
        pass
    result = fold.result()
    assert result.first_batch == first and list(result.steady) == steady and len(result.probe) == 3
    assert result.probe_seconds >= 0.06 and result.rows == 10  # the probe's rows are not the fold's


def test_a_step_timing_survives_the_meta_file(tmp_path: Path) -> None:
    timer = StepTimer(probe_batches=3)
    with timer.phase("setup"):
        time.sleep(0.01)
    fold = timer.fold()
    with fold.loading():
        time.sleep(0.01)
    list(fold.timed([[1, 2], [3, 4]]))
    timings = {"rows": 4, timing.TIMER_KEY: timer}
    record = timing.finish(timings, 4, "cuda", "cuda x1 (Tesla T4)")
    assert timing.TIMER_KEY not in timings and record["device"] == "cuda" and record["threads"] is None
    out = tmp_path / "step.csv"
    steps.write_step_meta(out, **timings, timing=record)
    back = StepTiming.from_json(steps.read_step_meta(out)["timing"])
    assert back is not None and back.setup_seconds >= 0.01 and back.folds[0].load_seconds >= 0.01
    assert back.folds[0].first_batch is not None and back.folds[0].steady[0].rows == 2
    assert back == StepTiming.from_json(json.loads(json.dumps(record)))


def test_unreadable_records_are_no_timing() -> None:
    assert StepTiming.from_json(None) is None and StepTiming.from_json({"rows": "x"}) is None


def test_the_process_age_and_the_probe_request() -> None:
    age = timing.process_age_seconds()
    assert age is None or 0 <= age < 24 * 3600
    assert timing.probe_batches({}) == 0 and timing.probe_batches({timing.PROBE_VARIABLE: "3"}) == 3
    assert timing.probe_batches({timing.PROBE_VARIABLE: "many"}) == 0


def test_rows_of_tensors_token_dicts_and_lists() -> None:
    import numpy as np

    assert timing.rows_of(np.zeros((5, 3))) == 5 and timing.rows_of({"input_ids": np.zeros((4, 7))}) == 4
    assert timing.rows_of([1, 2, 3]) == 3
