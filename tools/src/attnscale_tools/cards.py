"""Gallery cards for the examples that draw no figure.

mkdocs-gallery makes each card's thumbnail from the example's first figure, and shows its own
placeholder logo for an example without one (the "in plain PyTorch" pages, tables, the
checklist). The English build's hook (``mkdocs_hooks``) draws a card for each of them
instead, over the placeholder: the page's formula above a sketch of what the page holds (code,
a table, a checklist). Nothing on a card is English, so the Chinese edition uses it as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from attnscale_tools import gallery_format

if TYPE_CHECKING:
    from matplotlib.axes import Axes

#: What each text-only example's card shows: its kind of content and a formula of the page.
#: An example that is not listed gets a code card with its section's formula.
CARDS: dict[str, tuple[str, str]] = {
    "plot_03_variance_in_plain_pytorch": ("code", r"$\mathrm{Var}[q\cdot k] = d_k$"),
    "plot_06_softmax_in_plain_pytorch": ("code", r"$H = -\sum_j p_j \log p_j$"),
    "plot_09_scaling_in_plain_pytorch": ("code", r"$QK^{\top}/\sqrt{d_k}$"),
    "plot_06_optimisers": ("table", r"$\gamma = \min(1,\ \tau / S_{\max})$"),
    "plot_07_training_in_plain_pytorch": ("code", r"$W \to d_k^{1/4}\, W$"),
    "plot_05_checklist": ("checklist", r"$1/\sqrt{d_{\mathrm{head}}}$"),
    "plot_07_knobs_in_real_code": ("code", r"$\mathrm{scale} = d_h^{-1/2}$"),
    "plot_09_real_bugs": ("checklist", r"$\sqrt{d_{\mathrm{model}}} \neq \sqrt{d_k}$"),
    "plot_12_trained_checkpoints": ("table", r"$\max_{ij}\ q_i \cdot k_j / \sqrt{d_k}$"),
    "plot_13_monitor_in_plain_pytorch": ("code", r"$\max_{ij}\ s_{ij},\ H_i$"),
    "plot_fact_check": ("checklist", r"$\mathrm{Var}[q\cdot k] = d_k$"),
}
#: Each section's formula, for an example not in ``CARDS``.
SECTION_FORMULA = {
    "01_variance": r"$\mathrm{Var}[q\cdot k] = d_k$",
    "02_softmax": r"$\mathrm{softmax}(z/\sqrt{d_k})$",
    "03_normalization": r"$QK^{\top}/\sqrt{d_k}$",
    "04_training": r"$W \to d_k^{1/4}\, W$",
    "05_debugging": r"$\max_{ij}\ s_{ij}$",
}
INK = "#3f51b5"  # the site's primary colour (indigo)
ACCENT = "#ff7043"  # its accent (deep orange)
PAPER = "#eef0fa"
#: The card's size in pixels: the gallery's thumbnail_size (mkdocs.yml).
SIZE = (320, 224)
#: Written into each card's PNG metadata: a test tells a card from the gallery's placeholder.
MARK = "attnscale gallery card"


def card_for(page: Path) -> tuple[str, str]:
    """The kind and formula of the card of the example whose generated page is ``page``."""
    return CARDS.get(page.stem, ("code", SECTION_FORMULA.get(page.parent.name, r"$d_k$")))


def draw(kind: str, formula: str, out: Path) -> None:
    """Draw a card: the formula, and under it a sketch of code, a table or a checklist."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    fig = Figure(figsize=(SIZE[0] / 100, SIZE[1] / 100), dpi=100, facecolor=PAPER)
    ax = fig.add_axes((0, 0, 1, 1), xlim=(0, 1), ylim=(0, 1))
    ax.set_axis_off()
    ax.add_patch(Rectangle((0.0, 0.0), 0.035, 1, color=INK))
    ax.text(0.52, 0.8, formula, ha="center", va="center", fontsize=16, color=INK)
    SKETCHES[kind](ax)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, facecolor=PAPER, metadata={"Description": MARK})


def _code(ax: Axes) -> None:
    """An editor: lines of code as bars, indented, one in the accent colour."""
    from matplotlib.patches import FancyBboxPatch

    box = FancyBboxPatch((0.12, 0.08), 0.8, 0.5, boxstyle="round,pad=0.02", fc="white", ec=INK)
    ax.add_patch(box)
    for n, (indent, length) in enumerate([(0, 0.5), (0.06, 0.42), (0.06, 0.58), (0, 0.3)]):
        x, y = 0.17 + indent, 0.49 - n * 0.1
        colour = ACCENT if n == 2 else INK
        ax.plot([x, x + length], [y, y], lw=5, solid_capstyle="round", color=colour, alpha=0.85)


def _table(ax: Axes) -> None:
    """A table: a header row in the site's colour, rows of cells, one value marked."""
    from matplotlib.patches import Rectangle

    for row in range(4):
        for col in range(4):
            face = INK if row == 0 else (ACCENT if (row, col) == (2, 3) else "white")
            xy = (0.14 + col * 0.19, 0.5 - row * 0.12)
            ax.add_patch(Rectangle(xy, 0.18, 0.11, fc=face, ec=INK))


def _checklist(ax: Axes) -> None:
    """A checklist: boxes, ticked or crossed, with a line of text as a bar beside each."""
    from matplotlib.patches import Rectangle

    for n, ok in enumerate([True, True, False, True]):
        y = 0.52 - n * 0.13
        ax.add_patch(Rectangle((0.16, y - 0.045), 0.065, 0.09, fc="white", ec=INK, lw=1.5))
        mark, colour = (r"$\checkmark$", INK) if ok else (r"$\times$", ACCENT)
        ax.text(0.193, y, mark, ha="center", va="center", fontsize=11, color=colour)
        end = 0.78 - 0.08 * (n % 2)
        ax.plot([0.28, end], [y, y], lw=5, solid_capstyle="round", color=INK, alpha=0.55)


SKETCHES = {"code": _code, "table": _table, "checklist": _checklist}


def draw_missing(generated: Path) -> list[Path]:
    """Draw the card of every example under ``generated`` that has no figure, over the
    gallery's placeholder thumbnail; return the thumbnails drawn."""
    drawn = []
    for page in sorted(generated.glob("**/plot_*.md")):
        if not page.with_suffix(".py").exists() or gallery_format.images(page):
            continue
        thumb = gallery_format.card_thumbnail(page)
        draw(*card_for(page), thumb)
        drawn.append(thumb)
    return drawn
