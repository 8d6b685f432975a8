"""Intervals and effect sizes for the training pages: site-only, no stability promise.

Seeds are few on these pages (3 to 20), so every interval is one that keeps its coverage at small
``n``: the Student t-interval of a mean over seeds (paired where two variants share seeds: the
same data and initial weights), printed with its ``n``; one seed gives no interval at all. A
percentile bootstrap, used here before, covers about 84% at n = 5 and 76% at n = 3 when it says
95% (``tests/test_intervals.py`` measures both).

A best learning rate is known only to its grid's resolution: [best][] gives the grid point and the
*near-best range*, the grid points whose metric the seeds do not tell apart from the best one's.
Part of the code hash of ``fresh_seeds``, which picks its rates with [best][]: a change here needs
``python -m guide.stored confirm fresh_seeds``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = [
    "Best",
    "Gap",
    "best",
    "mean_interval",
    "median_interval",
    "paired_gap",
    "t_quantile",
    "wilson_interval",
]


def _t_cdf(t: float, df: int) -> float:
    """Student's t distribution function, by integrating its density (Simpson, 2,000 panels)."""
    if t < 0:
        return 1.0 - _t_cdf(-t, df)
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    x = np.linspace(0.0, t, 4001)
    pdf = np.exp(log_c - (df + 1) / 2 * np.log1p(x * x / df))
    h = t / 4000
    area = h / 3 * (pdf[0] + pdf[-1] + 4 * pdf[1:-1:2].sum() + 2 * pdf[2:-1:2].sum())
    return 0.5 + float(area)


def t_quantile(df: int, level: float = 0.95) -> float:
    """The two-sided ``level`` quantile of Student's t with ``df`` degrees of freedom
    (``t_quantile(4)`` is 2.776): the half-width of a t-interval in standard errors."""
    if df < 1:
        raise ValueError(f"df: need at least 1 degree of freedom, got {df}")
    target = 1 - (1 - level) / 2
    low, high = 0.0, 1e3
    for _ in range(60):  # bisection: the distribution function is monotone
        mid = (low + high) / 2
        low, high = (mid, high) if _t_cdf(mid, df) < target else (low, mid)
    return (low + high) / 2


class Gap(NamedTuple):
    """A mean over seeds (of a quantity, or of a per-seed difference) with its 95% t-interval;
    ``low`` and ``high`` are NaN with fewer than two seeds."""

    mean: float
    low: float
    high: float
    n: int

    def text(self, spec: str = "+.2f") -> str:
        """``"+0.12 (-0.03 to +0.27), n = 5"``, or ``"+7.00, n = 1, no interval"``."""
        if self.n < 2:
            return f"{self.mean:{spec}}, n = {self.n}, no interval"
        return f"{self.mean:{spec}} ({self.low:{spec}} to {self.high:{spec}}), n = {self.n}"

    def verdict(
        self, below: str, above: str, tied: str, *, smallest: float, undecided: str = "undecided"
    ) -> str:
        """``below`` or ``above`` when the interval excludes 0 and the mean is at least
        ``smallest`` in size; ``tied`` when the whole interval lies within ``±smallest`` (or
        excludes 0 with a mean too small to count); ``undecided`` when the interval reaches both
        0 and an effect of ``smallest``: the seeds cannot tell."""
        if self.n < 2 or not math.isfinite(self.mean):
            return undecided
        if self.high < 0 or self.low > 0:
            if abs(self.mean) < smallest:
                return tied
            return below if self.high < 0 else above
        return tied if -smallest < self.low and self.high < smallest else undecided


def mean_interval(values: np.ndarray, level: float = 0.95) -> Gap:
    """The mean of the finite ``values`` and its t-interval."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return Gap(math.nan, math.nan, math.nan, 0)
    mean = float(x.mean())
    if x.size < 2:
        return Gap(mean, math.nan, math.nan, int(x.size))
    half = t_quantile(x.size - 1, level) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return Gap(mean, mean - half, mean + half, int(x.size))


def paired_gap(a: np.ndarray, b: np.ndarray) -> Gap:
    """``b - a`` seed by seed: its mean and t-interval over the seeds where both are finite."""
    return mean_interval(np.asarray(b, dtype=float) - np.asarray(a, dtype=float))


class Best(NamedTuple):
    """A variant's best learning rate on its grid and its metric there."""

    point: int  # index of the best grid point: the lowest mean metric over seeds
    log_lr: float  # log10 of its rate
    near_low: float  # log10 rates of the near-best range: the grid points the seeds do not
    near_high: float  # tell apart from the best (their paired t-interval reaches 0)
    value: Gap  # the metric at the best point, over seeds
    at_end: bool  # the best point is the first or the last point run


def best(values: np.ndarray, log_lrs: np.ndarray) -> Best:
    """The best grid point of one variant from its ``(points, seeds)`` metric values.

    A run that diverged has metric ``+inf``, so a point where a seed diverged is never best,
    nor near-best. Only the contiguous stretch of near-best points around the best is reported.
    """
    with np.errstate(invalid="ignore"):
        mean = np.where(np.isnan(values).any(-1), np.nan, values.mean(-1))
    run = np.flatnonzero(~np.isnan(mean))
    if run.size == 0:
        nan = math.nan
        return Best(-1, nan, nan, nan, Gap(nan, nan, nan, 0), False)
    i = int(run[np.argmin(mean[run])])

    def near(j: int) -> bool:
        if np.isnan(mean[j]) or not np.isfinite(values[j]).all():
            return False
        return paired_gap(values[i], values[j]).low <= 0

    lo = hi = i
    while lo - 1 >= 0 and near(lo - 1):
        lo -= 1
    while hi + 1 < len(mean) and near(hi + 1):
        hi += 1
    at_end = bool(i in (run[0], run[-1]))
    value = mean_interval(values[i])
    return Best(i, float(log_lrs[i]), float(log_lrs[lo]), float(log_lrs[hi]), value, at_end)


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
