"""The Chinese edition: translation files, their freshness, and the tree the zh site is built from.

The English build runs every example once. The Chinese site is a second MkDocs build over a tree
this module assembles from that build's output: each example page keeps its code, printed output
and figures and has its English prose swapped for the Chinese blocks in ``i18n/zh/``.

Translation files mirror their sources: ``examples/02_softmax/plot_01_shift_vs_scale.py`` is
translated in ``i18n/zh/examples/02_softmax/plot_01_shift_vs_scale.md``, ``docs/index.md`` in
``i18n/zh/docs/index.md``. A file holds marked entries:

- ``<!-- block N en HASH -->``: text block N of a gallery script (0 is the docstring, then one per
  ``# %%`` cell), translated; HASH fingerprints the English it translates;
- ``<!-- page en HASH -->``: a whole hand-written page (or gallery header), translated;
- ``<!-- string: ENGLISH -->``: a figure's alt text on a generated page, keyed by the English
  exactly as the English page shows it.

Result tables, printed output and code comments are translated through the catalogue
(``tools/catalogue.py``).

A block or page whose English changed since it was translated is *stale*; ``todo`` after the
hash marks a block not yet translated. ``python tools/i18n.py check`` lists both, and
``python tools/i18n.py skeleton SOURCE...`` writes or refreshes translation files, keeping every
entry that is still current.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import html
import json
import re
import shutil
import sys
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from textwrap import dedent
from typing import NamedTuple

import catalogue
import gallery_format
import zh_figures
import zh_style

ROOT = Path(__file__).resolve().parent.parent
I18N = ROOT / "i18n" / "zh"
GENERATED = ROOT / "docs" / "generated"
LANG = "zh"

#: Hand-written pages translated as a whole, by source path.
PAGES = [
    "docs/index.md",
    "docs/explorer.md",
    "docs/references.md",
    "examples/README.md",
    *sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("examples/*/README.md")),
    "factcheck/README.md",
    "overrides/404.html",
]
#: Gallery scripts, translated block by block.
SCRIPTS = sorted(
    p.relative_to(ROOT).as_posix()
    for p in [*ROOT.glob("examples/*/plot_*.py"), *ROOT.glob("factcheck/plot_*.py")]
)

_MARK = re.compile(
    r"^<!-- (?:block (?P<n>\d+) en (?P<bh>[0-9a-f]{12})(?P<todo> todo)?|page en (?P<ph>[0-9a-f]{12})"
    r"(?P<ptodo> todo)?|string: (?P<en>.*?)) -->[ \t]*$",
    re.M,
)


def fingerprint(text: str) -> str:
    """A short hash of English text, blind to surrounding white space."""
    return hashlib.sha256(text.strip().encode()).hexdigest()[:12]


def translation_path(source: str) -> Path:
    path = I18N / source
    return path.with_suffix(".md") if path.suffix == ".py" else path


# --- the English: a gallery script's text blocks -------------------------------------------------


def _docstring_and_rest(text: str) -> tuple[str, str]:
    """The module docstring as the gallery shows it, and the source after it."""
    node = ast.parse(text)
    first = node.body[0]
    if not (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        raise ValueError("a gallery script starts with a docstring")
    docstring = ast.get_docstring(node) or ""
    if first.value.value.startswith("\n"):  # the gallery keeps a leading newline
        docstring = "\n" + docstring
    rest = "\n".join(text.split("\n")[first.end_lineno :])
    return docstring, rest


def text_blocks(script: Path) -> list[str]:
    """The text blocks of a gallery script, split as mkdocs-gallery splits them."""
    docstring, rest = _docstring_and_rest(script.read_text())
    blocks = [docstring]
    for match in gallery_format.SCRIPT_CELL.finditer(rest):
        block = dedent(re.sub("^#", "", match.group("text_content"), flags=re.M)).lstrip()
        if block.strip():
            blocks.append(block)
    return blocks


# --- the Chinese: translation files --------------------------------------------------------------


@dataclass
class Translation:
    """One translation file, parsed."""

    path: Path
    blocks: dict[int, tuple[str, str, bool]] = field(default_factory=dict)  # n -> (hash, zh, todo)
    page: tuple[str, str, bool] | None = None  # (hash, zh, todo)
    strings: dict[str, str] = field(default_factory=dict)  # English -> zh

    @classmethod
    def load(cls, path: Path) -> Translation:
        found = cls(path)
        if not path.exists():
            return found
        text = path.read_text()
        marks = list(_MARK.finditer(text))
        if text[: marks[0].start() if marks else len(text)].strip():
            raise ValueError(f"{path}: text before the first <!-- ... --> marker")
        for mark, after in zip(marks, [*marks[1:], None], strict=True):
            body = text[mark.end() : after.start() if after else len(text)].strip("\n")
            body = body.rstrip() + "\n" if body.strip() else ""
            if mark["n"] is not None:
                n = int(mark["n"])
                if n in found.blocks:
                    raise ValueError(f"{path}: block {n} appears twice")
                found.blocks[n] = (mark["bh"], body, bool(mark["todo"]))
            elif mark["ph"] is not None:
                found.page = (mark["ph"], body, bool(mark["ptodo"]))
            else:
                found.strings[mark["en"]] = body.strip()
        return found


class Problem(NamedTuple):
    """A translation that is not current: its file, what is wrong (``kind``) and where."""

    path: str  # the translation file, from the repository root
    kind: str  # one of PROBLEM_KINDS
    block: int | None = None  # the text block of a gallery script; None: the whole file
    source: str = ""  # the English it translates

    def __str__(self) -> str:
        where = f"{self.path}: " + ("" if self.block is None else f"block {self.block} ")
        return where + PROBLEM_KINDS[self.kind].format(source=self.source)


#: What a problem's kind means, as ``python tools/i18n.py check`` prints it.
PROBLEM_KINDS = {
    "missing": "missing (translates {source})",
    "block missing": "missing",
    "todo": "not translated yet (todo)",
    "stale": "stale: {source} changed",
    "extra": "has no English block",
}


def problems() -> list[Problem]:
    """Every missing, untranslated or stale entry (empty when all is current)."""
    found = []
    for source in SCRIPTS:
        tr = Translation.load(translation_path(source))
        rel = tr.path.relative_to(ROOT).as_posix()
        if not tr.path.exists():
            found.append(Problem(rel, "missing", source=source))
            continue
        english = text_blocks(ROOT / source)
        for n, text in enumerate(english):
            if n not in tr.blocks:
                found.append(Problem(rel, "block missing", n))
            elif tr.blocks[n][2]:
                found.append(Problem(rel, "todo", n))
            elif tr.blocks[n][0] != fingerprint(text):
                found.append(Problem(rel, "stale", n, "its English"))
        found += [Problem(rel, "extra", n) for n in tr.blocks if n >= len(english)]
    for source in PAGES:
        tr = Translation.load(translation_path(source))
        rel = tr.path.relative_to(ROOT).as_posix()
        if tr.page is None:
            found.append(Problem(rel, "missing", source=source))
        elif tr.page[2]:
            found.append(Problem(rel, "todo"))
        elif tr.page[0] != fingerprint((ROOT / source).read_text()):
            found.append(Problem(rel, "stale", source=source))
    return found


def skeleton(source: str, strings: Sequence[str] = ()) -> Path:
    """Write (or refresh) the translation file of ``source``; current entries are kept."""
    path = translation_path(source)
    tr = Translation.load(path)
    parts = []
    if source in PAGES:
        english = (ROOT / source).read_text()
        h = fingerprint(english)
        if tr.page and tr.page[0] == h and not tr.page[2]:
            parts.append(f"<!-- page en {h} -->\n\n{tr.page[1]}")
        else:
            parts.append(f"<!-- page en {h} todo -->\n\n{english.strip()}\n")
    else:
        for n, english in enumerate(text_blocks(ROOT / source)):
            h = fingerprint(english)
            old = tr.blocks.get(n)
            if old and old[0] == h and not old[2]:
                parts.append(f"<!-- block {n} en {h} -->\n\n{old[1]}")
            else:
                parts.append(f"<!-- block {n} en {h} todo -->\n\n{english.strip()}\n")
    for en in dict.fromkeys([*tr.strings, *strings]):
        parts.append(f"<!-- string: {en} -->\n\n{tr.strings.get(en, '')}\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts))
    return path


_ALT = re.compile(r"^!\[(?P<alt>.*?)\]\(\./images/", re.M)  # alt text may hold "]"


def generated_page(source: str) -> Path:
    """The Markdown page the English build generated from a gallery script."""
    top, *rest = Path(source).with_suffix(".md").parts
    return GENERATED.joinpath("gallery" if top == "examples" else "factcheck", *rest)


def alt_texts(source: str) -> list[str]:
    """The alt text of every figure on a generated example page, in order."""
    page = generated_page(source)
    return list(dict.fromkeys(m["alt"] for m in _ALT.finditer(page.read_text())))


# --- the zh tree: what the second MkDocs build renders -------------------------------------------

BUILD = ROOT / "build" / LANG
#: The gallery's own words on every example and gallery page.
BOILERPLATE = {
    "!!! note\n\n    Click": '!!! note "提示"\n\n    Click',
    "Click [here](#download_links)\n    to download the full example code": (
        "点击[这里](#download_links)\n    下载完整的示例代码"
    ),
    "Download Python source code:": "下载 Python 源代码：",
    "Download Jupyter notebook:": "下载 Jupyter 笔记本：",
    "Download all examples in Python source code:": "下载全部示例的 Python 源代码：",
    "Download all examples in Jupyter notebooks:": "下载全部示例的 Jupyter 笔记本：",
    "\nOut:\n{: .mkd-glr-script-out }": "\n输出：\n{: .mkd-glr-script-out }",
    "[Gallery generated by mkdocs-gallery]": "[示例库由 mkdocs-gallery 生成]",
}
_LINK = re.compile(r"\]\((?P<target>[^)\s#]+\.md)(?P<anchor>#[^)\s]*)?\)")
_AUTOREF = re.compile(r"\]\[(?P<ident>[\w.-]+)\]")


class TranslationError(ValueError):
    """A translation that is missing, stale or does not fit its English page."""


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


def _title_and_intro(block: str) -> tuple[str, str]:
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
    title = _title_and_intro(tr.blocks[0][1])[0]
    target.write_text(f"---\ntitle: {json.dumps(title, ensure_ascii=False)}\n---\n{md}")

    def code(text: str) -> str:
        return catalogue.translate_code(text, texts, missing.append)

    target.with_suffix(".py").write_text(code(chinese_script(source, tr)))
    notebook = _chinese_notebook(page.with_suffix(".ipynb"), tr, code)
    target.with_suffix(".ipynb").write_text(notebook)
    gallery = GENERATED / page.relative_to(GENERATED).parts[0]
    href = page.relative_to(gallery).with_suffix("").as_posix()
    return href, _title_and_intro(english[0])[0], tr.blocks[0][1]


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
        title, intro = (html.escape(t) for t in _title_and_intro(block))
        tip = intro[:95] + ("..." if len(intro) > 95 else "")
        body = m["body"].replace(f'alt="{english}"', f'alt="{title}"')
        body = body.replace(f">{english}<", f">{title}<")
        return f'<div class="mkd-glr-thumbcontainer" tooltip="{tip}">{body}</div>'

    md = gallery_format.CARD.sub(card, md)
    for english, chinese in BOILERPLATE.items():
        md = md.replace(english, chinese)
    target = docs / "generated" / gallery / "index.md"
    target.write_text(md)
    _zip_downloads(target.parent, gallery)


def assemble(site: Path = ROOT / "site", out: Path = BUILD) -> list[str]:
    """Write the zh docs tree and theme overrides into ``out``; return the stale strings found.

    Raises TranslationError if any translation is missing or stale, or if its English is not on
    the page it translates.
    """
    found = problems()
    if found:
        raise TranslationError("translations missing or stale:\n  " + "\n  ".join(map(str, found)))
    docs = out / "docs"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(ROOT / "overrides", out / "overrides")
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
    (docs / "glossary.md").write_text(_glossary_page())
    write_jieba_dictionary(out / "jieba_user.txt")
    _redraw_figures(docs, texts, missing)
    if missing:
        raise TranslationError(
            "generated texts with no Chinese (python tools/catalogue.py skeleton):\n  "
            + "\n  ".join(dict.fromkeys(missing))
        )
    anchors = _anchors(site)
    split, indexed = search_index(site)
    for page in docs.rglob("*.md"):  # once every page exists
        md = _link_english_only(page.read_text(), page, docs, anchors)
        english = site / page.relative_to(docs).with_suffix("") / "index.html"
        if page.name == "index.md":
            english = site / page.relative_to(docs).parent / "index.html"
        if english.exists():
            md = _english_anchors(md, english, page.relative_to(docs).as_posix())
            url = english.parent.relative_to(site).as_posix() + "/"
            md = _with_terms(md, indexed.get("" if url == "./" else url, ""), split)
        page.write_text(zh_style.bind_formulas(md))
    return stale


def _redraw_figures(docs: Path, texts: dict[str, str], missing: list[str]) -> None:
    """The Chinese pages' figures, redrawn with their text in Chinese from the copies the
    English build kept, and the gallery cards' thumbnails, made from each example's first
    figure as the gallery makes them (at the English thumbnail's size)."""
    from mkdocs_gallery.utils import rescale_image
    from PIL import Image

    kept = [(copy, docs / "generated" / image) for copy, image in zh_figures.copies()]
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
    words = set(split.split(text))
    used = [f"{zh}（{en}）" for zh, en, *_ in glossary() if _used(en.lower(), words, text)]
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


def fixed_headings() -> dict[str, str]:
    """The standard headings: English -> the one Chinese form."""
    return dict((en, zh) for en, zh in _table("Fixed headings"))


def _glossary_page() -> str:
    """The reader's glossary: its Chinese page, with the term table as Chinese | English."""
    rows = "".join(f"| {zh} | {en} |\n" for zh, en, *_ in glossary())
    table = "| 中文 | English |\n|---|---|\n" + rows
    page = (I18N / "glossary.md").read_text()
    if "<!-- terms -->" not in page:
        raise TranslationError("i18n/zh/glossary.md: no <!-- terms --> where the table goes")
    return page.replace("<!-- terms -->", table.rstrip("\n"))


#: A frequency that makes jieba keep a glossary term whole (缩放在 is 缩放/在, not 缩/放在)
_TERM_FREQUENCY = 1_000_000


def write_jieba_dictionary(path: Path) -> None:
    """The glossary's Chinese terms as a jieba user dictionary, for the search index. Terms
    with Latin letters or spaces (注意力 logit 增长) are left out: jieba's file format splits on
    spaces, and the search splits the Latin parts on its own."""
    terms = [zh for zh, *_ in glossary() if re.fullmatch(r"[\u4e00-\u9fff]+", zh)]
    path.write_text("".join(f"{t} {_TERM_FREQUENCY}\n" for t in terms))


def _zip_downloads(folder: Path, gallery: str) -> None:
    """The "download all examples" archives of a gallery, in Chinese."""
    for kind, suffix in [("python", ".py"), ("jupyter", ".ipynb")]:
        with zipfile.ZipFile(folder / f"{gallery}_{kind}.zip", "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(folder.glob(f"**/plot_*{suffix}")):
                z.write(f, f.relative_to(folder).as_posix())


def page_strings(source: str) -> list[str]:
    """The strings of a generated page that its translation must cover: the figures' alt text.
    (Tables and printed output go through the catalogue, tools/catalogue.py.)"""
    return alt_texts(source)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python tools/i18n.py", description=__doc__.split("\n\n")[0]
    )
    command = parser.add_subparsers(dest="command", required=True)
    command.add_parser("check", help="list every missing, untranslated or stale translation")
    skeletons = command.add_parser(
        "skeleton", help="write or refresh translation files, keeping their current entries"
    )
    skeletons.add_argument(
        "sources", nargs="*", metavar="SOURCE", help="gallery scripts or pages (default: all)"
    )
    command.add_parser("build", help="assemble the Chinese docs tree from the English build")
    args = parser.parse_args(argv)
    if args.command == "check":
        found = problems()
        print("\n".join(map(str, found)) or "every translation is current")
        return 1 if found else 0
    if args.command == "skeleton":
        unknown = sorted(set(args.sources) - {*SCRIPTS, *PAGES})
        if unknown:
            parser.error(f"not a gallery script or translated page: {', '.join(unknown)}")
        for source in args.sources or [*SCRIPTS, *PAGES]:
            strings = page_strings(source) if source in SCRIPTS else []
            print(skeleton(source, strings).relative_to(ROOT))
        return 0
    try:
        stale = assemble()
    except TranslationError as err:
        print(f"Chinese edition: {err}")
        return 1
    if stale:
        print("Stale Chinese strings (their English is gone):\n  " + "\n  ".join(stale))
        return 1
    print(f"Chinese docs tree written to {BUILD.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
