"""Intervals and effect sizes for the training pages: site-only, no stability promise.

Every interval on the training pages is a 95% percentile bootstrap over seeds
(``studies._sweep.bootstrap``: the seeds resampled with replacement, 4,000 draws), paired where
two variants share seeds (the same data and initial weights). [resample][] draws the same
resamples as one array, so that a statistic computed on all of them at once (the best rate of
every resample: [best_lr_draws][]) gives the same interval in a fraction of the time. Kept apart from the experiments'
code (``studies``), whose hash decides whether a stored run is current: analysing a run must
not invalidate it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .studies._sweep import best_lr, bootstrap, mean_metric, metric

__all__ = [
    "Best",
    "Gap",
    "best",
    "best_lr_draws",
    "bootstrap",
    "median_interval",
    "paired_gap",
    "percentile_interval",
    "resample",
    "sweep_metric",
    "wilson_interval",
]

DRAWS = 4000


def resample(seeds: int) -> np.ndarray:
    """Seed positions ``(DRAWS, seeds)``, drawn with replacement: ``bootstrap``'s resamples."""
    return np.random.default_rng(0).integers(0, seeds, (DRAWS, seeds))


def percentile_interval(draws: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The percentile interval of a statistic's values on the resamples (non-finite dropped)."""
    draws = np.asarray(draws, dtype=float)
    draws = draws[np.isfinite(draws)]
    if draws.size == 0:
        return math.nan, math.nan
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(draws, [tail, 100 - tail])
    return float(low), float(high)


def best_lr_draws(values: np.ndarray, log_lrs: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``studies._sweep.best_lr`` of every resample at once: ``(draws,)`` log10 best rates.

    ``values`` are one variant's metric values ``(points, seeds)``, ``idx`` the resamples
    ``(draws, seeds)``; a draw with no point run gives NaN.
    """
    mean = mean_metric(values[:, idx])  # (points, draws)
    valid = ~np.isnan(mean)
    i = np.argmin(np.where(valid, mean, np.inf), axis=0)
    best = log_lrs[i].astype(float)
    inner = np.clip(i, 1, len(log_lrs) - 2)
    draw = np.arange(idx.shape[0])
    y0, y1, y2 = mean[inner - 1, draw], mean[inner, draw], mean[inner + 1, draw]
    curvature = y0 - 2 * y1 + y2
    refine = (i == inner) & np.isfinite(y0 + y1 + y2) & (curvature > 0)
    h = log_lrs[inner + 1] - log_lrs[inner]  # a uniform grid
    with np.errstate(divide="ignore", invalid="ignore"):
        best = np.where(refine, best + 0.5 * h * (y0 - y2) / curvature, best)
    return np.where(valid.any(0), best, np.nan)


def sweep_metric(arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """One stored sweep part's metric values ``(variants, points, seeds)``, its log10 learning
    rates ``(points,)`` and its variant names."""
    names = [str(v) for v in arrays["variants"]]
    return metric(arrays["curve_loss"]), arrays["quarters"] / 4, names


class Best(NamedTuple):
    """A variant's best learning rate and its metric there, with bootstrap intervals."""

    log_lr: float  # log10 of the best rate, refined between grid points
    log_lr_low: float
    log_lr_high: float
    point: int  # index of the best grid point
    value: float  # mean metric over seeds at the best grid point
    value_low: float
    value_high: float
    at_end: bool  # the best grid point is the first or the last point run


def best(values: np.ndarray, log_lrs: np.ndarray) -> Best:
    """The best rate of one variant from its ``(points, seeds)`` metric values, with intervals.

    The rate is ``studies._sweep.best_lr`` (the grid's best point refined by a parabola); its
    interval and the metric's at that point come from resampling the seeds.
    """
    idx = resample(values.shape[-1])
    log_lr, i = best_lr(values, log_lrs)
    low, high = percentile_interval(best_lr_draws(values, log_lrs, idx))
    at = values[i]
    v_low, v_high = percentile_interval(at[idx].mean(-1))
    run = np.flatnonzero(~np.isnan(values).any(-1))
    at_end = bool(i in (run[0], run[-1]))
    return Best(log_lr, low, high, i, float(at.mean()), v_low, v_high, at_end)


#: The smallest difference in the training pages' metric that counts as one: 0.05 in the mean
#: log10 loss, the loss a factor 10^0.05 = 1.12 apart over the run. A smaller difference is
#: "tied" even when its interval excludes 0.
SMALLEST_EFFECT = 0.05


class Gap(NamedTuple):
    """The mean of a per-seed difference, with its 95% bootstrap interval."""

    mean: float
    low: float
    high: float

    def verdict(self, below: str, above: str, tied: str, *, smallest: float = 0.0) -> str:
        """``below`` if the interval lies below 0, ``above`` if above it, else ``tied``.

        A difference whose mean is smaller in size than ``smallest`` is ``tied`` however narrow
        its interval: it is resolved, but too small to count.
        """
        if abs(self.mean) < smallest:
            return tied
        return below if self.high < 0 else above if self.low > 0 else tied


def paired_gap(a: np.ndarray, b: np.ndarray) -> Gap:
    """``b - a`` seed by seed, its mean and bootstrap interval (seeds where both are finite)."""
    diff = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    diff = diff[np.isfinite(diff)]
    if diff.size == 0:
        return Gap(math.nan, math.nan, math.nan)
    low, high = percentile_interval(diff[resample(diff.size)].mean(-1))
    return Gap(float(diff.mean()), low, high)


def wilson_interval(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson's 95% score interval for a rate of ``k`` successes in ``n`` trials: it keeps its
    coverage at small ``n`` and at rates near 0 or 1, where the normal approximation fails."""
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"k, n: need 0 <= k <= n and n > 0, got k={k}, n={n}")
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def median_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """A distribution-free interval for the median: the order statistics ``(j, n + 1 - j)``
    with the largest ``j`` whose binomial coverage is at least ``level``. With fewer than 6
    values no such pair reaches 95%: the whole range (min, max) is returned, which covers less."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = x.size
    if n == 0:
        raise ValueError("values: need at least one value")
    # P(x_(j) <= median <= x_(n+1-j)) = 1 - 2 * P(Binomial(n, 1/2) <= j - 1)
    cdf = np.cumsum([math.comb(n, i) for i in range(n + 1)]) / 2.0**n
    j = 1
    while j + 1 <= (n + 1) // 2 and 1 - 2 * cdf[j] >= level:
        j += 1
    return float(x[j - 1]), float(x[n - j])
