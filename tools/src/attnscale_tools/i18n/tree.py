"""The zh docs tree: what the second MkDocs build renders, assembled from the English build."""

from __future__ import annotations

import ast
import html
import json
import re
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

from attnscale_tools import ROOT, catalogue, figure_copies, gallery_format, zh_figures, zh_style

from .glossary import glossary, glossary_page, plain_words, write_jieba_dictionary
from .sources import (
    GENERATED,
    I18N,
    LANG,
    PAGES,
    SCRIPTS,
    Translation,
    TranslationError,
    generated_page,
    page_strings,
    problems,
    text_blocks,
    translation_path,
)

# --- the zh tree: what the second MkDocs build renders -------------------------------------------

BUILD = ROOT / "build" / LANG
#: The gallery's own words on every example and gallery page.
BOILERPLATE = {
    gallery_format.NOTE_OPENING: '!!! note "提示"\n\n    Click',
    gallery_format.NOTE_TEXT: "点击[这里](#download_links)\n    下载完整的示例代码",
    gallery_format.DOWNLOAD_PYTHON: "下载 Python 源代码：",
    gallery_format.DOWNLOAD_NOTEBOOK: "下载 Jupyter 笔记本：",
    gallery_format.DOWNLOAD_ALL_PYTHON: "下载全部示例的 Python 源代码：",
    gallery_format.DOWNLOAD_ALL_NOTEBOOKS: "下载全部示例的 Jupyter 笔记本：",
    gallery_format.OUTPUT_LABEL: "\n输出：\n{: .mkd-glr-script-out }",
    gallery_format.SIGNATURE: "[示例库由 mkdocs-gallery 生成]",
}
_LINK = re.compile(r"\]\((?P<target>[^)\s#]+\.md)(?P<anchor>#[^)\s]*)?\)")
_AUTOREF = re.compile(r"\]\[(?P<ident>[\w.-]+)\]")


# A line break between two Chinese characters would show as a space in the browser.
_CJK_BREAK = re.compile(
    r"(?<=[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef])\n(?=[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef])"
)


def _replace_once(text: str, english: str, chinese: str, where: str) -> str:
    if english.strip() not in text:
        raise TranslationError(
            f"{where}: the English text is not on the generated page:\n{english}"
        )
    return text.replace(english.strip(), _CJK_BREAK.sub("", chinese.strip()))


def _anchors(site: Path) -> dict[str, str]:
    """Every anchor id on the English API reference pages, with its URL from the site root."""
    found: dict[str, str] = {}
    for page in sorted(site.glob("reference/**/index.html")):
        url = page.parent.relative_to(site).as_posix() + "/"
        for ident in re.findall(r'id="([^"]+)"', page.read_text()):
            found.setdefault(ident, url + "#" + ident)
    return found


def _link_english_only(text: str, page: Path, tree: Path, anchors: dict[str, str]) -> str:
    """Point links to pages that exist only in English (the API reference) at the English site."""
    rel = page.relative_to(tree).with_suffix("")
    depth = len(rel.parts) - (rel.name == "index") + 1  # +1: the zh site lives in zh/
    up = "../" * depth

    def autoref(m: re.Match[str]) -> str:
        if m["ident"] not in anchors:  # code such as x[0][2], unless it names the API
            if m["ident"].startswith("attnscale."):
                raise TranslationError(f"{page}: no reference page defines [{m['ident']}]")
            return m[0]
        return f"]({up}{anchors[m['ident']]})"

    def link(m: re.Match[str]) -> str:
        target = (page.parent / m["target"]).resolve()
        if target.is_relative_to(tree.resolve()) and target.exists():
            return m[0]
        english = (ROOT / "docs" / target.relative_to(tree.resolve())).with_suffix("")
        url = english.relative_to(ROOT / "docs").as_posix().removesuffix("index") + "/"
        url = url.replace("//", "/").removeprefix("/")
        return f"]({up}{url}{m['anchor'] or ''})"

    return _AUTOREF.sub(autoref, _LINK.sub(link, text))


def chinese_script(source: str, tr: Translation) -> str:
    """The gallery script with its prose in Chinese and its code untouched."""
    text = (ROOT / source).read_text()
    node = ast.parse(text).body[0]
    lines = text.split("\n")
    head = 'r"""\n' + tr.blocks[0][1].strip() + '\n"""'
    rest = "\n".join(lines[node.end_lineno :])
    blocks = iter(tr.blocks[n][1] for n in range(1, len(tr.blocks)))

    def cell(m: re.Match[str]) -> str:
        if not m["text_content"].strip("#\n \t"):
            return m[0]
        zh = next(blocks).strip().split("\n")
        body = "".join(f"# {line}".rstrip() + "\n" for line in zh)
        return m["header_line"] + "\n" + body

    return head + "\n" + gallery_format.SCRIPT_CELL.sub(cell, rest)


