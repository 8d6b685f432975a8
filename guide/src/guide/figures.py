"""Figure helpers that draw one figure of the guide each: site-only, no stability promise.

Each takes its data and an optional ``ax`` and returns the ``Axes`` it drew on. Colours come
from the axes' property cycle, that is from the site's style
([use_style][guide.style.use_style] sets it), not from code here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib import colors as mcolors
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from attnscale import _checks
from attnscale._figure import new_axes, to_numpy

__all__ = [
    "one_legend",
    "plot_jacobian_norm_vs_sigma",
    "plot_log_histograms",
    "plot_saturation_vs_sigma",
    "plot_strategy_bars",
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


def plot_jacobian_norm_vs_sigma(
    sigmas: Sequence[float],
    norms: torch.Tensor | np.ndarray,
    *,
    marks: Mapping[str, float] | None = None,
    ax: Axes | None = None,
    ylabel: str = "$\\|J\\|_F$, softmax Jacobian norm",
) -> Axes:
    """Mean, median and 10-90% band of per-row Jacobian norms against the logit scale $\\sigma$.

    Parameters
    ----------
    sigmas : Sequence[float]
        Logit standard deviations (x axis, log scale).
    norms : Tensor or ndarray
        Shape ``(len(sigmas), rows)``: one norm per row at each $\\sigma$.
    marks : Mapping[str, float], optional
        Logit scales to mark with labelled vertical lines.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.
    ylabel : str
        Label of the y axis.

    Returns
    -------
    matplotlib.axes.Axes
    """
    x, v = to_numpy(sigmas), to_numpy(norms)
    if x.ndim != 1 or v.ndim != 2 or v.shape[0] != x.size or v.shape[1] == 0:
        raise ValueError("norms must have shape (len(sigmas), rows) with at least one row")
    ax = new_axes(ax)
    lo, med, hi = np.quantile(v, [0.1, 0.5, 0.9], axis=1)
    ax.fill_between(x, lo, hi, color=GREYS[2], alpha=0.35, linewidth=0, label="10-90% of rows")
    ax.plot(x, v.mean(axis=1), "-", color=GREYS[0], linewidth=1.8, label="mean")
    ax.plot(x, med, "--", color=GREYS[1], linewidth=1.6, label="median")
    vmarks(ax, marks)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("$\\sigma$, standard deviation of the logits")
    ax.set_ylabel(ylabel)
    ax.legend()
    return ax


def plot_log_histograms(
    samples: Mapping[str, torch.Tensor | np.ndarray],
    *,
    floor: float = 1e-10,
    bins: int = 40,
    ax: Axes | None = None,
    xlabel: str = "$\\log_{10}$ of the value",
) -> Axes:
    """Overlay histograms of $\\log_{10}$ of values; values below ``floor`` pile up there.

    Shows distributions spanning many decades, such as per-row Jacobian norms
    that split into saturated (tiny) and unsaturated rows.

    Parameters
    ----------
    samples : Mapping[str, Tensor or ndarray]
        Non-negative values keyed by legend label.
    floor : float
        Values below it (including 0) are counted in the first bin.
    bins : int
        Number of bins.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.
    xlabel : str
        Label of the x axis.

    Returns
    -------
    matplotlib.axes.Axes
    """
    if not samples:
        raise ValueError("samples must contain at least one entry")
    floor = _checks.positive_float(floor, "floor")
    bins = _checks.positive_int(bins, "bins")
    ax = new_axes(ax)
    arrays = {label: to_numpy(v).ravel() for label, v in samples.items()}
    top = max(float(np.max(a)) for a in arrays.values() if a.size)
    edges = np.linspace(np.log10(floor), np.log10(max(top, floor * 10)) + 1e-9, bins + 1)
    for k, (label, a) in enumerate(arrays.items()):
        logs = np.log10(np.clip(a, floor, None))
        ax.hist(
            logs,
            bins=edges.tolist(),
            weights=np.full(a.size, 1.0 / max(a.size, 1)),
            histtype="step",
            linewidth=1.5,
            color=ordered_colour(k, len(arrays)),
            label=label,
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of rows per bin")
    ax.legend()
    return ax


def plot_saturation_vs_sigma(
    sigmas: Sequence[float],
    fractions: Mapping[str, Sequence[float]],
    *,
    marks: Mapping[str, float] | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Fraction of saturated softmax rows against the logit scale $\\sigma$.

    Parameters
    ----------
    sigmas : Sequence[float]
        Logit standard deviations (x axis, log scale).
    fractions : Mapping[str, Sequence[float]]
        Fractions in $[0, 1]$, one curve per label (e.g. per threshold).
    marks : Mapping[str, float], optional
        Logit scales to mark with labelled vertical lines.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.

    Returns
    -------
    matplotlib.axes.Axes
    """
    x = to_numpy(sigmas)
    if x.ndim != 1:
        raise ValueError("sigmas must be a 1-D sequence")
    ax = new_axes(ax)
    for k, (label, f) in enumerate(fractions.items()):
        y = to_numpy(f)
        if y.shape != x.shape:
            raise ValueError(f"fractions[{label!r}] must have the length of sigmas, {x.size}")
        ax.plot(x, y, "o-", color=ordered_colour(k, len(fractions)), markersize=3, label=label)
    vmarks(ax, marks)
    ax.set_xscale("log", base=2)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("$\\sigma$, standard deviation of the logits")
    ax.set_ylabel("fraction of saturated rows")
    ax.legend()
    return ax


def plot_strategy_bars(
    labels: Sequence[str],
    values: Sequence[float] | np.ndarray | torch.Tensor,
    *,
    ax: Axes | None = None,
    xlabel: str = "value",
    reference: float | None = None,
    colors: Sequence[str] | None = None,
    spread: tuple[Sequence[float], Sequence[float]] | None = None,
) -> Axes:
    """Horizontal bars, one per strategy, with the value printed at the end of each bar.

    Parameters
    ----------
    labels : Sequence[str]
        One name per bar (top to bottom).
    values : sequence of float
        Bar lengths.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.
    xlabel : str
        Label of the x axis (include units).
    reference : float, optional
        Draw a thin vertical reference line here (e.g. 1 for ratios).
    colors : sequence of str, optional
        One colour per bar (the strategy's colour site-wide); one colour for all without.
    spread : (low, high), optional
        A whisker per bar from ``low`` to ``high`` (e.g. an interquartile range).

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        If ``labels`` and ``values`` differ in length.
    """
    v = to_numpy(values)
    if v.ndim != 1 or v.size != len(labels):
        raise ValueError("labels and values must have the same length")
    ax = new_axes(ax, (6.4, 0.35 * len(labels) + 1.2))
    y = np.arange(len(labels))[::-1]
    ax.barh(y, v, color=list(colors) if colors is not None else "C0", height=0.6)
    ends = v
    if spread is not None:
        low, high = to_numpy(spread[0]), to_numpy(spread[1])
        ax.errorbar(v, y, xerr=[v - low, high - v], fmt="none", ecolor="0.45", capsize=2, lw=1.0)
        ends = np.maximum(v, high)
    for yi, vi, end in zip(y, v, ends, strict=True):
        ax.annotate(
            f"{vi:.2f}",
            (end, yi),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize="small",
        )
    if reference is not None:
        ax.axvline(reference, color="0.3", linewidth=0.8, linestyle="--")
    ax.set_yticks(y, labels)
    ax.set_xlabel(xlabel)
    ax.margins(x=0.15)
    return ax


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
