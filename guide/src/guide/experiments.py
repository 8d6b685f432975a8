"""Computations that a guide page and the fact-check share, so their numbers agree.

Site-only, no stability promise. A guide page and the fact-check call the same function with the
same settings. The article's experiment is the stored full run of ``studies/article.py`` (see
``guide.stored``): the training page verifies it against a live rerun, and the
fact-check reads the same arrays through these functions.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
import torch

from attnscale._softmax import softmax_jacobian_norm

from . import stored
from .intervals import paired_gap

__all__ = [
    "ARTICLE_QUARTER",
    "SIGMAS",
    "PairedGap",
    "article",
    "epochs_to_floor",
    "final_loss_gap",
    "jacobian_norm_peak",
    "logit_gradient_ratio",
    "softmax_rows",
    "speed_gap",
]

#: Logit scales of the softmax-gradient page: 1/4 to 128, a quarter octave apart.
SIGMAS: tuple[float, ...] = tuple(2 ** (j / 4) for j in range(-8, 29))


def softmax_rows(seed: int = 0, rows: int = 2000, n: int = 64) -> torch.Tensor:
    """Standard-normal rows ``(rows, n)``; the softmax-gradient page's logits are ``sigma * z``."""
    return torch.randn(rows, n, generator=torch.Generator().manual_seed(seed))


def jacobian_norm_peak(z: torch.Tensor) -> tuple[float, float]:
    """Where the mean softmax-Jacobian norm of the rows ``sigma * z`` peaks over ``SIGMAS``.

    Returns ``(sigma, mean norm there)``.
    """
    norms = softmax_jacobian_norm(torch.tensor(SIGMAS)[:, None, None] * z).mean(-1)  # (sigmas,)
    i = int(norms.argmax())
    return SIGMAS[i], float(norms[i])


@functools.lru_cache(maxsize=1)
def article() -> stored.Stored:
    """The stored full run of the article's experiment (20 seeds, learning-rate sweep)."""
    return stored.load("article")


#: The article's learning rate, as a quarter-decade exponent of the stored sweep.
ARTICLE_QUARTER = -12


def _at(arrays: dict[str, np.ndarray], key: str, quarter: int) -> np.ndarray:
    """``arrays[key]`` at one learning rate: ``(variants, seeds, ...)``."""
    return arrays[key][:, list(arrays["quarters"]).index(quarter)]


class PairedGap(NamedTuple):
    """A per-seed quantity of the two variants and its difference, paired by seed."""

    scaled: float  # mean over seeds, scaled model
    unscaled: float
    gap: float  # mean of (unscaled - scaled), seed by seed
    low: float  # 95% t-interval of the mean gap over the seeds
    high: float
    seeds: int  # seeds that entered (both variants finite)
    reference: float  # what the gap is measured against: the scaled model's mean quantity, or
    # for a loss its excess over the seed's floor (the part training can remove)


def _paired(scaled: np.ndarray, unscaled: np.ndarray, floor: np.ndarray | None = None) -> PairedGap:
    ok = np.isfinite(scaled) & np.isfinite(unscaled)
    a, b = scaled[ok], unscaled[ok]
    if a.size == 0:  # no seed where both variants have the quantity
        return PairedGap(math.nan, math.nan, math.nan, math.nan, math.nan, 0, math.nan)
    g = paired_gap(a, b)
    reference = float(a.mean() if floor is None else (a - floor[ok]).mean())
    return PairedGap(float(a.mean()), float(b.mean()), g.mean, g.low, g.high, g.n, reference)


def final_loss_gap(arrays: dict[str, np.ndarray], quarter: int = ARTICLE_QUARTER) -> PairedGap:
    """Final-epoch training loss (the article's measure), unscaled minus scaled, by seed;
    ``reference`` is the scaled model's excess loss, its loss minus the seed's floor."""
    last = _at(arrays, "epoch_loss", quarter)[..., -1]  # (variants, seeds)
    return _paired(last[0], last[1], arrays["floor"])


def epochs_to_floor(arrays: dict[str, np.ndarray], quarter: int = ARTICLE_QUARTER) -> np.ndarray:
    """First epoch (from 1) whose loss is within 1% of the seed's floor: ``(variants, seeds)``;
    NaN for a run that never gets there."""
    loss = _at(arrays, "epoch_loss", quarter)  # (variants, seeds, epochs)
    within = loss < 1.01 * arrays["floor"][None, :, None]
    first = within.argmax(-1) + 1.0
    return np.where(within.any(-1), first, np.nan)


def speed_gap(arrays: dict[str, np.ndarray], quarter: int = ARTICLE_QUARTER) -> PairedGap:
    """Epochs to within 1% of the floor, unscaled minus scaled, by seed (seeds where both get
    there)."""
    epochs = epochs_to_floor(arrays, quarter)
    return _paired(epochs[0], epochs[1])


def logit_gradient_ratio(
    arrays: dict[str, np.ndarray], quarter: int = ARTICLE_QUARTER
) -> tuple[float, float, float]:
    """Unscaled over scaled gradient at the softmax input in the first epoch, per seed.

    The quantity is each step's median over query rows of the row's gradient norm, then its
    median over the first epoch's steps (``logit_grad_row_median`` in the metric
    definitions). Returns the mean ratio over seeds and its lowest and highest seed.
    """
    rows = _at(arrays, "logit_grad_row_median_epoch1", quarter)  # (variants, seeds)
    ratio = rows[1] / rows[0]
    return float(ratio.mean()), float(ratio.min()), float(ratio.max())