def _chinese_notebook(english: Path, tr: Translation, code: Callable[[str], str]) -> str:
    """The English notebook with each Markdown cell (a text block) replaced by its translation,
    and its code cells' comments in Chinese (``code``)."""
    nb = json.loads(english.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            source = "".join(cell["source"])
            cell["source"] = code(source).splitlines(keepends=True)
    zh = [tr.blocks[n][1] for n in sorted(tr.blocks)]
    markdown = [c for c in nb["cells"] if c["cell_type"] == "markdown"]
    if len(markdown) != len(zh):
        raise TranslationError(f"{english}: {len(markdown)} Markdown cells for {len(zh)} blocks")
    for cell, text in zip(markdown, zh, strict=True):
        cell["source"] = text.strip() + "\n"
    return json.dumps(nb, ensure_ascii=False, indent=1) + "\n"


def title_and_intro(block: str) -> tuple[str, str]:
    lines = block.strip().split("\n")
    intro = _CJK_BREAK.sub("", "\n".join(lines[1:]).strip().split("\n\n")[0]).replace("\n", " ")
    return lines[0].removeprefix("# ").strip(), intro


def _example_page(
    source: str, docs: Path, stale: list[str], texts: dict[str, str], missing: list[str]
) -> tuple[str, str, str]:
    """Write the Chinese page and downloads of one example; return its card's href and titles."""
    tr = Translation.load(translation_path(source))
    page = generated_page(source)
    target = docs / page.relative_to(ROOT / "docs")
    target.parent.mkdir(parents=True, exist_ok=True)
    if not (target.parent / "images").exists():
        shutil.copytree(page.parent / "images", target.parent / "images")
    md = page.read_text()
    english = text_blocks(ROOT / source)
    for n, block in enumerate(english):
        md = _replace_once(md, block, tr.blocks[n][1], f"{source} block {n}")
    on_page = set(page_strings(source))
    if on_page - set(tr.strings):
        raise TranslationError(
            f"{source}: strings not translated: {sorted(on_page - set(tr.strings))}"
        )
    for en, zh in tr.strings.items():
        if en not in on_page:
            stale.append(
                f"{translation_path(source).relative_to(ROOT)}: no longer on the page: {en}"
            )
        elif not zh:
            raise TranslationError(f"{source}: string not translated: {en}")
        md = md.replace(f"![{en}](", f"![{zh}](")
    md = catalogue.translate(md, texts, missing.append)  # tables, printed output, comments
    for en, zh in BOILERPLATE.items():
        md = md.replace(en, zh)
    # Without the gallery plugin, MkDocs would name the page after its file in the navigation.
    title = title_and_intro(tr.blocks[0][1])[0]
    target.write_text(f"---\ntitle: {json.dumps(title, ensure_ascii=False)}\n---\n{md}")

    def code(text: str) -> str:
        return catalogue.translate_code(text, texts, missing.append)

    target.with_suffix(".py").write_text(code(chinese_script(source, tr)))
    notebook = _chinese_notebook(page.with_suffix(".ipynb"), tr, code)
    target.with_suffix(".ipynb").write_text(notebook)
    gallery = GENERATED / page.relative_to(GENERATED).parts[0]
    href = page.relative_to(gallery).with_suffix("").as_posix()
    return href, title_and_intro(english[0])[0], tr.blocks[0][1]


def _gallery_index(
    gallery: str, readmes: list[Path], docs: Path, cards: dict[str, tuple[str, str]]
) -> None:
    """Write a gallery's Chinese index: its READMEs, cards and "download all" archives."""
    md = (GENERATED / gallery / "index.md").read_text()
    for readme in readmes:
        source = readme.relative_to(ROOT).as_posix()
        zh = Translation.load(translation_path(source)).page
        md = _replace_once(md, readme.read_text(), zh[1], source)  # type: ignore[index]

    def card(m: re.Match[str]) -> str:
        english, block = cards[m["href"]]
        title, intro = (html.escape(t) for t in title_and_intro(block))
        tip = intro[:95] + ("..." if len(intro) > 95 else "")
        body = m["body"].replace(f'alt="{english}"', f'alt="{title}"')
        body = body.replace(f">{english}<", f">{title}<")
        return gallery_format.CARD_OPENING.format(tooltip=tip) + f"{body}</div>"

    md = gallery_format.CARD.sub(card, md)
    for english, chinese in BOILERPLATE.items():
        md = md.replace(english, chinese)
    target = docs / "generated" / gallery / "index.md"
    target.write_text(md)
    _zip_downloads(target.parent, gallery)


def assemble(site: Path = ROOT / "site", out: Path = BUILD) -> tuple[list[str], list[str]]:
    """Write the zh docs tree and theme overrides into ``out``; return the stale strings found,
    and the shapes of generated texts that the catalogue has no entry for (shown in English).

    Raises TranslationError if any translation is missing or stale, or if its English is not on
    the page it translates.
    """
    found = problems()
    if found:
        raise TranslationError("translations missing or stale:\n  " + "\n  ".join(map(str, found)))
    docs = out / "docs"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(ROOT / "overrides", out / "overrides")
    shutil.copytree(I18N / "theme", out / "overrides", dirs_exist_ok=True)  # zh-only templates
    stale: list[str] = []
    missing: list[str] = []  # generated texts the catalogue has no entry for
    texts = catalogue.load()
    cards = {}  # card href -> the English title and the Chinese block 0
    for source in SCRIPTS:
        href, english_title, zh_block = _example_page(source, docs, stale, texts, missing)
        cards[href] = (english_title, zh_block)
    for source in PAGES:
        zh = _CJK_BREAK.sub("", Translation.load(translation_path(source)).page[1])  # type: ignore[index]
        if source.startswith("overrides/"):
            (out / source).write_text(zh)
        elif source.startswith("docs/"):
            (docs / Path(source).relative_to("docs")).write_text(zh)
    _gallery_index("gallery", sorted(ROOT.glob("examples/**/README.md")), docs, cards)
    _gallery_index("factcheck", [ROOT / "factcheck" / "README.md"], docs, cards)
    for times in GENERATED.glob(f"**/{gallery_format.TIMING_TABLE}"):
        md = gallery_format.TIMING_HEADING.sub(
            r"# 运行时间\n\n**\2** 中各文件的总运行时间：**\1**", times.read_text()
        )
        (docs / times.relative_to(ROOT / "docs")).write_text(md)
    (docs / "glossary.md").write_text(glossary_page())
    write_jieba_dictionary(out / "jieba_user.txt")
    _redraw_figures(docs, texts, missing)
    anchors = _anchors(site)
    split, indexed = search_index(site)
    titles = _page_titles(site)
    for page in docs.rglob("*.md"):  # once every page exists
        md = _link_english_only(page.read_text(), page, docs, anchors)
        english = site / page.relative_to(docs).with_suffix("") / "index.html"
        if page.name == "index.md":
            english = site / page.relative_to(docs).parent / "index.html"
        if english.exists():
            md = _english_anchors(md, english, page.relative_to(docs).as_posix())
            url = english.parent.relative_to(site).as_posix() + "/"
            md = _with_terms(md, indexed.get("" if url == "./" else url, ""), split)
            md = _with_key_terms(md, titles.get("" if url == "./" else url, ""), split)
        page.write_text(zh_style.bind_formulas(md))
    return stale, list(dict.fromkeys(missing))


def _redraw_figures(docs: Path, texts: dict[str, str], missing: list[str]) -> None:
    """The Chinese pages' figures, redrawn with their text in Chinese from the copies the
    English build kept, and the gallery cards' thumbnails, made from each example's first
    figure as the gallery makes them (at the English thumbnail's size)."""
    from mkdocs_gallery.utils import rescale_image
    from PIL import Image

    kept = [(copy, docs / "generated" / image) for copy, image in figure_copies.copies()]
    kept = [(copy, target) for copy, target in kept if target.exists()]
    if kept:
        zh_figures.check_font()
    for copy, target in kept:
        zh_figures.redraw(copy, target, texts, missing.append)
        thumb = gallery_format.thumbnail(target)
        if thumb is not None and thumb.exists():
            with Image.open(thumb) as old:
                size = old.size
            rescale_image(target, thumb, *size)


def search_index(site: Path) -> tuple[re.Pattern[str], dict[str, str]]:
    """An edition's search index: its word separator, and each page's indexed text
    (by URL), lowercased: what a reader's query can match there."""
    index = json.loads((site / "search" / "search_index.json").read_text())
    found: dict[str, str] = {}
    for doc in index["docs"]:
        text = html.unescape(re.sub(r"<[^>]+>", " ", doc["title"] + " " + doc["text"]))
        url = doc["location"].split("#")[0]
        found[url] = found.get(url, "") + " " + text.lower()
    return re.compile(index["config"]["separator"]), found


def _page_titles(site: Path) -> dict[str, str]:
    """An edition's page titles by URL, as its search index has them."""
    index = json.loads((site / "search" / "search_index.json").read_text())
    return {d["location"]: d["title"] for d in index["docs"] if "#" not in d["location"]}


def _with_key_terms(md: str, english_title: str, split: re.Pattern[str]) -> str:
    """The page with the English of the glossary terms in its English title as its search tags:
    the index weights tags above titles, so "entropy" finds the pages about entropy first, as
    on the English edition, where the word is in their titles (the Chinese titles say 熵)."""
    title = html.unescape(english_title).lower()
    words = set(split.split(title))
    keys = [en for _, en, *_ in glossary() if _used(en.lower(), words, title)]
    if not keys:
        return md
    tags = "tags: " + json.dumps(keys, ensure_ascii=False) + "\n"
    if md.startswith("---\n"):
        return "---\n" + tags + md[4:]
    return "---\n" + tags + "---\n\n" + md


def term_forms(term: str) -> set[str]:
    """The forms of an English term a page may use: plurals (queries), and for a word in -ion
    its stem (saturat: saturated, saturates); as the search, matching the start of words."""
    forms = {term, term + "s", term + "es"}
    if term.endswith("y"):
        forms.add(term[:-1] + "ies")
    if term.endswith("ion") and " " not in term:
        forms.add(term[:-3])
    return forms


def _used(term: str, words: set[str], text: str) -> bool:
    """Whether an English term is on a page, in any of its forms: a single word as the start
    of an indexed word (as the search matches it), several words as a phrase."""
    if " " in term:
        return any(re.search(rf"\b{re.escape(f)}\b", text) for f in term_forms(term))
    return any(w.startswith(f) for w in words for f in term_forms(term))


def _with_terms(md: str, text: str, split: re.Pattern[str]) -> str:
    """The page with a note of the glossary terms its English counterpart uses (``text``, its
    indexed text), in Chinese and English: a reader can look a term up in English, and the
    site search finds the page by its English terms as it does on the English edition."""
    words, plain = set(split.split(text)), plain_words()
    used = [
        f"{zh}（{en}）"
        for zh, en, *_ in glossary()
        if zh not in plain and _used(en.lower(), words, text)
    ]
    if not used:
        return md
    note = '!!! abstract "本页术语"\n\n    ' + "、".join(used) + "\n\n"
    time = gallery_format.RUNNING_TIME.search(md)
    at = time.start() if time else -1
    return md[:at] + note + md[at:] if at >= 0 else md.rstrip("\n") + "\n\n" + note


_HEADING = re.compile(r"^(#{2,6}) (.+?)[ \t]*$", re.M)
_FENCED = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)


