"""Searches a reader of the Chinese edition types, run in Chromium against the built index
(issue 44): parts of compound terms, and English terms on pages whose prose says them in Chinese.
"""

from __future__ import annotations

import pytest
from test_site import _top_pages

GALLERY = "zh/generated/gallery/"

#: query -> a page it must find among the first three. The compounds of TERMS.md's search-word
#: table are indexed as their parts, and the search box cuts a query into the index's words: a
#: part finds its compound, and the whole compound still finds its page.
COMPOUND_PARTS = {
    "点积注意力": "03_normalization/plot_05_additive_attention",  # part of 缩放点积注意力
    "缩放点积注意力": "03_normalization/plot_05_additive_attention",
    "汇聚点": "05_debugging/plot_11_attention_sinks",  # part of 注意力汇聚点
    "注意力汇聚点": "05_debugging/plot_11_attention_sinks",
    "缩放并入初始化": "03_normalization/plot_01_at_initialisation",
    "软上限": "05_debugging/plot_02_soft_cap",
}

#: English key terms on the Chinese edition: each page carries the English of the terms in its
#: English title as search tags, where the index weights them.
ENGLISH_KEY_TERMS = {
    "entropy": "02_softmax/plot_02_entropy_vs_dk",
    "entropy collapse": "05_debugging/plot_04_entropy_collapse",
}


@pytest.mark.parametrize(("query", "page"), {**COMPOUND_PARTS, **ENGLISH_KEY_TERMS}.items())
def test_chinese_search_ranks_the_page_in_the_top_three(
    query: str, page: str, base_url: str, browser
) -> None:
    pages = _top_pages(query, base_url + "zh/", browser)
    assert any(GALLERY + page in p for p in pages), f"{query!r}: top pages {pages}"
