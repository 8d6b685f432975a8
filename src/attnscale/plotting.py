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

from . import _checks

if TYPE_CHECKING:
    from .monitor import MonitorReport

__all__ = [
    "PALETTE",
    "plot_monitor_series",
    "plot_monitor_summary",
    "plot_score_histograms",
    "plot_theory_vs_measured",
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
        ax.hist(_numpy(values), bins=bins, density=True, histtype="step", linewidth=1.4,
                color=colour, label=f"$d_k = {d_k}$")
    if reference_pdf:
        lo, hi = ax.get_xlim()
        x = np.linspace(lo, hi, 400)
        ax.plot(x, np.exp(-x**2 / 2) / np.sqrt(2 * np.pi), "k--", linewidth=1,
                label="$\\mathcal{N}(0, 1)$")
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
    ax.errorbar(m, y, xerr=None if err is None else _numpy(err), fmt="o", color=PALETTE[1],
                markersize=5, capsize=3, label="measured")
    ax.set_yticks(y, labels)
    ax.set_xlabel(quantity)
    ax.legend(frameon=False, loc="lower right")
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
