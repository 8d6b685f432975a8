"""MkDocs hooks, for both editions: a "running this example" box and a search boost on gallery
pages, the explorer's widgets and scripts, the language switcher's link to the same page in the
other edition, and (English build) a copy of each gallery figure for the Chinese edition."""

from __future__ import annotations

import ast
import copy
import os
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

# MkDocs loads this file by its path, as a module of its own: the build's other modules come
# from the installed package (pip install -e ./tools)
from attnscale_tools import ROOT, gallery_format

_TITLE = re.compile(r"^# .*$", re.M)

#: What a reader installs to run a guide example, from a clone of the repository: the one line
#: every example page's box gives (the package's install extras decide what it pulls in).
INSTALL_LINE = 'pip install -e ".[plot,hf]" -e ./guide'

#: The one box an example page has, under its title: what to install, the downloads, and what
#: the script needs and took here. Left out of the search index: otherwise it is the snippet
#: every example page shows in the search results.
_BOX = {
    "en": (
        "Running this example",
        "To run it, install attnscale and its guide package from a clone of the repository "
        "with `{install}` "
        "([Get started]({start})), then download [`{stem}.py`](./{stem}.py) or "
        "[`{stem}.ipynb`](./{stem}.ipynb) and run it as is.\n"
        "It needs `attnscale` and {packages}, and ran in {seconds} on the CPU that built "
        "this page ({cores} logical cores).",
    ),
    "zh": (
        "运行这个示例",
        "运行方法：在本仓库的克隆中用 `{install}` 安装 attnscale 及其指南包（见[快速上手]({start})），"
        "然后下载 [`{stem}.py`](./{stem}.py) 或 [`{stem}.ipynb`](./{stem}.ipynb)，直接运行即可。"
        "下载的脚本中说明文字、注释和文档字符串是中文，代码与英文版相同；"
        "它运行时打印的文字和图中的文字是英文，本页的输出和图是译成中文的。"
        "它需要 `attnscale` 以及 {packages}；在构建本页的 CPU（{cores} 个逻辑核）上运行了{seconds}。",
    ),
}

#: The editions: language code, the name the switcher shows, and where its site lives relative
#: to the English site's root.
EDITIONS = [("en", "English", ""), ("zh", "中文", "zh/")]
PREFIX = {code: prefix for code, _, prefix in EDITIONS}
#: Pages that exist in one edition only, by URL prefix: their switcher goes to the other home page.
ONLY_IN = {"en": ("reference/",), "zh": ("glossary/",)}


def _language(config: Any) -> str:
    return "zh" if config["theme"]["language"] == "zh" else "en"


def on_config(config: Any, **_: Any) -> Any:
    """The English build keeps a copy of each gallery figure, for the Chinese edition to redraw
    with Chinese text (zh_figures)."""
    _written_nav.clear()
    _written_nav.append(copy.deepcopy(config["nav"]))
    if _language(config) == "zh":  # the heading anchors' tooltip; the theme does not set it
        config["mdx_configs"].setdefault("toc", {})["permalink_title"] = "永久链接"
    if _language(config) == "en":
        from attnscale_tools import zh_figures

        zh_figures.install_keeper()
    return config


#: The navigation as mkdocs.yml writes it (a list of one).
_written_nav: list[Any] = []


def on_pre_build(config: Any, **_: Any) -> None:
    """The navigation as written. mkdocs-gallery replaces a gallery's index in it with a section
    of its own (the index page and every example again, under the index's title), which put a
    second "Guide" and every section twice under "Guide"; mkdocs.yml lists each page itself.
    Then (English build) a card for each example without a figure, over the gallery's
    placeholder logo (cards; the Chinese edition copies the cards)."""
    config["nav"] = _written_nav[0]
    if _language(config) == "en":
        from attnscale_tools import cards

        cards.draw_missing(Path(config["docs_dir"]) / "generated")


# After mkdocs-gallery's own on_pre_build (MkDocs' event_priority(-100), without importing
# MkDocs: the tests import this module where it is not installed).
on_pre_build.mkdocs_priority = -100  # type: ignore[attr-defined]