def _english_anchors(md: str, english: Path, where: str) -> str:
    """Each heading (h2 to h6) with the anchor of its English counterpart, so that a link (and
    the language switcher) keeps its #anchor across editions. The two pages have the same
    headings in the same order (tests/test_i18n.py checks the translations)."""
    ids = iter(re.findall(r'<h[2-6] id="([^"]+)"', english.read_text()))
    fences = [m[0] for m in _FENCED.finditer(md)]
    outside = _FENCED.sub("\x00", md).split("\x00")  # the text between code blocks
    try:
        outside = [_HEADING.sub(lambda m: f"{m[1]} {m[2]} {{#{next(ids)}}}", t) for t in outside]
    except StopIteration:
        raise TranslationError(f"{where}: more headings than on the English page") from None
    if next(ids, None) is not None:
        raise TranslationError(f"{where}: fewer headings than on the English page")
    return "".join(t + f for t, f in zip(outside, [*fences, ""], strict=True))


def _zip_downloads(folder: Path, gallery: str) -> None:
    """The "download all examples" archives of a gallery, in Chinese."""
    for kind, suffix in [("python", ".py"), ("jupyter", ".ipynb")]:
        with zipfile.ZipFile(folder / f"{gallery}_{kind}.zip", "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(folder.glob(f"**/plot_*{suffix}")):
                z.write(f, f.relative_to(folder).as_posix())
