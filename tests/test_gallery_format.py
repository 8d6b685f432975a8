"""The build's reading of mkdocs-gallery's output (attnscale_tools.gallery_format) holds for the
installed release and for what it wrote in the last build: a release that changes its format
fails here, in one place, not somewhere in the Chinese edition."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from attnscale_tools import gallery_format

ROOT = Path(__file__).parents[1]

GENERATED = ROOT / "docs" / "generated"
PAGES = sorted(p for p in GENERATED.glob("**/plot_*.md") if p.with_suffix(".py").exists())


def _docs_pin(name: str) -> tuple[str, str]:
    """The lower and upper bounds of ``name`` in pyproject.toml's docs extra (>=, <)."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        docs = tomllib.load(f)["project"]["optional-dependencies"]["docs"]
    (specifier,) = [r.specifier for r in map(Requirement, docs) if r.name == name]
    bounds = {s.operator: s.version for s in specifier}
    assert set(bounds) == {">=", "<"}, f"{name}: {specifier}"
    return bounds[">="], bounds["<"]


def test_the_pinned_release_is_the_one_read() -> None:
    """The docs extra allows only the release the patterns were read from (raising the pin
    means reading the format again), and the installed one, where the docs are built, is it."""
    lower, upper = _docs_pin("mkdocs-gallery")
    major, minor = map(int, gallery_format.VERSION.split("."))
    assert lower.startswith(gallery_format.VERSION + ".") and upper == f"{major}.{minor + 1}", (
        "pyproject.toml's docs extra pins mkdocs-gallery to one minor release"
    )
    gallery = pytest.importorskip("mkdocs_gallery")
    assert gallery.__version__.startswith(gallery_format.VERSION + "."), (
        f"mkdocs-gallery {gallery.__version__}: check attnscale_tools.gallery_format against its "
        f"output, then set VERSION"
    )


def test_a_script_splits_into_its_text_cells() -> None:
    script = '"""Title."""\n\nx = 1\n\n# %%\n# ## Step\n#\n# Text.\n\ny = 2\n'
    script += "#" * 24 + "\n# More.\n"
    cells = [m["text_content"] for m in gallery_format.SCRIPT_CELL.finditer(script)]
    assert cells == ["# ## Step\n#\n# Text.\n", "# More.\n"]


@pytest.fixture(scope="module")
def built() -> list[Path]:
    if not PAGES:
        pytest.skip("the docs have not been built (nox -s docs)")
    return PAGES


def test_every_example_page_has_the_parts_the_build_reads(built: list[Path]) -> None:
    printed = 0
    for page in built:
        md = page.read_text()
        assert gallery_format.DOWNLOAD_NOTE.search(md), page.name
        assert gallery_format.RUNNING_TIME.search(md), page.name
        printed += bool(gallery_format.OUTPUT_BLOCK.search(md))
        md5 = page.with_suffix(".py.md5")
        assert md5.read_text() == gallery_format.script_md5(page.with_suffix(".py")), md5.name
        figures = gallery_format.images(page)
        for image in figures:
            assert gallery_format.IMAGE.fullmatch(image.name)["script"] == page.stem
        if figures:
            thumb = gallery_format.thumbnail(figures[0])
            assert thumb is not None and thumb.exists(), page.name
    assert printed > len(built) // 2  # most examples print something
    assert len(gallery_format.checksums(GENERATED)) == len(built)


def test_every_gallery_has_cards_and_a_timing_table(built: list[Path]) -> None:
    galleries = {p.parent for p in built}
    for folder in {f.parent for f in galleries} | galleries:  # the guide's sections, the fact-check
        index = folder / "index.md"
        if not index.exists():
            continue
        cards = gallery_format.CARD.findall(index.read_text())
        assert cards, index
    for folder in galleries:
        table = (folder / gallery_format.TIMING_TABLE).read_text()
        assert gallery_format.TIMING_HEADING.search(table), folder.name
        rows = {m[1] for m in map(gallery_format.TIMING_ROW.search, table.splitlines()) if m}
        assert rows == {p.stem for p in built if p.parent == folder}, folder.name


def test_every_example_page_has_the_parts_the_chinese_edition_reads(built: list[Path]) -> None:
    """The code cells (the catalogue translates their comments), the running-time line, the two
    download buttons and the gallery's name (the Chinese scan leaves them out), and the
    figures' alt texts (translated)."""
    for page in built:
        md = page.read_text()
        assert gallery_format.CODE_BLOCK.search(md), page.name
        assert gallery_format.RUNNING_TIME_LINE.search(md), page.name
        assert len(gallery_format.DOWNLOAD_BUTTON.findall(md)) == 2, page.name  # .py, .ipynb
        assert gallery_format.GENERATOR in md, page.name
        alts = gallery_format.FIGURE_ALT.findall(md)
        assert bool(alts) == bool(gallery_format.images(page)), page.name


def test_the_pinned_material_is_the_one_read() -> None:
    """The docs extra allows only the Material release whose markup the browser tests drive,
    and the installed one, where there is one, is it."""
    import importlib.metadata

    lower, upper = _docs_pin("mkdocs-material")
    version = gallery_format.MATERIAL_VERSION
    assert lower.startswith(version + ".") and upper == str(int(version) + 1)
    try:
        installed = importlib.metadata.version("mkdocs-material")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("mkdocs-material is not installed here (the docs session installs it)")
    assert installed.startswith(version + "."), f"check gallery_format's selectors: {installed}"


