"""The explorer (docs/assets/explorer.js) in headless Chromium, in both editions: its numbers
against the library's test vectors, every control by keyboard and by pointer, the redraw time
at n = 4096, and the page weights.

Every page, the explorer's included, is also checked by test_site.py for outside requests,
console errors and axe-core violations.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import ROOT

pytest.importorskip("playwright.sync_api")

VECTORS = ROOT / "build" / "explorer" / "vectors.json"
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
EDITIONS = {"en": "", "zh": "zh/"}
WIDGET_PAGES = {
    "variance": "generated/gallery/01_variance/plot_01_variance_growth/",
    "temperature": "generated/gallery/02_softmax/plot_04_temperature/",
}
# Between the page's JavaScript and the library: relative for values of at least 1e-6, else
# absolute (1e-12): a nearly one-hot row's entropy, 1e-13, is rounding noise in both.
TOLERANCE = 1e-6
REDRAW_BUDGET_MS = 50.0
PAGE_BUDGET = 600e3  # bytes transferred on a first visit of the explorer page, gzip
WIDGET_BUDGET = 150e3  # bytes the widget adds to a guide page
WIDGET_ASSETS = ("/vendor/uplot/", "/explorer.js")


def _open(browser: Any, url: str, weigh: bool = False) -> tuple[Any, dict[str, int], list[str]]:
    """A tab on ``url`` after its explorers have drawn, the bytes of each response (a first
    visit: no cache), and the console errors."""
    tab = browser.new_page()
    sizes: dict[str, int] = {}
    errors: list[str] = []
    if weigh:
        cdp = browser.new_cdp_session(tab)
        cdp.send("Network.enable")
        cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
        tab.on(
            "requestfinished",
            lambda r: sizes.__setitem__(r.url, r.sizes()["responseBodySize"]),
        )
    tab.on("console", lambda m: m.type == "error" and errors.append(m.text))
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.goto(url, wait_until="load")
    tab.wait_for_function("() => window.attnscaleExplorer && attnscaleExplorer.instances.length")
    return tab, sizes, errors


@pytest.fixture(params=list(EDITIONS))
def explorer(request: Any, base_url: str, browser: Any) -> Iterator[tuple[str, Any, list[str]]]:
    edition = request.param
    tab, _, errors = _open(browser, f"{base_url}{EDITIONS[edition]}explorer/")
    yield edition, tab, errors
    tab.close()


def test_the_javascript_gives_the_librarys_numbers(explorer: tuple[str, Any, list[str]]) -> None:
    if not VECTORS.exists():
        pytest.fail(f"{VECTORS.relative_to(ROOT)} is missing: `nox -s docs` writes it")
    vectors = json.loads(VECTORS.read_text())
    _, tab, _ = explorer
    worst = tab.evaluate(
        """(v) => {
      const m = attnscaleExplorer.math;
      const worst = {};
      const check = (name, got, want) => {
        const err = want === got ? 0 : Math.abs(got - want) / Math.max(Math.abs(want), 1e-6);
        if (!(err <= (worst[name] ?? -1))) worst[name] = Number.isNaN(err) ? Infinity : err;
      };
      for (const r of v.rows) {
        m.softmax(r.logits).forEach((p, i) => check("softmax", p, r.softmax[i]));
        check("entropy", m.entropy(r.logits), r.entropy);
        check("normalized entropy", m.entropy(r.logits, true), r.normalized_entropy);
        check("max probability", m.maxProbability(r.logits), r.max_probability);
        check("Jacobian norm", m.jacobianNorm(r.logits), r.jacobian_norm);
      }
      for (const s of v.saturated) check("saturated fraction", m.saturatedFraction(s.rows), s.fraction);
      for (const s of v.spreads) {
        check("logit spread", m.logitStd(s.d_k, s.variance, s.scaled, s.temperature), s.std);
      }
      return worst;
    }""",
        vectors,
    )
    print(f"largest relative difference from attnscale {vectors['attnscale']}: {worst}")
    assert set(worst) == {
        "softmax",
        "entropy",
        "normalized entropy",
        "max probability",
        "Jacobian norm",
        "saturated fraction",
        "logit spread",
    }
    assert all(err <= TOLERANCE for err in worst.values()), worst


# What a reader sees: the summaries, and a digest of each chart's pixels.
_SEEN = """() => [...document.querySelectorAll('.attnscale-explorer')].map(root => ({
  summaries: [...root.querySelectorAll('.explorer-summary')].map(p => p.textContent),
  labels: [...root.querySelectorAll('.explorer-plot')].map(p => p.getAttribute('aria-label')),
  pixels: [...root.querySelectorAll('canvas')].map(c => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let h = 0;
    for (let i = 0; i < d.length; i += 7) h = (h * 31 + d[i]) | 0;
    return h;
  }),
}))"""


def _changed(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """What changed between two readings of the explorers: summaries, labels, charts."""
    return [
        f"{key} {i}"
        for b, a in zip(before, after, strict=True)
        for key in ("summaries", "labels", "pixels")
        for i, (x, y) in enumerate(zip(b[key], a[key], strict=True))
        if x != y
    ]


def _axe(tab: Any) -> list[str]:
    """axe-core's serious and critical findings on the explorers, as they are drawn now."""
    if not tab.evaluate("() => typeof axe !== 'undefined'"):
        tab.add_script_tag(path=str(AXE))
    return tab.evaluate(
        "async () => (await axe.run('.attnscale-explorer', {resultTypes: ['violations']}))"
        ".violations.filter(v => ['serious', 'critical'].includes(v.impact))"
        ".map(v => `${v.id}: ${v.help} (${v.nodes[0].target.join(' ')})`)"
    )


