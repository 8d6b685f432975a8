"""Plot helpers for one's own results: monitor reports, training runs, strategy comparisons.

Each ``plot_*`` function takes its data and an optional ``ax``; without one it
creates a figure of a legible default size. It returns the ``Axes`` it drew on,
with labelled axes, so callers can add titles or combine panels freely.
Colours come from the current matplotlib style's colour cycle, and every
helper that draws several series takes ``colors=`` and ``legend=`` to
override them or to leave the legend to the caller (one legend per figure).

Matplotlib is an optional dependency (the ``plot`` extra: ``pip install -e ".[plot]"`` from a clone):
``import attnscale`` does not import it; the first use of a plot helper does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from matplotlib.axes import Axes

from . import _checks
from ._figure import cycle_colour, linestyle, new_axes, to_numpy

if TYPE_CHECKING:
    from ._monitor import MonitorReport

__all__ = [
    "plot_monitor_series",
    "plot_monitor_summary",
    "plot_probability_rows",
    "plot_seed_bands",
    "plot_strategy_curves",
    "plot_training_metric",
]


def _values(data: object, name: str) -> np.ndarray:
    """``data`` as a float64 array; a ValueError naming ``name`` if it is not numeric."""
    try:
        return to_numpy(data)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numbers (a tensor, array or sequence): {err}") from None


def _mapping(value: object, name: str, example: str) -> Mapping[Any, Any]:
    """``value`` if it is a mapping (a dict), else a TypeError naming ``name`` and its form."""
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mapping such as {example}, got {type(value).__name__}")
    return value


def _options(colors: object, labels: object) -> tuple[Mapping[Any, Any], Mapping[Any, Any]]:
    """The optional ``colors`` and ``labels`` mappings, checked (None: empty)."""
    colour_of = {} if colors is None else _mapping(colors, "colors", "{'none': 'C1'}")
    label_of = {} if labels is None else _mapping(labels, "labels", "{'none': 'no scale'}")
    return colour_of, label_of


def _sites(where: object) -> tuple[str, ...] | None:
    """``where`` of plot_monitor_series: None, or a sequence of call-site names."""
    if where is None:
        return None
    if isinstance(where, str) or not isinstance(where, Collection):
        raise TypeError(
            f"where must be a list of call-site names such as ['layer0'], got "
            f"{type(where).__name__} {_checks.show(where)[:80]}"
        )
    for i, site in enumerate(where):
        if not isinstance(site, str):
            raise TypeError(f"where[{i}] must be a call-site name (str), got {type(site).__name__}")
    return tuple(where)


def plot_probability_rows(
    rows: Mapping[str, torch.Tensor | np.ndarray | Sequence[float]],
    *,
    ax: Axes | None = None,
    xlabel: str = "entry $i$ of the row",
    legend: bool = True,
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
    legend : bool
        Draw a legend on these axes.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    TypeError
        If ``rows`` is not a mapping.
    ValueError
        If ``rows`` is empty, a row is empty, not numeric or not finite (NaN or inf), or the
        rows differ in length.
    """
    _mapping(rows, "rows", "{'T = 1': probabilities}")
    if not rows:
        raise ValueError("rows must contain at least one probability vector")
    arrays = {label: _values(p, f"rows[{label!r}]").ravel() for label, p in rows.items()}
    for label, p in arrays.items():
        if p.size == 0:
            raise ValueError(f"rows[{label!r}] must hold at least one probability, got none")
        if not np.isfinite(p).all():
            raise ValueError(f"rows[{label!r}] must be finite probabilities (no NaN or inf)")
    n = {a.size for a in arrays.values()}
    if len(n) != 1:
        raise ValueError(f"rows must all have the same length, got lengths {sorted(n)}")
    size = n.pop()
    ax = new_axes(ax)
    width = 0.8 / len(arrays)
    x = np.arange(size)
    for k, (label, p) in enumerate(arrays.items()):
        ax.bar(
            x + (k - (len(arrays) - 1) / 2) * width,
            p,
            width=width,
            color=cycle_colour(k),
            label=label,
        )
    ax.set_xticks(x, [str(i + 1) for i in range(size)])
    ax.set_ylim(0, 1.05)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("probability $p_i$")
    if legend:
        ax.legend()
    return ax


