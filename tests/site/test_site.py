"""Open every page of the built site in headless Chromium and check what a reader gets."""

from __future__ import annotations

import functools
import re
import urllib.request
import zlib
from html.parser import HTMLParser
from pathlib import Path
from urllib.error import HTTPError
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest
from conftest import ROOT, SITE, public_names, site_pages

from attnscale_tools import gallery_format  # the class names of Material's markup the tests drive
from attnscale_tools.i18n import tree

# the browser extra (nox -s browser installs it): without it, these tests are skipped
PlaywrightTimeout = pytest.importorskip("playwright.sync_api").TimeoutError

PAGES = site_pages()
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
# Bytes transferred for a first visit: page, images, scripts, styles and fonts together, with
# text gzip-compressed as GitHub Pages serves it (see conftest.py).
PAGE_WEIGHT_LIMIT = 1.5e6

# Text of the page without code blocks, where raw TeX delimiters are legitimate.
VISIBLE_TEXT_JS = """() => {
  const body = document.querySelector('article') || document.body;
  const clone = body.cloneNode(true);
  clone.querySelectorAll('pre, code, script, style, .katex').forEach(e => e.remove());
  return clone.innerText;
}"""


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key in ("id", "name") and value:
                self.ids.add(value)


# Every page links to the whole navigation: fetch each link target once for the whole run.
@functools.cache
def _fetch(url: str) -> tuple[int | None, set[str] | None]:
    """``(HTTP error code or None, ids and names, or None if not HTML)`` of a local URL."""
    try:
        with urllib.request.urlopen(url) as response:
            if "html" not in response.headers.get("Content-Type", ""):
                return None, None
            parser = _Ids()
            parser.feed(response.read().decode("utf-8", "replace"))
            return None, parser.ids
    except HTTPError as exc:
        exc.close()
        return exc.code, None


def test_site_has_pages():
    assert "index.html" in PAGES
    assert any(p.startswith("generated/gallery/01_variance/") for p in PAGES)


@pytest.mark.parametrize("page", PAGES)
def test_page(page: str, base_url: str, browser) -> None:
    url = base_url + page
    outside, failed, errors, sizes = [], [], [], {}
    tab = browser.new_page()
    # Every page is weighed as a first visit: without this, the shared browser context would
    # serve scripts, styles and fonts that an earlier page loaded from its cache.
    cdp = browser.new_cdp_session(tab)
    cdp.send("Network.enable")
    cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
    tab.on(
        "request",
        lambda r: (
            urlsplit(r.url).hostname not in (None, "127.0.0.1")
            and r.url.startswith("http")
            and outside.append(r.url)
        ),
    )
    tab.on("requestfailed", lambda r: failed.append(r.url))
    tab.on("response", lambda r: r.status >= 400 and failed.append(f"{r.status} {r.url}"))
    tab.on("requestfinished", lambda r: sizes.__setitem__(r.url, r.sizes()["responseBodySize"]))
    tab.on("console", lambda m: m.type == "error" and errors.append(m.text))
    tab.on("pageerror", lambda e: errors.append(str(e)))
    try:
        tab.goto(url, wait_until="load")
        # Scroll through so lazily loaded images load too, then let them finish.
        tab.evaluate("window.scrollTo(0, document.body.scrollHeight)")
        tab.wait_for_function("() => [...document.images].every(i => i.complete)")
        tab.wait_for_timeout(300)  # let late requests (search index, fonts) show up

        assert not outside, f"requests to outside hosts: {outside}"
        assert not failed, f"failed requests: {failed}"
        assert not errors, f"console errors: {errors}"

        broken = tab.evaluate(
            "() => [...document.images].filter(i => !i.complete || i.naturalWidth === 0)"
            ".map(i => i.src)"
        )
        assert not broken, f"images that did not load: {broken}"

        unrendered = tab.evaluate(
            "() => [...document.querySelectorAll('.arithmatex')]"
            ".filter(e => !e.querySelector('.katex')).map(e => e.textContent.slice(0, 80))"
        )
        assert not unrendered, f"math left unrendered: {unrendered}"
        text = tab.evaluate(VISIBLE_TEXT_JS)
        raw = re.findall(r".{0,30}(?:\\\(|\\\[|\$\$).{0,30}", text)
        assert not raw, f"raw TeX delimiters in the text: {raw}"

        # Accessibility: axe-core from the npm registry, injected into the page, in both colour
        # schemes (Material's toggle sets this attribute; the page's CSS follows it).
        tab.add_script_tag(path=str(AXE))
        # Material fades colours in 125 ms: axe must see the new scheme, not the fade.
        tab.add_style_tag(content="*, ::before, ::after { transition: none !important; }")
        for scheme in ("default", "slate"):
            tab.evaluate(f"() => document.body.setAttribute('data-md-color-scheme', '{scheme}')")
            violations = tab.evaluate(
                "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
                ".filter(v => ['serious', 'critical'].includes(v.impact))"
                ".map(v => `${v.impact} ${v.id}: ${v.help} (${v.nodes.length} nodes, e.g. `"
                " + v.nodes[0].target.join(' ') + ')')"
            )
            assert not violations, f"serious or critical violations ({scheme}): {violations}"

        weight = sum(sizes.values())
        print(f"page weight {weight / 1e6:.3f} MB, {len(sizes)} requests: {page}")
        assert weight <= PAGE_WEIGHT_LIMIT, (
            f"{page} transfers {weight / 1e6:.2f} MB (> {PAGE_WEIGHT_LIMIT / 1e6} MB): "
            + ", ".join(
                f"{u.rsplit('/', 1)[-1]} {b / 1e3:.0f} kB"
                for u, b in sorted(sizes.items(), key=lambda kv: -kv[1])[:5]
            )
        )

        hrefs = tab.evaluate(
            "() => [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))"
        )
    finally:
        tab.close()

    bad = []
    for href in set(hrefs):
        target = urljoin(url, href)
        if urlsplit(target).hostname != "127.0.0.1":
            continue  # external links are plain links; nothing is loaded from them
        doc, fragment = urldefrag(target)
        error, ids = _fetch(doc)
        if error is not None:
            bad.append(f"{href} -> {error}")
        elif fragment and ids is not None and fragment not in ids:
            bad.append(f"{href} -> no anchor #{fragment}")
    assert not bad, f"broken internal links on {page}: {sorted(bad)}"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hrefs += [v for k, v in attrs if tag == "a" and k == "href" and v]


