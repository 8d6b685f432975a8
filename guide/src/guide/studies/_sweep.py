r"""Learning-rate sweeps of [train][attnscale.train] and their one declared metric.

Site-only. A sweep trains variants (a strategy, and a gain on the initial query and key weights)
over a quarter-decade learning-rate grid and seeds, widens the grid until every variant's best
rate is inside it, and keeps per model: the loss and attention statistics averaged over windows
of steps, the logit spread at the first step, and the final loss on a separate test set.

Every sweep trains on fresh data: one epoch over ``steps * batch_size`` sequences, so each
mini-batch is new to the model when its loss is recorded (before the update), and the recorded
training loss is a held-out loss at every step.

The metric of the training pages is declared here once: **the area under the held-out log-loss
curve**, the mean over the run of $\log_{10}$ of the held-out loss (window means of 64 steps),
with losses below $10^{-8}$ counted as $10^{-8}$ (below that float32 rounding, not learning,
orders the runs) and a run that diverged counted as $+\infty$. Lower is better; it rewards
getting low and getting there early. It picks each variant's best learning rate and it ranks
the variants. Intervals are percentile bootstrap intervals over seeds, paired where variants
share seeds.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from attnscale import train

__all__ = [
    "METRIC",
    "best_lr",
    "bootstrap",
    "mean_metric",
    "metric",
    "quarter_lrs",
    "sweep",
    "sweep_budget",
]

#: The declared metric, in words, for the pages.
METRIC = "area under the held-out log-loss curve (mean over the run of log10 of the loss)"
#: Losses below this count as this in the metric (float32 rounding decides them).
FLOOR = 1e-8

#: Per-step records kept as window means (``curve_*``) in a sweep's arrays.
CURVES = ("loss", "normalized_entropy", "logit_std", "logit_grad_row_median", "grad_norm_q")
LR_LIMITS = (-20, 4)  # the grid never goes below 1e-5 or above 10 (quarter-decade exponents)


def quarter_lrs(quarters: Sequence[int]) -> np.ndarray:
    """Learning rates ``10 ** (k / 4)`` of quarter-decade exponents ``k``."""
    return np.array([10 ** (k / 4) for k in quarters])


def metric(curve_loss: np.ndarray) -> np.ndarray:
    """The declared metric of each run from its loss windows ``(..., windows)``.

    The mean over windows of ``log10(max(loss, FLOOR))``; ``+inf`` for a run with a
    non-finite window (it diverged); NaN where the run was not made (all windows NaN).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log10(np.maximum(curve_loss, FLOOR))
    diverged = ~np.isfinite(curve_loss).all(-1)
    out = np.where(diverged, np.inf, logs.mean(-1))
    return np.where(np.isnan(curve_loss).all(-1), np.nan, out)


def mean_metric(values: np.ndarray) -> np.ndarray:
    """Mean over the last axis (seeds) of metric values; NaN where a point was not run."""
    run = ~np.isnan(values).any(-1)
    with np.errstate(invalid="ignore"):
        mean = values.mean(-1)
    return np.where(run, mean, np.nan)


def best_lr(values: np.ndarray, log_lrs: np.ndarray) -> tuple[float, int]:
    """Best log10 learning rate of one variant from its metric values ``(points, seeds)``.

    The grid point with the lowest mean metric, refined by the vertex of the parabola through
    it and its two neighbours (when both were run, finite, and the parabola opens upwards).
    Returns ``(log10 best rate, index of the best grid point)``.
    """
    mean = mean_metric(values)
    valid = ~np.isnan(mean)
    if not valid.any():
        return math.nan, -1
    i = int(np.nanargmin(np.where(valid, mean, np.inf)))
    best = float(log_lrs[i])
    if 0 < i < len(mean) - 1:
        y0, y1, y2 = mean[i - 1], mean[i], mean[i + 1]
        if np.isfinite([y0, y1, y2]).all():
            h = float(log_lrs[i + 1] - log_lrs[i])  # a uniform grid
            curvature = y0 - 2 * y1 + y2
            if curvature > 0:
                best += 0.5 * h * (y0 - y2) / curvature
    return best, i


