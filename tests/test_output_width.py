"""The text a gallery page prints fits its output box: at most 88 columns, in English and in
Chinese (a CJK character counted as two). A longer line wraps at the box edge at a 1280-px
window and breaks the columns of an aligned table."""

from __future__ import annotations

import unicodedata

import pytest

from attnscale_tools import catalogue, gallery_format

WIDTH = 88


def _columns(line: str) -> int:
    """A line's width on screen: a wide (CJK) character takes two columns."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def _ignore(key: str) -> None:
    """A text with no catalogue entry stays English; test_i18n looks for those."""


def _long_lines(pages: dict[str, str]) -> list[str]:
    return [
        f"{name}: {_columns(line)} columns: {line}"
        for name, text in pages.items()
        for block in gallery_format.OUTPUT_BLOCK.finditer(text)
        for line in block[2].splitlines()
        if _columns(line) > WIDTH
    ]


def _english_pages() -> dict[str, str]:
    pages = catalogue._pages()
    if not pages:
        pytest.skip("the English build has not run (nox -s docs)")
    return {p.relative_to(catalogue.GENERATED).as_posix(): p.read_text() for p in pages}


def test_printed_lines_fit_the_output_box() -> None:
    long = _long_lines(_english_pages())
    assert not long, f"{len(long)} lines:\n" + "\n".join(long)


def test_chinese_printed_lines_fit_the_output_box() -> None:
    texts = catalogue.load()
    pages = {
        name: catalogue.translate(text, texts, _ignore) for name, text in _english_pages().items()
    }
    long = _long_lines(pages)
    assert not long, f"{len(long)} lines:\n" + "\n".join(long)


def test_columns_count_chinese_as_two() -> None:
    assert _columns("ab") == 2 and _columns("中文") == 4
    assert _long_lines({"p": f"{gallery_format.OUTPUT_FENCE}\n{'x' * 89}\nshort\n```\n"})


def test_fold_keeps_the_text_and_fits() -> None:
    """A folded line reads back as the line it was (the Chinese edition joins the lines of a
    wrapped sentence at spaces), and no line is wider than the box."""
    from guide.printing import fold

    text = "sigma = 1/3: " + ", ".join(f"grid-point-{i} 0.0{i}" for i in range(20))
    lines = fold(text, indent="  ").splitlines()
    assert len(lines) > 1 and all(len(line) <= WIDTH for line in lines)
    assert " ".join(line.strip() for line in lines) == text
    assert all(line.startswith("    ") for line in lines[1:])
