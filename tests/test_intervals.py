"""The training pages' intervals: the resampling at once gives what the draw-by-draw one does."""

from __future__ import annotations

import numpy as np
import pytest

from attnscale._docs import intervals
from attnscale._docs.studies._sweep import best_lr, bootstrap


def _sweep_values(seeds: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A noisy valley over 9 quarter-decade rates, with a diverged run and an unrun point."""
    log_lrs = np.arange(-12, -3) / 4
    values = (log_lrs[:, None] + 2.1) ** 2 + rng.normal(0, 0.3, (len(log_lrs), seeds))
    values[-1, 0] = np.inf  # a seed diverged at the largest rate
    values[0] = np.nan  # the smallest rate was not run
    return values.astype(np.float32), log_lrs


@pytest.mark.parametrize("seeds", [2, 5, 20])
def test_best_lr_draws_match_best_lr_on_each_resample(seeds):
    values, log_lrs = _sweep_values(seeds, np.random.default_rng(seeds))
    idx = intervals.resample(seeds)
    at_once = intervals.best_lr_draws(values, log_lrs, idx)
    one_by_one = np.array([best_lr(values[:, i], log_lrs)[0] for i in idx])
    np.testing.assert_allclose(at_once, one_by_one, rtol=0, atol=1e-6)
    # The same resamples as the draw-by-draw bootstrap, hence the same interval.
    expected = bootstrap(lambda i: best_lr(values[:, i], log_lrs)[0], seeds)
    assert intervals.percentile_interval(at_once) == pytest.approx(expected, abs=1e-6)


def test_best_lr_draws_on_a_sweep_with_nothing_run():
    values = np.full((5, 3), np.nan)
    draws = intervals.best_lr_draws(values, np.arange(5) / 4, intervals.resample(3))
    assert np.isnan(draws).all()
    assert all(np.isnan(intervals.percentile_interval(draws)))


def test_best_and_paired_gap_intervals_are_the_bootstraps():
    rng = np.random.default_rng(1)
    values, log_lrs = _sweep_values(5, rng)
    b = intervals.best(values, log_lrs)
    assert (b.log_lr_low, b.log_lr_high) == pytest.approx(
        bootstrap(lambda i: best_lr(values[:, i], log_lrs)[0], 5), abs=1e-6
    )
    at = values[b.point]
    assert (b.value_low, b.value_high) == pytest.approx(
        bootstrap(lambda i: float(at[i].mean()), 5), abs=1e-6
    )
    a, c = rng.normal(size=7), rng.normal(size=7) + 1
    gap = intervals.paired_gap(a, c)
    assert (gap.low, gap.high) == pytest.approx(
        bootstrap(lambda i: float((c - a)[i].mean()), 7), abs=1e-9
    )
