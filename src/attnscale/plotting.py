"""Matplotlib helpers that draw every figure on the site in one style.

Each ``plot_*`` function takes its data and an optional ``ax``; without one it
creates a figure of a legible default size. It returns the ``Axes`` it drew on,
with labelled axes and a legend where there are several lines, so callers can
add titles or combine panels freely.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

from . import _checks

if TYPE_CHECKING:
    from .monitor import MonitorReport

__all__ = [
    "PALETTE",
    "Table",
    "plot_entropy_vs_temperature",
    "plot_jacobian_norm_vs_sigma",
    "plot_log_histograms",
    "plot_loss_grid",
    "plot_monitor_series",
    "plot_monitor_summary",
    "plot_probability_rows",
    "plot_saturation_vs_sigma",
    "plot_scaled_vs_unscaled",
    "plot_score_histograms",
    "plot_seed_bands",
    "plot_strategy_bars",
    "plot_strategy_curves",
    "plot_theory_vs_measured",
    "plot_training_metric",
    "plot_variance_vs_dk",
]

#: Colour cycle used by every helper (colour-blind safe, Okabe and Ito).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
_DEFAULT_SIZE = (6.4, 4.0)


def _axes(ax: Axes | None, size: tuple[float, float] = _DEFAULT_SIZE) -> Axes:
    """Return ``ax`` or a fresh styled Axes."""
    if ax is not None:
        if not isinstance(ax, Axes):
            raise TypeError(f"ax must be a matplotlib Axes, got {type(ax).__name__}")
        return ax
    _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


def _style(ax: Axes) -> Axes:
    ax.grid(True, alpha=0.3, linewidth=0.6)
    ax.spines[["top", "right"]].set_visible(False)
    return ax


def _numpy(x: object) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=float)


def plot_score_histograms(
    samples: Mapping[int, torch.Tensor | np.ndarray],
    *,
    ax: Axes | None = None,
    bins: int = 80,
    reference_pdf: bool = False,
    xlabel: str = "score",
) -> Axes:
    """Overlay density histograms of scores, one per key dimension $d_k$.

    Parameters
    ----------
    samples : Mapping[int, Tensor or ndarray]
        Scores keyed by $d_k$.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.
    bins : int
        Number of histogram bins per sample.
    reference_pdf : bool
        Also draw the standard normal density, the law scaled scores approach.
    xlabel : str
        Label of the x axis.

    Returns
    -------
    matplotlib.axes.Axes
    """
    if not samples:
        raise ValueError("samples must contain at least one d_k")
    bins = _checks.positive_int(bins, "bins")
    ax = _style(_axes(ax))
    for colour, (d_k, values) in zip(PALETTE, sorted(samples.items()), strict=False):
        ax.hist(
            _numpy(values),
            bins=bins,
            density=True,
            histtype="step",
            linewidth=1.4,
            color=colour,
            label=f"$d_k = {d_k}$",
        )
    if reference_pdf:
        lo, hi = ax.get_xlim()
        x = np.linspace(lo, hi, 400)
        ax.plot(
            x,
            np.exp(-(x**2) / 2) / np.sqrt(2 * np.pi),
            "k--",
            linewidth=1,
            label="$\\mathcal{N}(0, 1)$",
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("density")
    ax.legend(frameon=False)
    return ax


def plot_variance_vs_dk(
    d_ks: Sequence[int],
    measured: Sequence[float],
    *,
    low: Sequence[float] | None = None,
    high: Sequence[float] | None = None,
    theory: Sequence[float] | None = None,
    label: str = "measured",
    ax: Axes | None = None,
) -> Axes:
    """Log-log plot of a measured variance against $d_k$, with an error band and theory.

    Parameters
    ----------
    d_ks : Sequence[int]
        Key dimensions (x axis).
    measured : Sequence[float]
        Measured variances.
    low, high : Sequence[float], optional
        Lower and upper edges of the sampling-error band.
    theory : Sequence[float], optional
        Closed-form variances, drawn as a dashed line.
    label : str
        Legend label of the measured points.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.

    Returns
    -------
    matplotlib.axes.Axes
    """
    x, y = _numpy(d_ks), _numpy(measured)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError("d_ks and measured must be 1-D sequences of equal length")
    ax = _style(_axes(ax))
    colour = PALETTE[len(ax.lines) % len(PALETTE)]
    if theory is not None:
        ax.plot(x, _numpy(theory), "--", color="0.4", linewidth=1, label="theory")
    if low is not None and high is not None:
        ax.fill_between(x, _numpy(low), _numpy(high), color=colour, alpha=0.25, linewidth=0)
    ax.plot(x, y, "o", color=colour, markersize=5, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("$d_k$ (key dimension)")
    ax.set_ylabel("variance of the score")
    ax.legend(frameon=False)
    return ax


def plot_theory_vs_measured(
    labels: Sequence[str],
    theory: Sequence[float],
    measured: Sequence[float],
    *,
    err: Sequence[float] | None = None,
    ax: Axes | None = None,
    quantity: str = "variance",
) -> Axes:
    """Horizontal dot plot comparing a closed form with measurements, case by case.

    Parameters
    ----------
    labels : Sequence[str]
        One name per case (y axis).
    theory, measured : Sequence[float]
        Predicted and measured values.
    err : Sequence[float], optional
        Half-widths of error bars on the measurements.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.
    quantity : str
        Name of the quantity, for the x label.

    Returns
    -------
    matplotlib.axes.Axes
    """
    t, m = _numpy(theory), _numpy(measured)
    if not (len(labels) == t.size == m.size):
        raise ValueError("labels, theory and measured must have the same length")
    ax = _style(_axes(ax, (6.4, 0.45 * len(labels) + 1.2)))
    y = np.arange(len(labels))[::-1]
    ax.plot(t, y, "|", color="0.2", markersize=16, markeredgewidth=2, label="theory")
    ax.errorbar(
        m,
        y,
        xerr=None if err is None else _numpy(err),
        fmt="o",
        color=PALETTE[1],
        markersize=5,
        capsize=3,
        label="measured",
    )
    ax.set_yticks(y, labels)
    ax.set_xlabel(quantity)
    ax.legend(frameon=False, loc="lower right")
    return ax


# --- softmax ---


def _vmarks(ax: Axes, marks: Mapping[str, float] | None) -> None:
    """Labelled dashed vertical lines at the given x positions."""
    for k, (label, value) in enumerate((marks or {}).items()):
        ax.axvline(value, color=PALETTE[(k + 3) % len(PALETTE)], linestyle="--", linewidth=1)
        ax.annotate(
            label,
            (value, 0.98),
            xycoords=("data", "axes fraction"),
            rotation=90,
            ha="right",
            va="top",
            fontsize="x-small",
        )


def plot_probability_rows(
    rows: Mapping[str, torch.Tensor | np.ndarray | Sequence[float]],
    *,
    ax: Axes | None = None,
    xlabel: str = "entry $i$ of the row",
) -> Axes:
    """Grouped bar chart of softmax outputs, one group of bars per entry, one colour per row.

    Parameters
    ----------
    rows : Mapping[str, Tensor, ndarray or sequence of float]
        Probability vectors of equal length, keyed by their legend label.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.
    xlabel : str
        Label of the x axis.

    Returns
    -------
    matplotlib.axes.Axes
    """
    if not rows:
        raise ValueError("rows must contain at least one probability vector")
    arrays = {label: _numpy(p).ravel() for label, p in rows.items()}
    n = {a.size for a in arrays.values()}
    if len(n) != 1:
        raise ValueError(f"rows must all have the same length, got lengths {sorted(n)}")
    size = n.pop()
    ax = _style(_axes(ax))
    width = 0.8 / len(arrays)
    x = np.arange(size)
    for k, (label, p) in enumerate(arrays.items()):
        ax.bar(
            x + (k - (len(arrays) - 1) / 2) * width,
            p,
            width=width,
            color=PALETTE[k % len(PALETTE)],
            label=label,
        )
    ax.set_xticks(x, [str(i + 1) for i in range(size)])
    ax.set_ylim(0, 1.05)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("probability $p_i$")
    ax.legend(frameon=False, fontsize="small")
    return ax


def plot_scaled_vs_unscaled(
    d_ks: Sequence[int],
    unscaled: Sequence[float],
    scaled: Sequence[float],
    *,
    theory_unscaled: Sequence[float] | None = None,
    theory_scaled: Sequence[float] | None = None,
    theory_d_ks: Sequence[float] | None = None,
    label: str = "",
    ylabel: str = "value",
    colour: str = PALETTE[0],
    ax: Axes | None = None,
) -> Axes:
    """One row statistic against $d_k$, unscaled (filled) and scaled (open) scores in one colour.

    Call it once per sequence length on the same Axes, with a different ``colour``.

    Parameters
    ----------
    d_ks : Sequence[int]
        Key dimensions (x axis, log scale).
    unscaled, scaled : Sequence[float]
        Measured statistic for $q \\cdot k$ and $q \\cdot k / \\sqrt{d_k}$.
    theory_unscaled, theory_scaled : Sequence[float], optional
        Approximations drawn as thin dashed lines.
    theory_d_ks : Sequence[float], optional
        x values of the theory curves, if not ``d_ks`` (e.g. a finer grid).
    label : str
        Legend prefix, e.g. ``"n = 128"``.
    ylabel : str
        Label of the y axis.
    colour : str
        Colour of this group of lines.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.

    Returns
    -------
    matplotlib.axes.Axes
    """
    x, u, s = _numpy(d_ks), _numpy(unscaled), _numpy(scaled)
    if not (x.ndim == 1 and x.shape == u.shape == s.shape):
        raise ValueError("d_ks, unscaled and scaled must be 1-D sequences of equal length")
    ax = _style(_axes(ax))
    prefix = f"{label}, " if label else ""
    ax.plot(x, u, "o-", color=colour, markersize=4, linewidth=1.4, label=f"{prefix}unscaled")
    ax.plot(
        x,
        s,
        "s:",
        color=colour,
        markersize=4,
        markerfacecolor="white",
        linewidth=1.4,
        label=f"{prefix}scaled $1/\\sqrt{{d_k}}$",
    )
    tx = x if theory_d_ks is None else _numpy(theory_d_ks)
    for theory in (theory_unscaled, theory_scaled):
        if theory is not None:
            ty = _numpy(theory)
            if ty.shape != tx.shape:
                raise ValueError("theory curves must match theory_d_ks (or d_ks) in length")
            ax.plot(tx, ty, "--", color=colour, linewidth=0.9, alpha=0.7)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("$d_k$ (key dimension)")
    ax.set_ylabel(ylabel)
    ax.legend(frameon=False, fontsize="x-small")
    return ax


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
    x, v = _numpy(sigmas), _numpy(norms)
    if x.ndim != 1 or v.ndim != 2 or v.shape[0] != x.size or v.shape[1] == 0:
        raise ValueError("norms must have shape (len(sigmas), rows) with at least one row")
    ax = _style(_axes(ax))
    lo, med, hi = np.quantile(v, [0.1, 0.5, 0.9], axis=1)
    ax.fill_between(x, lo, hi, color=PALETTE[0], alpha=0.18, linewidth=0, label="10-90% of rows")
    ax.plot(x, v.mean(axis=1), "-", color=PALETTE[0], linewidth=1.8, label="mean")
    ax.plot(x, med, "--", color=PALETTE[1], linewidth=1.6, label="median")
    _vmarks(ax, marks)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("$\\sigma$, standard deviation of the logits")
    ax.set_ylabel(ylabel)
    ax.legend(frameon=False, fontsize="small")
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
    ax = _style(_axes(ax))
    arrays = {label: _numpy(v).ravel() for label, v in samples.items()}
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
            color=PALETTE[k % len(PALETTE)],
            label=label,
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of rows per bin")
    ax.legend(frameon=False, fontsize="small")
    return ax


def plot_entropy_vs_temperature(
    temperatures: Sequence[float],
    entropies: Mapping[str, Sequence[float] | torch.Tensor | np.ndarray],
    *,
    log_n: float | None = None,
    marks: Mapping[str, float] | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Entropy of $\\mathrm{softmax}(z / T)$ against the temperature $T$ (log scale).

    Parameters
    ----------
    temperatures : Sequence[float]
        Positive temperatures (x axis).
    entropies : Mapping[str, sequence]
        Entropy curves in nats keyed by legend label.
    log_n : float, optional
        Draw the ceiling $\\log n$ (uniform softmax) as a dotted line.
    marks : Mapping[str, float], optional
        Temperatures to mark with labelled vertical lines.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.

    Returns
    -------
    matplotlib.axes.Axes
    """
    t = _numpy(temperatures)
    if t.ndim != 1 or not np.all(t > 0):
        raise ValueError("temperatures must be a 1-D sequence of positive numbers")
    ax = _style(_axes(ax))
    for k, (label, h) in enumerate(entropies.items()):
        y = _numpy(h)
        if y.shape != t.shape:
            raise ValueError(f"entropies[{label!r}] must have the temperatures' length {t.size}")
        ax.plot(t, y, color=PALETTE[k % len(PALETTE)], linewidth=1.8, label=label)
    if log_n is not None:
        ax.axhline(log_n, color="0.3", linestyle=":", linewidth=1, label="$\\log n$ (uniform)")
    _vmarks(ax, marks)
    ax.set_xscale("log")
    ax.set_xlabel("temperature $T$")
    ax.set_ylabel("entropy $H$ (nats)")
    ax.legend(frameon=False, fontsize="small")
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
    x = _numpy(sigmas)
    if x.ndim != 1:
        raise ValueError("sigmas must be a 1-D sequence")
    ax = _style(_axes(ax))
    for k, (label, f) in enumerate(fractions.items()):
        y = _numpy(f)
        if y.shape != x.shape:
            raise ValueError(f"fractions[{label!r}] must have the length of sigmas, {x.size}")
        ax.plot(x, y, "o-", color=PALETTE[k % len(PALETTE)], markersize=3, label=label)
    _vmarks(ax, marks)
    ax.set_xscale("log", base=2)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("$\\sigma$, standard deviation of the logits")
    ax.set_ylabel("fraction of saturated rows")
    ax.legend(frameon=False, fontsize="small")
    return ax