def on_page_markdown(markdown: str, page: Any, config: Any, **_: Any) -> str:
    lang = _language(config)
    if re.fullmatch(r"generated/.+/plot_\w+\.md", page.file.src_uri):  # the fact-check too
        # One box per page: ours (below) says how to run the example; the gallery's note
        # only points at the download buttons at the bottom.
        markdown = gallery_format.DOWNLOAD_NOTE.sub("", markdown, count=1)
        markdown = markdown.replace(gallery_format.OUTPUT_FENCE, PLAIN_OUTPUT_FENCE)
        markdown = _title_with_math(markdown, page)
    if re.fullmatch(r"generated/gallery/[^/]+/plot_\w+\.md", page.file.src_uri):
        markdown = _running_box(markdown, page, lang)
    if re.fullmatch(r"generated/(.+/)?index\.md", page.file.src_uri):  # a gallery's cards
        markdown = _index_with_math(markdown)
    if page.file.src_uri == "reference/monitor.md":
        markdown = markdown.replace("<!-- monitor-tables -->", monitor_tables())
    if lang == "zh":  # the gallery's running-time line, on examples and the fact-check
        markdown = gallery_format.RUNNING_TIME.sub(
            lambda m: f"**脚本总运行时间：**{m[1]} 分 {float(m[2]):.1f} 秒", markdown
        )
    return markdown


#: Printed output as plain text: the gallery marks it as shell code, which colours its numbers
#: and words such as "for" and "in".
PLAIN_OUTPUT_FENCE = gallery_format.OUTPUT_FENCE.replace(".shell", ".text")

#: Notation the guide's titles write in plain text (they are also the cards' captions, the
#: navigation and the browser's title, where TeX would show raw), and its math for the heading.
_TITLE_MATH = [
    (re.compile(r"1/√d_k"), r"$1/\sqrt{d_k}$"),
    (re.compile(r"√d_k"), r"$\sqrt{d_k}$"),
    (re.compile(r"(?<![A-Za-z0-9_${\\])d_k(?![A-Za-z0-9_])"), r"$d_k$"),
    (re.compile(r"(?<![A-Za-z0-9_$])q·k(?![A-Za-z0-9_])"), r"$q \cdot k$"),
]


def title_math(title: str) -> str:
    """A guide title with its notation (d_k, √d_k, q·k) as math, as the prose writes it."""
    for pattern, math in _TITLE_MATH:
        title = pattern.sub(math.replace("\\", "\\\\"), title)  # a template: its \ doubled
    return title


def _title_with_math(markdown: str, page: Any) -> str:
    """The page's heading renders its notation as math; the navigation and the browser's title
    keep the plain text (the Chinese edition sets it in the page's front matter)."""
    title = _TITLE.search(markdown)
    if not title:
        raise ValueError(f"{page.file.src_uri}: gallery page without a title")
    plain = title[0].removeprefix("# ").strip()
    page.meta.setdefault("title", plain)
    heading = "# " + title_math(plain)
    return markdown[: title.start()] + heading + markdown[title.end() :]


_HEADING = re.compile(r"^(#{1,6} )(.+)$", re.M)
#: A card's caption on a gallery's index (raw HTML: KaTeX's auto-render reads \( \) there).
_CAPTION = re.compile(r'(<span class="std std-ref">)(.*?)(</span>)', re.S)


def _index_with_math(markdown: str) -> str:
    """A gallery index with its sections' headings and its cards' captions in math notation,
    as on the pages they lead to (alt texts and tooltips keep the plain text)."""
    markdown = _HEADING.sub(lambda m: m[1] + title_math(m[2]), markdown)
    return _CAPTION.sub(
        lambda m: m[1] + re.sub(r"\$([^$]+)\$", r"\\(\1\\)", title_math(m[2])) + m[3],
        markdown,
    )


