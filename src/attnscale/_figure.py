"""Small matplotlib utilities shared by the public plot helpers and the site's figures."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes

DEFAULT_SIZE = (6.4, 4.0)


def new_axes(ax: Axes | None, size: tuple[float, float] = DEFAULT_SIZE) -> Axes:
    """Return ``ax``, or the Axes of a new figure of ``size`` inches."""
    if ax is not None:
        if not isinstance(ax, Axes):
            raise TypeError(f"ax must be a matplotlib Axes, got {type(ax).__name__}")
        return ax
    _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


def to_numpy(x: object) -> np.ndarray:
    """A float64 NumPy copy of a tensor, array or sequence."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=float)


LINESTYLES = ("-", "--", ":", "-.")


def cycle_length() -> int:
    """How many colours the current style's property cycle has."""
    return max(1, len(plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])))


def cycle_colour(i: int) -> str:
    """The i-th colour of the current style's cycle (wrapping around)."""
    return f"C{i % cycle_length()}"


def linestyle(i: int) -> str:
    """A line style that changes each time the colours wrap around."""
    return LINESTYLES[(i // cycle_length()) % len(LINESTYLES)]
