"""The figures of the Chinese edition: the English build's figures, redrawn with Chinese text.

The English build runs every example once. While it saves a gallery figure, the MkDocs hook keeps
a pickled copy of the figure (``keep``) under ``build/figures/``. The Chinese assembly loads each
copy, puts every English text of it (title, axis labels, legend, tick labels, notes) through the
catalogue (``catalogue``), as it does for tables and printed output, and saves it over
the Chinese page's copy of the image, in a CJK font from the system's fonts (Debian's
``fonts-noto-cjk``). The data are the English run's: nothing is computed twice.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attnscale_tools import catalogue, figure_copies, gallery_format

#: The font the Chinese text is drawn in, after the style's own font for Latin text.
CJK_FONT = "Noto Sans CJK SC"


def keep(figure: Any, path: str | Path, kwargs: dict[str, Any]) -> None:
    """Keep a copy of a gallery figure being saved at ``path`` (under docs/generated)."""
    path = Path(path).resolve()
    if path.parent.name != "images" or not gallery_format.IMAGE.fullmatch(path.name):
        return
    copy = figure_copies.COPIES / path.relative_to(catalogue.GENERATED).with_suffix(".pickle")
    copy.parent.mkdir(parents=True, exist_ok=True)
    try:
        with warnings.catch_warnings():
            # Python 3.13 deprecates pickling itertools objects, which matplotlib's category
            # axes hold; where 3.14 refuses, the except below keeps the figure English
            warnings.filterwarnings("ignore", "Pickle, copy, and deepcopy", DeprecationWarning)
            data = pickle.dumps((figure, {k: v for k, v in kwargs.items() if k != "fname"}))
    except Exception:  # a figure that cannot be pickled stays English on the Chinese page
        copy.unlink(missing_ok=True)
        return
    copy.write_bytes(data)


def install_keeper() -> None:
    """Keep a copy of every figure the gallery saves from now on (the English build's hook)."""
    from matplotlib.figure import Figure

    if getattr(Figure.savefig, "_keeps_copies", False):
        return
    save = Figure.savefig

    def savefig(self: Figure, fname: Any, *args: Any, **kwargs: Any) -> Any:
        out = save(self, fname, *args, **kwargs)
        if isinstance(fname, (str, Path)) and not args:
            keep(self, fname, kwargs)
        return out

    savefig._keeps_copies = True  # type: ignore[attr-defined]
    Figure.savefig = savefig  # type: ignore[method-assign]


def translated(
    copy: Path, texts: dict[str, str], missing: Callable[[str], None]
) -> tuple[Any, dict[str, Any]]:
    """A kept figure with its English texts in Chinese, and the arguments it was saved with."""
    import matplotlib

    matplotlib.use("Agg")
    figure, kwargs = pickle.loads(copy.read_bytes())

    def chinese(text: str) -> str:
        lines = text.split("\n")
        for i, line in enumerate(lines):
            if catalogue.english_outside_math(line):
                key, numbers = catalogue.shape(line)
                if texts.get(key):
                    lines[i] = catalogue.fill(texts[key], numbers)
                else:
                    missing(key)
        return "\n".join(lines)

    for text in figure_copies.texts(figure):
        zh = chinese(text.get_text())
        if zh != text.get_text():
            text.set_text(zh)
            # a text with math is laid out by mathtext in one font, with no per-glyph fallback:
            # Noto Sans CJK, which has Latin letters too; elsewhere the CJK font follows the
            # style's for the characters it lacks
            family = text.get_fontfamily()
            text.set_fontfamily([CJK_FONT] if "$" in zh else [*family, CJK_FONT])
    for axes in figure.axes:  # tick labels are drawn again from the axes' formatters
        for axis in (axes.xaxis, axes.yaxis):
            labels = _translate_formatter(axis.get_major_formatter(), chinese)
            if labels:  # in the font of the texts above, for ticks made at drawing time too
                family = axis.label.get_fontfamily()
                math = any("$" in label for label in labels)
                axis.set_tick_params(labelfontfamily=[CJK_FONT] if math else [*family, CJK_FONT])
    return figure, kwargs


def _translate_formatter(formatter: Any, chinese: Callable[[str], str]) -> list[str]:
    """Put the fixed labels of a tick formatter through ``chinese`` (set_yticks(labels=...)
    makes a FuncFormatter over a dict of labels; older code, a FixedFormatter; bars over
    strings, a category formatter), and return those that changed."""
    import functools

    from matplotlib.category import StrCategoryFormatter
    from matplotlib.ticker import FixedFormatter, FuncFormatter

    if isinstance(formatter, StrCategoryFormatter):
        units = {chinese(str(k)): v for k, v in formatter._units.items()}
        changed = [k for k in units if k not in formatter._units]
        formatter._units = units
        return changed
    if isinstance(formatter, FixedFormatter):
        seq = [chinese(label) for label in formatter.seq]
        changed = [new for new, old in zip(seq, formatter.seq, strict=True) if new != old]
        formatter.seq = seq
        return changed
    if isinstance(formatter, FuncFormatter) and isinstance(formatter.func, functools.partial):
        changed = []
        for labels in formatter.func.args:
            if isinstance(labels, dict):
                for k, v in labels.items():
                    labels[k] = chinese(v)
                    changed += [labels[k]] if labels[k] != v else []
        return changed
    return []


def redraw(copy: Path, target: Path, texts: dict[str, str], missing: Callable[[str], None]) -> None:
    """Save a kept figure at ``target`` with its English texts in Chinese. The redrawn image is
    kept beside the copy and reused while the copy, the catalogue and this module are the same
    (drawing is most of the Chinese assembly's time on a rebuild)."""
    import matplotlib.pyplot as plt

    from guide.style import STYLE

    digest = hashlib.sha256(copy.read_bytes())
    digest.update(json.dumps(texts, sort_keys=True).encode())
    digest.update(Path(__file__).read_bytes())
    digest.update(STYLE.read_bytes())
    cached, stamp = copy.with_suffix(".zh.png"), copy.with_suffix(".zh.key")
    if cached.exists() and stamp.exists() and stamp.read_text() == digest.hexdigest():
        shutil.copyfile(cached, target)
        return
    lost: list[str] = []
    # Under the style the English figure was drawn in: a colour written "C0" is looked up in
    # the colour cycle when the figure is drawn, not when the line is made, so outside the
    # style it would come out in matplotlib's default colours instead of the site's.
    with plt.style.context(STYLE):
        figure, kwargs = translated(copy, texts, lost.append)
        figure.savefig(target, **kwargs)
    plt.close(figure)
    for key in lost:
        missing(key)
    if not lost:  # a figure with English left in it is drawn again next time
        shutil.copyfile(target, cached)
        stamp.write_text(digest.hexdigest())


def check_font() -> None:
    """Raise if matplotlib cannot find the CJK font (the Chinese text would be boxes).

    Matplotlib caches the fonts it found on first use; a cache made before the font was
    installed does not list it. Where fontconfig has the font, the font's file is added to
    matplotlib's font list, so a stale cache needs no manual clearing.
    """
    from matplotlib import font_manager

    try:
        font_manager.findfont(CJK_FONT, fallback_to_default=False)
        return
    except ValueError:
        pass
    for path in _fontconfig_files(CJK_FONT):
        font_manager.fontManager.addfont(path)
    try:
        font_manager.findfont(CJK_FONT, fallback_to_default=False)
    except ValueError:
        raise RuntimeError(
            f"the Chinese figures need the font {CJK_FONT!r}: apt-get install fonts-noto-cjk"
        ) from None


def _fontconfig_files(family: str) -> list[str]:
    """The font files fontconfig knows for ``family`` (none where fc-list is missing)."""
    import subprocess

    try:
        out = subprocess.run(
            ["fc-list", f"{family}", "file"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.split(":")[0].strip() for line in out.splitlines() if line.strip()]