def monitor_tables() -> str:
    """The monitor's fact tables as Markdown: thresholds, finding codes, attention paths."""
    from attnscale._monitor import calls, facts

    def row(*cells: object) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    out = ["**Thresholds** (each a keyword argument of `AttentionMonitor`)", ""]
    out += [row("name", "default", "values", "finding", "error at", "meaning"), row(*["---"] * 6)]
    for name, t in facts.THRESHOLD_TABLE.items():
        error = "—" if t.error_at is None else f"{t.error_at:g} × the threshold"
        meaning = t.meaning + (f"; {t.why}" if t.why else "")
        out.append(row(f"`{name}`", f"{t.default:g}", t.domain(), t.finding, error, meaning))
    out += [
        "",
        "**Finding codes**",
        "",
        row("code", "meaning", "guide page"),
        row("---", "---", "---"),
    ]
    for code, f in facts.FINDINGS.items():
        page = f.page.rstrip("/")
        out.append(
            row(f"`{code}`", f.meaning, f"[{page}](../generated/gallery/05_debugging/{page}.md)")
        )
    out += ["", "**Attention paths** (`AttentionStats.path`)", ""]
    out += [row("path", "site kind", "fused", "gradient", "all_rows", "how"), row(*["---"] * 6)]
    for name, p in calls.PATHS.items():
        yes = {True: "yes", False: "no"}
        out.append(
            row(f"`{name}`", f"`{p.kind}`", yes[p.fused], yes[p.gradients], yes[p.all_rows], p.what)
        )
    return "\n".join(out) + "\n"


def _running_box(markdown: str, page: Any, lang: str) -> str:
    src = page.file.src_uri
    # The guide's pages explain a topic; rank them above API entries in site search.
    page.meta["search"] = {"boost": 4}
    found = gallery_format.RUNNING_TIME.search(markdown)
    title = _TITLE.search(markdown)
    if not found or not title:
        raise ValueError(f"{src}: gallery page without a title or a running time")
    seconds = int(found.group(1)) * 60 + float(found.group(2))
    stem = src.rsplit("/", 1)[-1].removesuffix(".md")
    packages = imported_packages(Path(page.file.abs_src_path).with_suffix(".py"))
    joined = ("、" if lang == "zh" else ", ").join(f"`{p}`" for p in packages) or (
        "无其他包" if lang == "zh" else "nothing else"
    )
    if lang == "zh":
        took = "不到 0.1 秒" if seconds < 0.05 else f" {seconds:.1f} 秒"
    else:
        took = "under 0.1 s" if seconds < 0.05 else f"{seconds:.1f} s"
    # the build's own machine: readers, CI and the publishing runner each build on another
    cores = os.cpu_count()
    heading, text = _BOX[lang]
    start = "../" * src.count("/") + "get-started.md"
    body = text.format(
        install=INSTALL_LINE, start=start, seconds=took, cores=cores, stem=stem, packages=joined
    )
    box = (
        f'\n\n<div class="admonition info" data-search-exclude="true" markdown>\n'
        f'<p class="admonition-title">{heading}</p>\n\n{body}\n\n</div>\n'
    )
    return markdown[: title.end()] + box + markdown[title.end() :]


#: This repository's two distributions, by import name: the library and the guide's site code.
SOURCES = {"attnscale": ROOT / "src", "guide": ROOT / "guide" / "src"}
#: The name a reader installs the guide's package by.
GUIDE_DISTRIBUTION = "attnscale-guide"


def imported_packages(script: Path) -> list[str]:
    """The packages a script needs besides attnscale: those it imports, and those the attnscale
    and guide modules it imports import in turn (transformers, behind a guide helper), sorted;
    the guide's own package by its distribution name."""
    found: set[str] = set()
    seen: set[Path] = set()
    todo = [script]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imports(path):
            top = name.split(".")[0]
            if top in SOURCES:
                todo += _module_files(name)
                if top == "guide":
                    found.add(GUIDE_DISTRIBUTION)
            else:
                found.add(name.split(".")[0])
    return sorted(found - set(sys.stdlib_module_names) - {"__future__"})


