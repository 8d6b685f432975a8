"""Printed lines that fit a page's output box: 88 columns, the width of its code cells."""

from __future__ import annotations

import textwrap

WIDTH = 88


def fold(text: str, indent: str = "", hang: str = "  ") -> str:
    """``text`` folded to ``WIDTH`` columns at spaces (never inside a word, a number or
    a hyphenated name), each continuation line indented by ``indent + hang`` under the
    first, so that the Chinese edition reads the lines back as one sentence."""
    return textwrap.fill(
        text,
        WIDTH,
        initial_indent=indent,
        subsequent_indent=indent + hang,
        break_on_hyphens=False,
        break_long_words=False,
    )
