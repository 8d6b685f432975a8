"""The term table (i18n/zh/TERMS.md): the reader's glossary page and the search dictionary."""

from __future__ import annotations

import re
from pathlib import Path

from .sources import I18N, TranslationError

TERMS = I18N / "TERMS.md"


def _table(heading: str) -> list[list[str]]:
    """The rows of the Markdown table under ``heading`` in TERMS.md, header row excluded."""
    text = TERMS.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("|")
    ]
    return rows[2:]


def _listed(cell: str) -> list[str]:
    return [a.strip() for a in re.split("[、,]", cell) if a.strip()]


def glossary() -> list[tuple[str, str, bool, list[str], list[str]]]:
    """The term table's rows: the Chinese term, the English, whether the English is given at
    first use, the renderings not to use, and the longer words that contain the term but are
    other words."""
    return [
        (zh, en, gloss == "是", _listed(avoid), _listed(other))
        for zh, en, gloss, avoid, other in _table("Terms")
    ]


def plain_words() -> set[str]:
    """Rows of the term table that are everyday words (原文): no page lists them as its terms."""
    return {zh for zh, _ in _table("Plain words")}


def fixed_headings() -> dict[str, str]:
    """The standard headings: English -> the one Chinese form."""
    return dict((en, zh) for en, zh in _table("Fixed headings"))


def glossary_page() -> str:
    """The reader's glossary: its Chinese page, with the term table as Chinese | English."""
    rows = "".join(f"| {zh} | {en} |\n" for zh, en, *_ in glossary())
    table = "| 中文 | English |\n|---|---|\n" + rows
    page = (I18N / "glossary.md").read_text()
    if "<!-- terms -->" not in page:
        raise TranslationError("i18n/zh/glossary.md: no <!-- terms --> where the table goes")
    return page.replace("<!-- terms -->", table.rstrip("\n"))


#: A frequency that makes jieba keep a glossary term whole (缩放在 is 缩放/在, not 缩/放在)
_TERM_FREQUENCY = 1_000_000


def search_parts() -> dict[str, list[str]]:
    """The compound terms the search index cuts into parts (注意力汇聚点 -> 注意力, 汇聚点)."""
    parts = {zh: cut.split() for zh, cut in _table("Search words")}
    for zh, cut in parts.items():
        if "".join(cut) != zh or len(cut) < 2:
            raise TranslationError(f"TERMS.md, search words: {cut} does not make up {zh}")
    return parts


def search_words() -> list[str]:
    """The words of the search segmenter's dictionary: the glossary's all-Chinese terms, with
    the compounds of the search-word table replaced by their parts. Terms with Latin letters or
    spaces (注意力 logit 增长) are left out: jieba's file format splits on spaces, and the search
    splits the Latin parts on its own."""
    parts = search_parts()
    terms = [zh for zh, *_ in glossary() if re.fullmatch(r"[\u4e00-\u9fff]+", zh)]
    words = [w for t in terms for w in parts.get(t, [t])]
    return list(dict.fromkeys(words))


def write_jieba_dictionary(path: Path) -> None:
    """The search words (``search_words``) as a jieba user dictionary, for the search index."""
    path.write_text("".join(f"{t} {_TERM_FREQUENCY}\n" for t in search_words()))