def _imports(path: Path) -> list[str]:
    """Dotted names of what a file imports (relative imports resolved, and ``from m import
    x`` as both ``m`` and ``m.x``, which may be a module)."""
    package = []
    src = next((s for s in SOURCES.values() if s in path.parents), None)
    if src is not None:
        package = list(path.relative_to(src).with_suffix("").parts)
        package = package[:-1]  # a module's package; __init__'s is itself, minus "__init__"
    tree = ast.parse(path.read_text())
    optional = {  # imports guarded by `except ImportError`: the code runs without them
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.Try)
        and any("ImportError" in ast.unparse(h.type or ast.Name("")) for h in node.handlers)
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    names = []
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names += [module, *(f"{module}.{alias.name}" for alias in node.names)]
    return names


def _module_files(name: str) -> list[Path]:
    """The source file of an attnscale or guide module or package, if there is one."""
    base = SOURCES[name.split(".")[0]].joinpath(*name.split("."))
    return [f for f in (base.with_suffix(".py"), base / "__init__.py") if f.is_file()]


#: Gallery pages that embed a small explorer (docs/assets/explorer.js): its kind, and the
#: heading it goes before (both editions keep the English anchors).
WIDGETS = {
    "generated/gallery/01_variance/plot_01_variance_growth.md": ("variance", "the-tails-honestly"),
    "generated/gallery/02_softmax/plot_04_temperature.md": ("temperature", "the-two-limits"),
}
_NO_SCRIPT = {
    "en": "The explorer is drawn by JavaScript, which is off in this browser.",
    "zh": "探索器由 JavaScript 绘制，而这个浏览器关闭了 JavaScript。",
}


def on_page_content(html: str, page: Any, config: Any, **_: Any) -> str:
    """Put the explorer's widget on the pages in ``WIDGETS``, and its scripts (uPlot and
    explorer.js, from the English site's assets) on every page that has one."""
    lang = _language(config)
    root = "../" * page.url.count("/")  # from this page to its edition's root
    if page.file.src_uri in WIDGETS:
        kind, before = WIDGETS[page.file.src_uri]
        at = html.find(f'<h2 id="{before}"')
        if at < 0:
            raise ValueError(
                f"{page.file.src_uri}: no heading #{before} to put the explorer before"
            )
        html = html[:at] + explorer_widget(kind, more=root + "explorer/") + "\n" + html[at:]
    if 'class="attnscale-explorer"' not in html:
        return html
    # what a reader without JavaScript sees, in each empty explorer element
    html = re.sub(
        r'(<div class="attnscale-explorer"[^>]*>)(</div>)', rf"\1<p>{_NO_SCRIPT[lang]}</p>\2", html
    )
    assets = root + "../" * PREFIX[lang].count("/") + "assets/"
    return (
        f'{html}\n<link rel="stylesheet" href="{assets}vendor/uplot/uPlot.min.css">\n'
        f'<script src="{assets}vendor/uplot/uPlot.iife.min.js"></script>\n'
        f'<script src="{assets}explorer.js"></script>\n'
    )


def explorer_widget(kind: str, more: str = "") -> str:
    """The element explorer.js fills in: ``kind`` is full, variance or temperature."""
    link = f' data-more="{more}"' if more else ""
    return f'<div class="attnscale-explorer" data-kind="{kind}"{link} data-search-exclude></div>'


def on_page_context(context: dict[str, Any], page: Any, config: Any, **_: Any) -> dict[str, Any]:
    """Give the template one link per edition: the same page there, or its home page."""
    lang = _language(config)
    # From this page up to the English site's root, then down into each edition.
    root = context["base_url"] + "/" + "../" * PREFIX[lang].count("/")
    links = []
    for code, name, prefix in EDITIONS:
        same = code == lang or not page.url.startswith(ONLY_IN[lang])
        links.append((code, name, root + prefix + (page.url if same else "")))
    context["editions"] = links
    return context


def on_template_context(context: dict[str, Any], template_name: str, config: Any) -> Any:
    """The 404 page is served at any address: its switcher links start from the site root."""
    if template_name == "404.html":
        lang = _language(config)
        root = urlsplit(config["site_url"] or "/").path.removesuffix(PREFIX[lang])
        context["editions"] = [(c, name, f"{root}{p}404.html") for c, name, p in EDITIONS]
    return context
