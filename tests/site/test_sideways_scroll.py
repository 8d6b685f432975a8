"""No code block or printed output needs a horizontal scroll on a 1280-px-wide screen.

Every page of both editions, opened at the browser fixture's 1280 x 900 viewport (conftest.py):
a block whose content is wider than its box (scrollWidth > clientWidth) fails, listed with its
longest line. Run alone after ``nox -s docs``: ``pytest tests/site/test_sideways_scroll.py``
(from the browser session's environment, ``nox -s browser`` installs it).
"""

from __future__ import annotations

import pytest
from conftest import site_pages

pytest.importorskip("playwright.sync_api")  # the browser session's environment

#: The width the reader's window is assumed to have (the fixture's viewport).
WIDTH = 1280

# Each scrolling block of the page's content: Material scrolls a code block's <code>, a plain
# <pre> scrolls itself. For each, what it is, its longest line and how far it overflows.
WIDE_BLOCKS_JS = """() => {
  const blocks = document.querySelectorAll('.md-content pre, .md-content pre > code');
  return [...blocks]
    .filter(e => e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1)
    .filter(e => !(e.tagName === 'PRE' && e.querySelector(':scope > code')))
    .map(e => {
      const kind = e.closest('.mkd-glr-script-out-disp, .mkd-glr-script-out')
        ? 'printed output' : 'code';
      const longest = e.innerText.split('\\n').reduce((a, b) => (b.length > a.length ? b : a), '');
      return `${kind}, ${e.scrollWidth - e.clientWidth} px too wide, longest line `
        + `(${longest.length} chars): ${longest.trim().slice(0, 90)}`;
    });
}"""


@pytest.mark.parametrize("page", site_pages())
def test_no_block_scrolls_sideways(page: str, base_url: str, browser) -> None:
    tab = browser.new_page()
    try:
        assert tab.viewport_size and tab.viewport_size["width"] == WIDTH
        tab.goto(base_url + page, wait_until="load")
        tab.evaluate(
            "() => document.fonts.ready.then(() => true)"
        )  # widths in the page's own fonts
        wide = tab.evaluate(WIDE_BLOCKS_JS)
    finally:
        tab.close()
    assert not wide, f"{page}: {len(wide)} blocks need a horizontal scroll:\n" + "\n".join(wide)
