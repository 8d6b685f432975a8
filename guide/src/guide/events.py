"""Events in a training run's per-step records, by rules fixed before the counts.

Shared by the guide's pages on logit growth and on watching attention during training, so
that both call the same thing a loss spike. Steps are 0-based indices into the records.
"""

from __future__ import annotations

import numpy as np

#: steps per moving mean
SMOOTH = 20
#: a loss spike: the moving mean of the training loss this many nats above its lowest so far
SPIKE = 0.5


def moving_mean(x: np.ndarray, window: int = SMOOTH) -> np.ndarray:
    """Means over ``window`` consecutive steps; entry ``t`` covers steps ``t`` to
    ``t + window - 1``."""
    c = np.cumsum(np.insert(np.asarray(x, dtype=np.float64), 0, 0.0))
    return (c[window:] - c[:-window]) / window  # type: ignore[no-any-return,unused-ignore]


def first(flags: np.ndarray) -> float:
    """Index of the first True in ``flags``, NaN if there is none."""
    hit = np.flatnonzero(flags)
    return float(hit[0]) if hit.size else np.nan


def loss_spike(loss: np.ndarray, window: int = SMOOTH, rise: float = SPIKE) -> float:
    """The step that ends the first window whose mean training loss is more than ``rise``
    above the lowest window mean so far (NaN if none). A run that became non-finite spikes
    at its first non-finite window."""
    smooth = moving_mean(loss, window)
    smooth = np.where(np.isfinite(smooth), smooth, np.inf)
    return first(smooth > np.minimum.accumulate(smooth) + rise) + window - 1
