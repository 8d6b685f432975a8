"""Plot helpers: the public ones, the site's figures, and the one style with its strategy table."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch
from bad_input import INF, NAN, TINY_TRAIN

import attnscale as asc

matplotlib.use("Agg")
import matplotlib.colors as mcolors
import matplotlib.pyplot as plt

import attnscale
from attnscale import plot_seed_bands, plot_strategy_curves, plot_training_metric, train
from guide import figures, style

ROOT = Path(__file__).parents[1]


@pytest.fixture(autouse=True)
def _close_figures() -> None:
    yield
    plt.close("all")


def _fresh_python(code: str) -> str:
    """Run ``code`` in a new interpreter (nothing imported yet); return what it printed."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_import_attnscale_leaves_matplotlib_out() -> None:
    _fresh_python(
        "import sys, attnscale; "
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported'; "
        "attnscale.plot_seed_bands; "
        "assert 'matplotlib' in sys.modules"
    )


def test_without_matplotlib_the_plot_helpers_name_the_extra() -> None:
    """Without matplotlib, ``from attnscale import *`` imports everything else, and a plot
    helper raises an ImportError that says which extra to install."""
    printed = _fresh_python(
        "import sys; sys.modules['matplotlib'] = None\n"
        "from attnscale import *\n"
        "assert 'train' in dir() and 'plot_seed_bands' not in dir()\n"
        "import attnscale\n"
        "try:\n"
        "    attnscale.plot_seed_bands\n"
        "except ImportError as err:\n"
        "    print(err)\n"
    )
    assert 'pip install "attnscale[plot]"' in printed, printed


def test_training_helpers() -> None:
    res = train(
        "mean",
        strategies=["none", "cosine"],
        seeds=[0, 1],
        epochs=2,
        num_samples=8,
        d_model=8,
        d_k=4,
        batch_size=4,
    )
    ax = plot_training_metric(res, "entropy", band="std", hline=1.0, hline_label="ref")
    assert len(ax.get_lines()) == 3 and ax.get_xlabel() == "epoch"
    ax = plot_training_metric(
        res, "loss", colors={"none": "#123456"}, labels={"none": "no scale"}, legend=False
    )
    line = next(ln for ln in ax.get_lines() if ln.get_label() == "no scale")
    assert mcolors.to_hex(line.get_color()) == "#123456"
    assert ax.get_legend() is None
    ax = plot_seed_bands(
        {"a": torch.rand(3, 5), "b": torch.rand(5)}, x=[1, 2, 4, 8, 16], logx=True, markers=True
    )
    assert len(ax.get_lines()) == 2
    with pytest.raises(ValueError, match="curves"):
        plot_seed_bands({})
    with pytest.raises(ValueError, match="band"):
        plot_seed_bands({"a": torch.rand(2, 3)}, band="iqr")
    with pytest.raises(ValueError, match="x"):
        plot_seed_bands({"a": torch.rand(2, 3)}, x=[1, 2])
    with pytest.raises(ValueError, match="shape"):
        plot_seed_bands({"a": torch.rand(2, 3, 4)})
    with pytest.raises(TypeError, match="result"):
        plot_training_metric({"loss": 1}, "loss")


def test_strategy_curves_take_colours_and_labels() -> None:
    names = ["none", "inverse_sqrt"]
    ax = plot_strategy_curves(
        [1, 2, 4],
        {n: [1.0, 2.0, 3.0] for n in names},
        colors=style.colours(names),
        labels=style.labels(names),
    )
    drawn = {ln.get_label(): mcolors.to_hex(ln.get_color()) for ln in ax.get_lines()}
    assert drawn == {style.STRATEGIES[n].label: style.STRATEGIES[n].colour.lower() for n in names}


