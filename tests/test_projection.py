"""Time projection: fixed + per-row cost from card timings or two sizes, with its range. No notebook runs."""

from __future__ import annotations

import pytest

from builder.rehearse.projection import MIN_FIT_ROWS, OUTSIDE, RunTimes, fit_factor, project


def _step(name: str, seconds: float, **meta: object) -> dict[str, object]:
    return {"name": name, "seconds": seconds, **meta}


def test_two_sizes_separate_model_loading_from_per_row_time() -> None:
    # 6 public rows: 29 s, almost all of it loading; 60 rows: 30 s. The old projection said 1,410 s+.
    runs = [RunTimes(6, 29.0, (_step("infer", 25.0),)), RunTimes(60, 30.5, (_step("infer", 26.35),))]
    projection = project(runs, hidden_rows=300, limit_seconds=9 * 3600)
    infer, outside = projection.components
    assert (infer.name, infer.method, outside.name) == ("infer", "two sizes", OUTSIDE)
    assert infer.per_row_seconds == pytest.approx(1.35 / 54)
    assert infer.fixed_seconds == pytest.approx(25.0 - 6 * 1.35 / 54, abs=1e-3)
    assert projection.seconds == pytest.approx(29.0 + 294 * (1.35 + 0.15) / 54, abs=0.01)
    assert projection.low <= projection.seconds <= projection.high
    assert projection.exact and not projection.over_limit() and not projection.may_pass_limit()


def test_card_timings_need_one_run() -> None:
    step = _step("resnet", 12.0, rows=10, load_seconds=8.0, infer_seconds=2.0)
    projection = project([RunTimes(10, 20.0, (step,)), RunTimes(50, 21.0, ())], hidden_rows=1000)
    resnet = projection.components[0]
    assert (resnet.method, resnet.fixed_seconds, resnet.per_row_seconds) == ("card timings", 10.0, 0.2)
    alone = project([RunTimes(10, 20.0, (step,))], hidden_rows=1000)  # one run: the rest of the notebook is fixed
    assert alone.exact and alone.components[1].per_row_seconds == 0.0 and alone.seconds == pytest.approx(8.0 + 10.0 + 200.0)


def test_a_real_per_row_cost_passes_the_limit() -> None:
    runs = [RunTimes(5, 3.0, (_step("predict", 1.2),)), RunTimes(50, 4.8, (_step("predict", 3.0),))]
    projection = project(runs, hidden_rows=1_000_000, limit_seconds=36)
    assert projection.over_limit()
    assert projection.summary().startswith(f"{projection.seconds:.1f} s (")


def test_one_tiny_run_is_an_upper_bound_and_never_a_timeout_on_its_own() -> None:
    projection = project([RunTimes(1, 30.0, (_step("infer", 28.0),))], hidden_rows=10_000, limit_seconds=3600)
    assert not projection.exact and projection.seconds == pytest.approx(300_000)
    assert not projection.over_limit() and projection.may_pass_limit()
    assert "partly proportional (upper bound)" in projection.summary()
    big = project([RunTimes(MIN_FIT_ROWS, 30.0, ())], hidden_rows=10_000, limit_seconds=3600)
    assert big.over_limit()  # a test of MIN_FIT_ROWS rows is large enough for a proportional verdict


def test_noise_cannot_make_the_per_row_cost_negative() -> None:
    projection = project([RunTimes(5, 10.0, ()), RunTimes(50, 9.5, ())], hidden_rows=1000)
    (outside,) = projection.components
    assert outside.per_row_seconds == 0.0 and outside.per_row_low == 0.0 and outside.per_row_high > 0
    assert projection.seconds == pytest.approx(10.0)


@pytest.mark.parametrize(("rows", "factor"), [(1, 20), (5, 10), (15, 4), (49, 2), (50, 1), (5000, 1)])
def test_a_small_public_test_gets_a_second_size(rows: int, factor: int) -> None:
    assert fit_factor(rows) == factor
