"""Matplotlib helpers that draw every figure on the site in one style.

Each ``plot_*`` function takes its data and an optional ``ax``; without one it
creates a figure of a legible default size. It returns the ``Axes`` it drew on,
with labelled axes and a legend where there are several lines, so callers can
add titles or combine panels freely.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

from . import _checks

__all__ = [
    "PALETTE",
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


# --- normalization comparison ---

__all__ += ["Table", "plot_strategy_bars", "plot_strategy_curves"]

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

    Raises
    ------
    ValueError
        If a row's length differs from the number of headers.

    Examples
    --------
    >>> print(Table(["a", "b"], [[1, 2]]))
    | a | b |
    |---|---|
    | 1 | 2 |
    """

    def __init__(self, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        self.headers = [str(h) for h in headers]
        self.rows = [[str(c) for c in row] for row in rows]
        for i, row in enumerate(self.rows):
            if len(row) != len(self.headers):
                raise ValueError(
                    f"rows[{i}] has {len(row)} cells, but there are {len(self.headers)} headers"
                )

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
        body = "".join(
            "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in self.rows
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

__all__ += ["plot_loss_grid", "plot_seed_bands", "plot_training_metric"]


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
