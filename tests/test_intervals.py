"""The training pages' intervals and metric: t-intervals that cover, best rates at the grid's
resolution, a metric that stops counting where the task is solved."""

from __future__ import annotations

import math

import numpy as np
import pytest

from guide import intervals, metric


@pytest.mark.parametrize(
    ("df", "table"), [(1, 12.706), (2, 4.303), (4, 2.776), (9, 2.262), (19, 2.093), (100, 1.984)]
)
def test_t_quantile_matches_the_printed_tables(df, table):
    assert intervals.t_quantile(df) == pytest.approx(table, abs=1e-3)


def test_t_quantile_rejects_no_degrees_of_freedom():
    with pytest.raises(ValueError, match="df"):
        intervals.t_quantile(0)


@pytest.mark.parametrize("n", [3, 5])
def test_the_t_interval_covers_and_the_percentile_bootstrap_does_not(n):
    """Coverage over 4,000 simulated normal samples: the t-interval keeps its 95%, the
    percentile bootstrap the pages used before falls short at these n."""
    rng = np.random.default_rng(n)
    samples = rng.normal(0.0, 1.0, (4000, n))
    t_cover = np.mean(
        [intervals.mean_interval(x).low <= 0 <= intervals.mean_interval(x).high for x in samples]
    )
    idx = rng.integers(0, n, (1000, n))
    boot = samples[:, idx].mean(-1)  # (samples, draws)
    low, high = np.percentile(boot, [2.5, 97.5], axis=1)
    boot_cover = np.mean((low <= 0) & (high >= 0))
    assert abs(t_cover - 0.95) < 0.015
    assert boot_cover < 0.90


def test_one_seed_gives_no_interval_and_no_verdict():
    gap = intervals.paired_gap(np.array([1.0]), np.array([8.0]))
    assert gap.n == 1 and math.isnan(gap.low) and math.isnan(gap.high)
    assert gap.text("+.1f") == "+7.0, n = 1, no interval"
    assert gap.verdict("better", "worse", "tied", smallest=0.05) == "undecided"


@pytest.mark.parametrize(
    ("diffs", "expected"),
    [
        ([-0.30, -0.25, -0.35, -0.28, -0.31], "better"),  # resolved and large
        ([0.30, 0.25, 0.35, 0.28, 0.31], "worse"),
        ([0.010, 0.012, 0.009, 0.011, 0.010], "tied"),  # resolved but too small to count
        ([0.01, -0.01, 0.02, -0.02, 0.0], "tied"),  # the whole interval within +-0.05
        ([0.3, -0.3, 0.2, -0.25, 0.1], "undecided"),  # reaches 0 and 0.05: cannot tell
    ],
)
def test_verdicts(diffs, expected):
    gap = intervals.paired_gap(np.zeros(5), np.array(diffs))
    assert gap.verdict("better", "worse", "tied", smallest=0.05) == expected


def test_best_is_a_grid_point_with_the_points_the_seeds_cannot_tell_apart():
    log_lrs = np.arange(-12, -3) / 4
    rng = np.random.default_rng(0)
    valley = (log_lrs + 2.0) ** 2
    values = valley[:, None] + rng.normal(0, 0.01, (len(log_lrs), 5))
    values[4:6] = values[3].mean() + rng.normal(0, 0.2, (2, 5))  # two noisy near-ties above it
    values[-1, 0] = np.inf  # a diverged seed: never best, never near-best
    values[0] = np.nan  # not run
    b = intervals.best(values, log_lrs)
    mean = np.where(np.isnan(values).any(-1), np.inf, values.mean(-1))
    assert b.log_lr == log_lrs[b.point] and b.point == int(np.argmin(mean))
    assert b.near_low <= b.log_lr <= b.near_high
    assert b.near_high < log_lrs[-1]
    assert not b.at_end


def test_metric_counts_a_solved_task_as_solved():
    start = 0.5
    windows = np.array(
        [
            [start, 1e-2, 1e-6, 1e-9],  # reaches round-off
            [start, 1e-2, 1e-4, 1e-4],  # stops at the solved level: the same metric
            [start, 0.4, 0.3, 0.2],  # barely learns
            [start, 1e-2, np.inf, np.nan],  # diverged
        ]
    )
    values = metric.metric(windows, start)
    assert values[0] == values[1] == pytest.approx((0 + math.log10(0.02) - 3 - 3) / 4)
    assert -1 < values[2] < 0
    assert values[3] == np.inf
    assert metric.initial_loss(windows) == start


def test_rose_tenfold_sees_a_late_blow_up_but_not_round_off():
    start = 1.0
    curves = np.array(
        [
            [1.0, 1e-2, 1e-3, 2e-2],  # back up over tenfold from its lowest: a blow-up
            [1.0, 1e-3, 1e-7, 1e-5],  # round-off below the solved level wandering: no
            [1.0, 0.5, 0.4, 0.3],  # steady: no
        ]
    )
    assert metric.rose_tenfold(curves, start).tolist() == [True, False, False]


def test_standing_marks_a_best_rate_at_a_cliff_provisional():
    log_lrs = np.arange(5) / 4 - 3
    curves = np.ones((5, 3, 4)) * np.array([1.0, 0.1, 0.01, 0.01])
    curves[:, :, 1:] *= np.array([3.0, 2.0, 1.0, 0.5, 0.5])[:, None, None]
    curves[4, 0, -1] = 10.0  # the largest rate blows up on one seed
    s = metric.standing(curves, log_lrs, 1.0)
    assert s.best.point == 3 and s.cliff and s.provisional
    assert (s.stable_low, s.stable_high) == (log_lrs[0], log_lrs[3])
    assert "provisional" in s.rates()
