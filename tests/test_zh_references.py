"""The Chinese edition's references punctuate alike (issue 44): a reference's head (authors,
year, title and the gloss after it) and its identifiers keep the Latin style of the English
list, half-width brackets and full stops; the Chinese note after them keeps Chinese
punctuation, with no half-width bracket around Chinese text and no Latin full stop after it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ZH = Path(__file__).resolve().parents[1] / "i18n" / "zh"

CJK = r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef《》“”]"
# a list item that opens as a reference: "Authors (year). *Title*" or "Authors. *Title*"
REFERENCE = re.compile(r"^- (?:.+ \((?:\d{4}|无日期)\)|[A-Z][\w ,.-]+)\. \*[^*]+\*")
# the head: up to the title and the bracketed glosses right after it
HEAD = re.compile(r"^(.*?\*[^*]+\*(?:\s*[(（][^)）]*[)）])*)")


def references(text: str) -> list[str]:
    """The reference items of a Markdown text, each joined onto one line."""
    found: list[str] = []
    current: str | None = None
    for line in [*text.splitlines(), ""]:
        if current is not None and line.startswith("  "):
            current += " " + line.strip()
            continue
        if current is not None:
            found.append(current[2:])
        current = line if line.startswith("- ") else None
        if current is not None and not REFERENCE.match(current):
            # the title may close on a continuation line
            current = current if re.match(r"^- .+ \((?:\d{4}|无日期)\)\. \*", current) else None
    return found


def problems(item: str) -> list[str]:
    head = HEAD.match(item)
    if head is None:
        return ["no *title*"]
    rest = item[head.end() :]
    found = []
    if re.search(r"[（）。，]", head[1]):
        found.append("full-width punctuation in the head")
    if not re.match(r"[.,]", rest):
        found.append("the head not followed by a half-width . or ,")
    if re.search(r"arXiv:[\d.]*\d[。，；]", rest):
        found.append("full-width punctuation after an arXiv id")
    for m in re.finditer(r"(?<!\])\(([^()]*)\)", rest):  # a link's (url) is not a bracket
        if re.search(CJK, m[1]):
            found.append(f"half-width brackets around Chinese: {m[0]}")
    if re.search(CJK + r"\.(\s|$)", rest):
        found.append("a Latin full stop after Chinese text")
    return found


PAGES = sorted(p for p in ZH.rglob("*.md") if references(p.read_text(encoding="utf-8")))


def test_the_pages_with_references_are_found() -> None:
    names = {p.name for p in PAGES}
    assert {"references.md", "plot_fact_check.md", "plot_05_additive_attention.md"} <= names
    assert len(references((ZH / "docs" / "references.md").read_text(encoding="utf-8"))) >= 50


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ZH)))
def test_references_punctuate_alike(page: Path) -> None:
    bad = [
        f"{why}: {item[:70]}"
        for item in references(page.read_text(encoding="utf-8"))
        for why in problems(item)
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    ("item", "why"),
    [
        ("佚名（无日期）. *标题*. 一篇教程。", "full-width punctuation in the head"),
        ("Chen et al. (2023). *Lion paper*（Lion）. arXiv:2302.06675.", "in the head"),
        ("Smola. *Dive into Deep Learning*（中文版）“一节”。将", "in the head"),
        ("Kingma, Ba (2015). *Adam*. arXiv:1412.6980。", "after an arXiv id"),
        ("Vaswani (2017). *Attention*. arXiv:1706.03762，§3.2.1", "after an arXiv id"),
        ("Miller (2023). *Off By One*. 分母中带 +1 (博客文章).", "around Chinese"),
        ("Ba (2016). *Layer Normalization*. 层归一化.", "Latin full stop"),
    ],
)
def test_each_rule_finds_its_case(item: str, why: str) -> None:
    assert any(why in p for p in problems(item)), problems(item)


def test_a_well_punctuated_reference_passes() -> None:
    item = (
        "Jordan et al. (2024). *Muon: An optimizer* (博客文章, kellerjordan.github.io). "
        "用 Newton-Schulz 迭代正交化的动量（momentum）；见 [此处](https://example.org)。"
    )
    assert problems(item) == []