# --- monitor ---


def plot_monitor_series(
    report: MonitorReport,
    *,
    metric: str = "entropy_fraction",
    ax: Axes | None = None,
    where: Sequence[str] | None = None,
    ylabel: str | None = None,
) -> Axes:
    """Plot one statistic of an [AttentionMonitor][attnscale.AttentionMonitor] report against step.

    Parameters
    ----------
    report : MonitorReport
        The report, whose records hold one entry per call (step).
    metric : str
        A field of [AttentionStats][attnscale.AttentionStats], e.g.
        ``"entropy_fraction"`` or ``"max_abs_logit"``.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.
    where : Sequence[str], optional
        Call sites to draw (default: all).
    ylabel : str, optional
        Label of the y axis (default: the metric's name).

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    TypeError
        If ``report`` is not a MonitorReport.
    ValueError
        If ``metric`` is unknown or ``report`` has no records to draw.
    """
    from .monitor import AttentionStats, MonitorReport

    if not isinstance(report, MonitorReport):
        raise TypeError(f"report must be a MonitorReport, got {type(report).__name__}")
    fields = [f.name for f in dataclasses.fields(AttentionStats)]
    _checks.one_of(metric, "metric", fields)
    records = [r for r in report.records if where is None or r.where in where]
    if not records:
        raise ValueError("report has no records to plot (check where)")
    ax = _style(_axes(ax))
    for colour, rec in zip(itertools.cycle(PALETTE), records):
        values = [np.nan if v is None else float(v) for v in rec.values(metric)]
        ax.plot(np.arange(len(values)), values, color=colour, linewidth=1.4, label=rec.where)
    ax.set_xlabel("step (call number)")
    ax.set_ylabel(ylabel or metric.replace("_", " "))
    if len(records) > 1:
        ax.legend(frameon=False, fontsize="small")
    return ax


