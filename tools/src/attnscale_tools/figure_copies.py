"""The English build's gallery figures, kept for the Chinese edition: where the copies lie and
what they say.

While the English build saves a gallery figure, ``zh_figures.keep`` pickles it under
``build/figures/`` (the image's path below ``docs/generated/``, with ``.pickle``). The catalogue
lists the copies' texts that need an entry (``catalogue.figure_texts``), and ``zh_figures``
redraws them in Chinese. This module imports neither, so they need not import each other.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from attnscale_tools import ROOT

COPIES = ROOT / "build" / "figures"


def copies() -> Iterator[tuple[Path, Path]]:
    """Each kept figure, with its image's path relative to docs/generated."""
    for copy in sorted(COPIES.rglob("*.pickle")):
        yield copy, copy.relative_to(COPIES).with_suffix(".png")


def texts(figure: Any) -> list[Any]:
    """The matplotlib texts of a figure that show something (not blank)."""
    from matplotlib.text import Text

    return [t for t in figure.findobj(Text) if t.get_text().strip()]


def lines(copy: Path) -> list[str]:
    """Every line of every text of a kept figure."""
    figure, _ = pickle.loads(copy.read_bytes())
    return [line for t in texts(figure) for line in t.get_text().split("\n")]
