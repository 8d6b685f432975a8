r"""The declared metric of the training pages, and the measures printed beside it.

Site-only, no stability promise. **The metric** of a run is the area under its held-out log-loss
curve *relative to the task's start*: the mean over the run's windows of
$\log_{10}(L / L_0)$, where $L_0$ is the task's initial loss (the median first-window loss over
every run of a sweep part) and a loss below $L_0 / 1000$ counts as $L_0 / 1000$: the task is
solved there (the error's RMS is 3% of the start's), and what orders two runs below it is float32
round-off, not learning. So the metric runs from 0 (no progress) to -3 (solved from the first
window); a run that diverged counts as $+\infty$. It rewards getting low and getting there early;
it picks each variant's best learning rate and it ranks the variants.

Beside it the pages print what an area can hide: a run's last-window loss, whether it *rose
tenfold* (a window ten times above the lowest window before it: a late blow-up the area averages
away), and each variant's *stable range*, the learning rates at which no seed diverged or rose
tenfold.

The study ``fresh_seeds`` picks its learning rates with this metric, so this module is part of
its code hash (a change here needs ``python -m guide.stored confirm fresh_seeds``). The
sweeps themselves widen their grids by an older criterion (``studies._sweep.metric``, the same
area clipped at an absolute $10^{-8}$); ``at_end`` on the pages flags a best rate that sits at an
end of the grid under today's metric.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import intervals

__all__ = [
    "METRIC",
    "SMALLEST_EFFECT",
    "SOLVED",
    "Standing",
    "fresh_gaps",
    "initial_loss",
    "metric",
    "rose_tenfold",
    "stable_points",
    "standing",
    "sweep_metric",
]

#: A loss below ``SOLVED`` times the task's initial loss counts as solved.
SOLVED = 1e-3
#: The declared metric, in words, for the pages.
METRIC = (
    "area under the held-out log-loss curve relative to the start: the mean over the run of "
    "log10(loss / initial loss), a loss below a thousandth of the initial loss counted as that"
)
#: The smallest difference in the metric that counts as one: 0.05, the loss a factor
#: 10^0.05 = 1.12 apart over the run. A smaller difference is "tied" even when resolved.
SMALLEST_EFFECT = 0.05


def initial_loss(curve_loss: np.ndarray) -> float:
    """The task's initial loss: the median first-window loss over every run given
    ``(..., windows)`` (runs not made are NaN and left out)."""
    return float(np.nanmedian(curve_loss[..., 0]))


def metric(curve_loss: np.ndarray, initial: float | None = None) -> np.ndarray:
    """The declared metric of each run from its loss windows ``(..., windows)``.

    ``initial`` defaults to [initial_loss][] of the runs given (pass it when scoring part of a
    sweep). ``+inf`` for a run with a non-finite window (it diverged); NaN where the run was not
    made (all windows NaN).
    """
    start = initial_loss(curve_loss) if initial is None else initial
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log10(np.maximum(curve_loss / start, SOLVED))
    diverged = ~np.isfinite(curve_loss).all(-1)
    out = np.where(diverged, np.inf, logs.mean(-1))
    return np.where(np.isnan(curve_loss).all(-1), np.nan, out)


def rose_tenfold(curve_loss: np.ndarray, initial: float) -> np.ndarray:
    """Runs ``(...)`` that diverged, or had a window ten times above the lowest window before
    it (a blow-up, however the run ended). Losses below the solved level count as that level:
    round-off that wanders by ten below it is not a blow-up."""
    with np.errstate(invalid="ignore"):
        loss = np.maximum(curve_loss, SOLVED * initial)
        lowest = np.minimum.accumulate(np.nan_to_num(loss, nan=np.inf), axis=-1)
        rise = (loss[..., 1:] > 10 * lowest[..., :-1]).any(-1)
    return np.asarray(rise | ~np.isfinite(curve_loss).all(-1))


def stable_points(curve_loss: np.ndarray, initial: float) -> np.ndarray:
    """Grid points ``(points,)`` of one variant's ``(points, seeds, windows)`` curves at which
    every seed ran and none diverged or rose tenfold."""
    run = ~np.isnan(curve_loss).all(-1).any(-1)
    return np.asarray(run & ~rose_tenfold(curve_loss, initial).any(-1))


def sweep_metric(arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """One stored sweep part's metric values ``(variants, points, seeds)``, its log10 learning
    rates ``(points,)`` and its variant names; ``L_0`` is the part's own initial loss."""
    names = [str(v) for v in arrays["variants"]]
    return metric(arrays["curve_loss"]), arrays["quarters"] / 4, names


class Standing(NamedTuple):
    """Where a variant's best learning rate stands on its grid."""

    best: intervals.Best
    stable_low: float  # log10 rates of the stable range: the contiguous stable grid points
    stable_high: float  # around the best (NaN if the best point itself is unstable)
    cliff: bool  # the next larger rate is unstable (or was not run)
    rose: int  # seeds at the best rate that rose tenfold or diverged

    @property
    def provisional(self) -> bool:
        """The best rate sits at an end of the grid or at a cliff."""
        return self.best.at_end or self.cliff

    def rates(self) -> str:
        """``"0.0032 (0.0032 to 0.0056)"``: the best grid rate and the near-best range, the
        rates the seeds do not tell apart from it; ``", provisional"`` added where it is."""
        b = self.best
        near = f"{10**b.near_low:.2g} to {10**b.near_high:.2g}"
        return f"{10**b.log_lr:.2g} ({near})" + (", provisional" * self.provisional)

    def stable(self) -> str:
        """The stable range as ``"0.001 to 0.01"``, or ``"none"``."""
        if not np.isfinite(self.stable_low):
            return "none"
        return f"{10**self.stable_low:.2g} to {10**self.stable_high:.2g}"


def standing(curve_loss: np.ndarray, log_lrs: np.ndarray, initial: float) -> Standing:
    """The [Standing][] of one variant from its ``(points, seeds, windows)`` loss curves."""
    values = metric(curve_loss, initial)
    b = intervals.best(values, log_lrs)
    ok = stable_points(curve_loss, initial)
    i = b.point
    lo = hi = i
    while ok[i] and lo - 1 >= 0 and ok[lo - 1]:
        lo -= 1
    while ok[i] and hi + 1 < len(ok) and ok[hi + 1]:
        hi += 1
    low, high = (float(log_lrs[lo]), float(log_lrs[hi])) if ok[i] else (np.nan, np.nan)
    cliff = i + 1 >= len(ok) or not ok[i + 1]
    rose = int(rose_tenfold(curve_loss[i], initial).sum())
    return Standing(b, low, high, bool(cliff), rose)


def fresh_gaps(
    arrays: dict[str, np.ndarray], initial: float, reference: str
) -> dict[str, intervals.Gap]:
    """On a part of the ``fresh_seeds`` study: each variant's metric minus ``reference``'s,
    seed by seed, with its t-interval; ``initial`` is the loss the metric is relative to (the
    sweep part's, so that both pages score the same way)."""
    values = metric(arrays["curve_loss"], initial)  # (variants, seeds)
    names = [str(v) for v in arrays["variants"]]
    ref = values[names.index(reference)]
    return {n: intervals.paired_gap(ref, values[i]) for i, n in enumerate(names) if n != reference}