def _contrast(a: str, b: tuple[float, ...]) -> float:
    """WCAG contrast ratio of two colours."""

    def lum(c: object) -> float:
        rgb = [
            x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in mcolors.to_rgb(c)
        ]
        return 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]

    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_one_legend_per_figure() -> None:
    fig, axes = plt.subplots(1, 2, layout="constrained")
    for ax in axes:
        ax.plot([0, 1], label="a")
        ax.plot([1, 0], label="b")
        ax.legend()
    axes[1].axhline(0.5, label="ln L")
    figures.one_legend(fig)
    assert all(ax.get_legend() is None for ax in axes)
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["a", "b", "ln L"]
    plt.close(fig)


def test_every_strategy_has_one_colour_and_one_label() -> None:
    assert set(style.STRATEGIES) == set(attnscale.SCALING_STRATEGIES)
    colours = [mcolors.to_hex(look.colour) for look in style.STRATEGIES.values()]
    labels = [look.label for look in style.STRATEGIES.values()]
    assert len(set(colours)) == len(colours), "two strategies share a colour"
    assert len(set(labels)) == len(labels), "two strategies share a label"
    assert not any("_" in label.replace("\\", "") for label in labels if "$" not in label)


def test_text_labels_have_no_mathtext_and_stay_distinct() -> None:
    names = [*style.STRATEGIES, *style.VARIANTS]
    text = style.text_labels(names)
    assert not any(c in label for label in text.values() for c in "$\\{}")
    assert len(set(text.values())) == len(names)
    assert text["inverse_sqrt"] == "1/√d_k" and text["none"] == style.labels(["none"])["none"]


def test_style_file_applies() -> None:
    style.use_style()
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    assert mcolors.to_hex(cycle[0]) == style.STRATEGIES["inverse_sqrt"].colour.lower()
    assert plt.rcParams["axes.spines.top"] is False
    matplotlib.rcdefaults()


EXAMPLES = sorted(ROOT.glob("examples/*/plot_*.py"))


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.stem)
def test_figures_use_the_style_and_the_strategy_table(script: Path) -> None:
    """Every example that draws applies the site style; none spells strategy names in legends."""
    text = script.read_text()
    if re.search(r"\bplt\.(subplots|figure)\(|\bplot_[a-z_]+\(", text):
        assert "use_style()" in text, "the example draws but does not apply the site style"
    # a strategy's snake_case name as a legend label means the table was bypassed
    for name in attnscale.SCALING_STRATEGIES:
        assert not re.search(rf"label=[\"']{name}[\"']", text), name


def _fp16_report(growth: float) -> attnscale.MonitorReport:
    """A monitor report of float16 attention whose raw product overflows for large growth."""
    gen = torch.Generator().manual_seed(0)
    q, k = (growth * torch.randn(2, 1, 2, 8, 64, generator=gen)).half()
    with attnscale.AttentionMonitor() as monitor:
        torch.softmax((q @ k.transpose(-2, -1)) * 0.125, dim=-1)
    return monitor.report()


def test_monitor_summary_is_a_dot_plot_with_overflow_at_the_edge() -> None:
    reports = {"small": _fp16_report(2.0), "overflowed": _fp16_report(100.0)}
    assert reports["overflowed"].records[0].last.max_abs_qk == float("inf")
    ax = attnscale.plot_monitor_summary(
        reports, metric="max_abs_qk", log=True, marks={"float16 max": 65504.0}
    )
    assert not ax.patches  # no bars
    dots = [c.get_offsets() for c in ax.collections]
    finite, edge = (np.asarray(d) for d in dots)
    small = reports["small"].records[0].last.max_abs_qk
    np.testing.assert_allclose(finite, [[small, 1.0]])  # rows top to bottom: y 1, 0
    assert edge[0, 0] == ax.get_xlim()[1] and edge[0, 1] == 0.0
    assert [t.get_text() for t in ax.texts] == ["inf"]
    assert ax.get_legend().get_texts()[0].get_text() == "float16 max"
    assert ax.get_xlim()[0] < small < 65504.0 < ax.get_xlim()[1]
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="positive"):
        attnscale.plot_monitor_summary(reports, metric="max_abs_qk", log=True, marks={"m": 0.0})
    # a report's dot takes the colour given for its name
    ax = attnscale.plot_monitor_summary(reports, metric="max_abs_qk", colors={"small": "#009E73"})
    np.testing.assert_allclose(ax.collections[0].get_facecolors()[0], mcolors.to_rgba("#009E73"))
    plt.close(ax.figure)