def _settled(tab: Any) -> list[dict[str, Any]]:
    tab.evaluate("() => new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)))")
    return tab.evaluate(_SEEN)


def test_every_control_works_by_keyboard_and_by_pointer(
    explorer: tuple[str, Any, list[str]],
) -> None:
    _, tab, errors = explorer
    sliders = tab.locator(".attnscale-explorer input[type=range]")
    assert sliders.count() == 4
    for i in range(sliders.count()):
        slider = sliders.nth(i)
        name = slider.get_attribute("name")
        output = tab.locator(f"output[for='{slider.get_attribute('id')}']")
        before, shown = _settled(tab), output.text_content()
        slider.focus()
        slider.press("ArrowLeft")
        after = _settled(tab)
        assert output.text_content() != shown, f"{name}: the arrow key did not move it"
        assert output.text_content() in (slider.get_attribute("aria-valuetext") or "")
        moved = _changed(before, after)
        assert any(m.startswith("summaries") for m in moved), f"{name}: no summary changed"
        assert any(m.startswith("pixels") for m in moved), f"{name}: no chart changed"

        box = slider.bounding_box()
        assert box is not None
        value = slider.input_value()
        before = after
        tab.mouse.click(box["x"] + 0.9 * box["width"], box["y"] + box["height"] / 2)
        after = _settled(tab)
        assert slider.input_value() != value, f"{name}: a click on the track did not move it"
        assert any(m.startswith("pixels") for m in _changed(before, after)), name

    box = tab.locator(".attnscale-explorer input[type=checkbox]")
    for act in (lambda: box.press("Space"), lambda: box.click()):
        before, checked = _settled(tab), box.is_checked()
        box.focus()
        act()
        assert box.is_checked() != checked
        assert any(m.startswith("pixels") for m in _changed(before, _settled(tab)))
    assert not _axe(tab)
    assert not errors


def test_every_corner_of_the_settings_draws(explorer: tuple[str, Any, list[str]]) -> None:
    """Each slider at each end, the scale on and off, in every combination: no error, and
    finite numbers in every summary."""
    _, tab, errors = explorer
    bad = tab.evaluate(
        """() => {
      const root = document.querySelector('.attnscale-explorer');
      const set = (name, end) => {
        const s = root.querySelector(`input[name=${name}]`);
        s.value = end ? s.max : s.min;
        s.dispatchEvent(new Event('input'));
      };
      const bad = [];
      for (let corner = 0; corner < 32; corner++) {
        ['dk', 'temperature', 'n', 'variance'].forEach((name, bit) => set(name, corner >> bit & 1));
        const box = root.querySelector('input[type=checkbox]');
        if (box.checked !== Boolean(corner & 16)) box.click();
        for (const p of root.querySelectorAll('.explorer-summary')) {
          if (/NaN|Infinity|undefined/.test(p.textContent)) bad.push(`${corner}: ${p.textContent}`);
        }
      }
      return bad;
    }"""
    )
    _settled(tab)
    assert not bad
    assert not errors