@pytest.mark.parametrize("home", ["index.html", "zh/index.html"])
def test_home_page_links_every_guide_section(home: str) -> None:
    """The reading path on the home page has a card for each section of the guide."""
    sections = sorted(
        p.name for p in (ROOT / "examples").iterdir() if p.is_dir() and p.name[0] not in "._"
    )
    assert len(sections) >= 5
    main = (SITE / home).read_text()
    # The reading path only: the navigation and footer link every section on every page.
    start = main.index('class="grid cards"')
    parser = _Links()
    parser.feed(main[start : main.index("</div>", start)])
    linked = {s for s in sections for href in parser.hrefs if f"gallery/{s}/" in href}
    assert linked == set(sections), f"sections without a card: {set(sections) - linked}"


def test_every_public_name_is_in_the_inventory():
    raw = (SITE / "objects.inv").read_bytes()
    header_end = 0
    for _ in range(4):
        header_end = raw.index(b"\n", header_end) + 1
    entries = zlib.decompress(raw[header_end:]).decode()
    documented = set(re.findall(r"^attnscale\.(\w+) ", entries, re.M))
    missing = set(public_names()) - documented
    assert not missing, f"public names missing from objects.inv: {sorted(missing)}"


SEARCHES = {
    "softmax": "02_softmax",
    "entropy": "02_softmax",
    "QK-norm": "03_normalization",
    "monitor": "05_debugging",
    "mask": "05_debugging/plot_08_masking",
    "bf16": "03_normalization/plot_06_bfloat16",
    "FlexAttention": "05_debugging/plot_07_knobs_in_real_code",
    "additive": "03_normalization/plot_05_additive_attention",
}