def plot_monitor_series(
    report: MonitorReport,
    *,
    metric: str = "normalized_entropy",
    ax: Axes | None = None,
    where: Sequence[str] | None = None,
    ylabel: str | None = None,
    legend: bool = True,
    color: str | None = None,
    label: str | None = None,
) -> Axes:
    """Plot one statistic of an [AttentionMonitor][attnscale.AttentionMonitor] report against step.

    Parameters
    ----------
    report : MonitorReport
        The report, whose records hold one entry per call (step).
    metric : str
        A field of [AttentionStats][attnscale.AttentionStats], e.g.
        ``"normalized_entropy"`` or ``"max_abs_logit"``.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on.
    where : Sequence[str], optional
        Call sites to draw (default: all).
    ylabel : str, optional
        Label of the y axis (default: the metric's name).
    legend : bool
        Draw a legend (one entry per call site) when there are several sites.
    color : str, optional
        One colour for every line of this report (to tell several reports apart on one axes);
        default: one colour per call site.
    label : str, optional
        Legend label of this report's lines, followed by the call site when there are several;
        default: the call site.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    TypeError
        If ``report`` is not a MonitorReport (a list of reports included: draw each on one
        ``ax`` with its own ``color`` and ``label``), or ``where`` is not a list of names.
    ValueError
        If ``metric`` is unknown or ``report`` has no records to draw.
    """
    from ._monitor import AttentionStats, MonitorReport

    if not isinstance(report, MonitorReport):
        raise TypeError(
            f"report must be a MonitorReport (monitor.report()), got {type(report).__name__}"
        )
    fields = [f.name for f in dataclasses.fields(AttentionStats)]
    _checks.one_of(metric, "metric", fields)
    sites = _sites(where)
    records = [r for r in report.records if sites is None or r.where in sites]
    if not records:
        raise ValueError("report has no records to plot (check where)")
    ax = new_axes(ax)
    for i, rec in enumerate(records):
        values = [np.nan if v is None else float(v) for v in rec.values(metric)]
        name = rec.where if label is None else label
        if label is not None and len(records) > 1:
            name = f"{label}: {rec.where}"
        ax.plot(np.arange(len(values)), values, color=color or cycle_colour(i), label=name)
    ax.set_xlabel("step (call number)")
    ax.set_ylabel(ylabel or metric.replace("_", " "))
    if legend and len(records) > 1:
        ax.legend()
    return ax