def plot_monitor_summary(
    reports: Mapping[str, MonitorReport],
    *,
    metric: str = "logit_std",
    ax: Axes | None = None,
    xlabel: str | None = None,
    log: bool = False,
) -> Axes:
    """Horizontal bars comparing one statistic's last value across several reports.

    Each report contributes one bar per call site, labelled ``name: where``.

    Parameters
    ----------
    reports : Mapping[str, MonitorReport]
        Reports keyed by a short name (e.g. the planted bug).
    metric : str
        A field of [AttentionStats][attnscale.AttentionStats].
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.
    xlabel : str, optional
        Label of the x axis (default: the metric's name).
    log : bool
        Use a logarithmic x axis.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        If ``metric`` is unknown or there is nothing to draw.
    """
    from .monitor import AttentionStats

    fields = [f.name for f in dataclasses.fields(AttentionStats)]
    _checks.one_of(metric, "metric", fields)
    labels: list[str] = []
    values: list[float] = []
    for name, report in reports.items():
        for rec in report.records:
            v = getattr(rec.last, metric)
            labels.append(name if len(report.records) == 1 else f"{name}: {rec.where}")
            values.append(np.nan if v is None or not np.isfinite(v) else float(v))
    if not labels:
        raise ValueError("reports must contain at least one record")
    ax = _style(_axes(ax, (6.4, 0.45 * len(labels) + 1.2)))
    y = np.arange(len(labels))[::-1]
    ax.barh(y, values, color=[PALETTE[i % len(PALETTE)] for i in range(len(labels))])
    ax.set_yticks(y, labels)
    if log:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel or metric.replace("_", " "))
    return ax