def test_threshold_dots_keep_equal_values_apart_and_show_unreached_at_the_edge() -> None:
    thresholds = {
        "a": {"lost": 10.0, "overflow": 10.0},  # equal: must not hide each other
        "b": {"lost": 3.0, "overflow": None},
    }
    ax = figures.plot_threshold_dots(thresholds, xlim=(1.0, 100.0), xlabel="g")
    assert not ax.patches  # dots, no bars
    lost, overflow, unreached = (np.asarray(c.get_offsets()) for c in ax.collections)
    assert lost[:, 0].tolist() == [10.0, 3.0]
    assert overflow[:, 0].tolist() == [10.0]
    assert lost[0, 1] != overflow[0, 1]  # same x, drawn at different heights
    assert 100.0 < unreached[0, 0] < ax.get_xlim()[1]  # beyond the measured range, inside axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    labels = ax.get_legend_handles_labels()[1]
    assert labels == ["lost", "overflow", "overflow: not reached by 100"]
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="within xlim"):
        figures.plot_threshold_dots({"a": {"lost": 500.0}}, xlim=(1.0, 100.0))
    with pytest.raises(ValueError, match="same kinds"):
        figures.plot_threshold_dots({"a": {"x": 1.0}, "b": {"y": 1.0}}, xlim=(1.0, 100.0))


def test_a_covered_strategy_curve_stays_visible() -> None:
    """A curve that a later one covers is drawn wide and pale beneath it; a threshold line can
    be named in the legend."""
    from attnscale._plotting import plot_strategy_curves

    x = [1.0, 2.0, 4.0]
    ax = plot_strategy_curves(
        x,
        {"a": [1.0, 0.5, 0.2], "b": [1.005, 0.5, 0.2], "c": [0.9, 0.9, 0.9]},
        hline=0.5,
        hline_label="threshold",
    )
    a, b, c = ax.get_lines()[:3]
    assert a.get_linewidth() > b.get_linewidth() == c.get_linewidth()
    assert a.get_alpha() < 1 and b.get_alpha() == 1
    assert "threshold" in [t.get_text() for t in ax.get_legend().get_texts()]


# -- bad input: a clear error naming the argument, or the right answer (helpers in bad_input.py) --