def test_the_built_site_has_the_markup_the_browser_tests_drive() -> None:
    """Every class name of the selectors the browser tests use is in Material's page or in its
    script (search results are made by the script)."""
    import re

    site = ROOT / "site"
    if not (site / "index.html").exists():
        pytest.skip("the site has not been built (nox -s docs)")
    markup = (site / "index.html").read_text()
    markup += "".join(p.read_text() for p in site.glob("assets/javascripts/bundle.*.js"))
    selectors = [
        gallery_format.SEARCH_OPEN,
        gallery_format.SEARCH_INPUT,
        gallery_format.SEARCH_RESULT_LINK,
        gallery_format.LANGUAGE_MENU,
        f".{gallery_format.LANGUAGE_LINK}",
    ]
    classes = {c for s in selectors for c in re.findall(r"\.([\w-]+)", s)}
    assert len(classes) >= 6
    assert [c for c in sorted(classes) if c not in markup] == []


def test_every_card_has_a_thumbnail_of_its_own(built: list[Path]) -> None:
    """No card shows mkdocs-gallery's placeholder logo: a card's thumbnail is the example's
    first figure, or for an example without one a card drawn by the build (attnscale_tools.cards)."""
    from attnscale_tools import cards

    for page in built:
        thumb = gallery_format.card_thumbnail(page)
        assert thumb.exists(), page.name
        figures = gallery_format.images(page)
        if figures:
            assert thumb == gallery_format.thumbnail(figures[0])
        else:
            assert cards.MARK.encode() in thumb.read_bytes(), f"{page.name}: the placeholder"


def test_printed_output_opens_with_the_fence_the_hook_replaces(built: list[Path]) -> None:
    """The hook shows printed output as plain text by replacing this fence: it must be there."""
    from attnscale_tools import mkdocs_hooks

    assert ".text" in mkdocs_hooks.PLAIN_OUTPUT_FENCE
    pages = [p for p in built if gallery_format.OUTPUT_FENCE in p.read_text()]
    assert len(pages) > len(built) // 2


def test_titles_show_their_notation_as_math() -> None:
    from attnscale_tools import mkdocs_hooks

    title = mkdocs_hooks.title_math
    assert title("The variance of q·k grows with d_k") == (
        r"The variance of $q \cdot k$ grows with $d_k$"
    )
    assert title("1/√d_k against √d_k") == r"$1/\sqrt{d_k}$ against $\sqrt{d_k}$"
    assert title("注意力随d_k的变化") == "注意力随$d_k$的变化"
    assert title(title("q·k and d_k")) == title("q·k and d_k")  # once only
    assert title("d_kv and x_d_k") == "d_kv and x_d_k"  # other names untouched


def test_the_gallery_words_the_chinese_edition_translates_are_on_its_pages(
    built: list[Path],
) -> None:
    """Each of the gallery's own words that i18n.tree translates is where the gallery writes
    it: a string that moved would stay English on every Chinese page."""
    printed = 0
    for page in built:
        md = page.read_text()
        for words in (
            gallery_format.NOTE_OPENING,
            gallery_format.NOTE_TEXT,
            gallery_format.DOWNLOAD_PYTHON,
            gallery_format.DOWNLOAD_NOTEBOOK,
            gallery_format.SIGNATURE,
        ):
            assert words in md, (page.name, words)
        printed += gallery_format.OUTPUT_LABEL in md
    assert printed > len(built) // 2  # most examples print something
    folders = {p.parent for p in built}  # the sections, the fact-check
    indexes = {f / "index.md" for f in folders | {f.parent for f in folders}}
    text = "".join(i.read_text() for i in sorted(indexes) if i.exists())
    assert (
        gallery_format.DOWNLOAD_ALL_PYTHON in text and gallery_format.DOWNLOAD_ALL_NOTEBOOKS in text
    )
    assert gallery_format.CARD_OPENING.split('tooltip="')[0] in text


def test_code_cells_fit_the_page() -> None:
    """Every line of a gallery script's code cells is at most 88 columns: that fits the page's
    code box at a 1280-px-wide window (tests/site/test_sideways_scroll.py measures it). The
    module docstring and the text cells are prose, rendered as paragraphs."""
    import ast

    scripts = sorted(ROOT.glob("examples/*/plot_*.py")) + sorted(ROOT.glob("factcheck/plot_*.py"))
    assert scripts
    long = []
    for script in scripts:
        text = script.read_text()
        prose = set(range(1, ast.parse(text).body[0].end_lineno + 1))  # the docstring
        for cell in gallery_format.SCRIPT_CELL.finditer(text):
            first = text.count("\n", 0, cell.start("text_content")) + 1
            prose |= set(range(first, first + cell["text_content"].count("\n") + 1))
        for n, line in enumerate(text.splitlines(), 1):
            if n not in prose and len(line) > 88:
                long.append(f"{script.relative_to(ROOT)}:{n}: {len(line)} columns")
    assert not long, "\n".join(long)