# --- normalization comparison ---


_LINESTYLES = ("-", "--", ":", "-.")


def plot_strategy_curves(
    x: Sequence[float] | np.ndarray | torch.Tensor,
    curves: Mapping[str, Sequence[float] | np.ndarray | torch.Tensor],
    *,
    ax: Axes | None = None,
    xlabel: str = "x",
    ylabel: str = "y",
    logx: bool = True,
    logy: bool = False,
    hline: float | None = None,
) -> Axes:
    """One line per score-scaling strategy against a shared x axis.

    Colours follow [PALETTE][attnscale.PALETTE]; beyond seven lines the line style changes, so
    every strategy stays distinguishable in grey scale too.

    Parameters
    ----------
    x : sequence of float
        Shared x values (e.g. $d_k$ or a weight scale $g$).
    curves : Mapping[str, sequence of float]
        Values per strategy label, each as long as ``x``. Non-finite values are not drawn.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.
    xlabel, ylabel : str
        Axis labels (include units).
    logx, logy : bool
        Logarithmic axes (base 2 for x, 10 for y).
    hline : float, optional
        Draw a thin horizontal reference line at this value.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        If ``curves`` is empty or a curve's length differs from ``x``.
    """
    if not curves:
        raise ValueError("curves must contain at least one strategy")
    xs = _numpy(x)
    ax = _style(_axes(ax))
    for i, (label, values) in enumerate(curves.items()):
        y = _numpy(values)
        if y.shape != xs.shape:
            raise ValueError(f"curves[{label!r}] has shape {y.shape}, x has {xs.shape}")
        ax.plot(
            xs,
            y,
            marker="o",
            markersize=3,
            linewidth=1.4,
            label=label,
            color=PALETTE[i % len(PALETTE)],
            linestyle=_LINESTYLES[(i // len(PALETTE)) % len(_LINESTYLES)],
        )
    if hline is not None:
        ax.axhline(hline, color="0.5", linewidth=0.8, linestyle="--")
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(frameon=False, fontsize="small", ncol=2)
    return ax


class Table:
    """A small table that shows itself as HTML in notebooks and gallery pages, Markdown as text.

    The last expression of a gallery cell (or notebook cell) is rendered through
    ``_repr_html_``; ``str()`` and ``repr()`` give a Markdown table with aligned columns.

    Parameters
    ----------
    headers : Sequence[str]
        Column names.
    rows : Sequence[Sequence[object]]
        One sequence per row, as long as ``headers``; cells are converted with ``str``.
    links : Mapping[str, Sequence[str]], optional
        Per column header, one link target per row: that column's cells become links.

    Raises
    ------
    ValueError
        If a row's length differs from the number of headers, or ``links`` names an
        unknown column or has the wrong number of targets.

    Examples
    --------
    >>> print(Table(["a", "b"], [[1, 2]]))
    | a | b |
    |---|---|
    | 1 | 2 |
    """

    def __init__(
        self,
        headers: Sequence[str],
        rows: Sequence[Sequence[object]],
        *,
        links: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.headers = [str(h) for h in headers]
        self.rows = [[str(c) for c in row] for row in rows]
        for i, row in enumerate(self.rows):
            if len(row) != len(self.headers):
                raise ValueError(
                    f"rows[{i}] has {len(row)} cells, but there are {len(self.headers)} headers"
                )
        self.links: dict[int, list[str]] = {}
        for header, targets in (links or {}).items():
            if header not in self.headers or len(targets) != len(self.rows):
                raise ValueError(
                    f"links must map a column header to one target per row; got {header!r} "
                    f"with {len(targets)} targets for {len(self.rows)} rows"
                )
            self.links[self.headers.index(header)] = [str(t) for t in targets]

    def __str__(self) -> str:
        # Pipes inside cells are escaped so the Markdown stays a table.
        headers = [h.replace("|", "\\|") for h in self.headers]
        rows = [[c.replace("|", "\\|") for c in row] for row in self.rows]
        widths = [max([len(h)] + [len(r[j]) for r in rows]) for j, h in enumerate(headers)]

        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

        rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
        return "\n".join([line(headers), rule, *(line(r) for r in rows)])

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        from html import escape

        head = "".join(f"<th>{escape(h)}</th>" for h in self.headers)

        def cell(i: int, j: int, text: str) -> str:
            if j in self.links:
                return f'<td><a href="{escape(self.links[j][i])}">{escape(text)}</a></td>'
            return f"<td>{escape(text)}</td>"

        body = "".join(
            "<tr>" + "".join(cell(i, j, c) for j, c in enumerate(row)) + "</tr>"
            for i, row in enumerate(self.rows)
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def plot_strategy_bars(
    labels: Sequence[str],
    values: Sequence[float] | np.ndarray | torch.Tensor,
    *,
    ax: Axes | None = None,
    xlabel: str = "value",
    reference: float | None = None,
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

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        If ``labels`` and ``values`` differ in length.
    """
    v = _numpy(values)
    if v.ndim != 1 or v.size != len(labels):
        raise ValueError("labels and values must have the same length")
    ax = _style(_axes(ax, (6.4, 0.35 * len(labels) + 1.2)))
    y = np.arange(len(labels))[::-1]
    ax.barh(y, v, color=PALETTE[0], height=0.6)
    for yi, vi in zip(y, v, strict=True):
        ax.annotate(
            f"{vi:.2f}",
            (vi, yi),
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


# --- training dynamics ---


def plot_seed_bands(
    curves: Mapping[str, Sequence[Sequence[float]] | np.ndarray | torch.Tensor],
    *,
    x: Sequence[float] | np.ndarray | torch.Tensor | None = None,
    ax: Axes | None = None,
    band: str = "range",
    xlabel: str = "epoch",
    ylabel: str = "value",
    logx: bool = False,
    logy: bool = False,
    hline: float | None = None,
    hline_label: str | None = None,
    markers: bool = False,
) -> Axes:
    """Mean over seeds of each curve, with a shaded band showing the spread across seeds.

    Parameters
    ----------
    curves : Mapping[str, array of shape (seeds, points)]
        One array per label; rows are seeds. A 1-D array counts as one seed.
    x : sequence of float, optional
        Shared x values; default ``1, 2, ..., points`` (epochs or steps counted from 1).
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.
    band : str
        ``"range"`` (minimum to maximum over seeds) or ``"std"`` (mean ± one standard
        deviation).
    xlabel, ylabel : str
        Axis labels (include units).
    logx, logy : bool
        Logarithmic axes (base 10).
    hline : float, optional
        A horizontal reference line (e.g. a loss floor), labelled ``hline_label``.
    hline_label : str, optional
        Legend entry of the reference line.
    markers : bool
        Draw a marker at each point (for short sweeps).

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        If ``curves`` is empty, ``band`` is unknown, or shapes disagree.

    Examples
    --------
    >>> ax = plot_seed_bands({"scaled": torch.rand(5, 20), "unscaled": torch.rand(5, 20)})
    >>> len(ax.get_lines()), ax.get_xlabel()
    (2, 'epoch')
    """
    if not curves:
        raise ValueError("curves must contain at least one label")
    band = _checks.one_of(band, "band", ("range", "std"))
    ax = _style(_axes(ax))
    for i, (label, values) in enumerate(curves.items()):
        y = _numpy(values)
        if y.ndim == 1:
            y = y[None, :]
        if y.ndim != 2:
            raise ValueError(f"curves[{label!r}] must have shape (seeds, points), got {y.shape}")
        xs = np.arange(1, y.shape[1] + 1) if x is None else _numpy(x)
        if xs.shape != (y.shape[1],):
            raise ValueError(f"curves[{label!r}] has {y.shape[1]} points, x has {xs.shape}")
        mean = y.mean(0)
        if band == "range":
            lo, hi = y.min(0), y.max(0)
        else:
            sd = y.std(0, ddof=1) if y.shape[0] > 1 else np.zeros_like(mean)
            lo, hi = mean - sd, mean + sd
        colour = PALETTE[i % len(PALETTE)]
        style = _LINESTYLES[(i // len(PALETTE)) % len(_LINESTYLES)]
        ax.plot(
            xs,
            mean,
            color=colour,
            linestyle=style,
            linewidth=1.5,
            label=label,
            marker="o" if markers else None,
            markersize=3,
        )
        if y.shape[0] > 1:
            ax.fill_between(xs, lo, hi, color=colour, alpha=0.2, linewidth=0)
    if hline is not None:
        ax.axhline(hline, color="0.3", linewidth=0.9, linestyle="--", label=hline_label)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(frameon=False, fontsize="small")
    return ax


def plot_training_metric(
    result: object,
    metric: str,
    *,
    ax: Axes | None = None,
    per_epoch: bool = True,
    ylabel: str | None = None,
    logy: bool = False,
    band: str = "range",
    hline: float | None = None,
    hline_label: str | None = None,
) -> Axes:
    """One metric of a [TrainingResult][attnscale.TrainingResult], mean and band over seeds.

    One line per variant (strategy, and learning rate when several were trained), drawn with
    [plot_seed_bands][attnscale.plot_seed_bands].

    Parameters
    ----------
    result : TrainingResult
        Output of [train][attnscale.train].
    metric : str
        A name from [METRICS][attnscale.METRICS].
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.
    per_epoch : bool
        Average the steps of each epoch (x axis in epochs) or plot every step.
    ylabel : str, optional
        Label of the y axis; default the metric's name.
    logy : bool
        Logarithmic y axis.
    band : str
        ``"range"`` or ``"std"``, as in [plot_seed_bands][attnscale.plot_seed_bands].
    hline, hline_label : optional
        Horizontal reference line and its legend entry.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    TypeError
        If ``result`` is not a TrainingResult.

    Examples
    --------
    >>> from attnscale import train
    >>> res = train("mean", strategies=["none", "inverse_sqrt"], seeds=[0, 1], epochs=2,
    ...             num_samples=8, d_model=8, d_k=4)
    >>> len(plot_training_metric(res, "loss", logy=True).get_lines())
    2
    """
    from .training import TrainingResult

    if not isinstance(result, TrainingResult):
        raise TypeError(f"result must be a TrainingResult, got {type(result).__name__}")
    curves = result.by_variant(metric, per_epoch=per_epoch)
    return plot_seed_bands(
        curves,
        ax=ax,
        band=band,
        xlabel="epoch" if per_epoch else "step",
        ylabel=metric if ylabel is None else ylabel,
        logy=logy,
        hline=hline,
        hline_label=hline_label,
    )


def plot_loss_grid(
    rows: Sequence[str],
    cols: Sequence[str],
    mean: Sequence[Sequence[float]] | np.ndarray | torch.Tensor,
    std: Sequence[Sequence[float]] | np.ndarray | torch.Tensor,
    *,
    ax: Axes | None = None,
    colorbar_label: str = "final loss (log10)",
) -> Axes:
    """A grid of final losses, coloured by $\\log_{10}$ of the mean, annotated mean ± std.

    The best (lowest mean) cell of each column is framed, so the winner per column is visible.

    Parameters
    ----------
    rows, cols : Sequence[str]
        Row labels (e.g. strategies) and column labels (e.g. tasks).
    mean, std : array of shape (rows, cols)
        Mean and standard deviation over seeds of the final loss (> 0).
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.
    colorbar_label : str
        Label of the colour bar.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        If the shapes do not match the labels or a mean is not positive.

    Examples
    --------
    >>> ax = plot_loss_grid(["a", "b"], ["uniform", "sharp"], [[1e-3, 1e-1], [1e-2, 1e-4]],
    ...                     [[1e-4, 1e-2], [1e-3, 1e-5]])
    >>> len(ax.texts), len(ax.patches)
    (4, 2)
    """
    m, s = _numpy(mean), _numpy(std)
    shape = (len(rows), len(cols))
    if m.shape != shape or s.shape != shape:
        raise ValueError(f"mean and std must have shape {shape}, got {m.shape} and {s.shape}")
    if not (m > 0).all():
        raise ValueError("mean must be positive (it is drawn on a log scale)")
    ax = _axes(ax, (1.6 * len(cols) + 2.6, 0.42 * len(rows) + 1.2))
    logm = np.log10(m)
    image = ax.imshow(logm, cmap="viridis_r", aspect="auto")
    mid = (logm.min() + logm.max()) / 2
    for i in range(shape[0]):
        for j in range(shape[1]):
            ax.text(
                j,
                i,
                f"{m[i, j]:.2g} ± {s[i, j]:.1g}",
                ha="center",
                va="center",
                fontsize="small",
                color="white" if logm[i, j] < mid else "black",
            )
    for j in range(shape[1]):
        i = int(np.argmin(m[:, j]))
        ax.add_patch(
            Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="#D55E00", linewidth=2.2)
        )
    ax.set_xticks(range(shape[1]), cols)
    ax.set_yticks(range(shape[0]), rows)
    ax.figure.colorbar(image, ax=ax, label=colorbar_label)
    return ax