@pytest.mark.parametrize(
    "rows, match",
    [
        ({"a": []}, r"rows\['a'\]"),
        ({"a": torch.zeros(0)}, r"rows\['a'\]"),
        ({"a": [0.5, NAN]}, r"rows\['a'\]"),
        ({"a": [0.5, 0.5], "b": [INF, 0.0]}, r"rows\['b'\]"),
        ({"a": "ab"}, r"rows\['a'\]"),
        ({}, "rows"),
    ],
)
def test_probability_rows_refuse_empty_and_non_finite(rows, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        asc.plot_probability_rows(rows)


@pytest.mark.parametrize(
    "x, curves, match",
    [
        ([], {"a": []}, "x"),
        ([1, NAN, 4], {"a": [1.0, 2.0, 3.0]}, "x"),
        ([1, INF, 4], {"a": [1.0, 2.0, 3.0]}, "x"),
        ([[1, 2]], {"a": [[1.0, 2.0]]}, "x"),
        ([1, 2], {"a": [1.0]}, r"curves\['a'\]"),
        ([1, 2], {"a": ["p", "q"]}, r"curves\['a'\]"),
        ([1, 2], {}, "curves"),
    ],
)
def test_strategy_curves_refuse_bad_x_and_curves(x, curves, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        asc.plot_strategy_curves(x, curves)


def test_strategy_curves_leave_non_finite_values_out() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ax = asc.plot_strategy_curves([1, 2, 4], {"a": [1.0, NAN, 2.0], "b": [INF, 1.0, -INF]})
    assert len(ax.get_lines()) == 2


@pytest.mark.parametrize(
    "curves",
    [{"a": []}, {"a": np.zeros((0, 3))}, {"a": np.zeros((3, 0))}, {"a": torch.zeros(2, 2, 2)}],
)
def test_seed_bands_refuse_empty_curves(curves) -> None:
    with pytest.raises(ValueError, match=r"curves\['a'\]"):
        asc.plot_seed_bands(curves)


@pytest.mark.parametrize("band", ["range", "std"])
def test_seed_bands_leave_non_finite_points_out(band: str) -> None:
    curves = {
        "diverged": [[1.0, NAN, 2.0, 3.0], [1.0, 2.0, -INF, 3.0]],
        "ok": [[1.0, 2.0, 3.0, 4.0], [2.0, 3.0, 4.0, 5.0]],
        "all nan": [[NAN] * 4],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ax = asc.plot_seed_bands(curves, band=band)
    mean = ax.get_lines()[0].get_ydata()
    assert np.isnan(mean[1]) and np.isnan(mean[2]) and mean[0] == 1.0 and mean[3] == 3.0
    assert np.array_equal(ax.get_lines()[1].get_ydata(), [1.5, 2.5, 3.5, 4.5])
    with pytest.raises(ValueError, match="band"):
        asc.plot_seed_bands(curves, band="iqr")


def test_training_metric_plot_needs_a_result() -> None:
    with pytest.raises(TypeError, match="result"):
        asc.plot_training_metric({"loss": [1.0]}, "loss")
    with pytest.raises(ValueError, match="name"):
        asc.plot_training_metric(asc.train("mean", **TINY_TRAIN), "nope")


def _report() -> asc.MonitorReport:
    q = torch.randn(1, 1, 4, 8)
    with asc.AttentionMonitor() as monitor:
        torch.softmax(q @ q.transpose(-2, -1) * 8**-0.5, dim=-1)
    assert monitor.report().records
    return monitor.report()


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda r: asc.plot_monitor_series([r]), "report must be a MonitorReport.*got list"),
        (lambda r: asc.plot_monitor_series(r, where="x"), "where must be a list .*got str"),
        (lambda r: asc.plot_monitor_series(r, where=[3]), r"where\[0\] must be .*got int"),
        (lambda r: asc.plot_monitor_summary(r), "reports must be a mapping .*got MonitorReport"),
        (lambda r: asc.plot_monitor_summary([r]), "reports must be a mapping .*got list"),
        (lambda r: asc.plot_monitor_summary({"a": [r]}), r"reports\['a'\] must be a MonitorR"),
        (lambda r: asc.plot_monitor_summary({"a": r}, marks=[1.0]), "marks must be a mapping"),
        (lambda r: asc.plot_monitor_summary({"a": r}, marks={"m": "x"}), r"marks\['m'\]"),
        (lambda r: asc.plot_monitor_summary({"a": r}, colors=["C1"]), "colors must be a mapping"),
        (lambda r: asc.plot_probability_rows([[0.5, 0.5]]), "rows must be a mapping .*got list"),
        (lambda r: asc.plot_strategy_curves([1], [[1.0]]), "curves must be a mapping .*got list"),
        (lambda r: asc.plot_strategy_curves([1], {"a": [1]}, labels=["a"]), "labels must be a"),
        (lambda r: asc.plot_seed_bands(r), "curves must be a mapping .*got MonitorReport"),
        (lambda r: asc.plot_seed_bands({"a": [1.0]}, colors="C1"), "colors must be a mapping"),
    ],
)
def test_plot_helpers_name_an_argument_of_the_wrong_kind(call, match: str) -> None:
    """A list, a single report or a string where a report or a mapping belongs is a TypeError
    naming the argument, not an AttributeError from inside the helper."""
    with pytest.raises(TypeError, match=match):
        call(_report())