def _search(query: str, base_url: str, browser, every: bool = False) -> tuple[list[str], list[str]]:
    """The links and the texts of the search results for ``query`` (the first ones shown, or
    ``every`` one)."""
    tab = browser.new_page()
    try:
        tab.goto(base_url, wait_until="load")
        tab.click(gallery_format.SEARCH_OPEN)
        box = tab.locator(gallery_format.SEARCH_INPUT)
        results = tab.locator(gallery_format.SEARCH_RESULT_LINK)
        # The search index loads in a web worker, which a busy 2-core machine can hold up for
        # well over 45 s (seen in CI with a docs build running beside it). Typing the query
        # again once the worker is up re-runs the search.
        for attempt in range(3):
            box.fill("")
            box.fill(query)
            try:
                results.first.wait_for(timeout=40_000)
                break
            except PlaywrightTimeout:
                if attempt == 2:
                    raise
        hrefs = results.evaluate_all("as => as.map(a => a.getAttribute('href'))")
        texts = results.evaluate_all("as => as.map(a => a.innerText)")
    finally:
        tab.close()
    return hrefs, texts


def _pages(query: str, base_url: str, browser) -> list[str]:
    """The pages the search lists for ``query``, in order."""
    hrefs, _ = _search(query, base_url, browser)
    return list(dict.fromkeys(urlsplit(h).path for h in hrefs))


def _top_pages(query: str, base_url: str, browser) -> list[str]:
    """The first three pages the search lists for ``query``."""
    return _pages(query, base_url, browser)[:3]


@pytest.mark.parametrize(("query", "section"), SEARCHES.items())
def test_search_finds_the_section(query: str, section: str, base_url: str, browser) -> None:
    # Results list each page, then its matching sections: compare the top three pages.
    pages = _top_pages(query, base_url, browser)
    assert any(section in p for p in pages), f"{query!r}: top pages {pages}"


# --- the two editions ----------------------------------------------------------------------------


def test_every_english_page_has_a_chinese_twin():
    english = {p for p in PAGES if not p.startswith(("zh/", "reference/"))}
    assert english, "no English pages"
    missing = sorted(p for p in english if "zh/" + p not in PAGES)
    assert not missing, f"English pages without a Chinese twin: {missing}"


def _heading_ids(page: str) -> list[str]:
    return re.findall(r'<h[2-6] id="([^"]+)"', (SITE / page).read_text())


@pytest.mark.parametrize("page", [p for p in PAGES if p.startswith("zh/") and "404" not in p])
def test_chinese_headings_have_the_english_anchors(page: str) -> None:
    """A Chinese heading's anchor is its English twin's (#setup, not #_1), so links and the
    language switcher keep their place across editions."""
    english = page.removeprefix("zh/")
    if english not in PAGES:
        pytest.skip("in Chinese only")
    assert _heading_ids(page) == _heading_ids(english)


