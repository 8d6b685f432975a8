"""Figure helpers that several pages (or a page and a test) share: site-only, no stability
promise. A helper that one page alone uses lives in that page's script, where a reader who
downloads it sees it.

Colours come from the axes' property cycle, that is from the site's style
([use_style][guide.style.use_style] sets it), or from the sequential map of ordered values.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from matplotlib import colormaps
from matplotlib import colors as mcolors
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from attnscale._figure import new_axes

__all__ = [
    "one_legend",
    "plot_threshold_dots",
]


def ordered_colour(k: int, n: int) -> str:
    """The colour of the k-th of n ordered values (a d_k, a sigma, a threshold): a sequential
    map, since the site's categorical colours each mean one strategy."""
    return str(mcolors.to_hex(colormaps["viridis"](0.85 * k / max(n - 1, 1))))


#: Statistics of one quantity (mean, median, one row) and kinds of event: black and greys,
#: told apart by line style or marker, never by a strategy's colour.
GREYS = ("black", "0.45", "0.65")


def one_legend(fig: Figure, *, ncols: int = 4) -> None:
    """Replace the panels' legends by one legend below the figure, each label once."""
    entries: dict[str, Artist] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
        legend = ax.get_legend()
        if legend is not None:
            legend.remove()
    if entries:
        fig.legend(
            list(entries.values()),
            list(entries),
            loc="outside lower center",
            ncols=min(ncols, len(entries)),
            frameon=False,
        )


def vmarks(ax: Axes, marks: Mapping[str, float] | None) -> None:
    """Grey vertical lines at the given x positions, named in the legend.

    Grey, so they never share a colour with a curve or a band, and labelled in the legend rather
    than by rotated text, which would sit on the curves and bands. Never dotted: dotted grey is
    the horizontal reference line (log n, a threshold) of the same figures. Each line has its own
    grey, its own dash pattern and its own marker at its top end (the legend shows the marker
    too), so that lines of similar greys and dashes, and a dashed curve beside them, can still
    be told apart.
    """
    for k, (label, value) in enumerate((marks or {}).items()):
        ax.axvline(
            value,
            ymax=0.97,
            color=("0.2", "0.5", "0.35", "0.65")[k % 4],
            linestyle=((0, (6, 2)), "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1.5, 1.5, 6, 1.5)))[k % 4],
            linewidth=1.2,
            marker=("v", "s", "D", "^")[k % 4],
            markersize=4.5,
            markevery=[1],
            label=label,
        )


def plot_threshold_dots(
    thresholds: Mapping[str, Mapping[str, float | None]],
    *,
    xlim: tuple[float, float],
    ax: Axes | None = None,
    xlabel: str = "value",
) -> Axes:
    """A dot chart of where each row crosses each of several thresholds, on a log axis.

    One row per key of ``thresholds``; each threshold kind has its own marker and colour and is
    drawn slightly above or below the row's line, so equal values do not hide each other. A
    threshold that was not reached (``None``) is drawn as a hollow triangle at the right edge.

    Parameters
    ----------
    thresholds : Mapping[str, Mapping[str, float or None]]
        ``{row label: {threshold kind: value or None}}``; every row has the same kinds.
    xlim : tuple of float
        The measured range (positive); values outside it are errors.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.
    xlabel : str
        Label of the x axis.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        If there are no rows, rows have different kinds, or a value is outside ``xlim``.
    """
    rows = list(thresholds)
    if not rows:
        raise ValueError("thresholds must have at least one row")
    kinds = list(thresholds[rows[0]])
    if any(list(thresholds[r]) != kinds for r in rows):
        raise ValueError("every row of thresholds must have the same kinds, in the same order")
    lo, hi = xlim
    if not 0 < lo < hi:
        raise ValueError(f"xlim must be (low, high) with 0 < low < high, got {xlim}")
    ax = new_axes(ax, (6.4, 0.4 * len(rows) + 1.4))
    ax.set_xscale("log")
    ax.set_xlim(lo / 1.25, hi * 1.7)
    edge = hi * 1.3  # where "not reached" is drawn, beyond the end of the measured range
    ax.axvline(hi, color="0.5", linestyle=":", linewidth=1)
    y = np.arange(len(rows))[::-1]
    offsets = np.linspace(0.15, -0.15, len(kinds)) if len(kinds) > 1 else [0.0]
    for k, (kind, dy) in enumerate(zip(kinds, offsets, strict=True)):
        colour, marker = GREYS[k % 2], "os^D"[k % 4]
        reached = [(yi, thresholds[r][kind]) for yi, r in zip(y, rows, strict=True)]
        xs = [v for _, v in reached if v is not None]
        if any(not lo <= v <= hi for v in xs):
            raise ValueError(f"{kind}: values must lie within xlim {xlim}, got {xs}")
        ax.scatter(
            xs,
            [yi + dy for yi, v in reached if v is not None],
            color=colour,
            marker=marker,
            label=kind,
            zorder=3,
        )
        missing = [yi + dy for yi, v in reached if v is None]
        if not missing:
            continue
        ax.scatter(
            [edge] * len(missing),
            missing,
            marker=">",
            facecolors="none",
            edgecolors=colour,
            label=f"{kind}: not reached by {hi:g}",
            zorder=3,
        )
    ax.set_yticks(y, rows)
    ax.set_ylim(y.min() - 0.6, y.max() + 0.6)
    ax.grid(axis="y", alpha=0.4)
    ax.set_xlabel(xlabel)
    return ax
