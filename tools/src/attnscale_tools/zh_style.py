"""Typography of the Chinese edition: the checks of i18n/zh/TERMS.md, and the one rule the build
applies itself (a formula keeps the full-width punctuation that follows it on its line).

Each check takes Markdown and returns one line per problem, quoting the place.
"""

from __future__ import annotations

import re

from attnscale_tools import gallery_format

#: Full-width punctuation that closes or separates (never followed or preceded by a space).
PUNCTUATION = "，。：；！？、）」』"

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
# inline math may wrap to the next line, never across a paragraph
_INLINE_MATH = r"\$(?:[^$\n]|\n(?!\n))+\$"
_MATH = re.compile(rf"\$\$.*?\$\$|{_INLINE_MATH}|\\\(.*?\\\)", re.S)
_CODE = re.compile(r"`[^`\n]+`")
_URL = re.compile(r"\]\([^)\s]*\)|\]\[[^\]\n]*\]|<[^>\n]+>")  # link targets and tags


def prose(markdown: str) -> str:
    """The text a reader reads as prose: code, formulas, link targets and HTML tags replaced
    by a placeholder (so that what surrounds them keeps its place)."""
    text = _FENCE.sub("", markdown)
    text = _MATH.sub("X", text)
    text = _CODE.sub("X", text)
    return _URL.sub("]", text)


def _quote(text: str, start: int, end: int) -> str:
    return text[max(0, start - 8) : end + 8].replace("\n", " ")


def spaces_at_punctuation(markdown: str) -> list[str]:
    """A space after (or before) full-width punctuation."""
    text = prose(markdown)
    found = re.finditer(rf"[{PUNCTUATION}（「]\**[ \t]+(?=\S)|(?<=\S)[ \t]+[{PUNCTUATION}]", text)
    return [f"space at full-width punctuation: {_quote(text, m.start(), m.end())!r}" for m in found]


def nested_brackets(markdown: str) -> list[str]:
    """Full-width brackets inside full-width brackets: （熵坍缩（entropy collapse））."""
    text, found, depth, start = prose(markdown), [], 0, 0
    for i, ch in enumerate(text):
        if ch == "（":
            depth += 1
            if depth == 1:
                start = i
            elif depth == 2:
                found.append(f"nested full-width brackets: {_quote(text, start, i)!r}")
        elif ch == "）":
            depth = max(0, depth - 1)
        elif ch == "\n" and text[i + 1 : i + 2] == "\n":  # a paragraph ends every bracket
            depth = 0
    return found


def number_style(markdown: str) -> list[str]:
    """Thousands separators (4,000) and ranges written with a hyphen (第 1-3 步)."""
    text = prose(markdown)
    found = [
        f"thousands separator: {_quote(text, m.start(), m.end())!r}"
        for m in re.finditer(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\w])", text)
    ]
    found += [
        f"range with a hyphen (use ～): {_quote(text, m.start(), m.end())!r}"
        for m in re.finditer(r"(?<![\w.-])\d+(?:\.\d+)?[-–]\d+(?:\.\d+)?(?![\w.-])", text)
    ]
    return found


def check(markdown: str) -> list[str]:
    """Every typography problem of a Chinese text."""
    return spaces_at_punctuation(markdown) + nested_brackets(markdown) + number_style(markdown)


# A formula, then full-width punctuation: both in one unbreakable span, so that the line never
# breaks between them (an orphaned 。 at the start of a line). Only outside code.
_MATH_THEN_PUNCTUATION = re.compile(rf"(?<!\$)({_INLINE_MATH})([{PUNCTUATION}]+)")


#: ``![alt](``: an image's alt text, one level of brackets allowed in it ($x[i]$)
_IMAGE_ALT = r"!\[(?:[^\[\]\n]|\[[^\[\]\n]*\])*\]\("


def bind_formulas(markdown: str) -> str:
    """``$x$。`` as ``<span class="nowrap">$x$。</span>``, outside code, HTML tags and image
    alt texts."""
    # code blocks, code spans, HTML tags (a card's tooltip attribute holds formulas too) and
    # an image's alt text, which becomes an attribute: markup there is read aloud, not applied
    parts = re.split(
        rf"(^```.*?^```[ \t]*$|`[^`\n]+`|<[^<>]*>|{_IMAGE_ALT})", markdown, flags=re.M | re.S
    )
    for i in range(0, len(parts), 2):  # the even parts are outside them
        parts[i] = _MATH_THEN_PUNCTUATION.sub(r'<span class="nowrap">\1\2</span>', parts[i])
    return "".join(parts)


def reader_text(page: str) -> str:
    """The prose of an assembled Chinese page as a reader sees it, for the English scan: no
    code, formulas, link targets or markup; no glosses (the English in brackets after a term);
    no titles of works (in italics, and the reference list); no tables or printed output (the
    catalogue's)."""
    md = gallery_format.OUTPUT_BLOCK.sub("", page)
    md = re.sub(r"<table>.*?</table>", "", md, flags=re.S)
    md = re.sub(r"^## 参考文献.*?(?=^## |\Z)", "", md, flags=re.S | re.M)
    md = re.sub(r"\A---\n.*?\n---\n", "", md, flags=re.S)  # front matter
    md = re.sub(r"^!!! \w+", "", md, flags=re.M)  # admonition markers
    md = gallery_format.RUNNING_TIME_LINE.sub("", md)  # a hook's, in Chinese
    md = gallery_format.DOWNLOAD_BUTTON.sub("", md)
    md = re.sub(r"\[[^\]\n]*\]\([^)\s]*reference/[^)\s]*\)", "X", md)  # API names, linked
    md = md.replace(gallery_format.GENERATOR, "X")  # the gallery's name, in its signature line
    md = re.sub(r"\*[A-Z][^*\n\u4e00-\u9fff]*\*", "X", md)  # titles of works, in italics
    text = prose(md)
    text = re.sub(r"[（(][A-Za-z][^（）()]*[）)]", "", text)  # glosses
    return re.sub(r"<[^>]+>|\{[#:.][^}]*\}", " ", text)