def bootstrap(
    stat: Any, seeds: int, *, draws: int = 4000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile interval of ``stat(idx)`` over seed indices drawn with replacement.

    ``stat`` takes an integer array of seed positions (a resample of ``range(seeds)``) and
    returns a float; non-finite values are dropped before taking the percentiles.
    """
    rng = np.random.default_rng(seed)
    values = np.array([stat(rng.integers(0, seeds, seeds)) for _ in range(draws)])
    values = values[np.isfinite(values)]
    if values.size == 0:
        return math.nan, math.nan
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def _window_means(values: torch.Tensor, window: int) -> np.ndarray:
    """``(models, steps)`` to ``(models, steps // window)`` means."""
    models, steps = values.shape
    w = steps // window
    return values[:, : w * window].reshape(models, w, window).mean(-1).numpy()


def sweep_budget(
    task: str,
    variants: Mapping[str, tuple[str, float]],
    d_k: int,
    budget: Mapping[str, Any],
    device: str,
) -> dict[str, np.ndarray]:
    """[sweep][] at a study's budget, for square heads of width ``d_k`` (d_model = d_v = d_k)."""
    return sweep(
        task,
        variants,
        budget["quarters"],
        budget["seeds"],
        steps=budget["steps"],
        window=budget["window"],
        extend=budget["extend"],
        device=device,
        d_model=d_k,
        d_k=d_k,
        d_v=d_k,
        seq_len=budget["seq_len"],
        test_samples=budget["test_samples"],
        batch_size=budget["batch_size"],
    )


def sweep(
    task: str,
    variants: Mapping[str, tuple[str, float]],
    quarters: Sequence[int],
    seeds: Sequence[int],
    *,
    steps: int,
    window: int,
    extend: bool,
    device: str,
    **settings: Any,
) -> dict[str, np.ndarray]:
    """Train every variant at every rate of the grid, widened until each best rate is inside.

    Parameters
    ----------
    task : str
        A task of [make_task][attnscale.make_task].
    variants : mapping
        Label to ``(strategy, qk_init_gain)``.
    quarters : sequence of int
        The starting grid, as quarter-decade exponents (rates ``10 ** (k / 4)``).
    seeds : sequence of int
    steps : int
        Adam steps, each on a fresh mini-batch (one epoch of ``steps * batch_size`` sequences).
    window : int
        Steps per window of the recorded curves.
    extend : bool
        Widen the grid by two points at an end where a variant's best rate lies, until none
        does (or the grid reaches 1e-5 or 10).
    device : str
    **settings
        Passed to [train][attnscale.train] (sizes, batch size, test samples).

    Returns
    -------
    dict of arrays
        ``quarters`` (points,), ``variants`` (names), and per model, shaped
        ``(variants, points, seeds[, windows])`` with NaN where a point was not run:
        ``test_loss``, ``train_loss``, ``logit_std0`` and ``curve_<metric>`` for the metrics
        in ``CURVES``.
    """
    names = list(variants)
    runs: dict[tuple[str, int], dict[str, np.ndarray]] = {}

    def train_points(labels: Sequence[str], ks: Sequence[int]) -> None:
        by_gain: dict[float, list[str]] = {}  # one training call per initial gain
        for label in labels:
            by_gain.setdefault(variants[label][1], []).append(label)
        for gain, same in by_gain.items():
            strategies = list(dict.fromkeys(variants[label][0] for label in same))
            res = train(
                task,
                strategies=strategies,
                lrs=[10 ** (k / 4) for k in ks],
                seeds=list(seeds),
                num_samples=steps * settings["batch_size"],
                epochs=1,
                qk_init_gain=gain,
                device=device,
                progress=False,
                **settings,
            )
            curves = {m: _window_means(res.metric(m), window) for m in CURVES}
            for label in same:
                for j, k in enumerate(ks):  # noqa: B007 (kept: the stored run's code)
                    idx = res.select(strategy=variants[label][0], lr=10 ** (k / 4))
                    runs[label, k] = {
                        "test_loss": res.test_loss[idx].numpy(),
                        "train_loss": res.final_train_loss[idx].numpy(),
                        "logit_std0": res.logit_std[idx, 0].numpy(),
                        **{f"curve_{m}": c[idx] for m, c in curves.items()},
                    }

    grid = sorted(quarters)
    train_points(names, grid)
    while extend:
        low, high = [], []
        for label in names:
            ks = [k for k in grid if (label, k) in runs]
            values = np.stack([metric(runs[label, k]["curve_loss"]) for k in ks])
            _, i = best_lr(values, np.array(ks) / 4)
            if i == 0 and ks[0] > LR_LIMITS[0]:
                low.append(label)
            elif i == len(ks) - 1 and ks[-1] < LR_LIMITS[1]:
                high.append(label)
        if not low and not high:
            break
        for labels, new in (
            (low, [k for k in (grid[0] - 2, grid[0] - 1) if k >= LR_LIMITS[0]]),
            (high, [k for k in (grid[-1] + 1, grid[-1] + 2) if k <= LR_LIMITS[1]]),
        ):
            if labels and new:
                train_points(labels, new)
                grid = sorted({*grid, *new})

    windows = steps // window
    shapes = {"test_loss": (), "train_loss": (), "logit_std0": ()}
    shapes |= {f"curve_{m}": (windows,) for m in CURVES}  # type: ignore[misc]
    out: dict[str, np.ndarray] = {
        "quarters": np.array(grid),
        "variants": np.array(names),
        "seeds": np.array(list(seeds)),
    }
    for key, tail in shapes.items():
        arr = np.full((len(names), len(grid), len(seeds), *tail), np.nan, dtype=np.float32)
        for a, label in enumerate(names):
            for b, k in enumerate(grid):
                if (label, k) in runs:
                    arr[a, b] = runs[label, k][key]
        out[key] = arr
    return out


def agree(stored: Any, live: Mapping[str, Mapping[str, np.ndarray]]) -> list[Any]:
    """Checks that a reduced sweep reproduces the same models of the stored full sweep.

    For every model of the live run (a part, variant, rate and seed that the full run also
    trained): the metric and the first-step logit spread within stated bounds; and for every
    pair of variants at one rate and seed whose stored metrics differ by more than 0.1 (a
    factor 1.26 in loss), the live metrics order them the same way.

    The final test loss is not compared: a run deep in its loss floor ends somewhere else when
    the same model is trained in a stack of another size (float summation order, amplified by
    late training), while the metric, which averages the whole curve, stays put.
    """
    from ..stored import Check, close, same_direction

    checks: list[Check] = []
    for part, run in live.items():
        full = stored.parts[part]
        names = [str(v) for v in run["variants"]]
        ia = [[str(v) for v in full["variants"]].index(n) for n in names]
        ib = [list(full["quarters"]).index(k) for k in run["quarters"]]
        ic = [list(full["seeds"]).index(s) for s in run["seeds"]]
        sub = np.ix_(ia, ib, ic)
        values = {
            "metric": (metric(full["curve_loss"])[sub], metric(run["curve_loss"]), 0.0, 0.05),
            "logit spread at step 1": (full["logit_std0"][sub], run["logit_std0"], 1e-3, 0.0),
        }
        for (a, label), (b, k), (c, s) in itertools.product(
            enumerate(names), enumerate(run["quarters"]), enumerate(run["seeds"])
        ):
            where = f"{part}, {label}, lr 10^({int(k)}/4), seed {int(s)}"
            for what, (kept, now, rtol, atol) in values.items():
                checks.append(
                    close(
                        f"{where}: {what}",
                        float(kept[a, b, c]),
                        float(now[a, b, c]),
                        rtol=rtol,
                        atol=atol,
                    )
                )
        kept, now = values["metric"][:2]
        for a, a2 in itertools.combinations(range(len(names)), 2):
            for (b, k), (c, s) in itertools.product(
                enumerate(run["quarters"]), enumerate(run["seeds"])
            ):
                gap = float(kept[a, b, c] - kept[a2, b, c])
                if np.isfinite(gap) and abs(gap) > 0.1:
                    checks.append(
                        same_direction(
                            f"{part}, lr 10^({int(k)}/4), seed {int(s)}: metric of {names[a]} "
                            f"minus {names[a2]}",
                            gap,
                            float(now[a, b, c] - now[a2, b, c]),
                        )
                    )
    return checks