class _Switcher(HTMLParser):
    """The <html lang> and the language switcher's links of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.lang: str | None = None
        self.editions: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "html":
            self.lang = a.get("lang")
        if tag == "a" and gallery_format.LANGUAGE_LINK in (a.get("class") or ""):
            self.editions[a["hreflang"] or ""] = a["href"] or ""


@pytest.mark.parametrize("page", PAGES)
def test_language_and_switcher(page: str) -> None:
    """Each page declares its language, and the switcher goes to the same page in the other."""
    parser = _Switcher()
    parser.feed((SITE / page).read_text())
    zh = page.startswith("zh/")
    assert parser.lang == ("zh-CN" if zh else "en")
    assert set(parser.editions) == {"en", "zh"}
    english = page.removeprefix("zh/")
    expected = {"en": english, "zh": "zh/" + english}
    # Pages of one edition only link the other edition's home page.
    if page.startswith("reference/"):  # the API reference is in English only
        expected["zh"] = "zh/index.html"
    elif page.startswith("zh/glossary/"):  # the glossary is in Chinese only
        expected["en"] = "index.html"
    if page.endswith("404.html"):  # served at any address: its links start from the site root
        assert parser.editions == {"en": "/attnscale/404.html", "zh": "/attnscale/zh/404.html"}
        return
    for code, href in parser.editions.items():
        target = urljoin("https://x.test/" + page, href).removeprefix("https://x.test/")
        target = target + "index.html" if target.endswith("/") or not target else target
        assert target == expected[code], f"{code} link {href!r} of {page}"
        assert (SITE / target).exists(), f"{code} link {href!r} of {page}: no such page"


def test_switcher_click_keeps_the_page(base_url: str, browser) -> None:
    tab = browser.new_page()
    try:
        page = "generated/gallery/02_softmax/plot_04_temperature/"
        tab.goto(base_url + page, wait_until="load")
        tab.hover(gallery_format.LANGUAGE_MENU)
        tab.click(f"a.{gallery_format.LANGUAGE_LINK}[hreflang=zh]")
        tab.wait_for_url(base_url + "zh/" + page)
        assert tab.evaluate("document.documentElement.lang") == "zh-CN"
        # at a heading, the switcher goes to the same heading: both editions share its anchor
        tab.goto(base_url + "zh/" + page + "#references", wait_until="load")
        tab.hover(gallery_format.LANGUAGE_MENU)
        tab.click(f"a.{gallery_format.LANGUAGE_LINK}[hreflang=en]")
        tab.wait_for_url(base_url + page + "#references")
        assert tab.evaluate("document.getElementById('references').tagName") == "H2"
        tab.goto(base_url + page, wait_until="load")
        tab.hover(gallery_format.LANGUAGE_MENU)
        tab.click(f"a.{gallery_format.LANGUAGE_LINK}[hreflang=en]")
        tab.wait_for_url(base_url + page)
    finally:
        tab.close()


SEARCHES_ZH = {
    "缩放": "03_normalization",  # on nearly every page: the section about the scale
    "熵": "02_softmax",
    "温度": "02_softmax/plot_04_temperature",
    "掩码": "05_debugging/plot_08_masking",
    # a glossary term jieba splits (雅/可比/矩阵) unless the glossary is its user dictionary
    "雅可比矩阵": "02_softmax/plot_03_softmax_gradient",
}


@pytest.mark.parametrize(("query", "section"), SEARCHES_ZH.items())
def test_chinese_search_finds_the_section(query: str, section: str, base_url: str, browser):
    test_search_finds_the_section(
        query, "zh/generated/gallery/" + section, base_url + "zh/", browser
    )


#: English words a reader types on the Chinese edition (glossed terms, and words the Chinese
#: prose keeps in English): the Chinese search finds them on the pages the English one does.
ENGLISH_ON_ZH = ["query", "attention", "entropy", "saturation", "padding", "softmax"]


@pytest.mark.parametrize("query", ENGLISH_ON_ZH)
def test_chinese_search_finds_english_words(query: str, base_url: str, browser) -> None:
    """Typed in full and as a prefix (the index's English terms are not stemmed), an English
    word finds pages on the Chinese edition among the first results, as on the English one."""
    english = set(_pages(query, base_url, browser))
    for typed in (query, query[:-2]):
        chinese = {p.replace("/zh/", "/", 1) for p in _pages(typed, base_url + "zh/", browser)}
        assert chinese & english, (typed, chinese, english)


def _indexed_pages(site: Path, word: str) -> set[str]:
    """The pages whose search index holds a word starting with ``word``: the pages the search
    lists for it (it matches the start of words), the API reference and glossary aside."""
    split, pages = tree.search_index(site)
    return {
        url
        for url, text in pages.items()
        if not url.startswith(("reference/", "glossary/"))
        and any(w.startswith(word) for w in split.split(text))
    }


@pytest.mark.parametrize("query", ENGLISH_ON_ZH)
def test_english_words_find_the_same_pages_on_both_editions(query: str) -> None:
    """Every result, not the first screen: the Chinese index finds an English word on the pages
    whose English twin has it (each Chinese page notes the English of its terms)."""
    # ... or another form of it (queries, saturated): a Chinese page glosses the base form
    english = set().union(*(_indexed_pages(SITE, w) for w in tree.term_forms(query)))
    chinese = _indexed_pages(SITE / "zh", query)
    assert english, query
    assert chinese == english, (sorted(chinese - english), sorted(english - chinese))


@pytest.mark.parametrize(
    ("query", "edition", "boilerplate"),
    [
        ("bf16", "", "To run it, install attnscale"),
        ("熵", "zh/", "运行方法"),
    ],
)
def test_search_snippets_are_not_the_running_box(
    query: str, edition: str, boilerplate: str, base_url: str, browser
) -> None:
    """Every example page opens with the box that says how to run it (tools/mkdocs_hooks.py);
    it is left out of the index, so a result shows the page's own text."""
    _, texts = _search(query, base_url + edition, browser)
    assert texts and not any(boilerplate in t for t in texts), texts[:3]