def plot_monitor_summary(
    reports: Mapping[str, MonitorReport],
    *,
    metric: str = "logit_std",
    ax: Axes | None = None,
    xlabel: str | None = None,
    log: bool = False,
    marks: Mapping[str, float] | None = None,
    colors: Mapping[str, str] | None = None,
) -> Axes:
    """A dot plot of one statistic's last value across several reports.

    Each report contributes one row per call site, labelled ``name: where``. Dots, not bars: on
    a logarithmic axis the length of a bar means nothing. A value that overflowed (``+inf``) is
    drawn at the right edge of the axis as a triangle labelled "inf"; a missing or NaN value as
    a cross at the left edge labelled "n/a".

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
    marks : Mapping[str, float], optional
        Reference values, e.g. what a correct model gives, drawn as labelled dashed lines.
    colors : Mapping[str, str], optional
        Colour per key of ``reports`` (e.g. the colour a strategy has elsewhere); keys not in
        it take the style's colour cycle.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    TypeError
        If ``reports`` is not a mapping of names to MonitorReports (a single report or a list
        included), ``marks`` or ``colors`` is not a mapping, or a mark is not a number.
    ValueError
        If ``metric`` is unknown, there is nothing to draw, a mark is not a finite number, or
        ``log`` is set and a value or mark is not positive.
    """
    from ._monitor import AttentionStats, MonitorReport

    fields = [f.name for f in dataclasses.fields(AttentionStats)]
    _checks.one_of(metric, "metric", fields)
    _mapping(reports, "reports", "{'correct': report}")
    colour_of, _ = _options(colors, None)
    labels: list[str] = []
    values: list[float] = []
    colours: list[str] = []
    for k, (name, report) in enumerate(reports.items()):
        if not isinstance(report, MonitorReport):
            raise TypeError(
                f"reports[{name!r}] must be a MonitorReport, got {type(report).__name__}"
            )
        for rec in report.records:
            v = getattr(rec.last, metric)
            labels.append(name if len(report.records) == 1 else f"{name}: {rec.where}")
            values.append(np.nan if v is None else float(v))
            colours.append(colour_of.get(name, cycle_colour(k)))
    if not labels:
        raise ValueError("reports must contain at least one record")
    x = np.array(values)
    finite = x[np.isfinite(x)]
    refs = {
        label: _checks.finite_float(value, f"marks[{label!r}]")
        for label, value in _mapping(
            {} if marks is None else marks, "marks", "{'float16 max': 65504.0}"
        ).items()
    }
    shown = np.concatenate([finite, np.array(list(refs.values()), dtype=float)])
    if log and (shown <= 0).any():
        raise ValueError(f"log=True needs positive values and marks, got {shown[shown <= 0]}")
    ax = new_axes(ax, (6.4, 0.45 * len(labels) + 1.2))
    y = np.arange(len(labels))[::-1]
    if log:
        ax.set_xscale("log")
    if shown.size:
        lo, hi = shown.min(), shown.max()
        if log:
            ax.set_xlim(lo / 2, hi * 2)
        else:
            pad = 0.1 * (hi - lo) or 0.1 * abs(hi) or 1.0
            ax.set_xlim(lo - pad, hi + pad)
    ax.grid(axis="y", alpha=0.4)
    ok = np.isfinite(x)
    ax.scatter(x[ok], y[ok], c=[c for c, good in zip(colours, ok, strict=True) if good], zorder=3)
    left, right = ax.get_xlim()
    for yi, xi, colour in zip(y, x, colours, strict=True):
        if np.isfinite(xi):
            continue
        edge, marker, text, ha = (
            (right, ">", "inf", "right") if xi == np.inf else (left, "x", "n/a", "left")
        )
        ax.scatter([edge], [yi], marker=marker, color=colour, zorder=3, clip_on=False)
        ax.annotate(
            text, (edge, yi), xytext=(0, 7), textcoords="offset points", ha=ha, fontsize="small"
        )
    for k, (label, value) in enumerate(refs.items()):
        ax.axvline(
            value, color="0.35", linestyle=("--", ":", "-.")[k % 3], linewidth=1, label=label
        )
    if refs:
        ax.legend(loc="best", fontsize="small")
    ax.set_xlim(left, right)
    ax.set_yticks(y, labels)
    ax.set_ylim(y.min() - 0.6, y.max() + 0.6)
    ax.set_xlabel(xlabel or metric.replace("_", " "))
    return ax


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
    hline_label: str | None = None,
    colors: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    legend: bool = True,
) -> Axes:
    """One line per score-scaling strategy against a shared x axis.

    Colours follow the style's colour cycle; when the colours wrap around the line style changes, so
    every strategy stays distinguishable in grey scale too. A curve that a later one covers
    (within 2% at every point: on the page, one line) is drawn wide and pale beneath it, so it stays
    visible.

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
        Draw a thin horizontal reference line at this value...
    hline_label : str, optional
        ... named in the legend.
    colors : Mapping[str, str], optional
        Colour per key of ``curves``; keys not in it take the style's colour cycle.
    labels : Mapping[str, str], optional
        Legend label per key of ``curves`` (default: the key itself).
    legend : bool
        Draw a legend on these axes. Pass False to draw one legend for a whole figure.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    TypeError
        If ``curves``, ``colors`` or ``labels`` is not a mapping.
    ValueError
        If ``curves`` is empty, ``x`` is empty, not one-dimensional or not finite, a value is
        not numeric, or a curve's length differs from ``x``.
    """
    _mapping(curves, "curves", "{'none': values}")
    colour_of, label_of = _options(colors, labels)
    if not curves:
        raise ValueError("curves must contain at least one strategy")
    xs = _values(x, "x")
    if xs.ndim != 1 or xs.size == 0:
        raise ValueError(f"x must be a non-empty one-dimensional sequence, got shape {xs.shape}")
    if not np.isfinite(xs).all():
        raise ValueError("x must be finite (no NaN or inf)")
    ax = new_axes(ax)
    ys = {}
    for label, values in curves.items():
        ys[label] = _values(values, f"curves[{label!r}]")
        if ys[label].shape != xs.shape:
            raise ValueError(f"curves[{label!r}] has shape {ys[label].shape}, x has {xs.shape}")
    names = list(ys)
    for i, (label, y) in enumerate(ys.items()):
        covered = any(
            np.allclose(y, ys[later], rtol=0.02, atol=0, equal_nan=True) for later in names[i + 1 :]
        )
        ax.plot(
            xs,
            y,
            marker="o",
            markersize=3,
            linewidth=5 if covered else 1.4,
            alpha=0.45 if covered else 1.0,
            label=label_of.get(label, label),
            color=colour_of.get(label, cycle_colour(i)),
            linestyle=linestyle(i),
        )
    if hline is not None:
        ax.axhline(hline, color="0.5", linewidth=0.8, linestyle="--", label=hline_label)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if legend:
        ax.legend(ncol=2)
    return ax


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
    colors: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    legend: bool = True,
) -> Axes:
    """Mean over seeds of each curve, with a shaded band showing the spread across seeds.

    Parameters
    ----------
    curves : Mapping[str, array of shape (seeds, points)]
        One array per label; rows are seeds. A 1-D array counts as one seed. Non-finite
        values (NaN or inf, e.g. from a diverged run) are not drawn: a point where any seed is
        non-finite is left out of that label's mean line and band.
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
    colors : Mapping[str, str], optional
        Colour per key of ``curves``; keys not in it take the style's colour cycle.
    labels : Mapping[str, str], optional
        Legend label per key of ``curves`` (default: the key itself).
    legend : bool
        Draw a legend on these axes. Pass False to draw one legend for a whole figure.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    TypeError
        If ``curves``, ``colors`` or ``labels`` is not a mapping.
    ValueError
        If ``curves`` is empty, a curve has no seeds or no points, a value is not numeric,
        ``band`` is unknown, or shapes disagree.

    Examples
    --------
    >>> import torch
    >>> from attnscale import plot_seed_bands
    >>> ax = plot_seed_bands({"scaled": torch.rand(5, 20), "unscaled": torch.rand(5, 20)})
    >>> len(ax.get_lines()), ax.get_xlabel()
    (2, 'epoch')
    """
    _mapping(curves, "curves", "{'none': values}")
    colour_of, label_of = _options(colors, labels)
    if not curves:
        raise ValueError("curves must contain at least one label")
    band = _checks.one_of(band, "band", ("range", "std"))
    ax = new_axes(ax)
    for i, (label, values) in enumerate(curves.items()):
        y = _values(values, f"curves[{label!r}]")
        if y.ndim == 1:
            y = y[None, :]
        if y.ndim != 2 or 0 in y.shape:
            raise ValueError(
                f"curves[{label!r}] must have shape (seeds, points) with at least one seed and "
                f"one point, got {y.shape}"
            )
        xs = np.arange(1, y.shape[1] + 1) if x is None else _values(x, "x")
        if xs.shape != (y.shape[1],):
            raise ValueError(f"curves[{label!r}] has {y.shape[1]} points, x has {xs.shape}")
        # Non-finite values become gaps: NaN propagates through the statistics without the
        # warnings that inf - inf would raise, and matplotlib does not draw it.
        y = np.where(np.isfinite(y), y, np.nan)
        mean = y.mean(0)
        if band == "range":
            lo, hi = y.min(0), y.max(0)
        else:
            sd = y.std(0, ddof=1) if y.shape[0] > 1 else np.zeros_like(mean)
            lo, hi = mean - sd, mean + sd
        colour = colour_of.get(label, cycle_colour(i))
        ax.plot(
            xs,
            mean,
            color=colour,
            linestyle=linestyle(i),
            label=label_of.get(label, label),
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
    if legend:
        ax.legend()
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
    colors: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    legend: bool = True,
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
    colors, labels : Mapping[str, str], optional
        Colour and legend label per variant label (the strategy name, e.g. ``"none"``).
    legend : bool
        Draw a legend on these axes.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    TypeError
        If ``result`` is not a TrainingResult.

    Examples
    --------
    >>> from attnscale import plot_training_metric
    >>> from attnscale import train
    >>> res = train("mean", strategies=["none", "inverse_sqrt"], seeds=[0, 1], epochs=2,
    ...             num_samples=8, d_model=8, d_k=4)
    >>> len(plot_training_metric(res, "loss", logy=True).get_lines())
    2
    """
    from ._training.result import TrainingResult

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
        colors=colors,
        labels=labels,
        legend=legend,
    )