def test_the_charts_follow_the_colour_scheme(explorer: tuple[str, Any, list[str]]) -> None:
    _, tab, errors = explorer
    before = _settled(tab)
    tab.locator("label[for='__palette_1']").click()  # Material's dark-scheme toggle
    try:
        assert tab.evaluate("() => document.body.dataset.mdColorScheme") == "slate"
        after = _settled(tab)
        assert len(_changed(before, after)) >= 4, "the charts were not redrawn in dark colours"
        assert not _axe(tab)
    finally:  # Material keeps the choice in the browser's storage, for every later page
        tab.locator("label[for='__palette_0']").click()
    assert tab.evaluate("() => document.body.dataset.mdColorScheme") == "default"
    assert not errors


def test_a_slider_move_redraws_within_budget_at_4096_keys(
    explorer: tuple[str, Any, list[str]],
) -> None:
    """Each move: the computation and uPlot's drawing (a microtask after the input event).
    The first move to a new d_k computes new draws, later ones reuse them; the σ curves of
    every n are computed while the page is idle after loading (``ready``)."""
    edition, tab, _ = explorer
    times = tab.evaluate(
        """async () => {
      await attnscaleExplorer.ready;
      const root = document.querySelector('.attnscale-explorer');
      const slider = name => root.querySelector(`input[name=${name}]`);
      const move = async (name, value) => {
        const s = slider(name);
        s.value = String(value);
        const t0 = performance.now();
        s.dispatchEvent(new Event('input'));
        await Promise.resolve();  // after uPlot's queued redraw
        return performance.now() - t0;
      };
      const times = {};
      times['n to 4096'] = [await move('n', 12)];
      for (const name of ['dk', 'temperature', 'variance']) {
        const s = slider(name);
        times[name] = [];
        for (let k = 0; k < 8; k++) times[name].push(await move(name, k % 2 ? s.min : s.max));
      }
      return times;
    }"""
    )
    flat = [t for ts in times.values() for t in ts]
    print(
        f"{edition} explorer at n = 4096, d_k up to 4096: redraw median "
        f"{statistics.median(flat):.1f} ms, slowest {max(flat):.1f} ms "
        f"({', '.join(f'{k} {max(v):.1f}' for k, v in times.items())})"
    )
    assert max(flat) <= REDRAW_BUDGET_MS, times


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_page_weights(edition: str, base_url: str, browser: Any) -> None:
    url = f"{base_url}{EDITIONS[edition]}explorer/"
    tab, sizes, _ = _open(browser, url, weigh=True)
    tab.close()
    total = sum(sizes.values())
    print(f"{edition} explorer page: {total / 1e3:.0f} kB transferred on a first visit")
    assert total <= PAGE_BUDGET, sorted(sizes.items(), key=lambda kv: -kv[1])[:5]
    for kind, page in WIDGET_PAGES.items():
        tab, sizes, _ = _open(browser, f"{base_url}{EDITIONS[edition]}{page}", weigh=True)
        kinds = tab.evaluate("() => attnscaleExplorer.instances.map(e => e.kind)")
        tab.close()
        assert kinds == [kind]
        extra = sum(b for u, b in sizes.items() if any(a in u for a in WIDGET_ASSETS))
        print(f"{edition} {kind} widget adds {extra / 1e3:.0f} kB to {page}")
        assert 0 < extra <= WIDGET_BUDGET


def test_the_chinese_edition_speaks_chinese(base_url: str, browser: Any) -> None:
    texts = {}
    for edition, prefix in EDITIONS.items():
        tab, _, _ = _open(browser, f"{base_url}{prefix}explorer/")
        texts[edition] = tab.locator(".attnscale-explorer").inner_text()
        tab.close()
    assert "sequence length" in texts["en"] and "序列长度" not in texts["en"]
    for word in ("键维度", "温度", "序列长度", "熵", "饱和"):
        assert word in texts["zh"], word
    assert "sequence length" not in texts["zh"]


def test_without_javascript_the_page_says_so() -> None:
    for prefix, words in (("", "off in this browser"), ("zh/", "关闭了 JavaScript")):
        html = (ROOT / "site" / prefix / "explorer" / "index.html").read_text()
        at = html.index('class="attnscale-explorer"')
        assert words in html[at : html.index("</div>", at)], prefix
