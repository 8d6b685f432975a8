"""The Chinese edition: every translation present and current, its downloads the English code,
its terms the glossary's, and its navigation the English one's."""

from __future__ import annotations

import ast
import html.parser
import re
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import yaml

from attnscale_tools import catalogue, figure_copies, gallery_format, zh_style
from attnscale_tools.i18n import __main__ as cli
from attnscale_tools.i18n import glossary, sources, tree

ROOT = Path(__file__).parents[1]

FILES = sorted(sources.translation_path(s) for s in [*sources.SCRIPTS, *sources.PAGES])


def test_every_translation_is_present_and_current():
    found = sources.problems()
    assert not found, "run `python -m attnscale_tools.i18n skeleton` and translate:\n" + "\n".join(
        map(str, found)
    )


def _mini_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One gallery script and one page, translated, in a tree of their own."""
    script = tmp_path / "examples" / "01_a" / "plot_01_a.py"
    script.parent.mkdir(parents=True)
    script.write_text('r"""\n# Title\n\nIntro.\n"""\n\n# %%\n# ## Step\n#\n# Text.\n\nx = 1\n')
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n")
    monkeypatch.setattr(sources, "ROOT", tmp_path)
    monkeypatch.setattr(sources, "I18N", tmp_path / "i18n" / "zh")
    monkeypatch.setattr(sources, "SCRIPTS", ["examples/01_a/plot_01_a.py"])
    monkeypatch.setattr(sources, "PAGES", ["docs/index.md"])
    for source in [*sources.SCRIPTS, *sources.PAGES]:
        path = sources.skeleton(source)
        path.write_text(path.read_text().replace(" todo -->", " -->"))
    return script


def test_changed_english_makes_its_block_stale(tmp_path, monkeypatch):
    script = _mini_project(tmp_path, monkeypatch)
    assert sources.problems() == []
    script.write_text(script.read_text().replace("# Text.", "# Other text."))
    (tmp_path / "docs" / "index.md").write_text("# Home, edited\n")
    found = sources.problems()
    assert [(p.path, p.kind, p.block) for p in found] == [
        ("i18n/zh/examples/01_a/plot_01_a.md", "stale", 1),
        ("i18n/zh/docs/index.md", "stale", None),
    ]
    assert str(found[1]) == "i18n/zh/docs/index.md: stale: docs/index.md changed"


def test_missing_and_untranslated_entries_are_reported(tmp_path, monkeypatch):
    script = _mini_project(tmp_path, monkeypatch)
    script.write_text(script.read_text() + "\n# %%\n# A new cell.\n\ny = 2\n")
    sources.translation_path("docs/index.md").unlink()
    assert [(p.path, p.kind, p.block) for p in sources.problems()] == [
        ("i18n/zh/examples/01_a/plot_01_a.md", "block missing", 2),
        ("i18n/zh/docs/index.md", "missing", None),
    ]
    sources.skeleton("examples/01_a/plot_01_a.py")  # keeps blocks 0 and 1, adds 2 as todo
    assert sources.problems()[0][1:3] == ("todo", 2)


def test_a_block_inserted_above_leaves_the_later_translations_in_use(tmp_path, monkeypatch):
    script = _mini_project(tmp_path, monkeypatch)
    path = sources.translation_path("examples/01_a/plot_01_a.py")
    path.write_text(path.read_text().replace("Text.", "文字。"))
    script.write_text(
        script.read_text().replace("# %%\n# ## Step", "# %%\n# New.\n\n# %%\n# ## Step")
    )
    sources.skeleton("examples/01_a/plot_01_a.py")
    blocks = sources.Translation.load(path).blocks
    assert blocks[1][1].strip() == "New." and blocks[1][2]  # the new block, to translate
    assert blocks[2][2] is False and "文字。" in blocks[2][1]  # the old block 1, kept
    assert [p.block for p in sources.problems()] == [1]


def _without_docstrings(module: ast.Module) -> ast.Module:
    """The code with the text of its string-only statements (docstrings, translated) left
    out: what runs."""
    for node in ast.walk(module):
        value = node.value if isinstance(node, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            value.value = ""
    return module


@pytest.mark.parametrize("source", sources.SCRIPTS)
def test_chinese_download_runs_the_english_code(source: str, tmp_path: Path) -> None:
    """The Chinese .py differs from the English one in its prose, comments and docstrings
    only: same code."""
    if sources.problems():
        pytest.skip("translations incomplete (see test_every_translation_is_present_and_current)")
    tr = sources.Translation.load(sources.translation_path(source))
    # as the build writes it: the comments through the catalogue too
    chinese = catalogue.translate_code(
        tree.chinese_script(source, tr), catalogue.load(), lambda key: None
    )
    english = (ROOT / source).read_text()
    code = [
        ast.dump(_without_docstrings(ast.Module(ast.parse(t).body[1:], [])))
        for t in (english, chinese)
    ]
    assert code[0] == code[1]
    copy = tmp_path / Path(source).name
    copy.write_text(chinese)
    zh = [tr.blocks[n][1].strip() for n in sorted(tr.blocks)]
    assert [b.strip() for b in sources.text_blocks(copy)] == zh


# --- terms ---------------------------------------------------------------------------------------


TERMS = glossary.glossary()


def _chinese_text(path: Path) -> str:
    """The Chinese of a translation file: markers, code and math removed."""
    tr = sources.Translation.load(path)
    parts = [zh for _, zh, _ in tr.blocks.values()] + list(tr.strings.values())
    parts += [tr.page[1]] if tr.page else []
    text = "\n".join(parts)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]*\$|\\\(.*?\\\)|`[^`\n]*`", "", text, flags=re.S)
    return re.sub(r"\]\([^)]*\)", "]", text)


def test_glossary_is_well_formed():
    assert len(TERMS) >= 30
    english = [en for _, en, *_ in TERMS]
    assert len(english) == len(set(english)), "an English term appears twice"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(sources.I18N).as_posix())
def test_pages_use_the_glossary(path: Path) -> None:
    text = _chinese_text(path)
    wrong = [f"{a} (use {zh})" for zh, _, _, avoid, _ in TERMS for a in avoid if a in text]
    assert not wrong, f"translations the glossary rules out: {wrong}"
    # An English term glossed in parentheses is glossed after its one Chinese translation.
    glossed = {en.lower(): zh for zh, en, *_ in TERMS}
    for m in re.finditer(r"([\u4e00-\u9fff\w -]{0,20}?) ?[（(]([A-Za-z][A-Za-z -]*)[）)]", text):
        zh = glossed.get(m[2].lower())
        if zh is not None and not m[1].rstrip().endswith(zh):
            wrong.append(f"{m[0]!r}: the glossary says {zh}（{m[2]}）")
    assert not wrong, f"terms glossed with another translation: {wrong}"


def _body(text: str) -> str:
    """Text without headings, where a gloss would clutter a title."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(sources.I18N).as_posix())
def test_terms_are_glossed_at_first_use(path: Path) -> None:
    text = _body(_chinese_text(path))
    missing = []
    for zh, en, gloss, _, other_words in TERMS:
        if not gloss:
            continue
        # Skip occurrences inside a longer glossary term (掩码 in 填充掩码) or inside a longer
        # word the table names (值 in 最大值).
        longer = [z for z, *_ in TERMS if zh in z and z != zh] + other_words
        covered = [k.span() for z in longer for k in re.finditer(re.escape(z), text)]
        for m in re.finditer(re.escape(zh), text):
            if any(s <= m.start() and m.end() <= e for s, e in covered):
                continue
            if not re.match(rf" ?[（(]{re.escape(en)}[）)]", text[m.end() :], re.I):
                missing.append(f"{zh}（{en}）")
            break
    assert not missing, f"first use without the English in parentheses: {missing}"


# --- navigation ----------------------------------------------------------------------------------


def _nav_files(config: Path) -> list[str]:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda *a: None)
    nav = yaml.load(config.read_text(), Loader=Loader)["nav"]

    def walk(item: object) -> list[str]:
        if isinstance(item, str):
            return [item] if item.endswith(".md") else []
        if isinstance(item, dict):
            return [f for v in item.values() for f in walk(v)]
        return [f for v in item for f in walk(v)]  # type: ignore[attr-defined]

    return walk(nav)


def test_chinese_navigation_follows_the_english():
    english = [f for f in _nav_files(ROOT / "mkdocs.yml") if not f.startswith("reference/")]
    chinese = _nav_files(ROOT / "mkdocs.zh.yml")
    assert chinese == [*english, "glossary.md"]


def test_the_glossary_is_the_search_segmenters_dictionary(tmp_path: Path) -> None:
    """Every all-Chinese glossary term goes to jieba with a frequency that keeps it whole, but
    a compound of the search-word table goes as its parts, so that a part finds it."""
    path = tmp_path / "jieba_user.txt"
    glossary.write_jieba_dictionary(path)
    entries = dict(line.split() for line in path.read_text().splitlines())
    chinese = {zh for zh, *_ in TERMS if re.fullmatch(r"[\u4e00-\u9fff]+", zh)}
    parts = glossary.search_parts()
    assert {"缩放点积注意力", "注意力汇聚点", "缩放并入初始化"} <= set(parts) <= chinese
    assert set(entries) == (chinese - set(parts)) | {p for cut in parts.values() for p in cut}
    assert {"缩放", "雅可比矩阵", "汇聚点", "点积注意力"} <= set(entries)
    assert all(int(f) >= 10**6 for f in entries.values())


# --- typography and headings (i18n/zh/TERMS.md) ----------------------------------------------


def _translated_texts(path: Path) -> list[str]:
    tr = sources.Translation.load(path)
    return (
        [zh for _, zh, _ in tr.blocks.values()]
        + [*tr.strings.values()]
        + ([tr.page[1]] if tr.page else [])
    )


@pytest.mark.parametrize(
    "path",
    [*FILES, sources.I18N / "glossary.md"],
    ids=lambda p: p.relative_to(sources.I18N).as_posix(),
)
def test_typography(path: Path) -> None:
    texts = [path.read_text()] if path.name == "glossary.md" else _translated_texts(path)
    found = [problem for text in texts for problem in zh_style.check(text)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    ("planted", "problem"),
    [
        ("**均值。** 由线性性可知", "space at full-width punctuation"),
        ("方差为 $d_k$ 。", "space at full-width punctuation"),
        ("会坍缩（熵坍缩（entropy collapse））。", "nested full-width brackets"),
        ("每次运行 2,048 步。", "thousands separator"),
        ("第 1-3 步：缺失的缩放。", "range with a hyphen"),
    ],
)
def test_typography_checks_catch_a_planted_problem(planted: str, problem: str) -> None:
    assert [p for p in zh_style.check(planted) if p.startswith(problem)]
    # ... and leave code, formulas and the correct forms alone
    assert not zh_style.check("每次运行 2048 步，第 1～3 步。`a, b = 1, 2` 与 $x_{1-3}$。")


def test_a_formula_keeps_its_punctuation_on_its_line() -> None:
    bound = zh_style.bind_formulas("方差为 $d_k$。代码 `$a$。` 不变。\n```\n$b$，\n```\n")
    assert bound.startswith('方差为 <span class="nowrap">$d_k$。</span>代码 `$a$。` 不变。')
    assert bound.endswith("```\n$b$，\n```\n")


_HEADING = re.compile(r"^(#{2,6}) (.+?)\s*$", re.M)


def _headings(text: str) -> list[str]:
    return [m[2] for m in _HEADING.finditer(re.sub(r"```.*?```", "", text, flags=re.S))]


@pytest.mark.parametrize("source", sources.SCRIPTS)
def test_headings_follow_the_english(source: str) -> None:
    """The same headings in the same order as the English page (the build gives each the
    English anchor), the standard ones in their one Chinese form."""
    tr = sources.Translation.load(sources.translation_path(source))
    fixed = glossary.fixed_headings()
    wrong = []
    for n, english in enumerate(sources.text_blocks(ROOT / source)):
        en, zh = _headings(english), _headings(tr.blocks[n][1]) if n in tr.blocks else []
        if len(en) != len(zh):
            wrong.append(f"block {n}: {len(zh)} headings for the English {len(en)}")
        wrong += [
            f"block {n}: {z!r} for {e!r} (use {fixed[e]})"
            for e, z in zip(en, zh, strict=False)  # counts compared above
            if e in fixed and z != fixed[e]
        ]
    assert not wrong, "\n".join(wrong)


def test_headings_check_catches_a_planted_problem() -> None:
    assert glossary.fixed_headings()["Setup"] == "实验设置"
    assert _headings("## 设置\n\n```\n## not a heading\n```\n### 数学推导\n") == [
        "设置",
        "数学推导",
    ]


# --- generated text and English on the assembled pages -----------------------------------------

ASSEMBLED = sorted(tree.BUILD.glob("docs/**/*.md"))


def test_generated_text_goes_through_the_catalogue() -> None:
    """Numbers leave the shape and come back in order (or by position); a text with no entry
    is reported and left as it was; code, numbers and names need no entry."""
    table = {
        "converged in {} of {} seeds": "{2} 个随机种子中有 {1} 个收敛",
        "step {} of {}": "第 {} 步（共 {} 步）",
    }
    missing: list[str] = []
    page = (
        "<table><thead><tr><th>step 3 of 40</th></tr></thead><tbody>"
        "<tr><td>converged in 12 of 20 seeds</td></tr><tr><td>still falling</td></tr>"
        "<tr><td>arXiv:1706.03762</td></tr></tbody></table>\n"
        "```{.shell .mkd-glr-script-out-disp }\nconverged in 1 of 2 seeds\nlayers.0.attn  0.5\n```\n"
    )
    out = catalogue.translate(page, table, missing.append)
    assert "<th>第 3 步（共 40 步）</th>" in out
    assert "<td>20 个随机种子中有 12 个收敛</td>" in out and "<td>still falling</td>" in out
    assert "\n2 个随机种子中有 1 个收敛\nlayers.0.attn  0.5\n" in out  # aligned rows: code
    assert missing == ["still falling"]


def test_a_wrapped_printed_paragraph_is_one_text() -> None:
    line = "WARNING: The scores are multiplied by 1 (traced), 8 x 1/sqrt(head_dim). Likely cause:"
    printed = f"{line}\n    no scale: the product reaches the softmax unscaled.\nNext item"
    units = catalogue._units(printed)
    assert [u[1] for u in units] == [
        f"{line} no scale: the product reaches the softmax unscaled.",
        "Next item",
    ]
    # a "label: value" line or a code line after a long line is a line of its own
    long = "training loss, mean of each quarter of the run: 0.91, 0.52, 0.44, 0.43"
    for second in ("held-out loss: 0.43 nats per byte", "self.scaling = self.head_dim**-0.5"):
        assert [u[1] for u in catalogue._units(f"{long}\n{second}")] == [long, second]
    wrapped = catalogue.wrap("警告：" + "分数乘以 1，" * 12 + "未缩放。", "", "    ")
    # 80 columns, and a full-width punctuation mark may hang past them rather than start a line
    assert all(catalogue._width(x) <= 82 for x in wrapped.splitlines())
    assert not any(x.strip()[0] in "，。：；、" for x in wrapped.splitlines())
    assert all(x.startswith("    ") for x in wrapped.splitlines()[1:])


def test_every_generated_text_has_a_chinese_entry() -> None:
    if not catalogue.GENERATED.exists():
        pytest.skip("the English build has not run (nox -s docs)")
    missing = catalogue.missing_by_page()
    assert not missing, (
        "run `python -m attnscale_tools.catalogue skeleton` and translate:\n"
        + "\n".join(f"{page}: {key}" for page, keys in missing.items() for key in keys)
    )
    assert not catalogue.unused(), (
        "entries no page shows: python -m attnscale_tools.catalogue missing"
    )


def test_every_branch_a_script_can_print_has_a_chinese_entry() -> None:
    """Not only the texts this build printed: a number from another machine can take another
    branch (a lead time where there was none, a sign, a wider column), whose shape this build
    never saw. Each f-string that prints numbers whole (a table cell, a printed line) needs an
    entry, both arms of a conditional included."""
    missing = catalogue.unprinted_shapes(catalogue.scripts())
    assert not missing, "add to i18n/zh/catalogue:\n" + "\n".join(missing)


def test_the_branch_scan_sees_an_untaken_branch(tmp_path: Path) -> None:
    script = tmp_path / "plot_01_x.py"
    script.write_text(
        "lead = 3.0\n"
        'rows = [["no toy spike" if lead < 0 else f"{lead:+.0f} steps ahead of the spike"]]\n'
        'print(f"{0.5:.0%} of the runs never spiked")\n'
    )
    assert sorted(t for _, t in catalogue.formatted_texts(script)) == [
        "0 steps ahead of the spike",
        "0% of the runs never spiked",
        "no toy spike",
    ]
    assert catalogue.shape("+0 steps ahead")[0] == catalogue.shape("-12 steps ahead")[0]
    assert catalogue.shape("d_k =   16: x")[0] == catalogue.shape("d_k = 256: x")[0]
    assert len(catalogue.unprinted_shapes([script])) == 3


def test_a_stale_matplotlib_font_cache_finds_the_cjk_font(monkeypatch) -> None:
    """A font cache made before fonts-noto-cjk was installed: the font is found through
    fontconfig, not reported missing."""
    from matplotlib import font_manager

    from attnscale_tools import zh_figures

    kept = [f for f in font_manager.fontManager.ttflist if "CJK" not in f.name]
    monkeypatch.setattr(font_manager.fontManager, "ttflist", kept)
    font_manager.fontManager._findfont_cached.cache_clear()
    try:
        zh_figures.check_font()
        assert "CJK" in font_manager.findfont(zh_figures.CJK_FONT, fallback_to_default=False)
    finally:
        font_manager.fontManager._findfont_cached.cache_clear()


def test_the_english_scan_catches_a_planted_word() -> None:
    page = "---\ntitle: x\n---\n这个结果已经 converged 了，见 `train()` 与 $\\max$。\n"
    assert catalogue.english_words(zh_style.reader_text(page)) == ["converged"]
    glossed = "查询（query）与 softmax，见 [链接](https://example.org/a-page)。\n"
    assert catalogue.english_words(zh_style.reader_text(glossed)) == []


def test_a_name_joined_by_a_hyphen_is_not_english(monkeypatch: pytest.MonkeyPatch) -> None:
    """ "QK-Clip" stays a name even where the English prose writes "clip" in lowercase; the
    same word standing alone and capitalised is English."""
    monkeypatch.setattr(catalogue, "_vocabulary", lambda: frozenset({"clip"}))
    assert catalogue.english_words("用 QK-Clip 与 MuonClip 限制 logit。") == []
    assert catalogue.english_words("Clip 之后。") == ["Clip"]


@pytest.mark.parametrize(
    "page", ASSEMBLED, ids=lambda p: p.relative_to(tree.BUILD / "docs").as_posix()
)
def test_no_english_in_chinese_prose(page: Path) -> None:
    """What a reader reads on a Chinese page is Chinese, outside code, formulas, glosses, names
    and the words the field keeps in English (catalogue.KEPT)."""
    if page.name in ("references.md", "glossary.md"):
        pytest.skip("titles of works; the glossary pairs each term with its English")
    words = catalogue.english_words(zh_style.reader_text(page.read_text()))
    assert not words, f"English on a Chinese page: {sorted(set(words))}"


def test_page_titles_in_tables_are_the_pages_own() -> None:
    """A table that names a guide page (the fact-check's) names it by its Chinese title."""
    texts = catalogue.load()
    for source in sources.SCRIPTS:
        tr = sources.Translation.load(sources.translation_path(source))
        english = tree.title_and_intro(sources.text_blocks(ROOT / source)[0])[0]
        key, numbers = catalogue.shape(english)
        if texts.get(key):
            assert catalogue.fill(texts[key], numbers) == tree.title_and_intro(tr.blocks[0][1])[0]


def test_code_comments_go_through_the_catalogue() -> None:
    """A comment block is one text, re-wrapped in Chinese at its column; a comment after code
    is replaced in place; code, directives and Chinese comments are left alone."""
    code = (
        "def f(x):\n"
        "    # scale the scores by 1/sqrt(d), as the\n"
        "    # paper does\n"
        "    return x * 0.125  # the scale\n"
        "y = f(2)  # noqa: E501\n"
        "z = 1  # not in the catalogue\n"
    )
    table = {
        "scale the scores by {}/sqrt(d), as the paper does": "按论文的做法，把分数乘以 {}/sqrt(d)",
        "the scale": "缩放",
    }
    missing: list[str] = []
    out = catalogue.translate_code(code, table, missing.append)
    assert out.split("\n")[:3] == [
        "def f(x):",
        "    # 按论文的做法，把分数乘以 1/sqrt(d)",
        "    return x * 0.125  # 缩放",
    ]
    assert "y = f(2)  # noqa: E501" in out and missing == ["not in the catalogue"]
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(code))


def test_docstrings_go_through_the_catalogue() -> None:
    """A docstring (a string-only statement) is one text, its whitespace runs one space; its
    Chinese keeps the quotes and the first line's indentation, re-wrapped within 88 columns
    (triple quotes where one line will not do), and the code still parses the same. f-strings,
    strings inside code and a script's module docstring (its page's text) are left alone."""
    code = (
        '"""A gallery script\'s text."""\n'
        "def f(x):\n"
        '    """Scale the scores by 1/sqrt(d), as the\n'
        '    paper does."""\n'
        '    y = f"{x} an f-string"\n'
        "    r'Per row: the bare string between statements.'\n"
        '    return ("not", "documentation")  # the scale\n'
        "class A:\n"
        '    """Not in the catalogue."""\n'
    )
    assert [d[4] for d in catalogue.docstrings(code)] == [
        "Scale the scores by 1/sqrt(d), as the paper does.",
        "Per row: the bare string between statements.",
        "Not in the catalogue.",
    ]
    table = {
        "Scale the scores by {}/sqrt(d), as the paper does.": "按论文的做法，把分数乘以 {}/sqrt(d)。",
        "Per row: the bare string between statements.": "每一行：" + "语句之间的字符串，" * 8,
        "the scale": "缩放",
    }
    missing: list[str] = []
    out = catalogue.translate_code(code, table, missing.append).split("\n")
    assert out[2] == '    """按论文的做法，把分数乘以 1/sqrt(d)。"""'
    assert out[4].startswith("    r'''每一行：") and out[5].startswith("    ")
    assert out[5].endswith("'''") and out[6].endswith("# 缩放")
    assert all(catalogue._width(line) <= 88 for line in out)
    assert missing == ["Not in the catalogue."]
    translated = ast.parse("\n".join(out))
    assert ast.dump(_without_docstrings(translated)) == ast.dump(
        _without_docstrings(ast.parse(code))
    )


def test_formulas_in_html_attributes_are_left_alone() -> None:
    card = '<div class="card" tooltip="除以温度 $T$，softmax 变尖。">$x$。</div>'
    assert zh_style.bind_formulas(card) == card.replace(
        "$x$。</div>", '<span class="nowrap">$x$。</span></div>'
    )


def test_text_cells_are_not_code_comments() -> None:
    script = "x = 1\n\n# %%\n# A text cell, translated as a block.\n\n# a comment\ny = 2\n"
    assert [c[3] for c in catalogue.comments(script)] == ["a comment"]


def test_a_figure_is_redrawn_with_chinese_text(tmp_path: Path, monkeypatch) -> None:
    """The English build keeps a copy of a gallery figure; the Chinese edition redraws it with
    its texts through the catalogue, in the CJK font, and reports a text with no entry; fixed
    tick labels are translated where the axis draws them from; a text with math is drawn in the
    CJK font alone (mathtext has no per-glyph fallback); a redraw is reused while its inputs
    are the same."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnscale_tools import zh_figures

    zh_figures.check_font()  # as the build does first: a font cache older than the font is mended
    monkeypatch.setattr(figure_copies, "COPIES", tmp_path / "figures")
    monkeypatch.setattr(catalogue, "GENERATED", tmp_path / "generated")
    fig, (ax, bars) = plt.subplots(1, 2)
    bars.barh(["low", "no scale"], [1, 2])
    ax.plot([0, 1], [0, 1], label="no scale")
    ax.set_title("Entropy over 3 seeds")
    ax.set_xlabel("$d_k$")
    ax.set_ylabel("$H$ per head")
    ax.set_yticks([0, 1], labels=["low", "2 high"])
    ax.legend()
    image = tmp_path / "generated" / "gallery" / "a" / "images" / "mkd_glr_plot_01_a_001.png"
    image.parent.mkdir(parents=True)
    zh_figures.keep(fig, image, {"dpi": 50})
    zh_figures.keep(fig, tmp_path / "elsewhere.png", {})  # not a gallery image: no copy
    plt.close(fig)
    ((copy, rel),) = list(figure_copies.copies())
    assert rel.as_posix() == "gallery/a/images/mkd_glr_plot_01_a_001.png"
    assert sorted(set(catalogue.figure_texts(copy))) == [
        "$H$ per head",
        "2 high",
        "Entropy over 3 seeds",
        "low",
        "no scale",
    ]
    missing: list[str] = []
    texts = {
        "Entropy over {} seeds": "{} 个随机种子上的熵",
        "$H$ per head": "每个头的 $H$",
        "{} high": "{} 高",
        "low": "低",
    }
    figure, kwargs = zh_figures.translated(copy, texts, missing.append)
    ax = figure.axes[0]
    assert ax.get_title() == "3 个随机种子上的熵" and kwargs == {"dpi": 50}
    assert ax.title.get_fontfamily()[-1] == zh_figures.CJK_FONT != ax.title.get_fontfamily()[0]
    assert ax.get_ylabel() == "每个头的 $H$"
    assert ax.yaxis.label.get_fontfamily() == [zh_figures.CJK_FONT]
    assert [ax.yaxis.get_major_formatter()(v, i) for i, v in enumerate([0, 1])] == ["低", "2 高"]
    assert figure.axes[1].yaxis.get_major_formatter()(0) == "低"
    assert ax.get_xlabel() == "$d_k$" and set(missing) == {"no scale"}
    zh_figures.redraw(copy, image, {}, missing.append)
    assert image.stat().st_size > 0
    # a redraw with every text translated is kept and reused while nothing it depends on changes
    texts["no scale"] = "不缩放"
    zh_figures.redraw(copy, image, texts, missing.append)

    def drawn(*args: object) -> None:
        raise AssertionError("drawn again")

    monkeypatch.setattr(zh_figures, "translated", drawn)
    again = tmp_path / "again.png"
    zh_figures.redraw(copy, again, texts, missing.append)
    assert again.read_bytes() == image.read_bytes()
    with pytest.raises(AssertionError, match="drawn again"):
        zh_figures.redraw(copy, again, {**texts, "low": "较低"}, missing.append)


def test_every_figure_is_redrawn_in_chinese() -> None:
    """Every gallery figure of the English build has a kept copy, and the Chinese page shows
    it redrawn wherever it has English text; so is a gallery card's thumbnail."""
    pngs = catalogue.GENERATED.glob("**/images/*.png")
    images = sorted(i for i in pngs if gallery_format.IMAGE.fullmatch(i.name))
    if not images or not figure_copies.COPIES.exists() or not ASSEMBLED:
        pytest.skip("the docs have not been built (nox -s docs)")
    kept = dict((catalogue.GENERATED / image, copy) for copy, image in figure_copies.copies())
    assert [i for i in images if i not in kept] == [], "figures with no copy to redraw"
    redrawn = [i for i in images if catalogue.figure_texts(kept[i])]
    assert redrawn
    for image in redrawn:
        chinese = tree.BUILD / "docs" / image.relative_to(ROOT / "docs")
        assert chinese.read_bytes() != image.read_bytes(), image.name
        thumb = gallery_format.thumbnail(image)
        if thumb is not None and thumb.exists():  # the gallery card's thumbnail
            zh_thumb = chinese.parent / "thumb" / thumb.name
            assert zh_thumb.read_bytes() != thumb.read_bytes(), thumb.name


def test_no_english_is_left_in_the_chinese_figures() -> None:
    """After the redraw, a figure text (tick labels as the axes draw them included) with
    English words in it is one the catalogue keeps as it is (model names)."""
    from attnscale_tools import zh_figures

    copies = list(figure_copies.copies())
    if not copies:
        pytest.skip("the docs have not been built (nox -s docs)")
    texts = catalogue.load()
    left = []
    for copy, image in copies:
        figure, _ = zh_figures.translated(copy, texts, lambda key: None)
        shown = [t.get_text() for t in figure_copies.texts(figure)]
        for axes in figure.axes:
            for axis in (axes.xaxis, axes.yaxis):
                formatter = axis.get_major_formatter()
                locs = axis.get_majorticklocs()
                shown += [formatter(loc, i) for i, loc in enumerate(locs)]
        for text in shown:
            key = catalogue.shape(text)[0]
            if catalogue.english_outside_math(text) and texts.get(key) != key:
                left.append(f"{image.name}: {text}")
    assert not left, "\n".join(sorted(set(left)))


def test_the_command_line_names_what_it_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check"]) == (1 if sources.problems() else 0)
    for argv, words in (([], "required"), (["skeleton", "nope.py"], "nope.py"), (["x"], "x")):
        with pytest.raises(SystemExit) as exit_:
            cli.main(argv)
        assert exit_.value.code == 2
        assert words in capsys.readouterr().err


# --- the built Chinese site (issue 44) -----------------------------------------------------------

SITE_ZH = ROOT / "site" / "zh"


def _built_pages(edition: Path) -> list[Path]:
    pages = sorted(edition.glob("**/*.html"))
    if not pages:
        pytest.skip("the docs have not been built (nox -s docs)")
    return pages


def test_no_ruled_out_term_on_the_built_pages() -> None:
    """The glossary's ruled-out renderings (its 不用的译法 column, 监视器 among them) appear
    nowhere a reader sees: not in the translations, nor in printed output, code comments or
    figures' alt texts that reach the page through the catalogue."""
    ruled_out = {a: zh for zh, _, _, avoid, _ in TERMS for a in avoid}
    assert "监视器" in ruled_out  # a display screen, not the diagnostics tool
    found = [
        f"{page.relative_to(SITE_ZH)}: {a} (use {zh})"
        for page in _built_pages(SITE_ZH)
        for a, zh in ruled_out.items()
        if a in page.read_text()
    ]
    assert not found, "\n".join(found)


class _Attributes(html.parser.HTMLParser):
    """The values of the attributes a screen reader reads out, as the browser has them."""

    READ_ALOUD = ("alt", "title", "aria-label")

    def __init__(self) -> None:
        super().__init__()
        self.values: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.values += [v for k, v in attrs if k in self.READ_ALOUD and v]


_MARKUP = re.compile(r"</?[A-Za-z][^>]*>")


def test_markup_is_caught_in_a_planted_alt_text() -> None:
    page = '<img alt="熵，&lt;span class=&quot;nowrap&quot;&gt;\\(n\\)，&lt;/span&gt;" src="a.png">'
    parser = _Attributes()
    parser.feed(page)
    assert [v for v in parser.values if _MARKUP.search(v)]
    assert not _MARKUP.search("\\(a < b\\) 与 \\(b > c\\)")  # a formula's signs are no markup


@pytest.mark.parametrize("edition", ["en", "zh"])
def test_no_markup_in_text_read_aloud(edition: str) -> None:
    """Alt texts, titles and ARIA labels hold plain text: a tag in them is read aloud as
    characters ("span class equals nowrap"), in either edition."""
    site = ROOT / "site"
    pages = [
        p for p in _built_pages(site) if (p.relative_to(site).parts[0] == "zh") == (edition == "zh")
    ]
    found = []
    for page in pages:
        parser = _Attributes()
        parser.feed(page.read_text())
        found += [f"{page.relative_to(site)}: {v!r}" for v in parser.values if _MARKUP.search(v)]
    assert not found, "\n".join(found)


def test_formulas_in_image_alt_texts_are_left_alone() -> None:
    md = "![熵，$n = 16$，$a[i]$。](./images/a.png) 正文 $n$，完"
    bound = zh_style.bind_formulas(md)
    assert bound.startswith("![熵，$n = 16$，$a[i]$。](./images/a.png)")
    assert '<span class="nowrap">$n$，</span>完' in bound


def _palette(png: Path, share: float) -> np.ndarray:
    """The saturated colours of an image (RGB in steps of 8) that cover more than ``share`` of
    its pixels: the lines, bars and markers, without greys, anti-aliasing and pale fills."""
    from matplotlib.colors import rgb_to_hsv
    from matplotlib.image import imread

    rgb = imread(png)[..., :3].reshape(-1, 3)
    hsv = rgb_to_hsv(rgb)
    saturated = rgb[(hsv[:, 1] > 0.4) & (hsv[:, 2] > 0.2)]
    colours, counts = np.unique(np.round(saturated * 255 / 8) * 8, axis=0, return_counts=True)
    return colours[counts > share * len(rgb)]


def _unmatched(colours: np.ndarray, palette: np.ndarray, tolerance: float = 16) -> list[str]:
    """The colours with no colour of ``palette`` within ``tolerance`` in every channel (tab10's
    blue #1f77b4 is 31 from Okabe-Ito's #0072b2 in red)."""
    return [
        "#{:02x}{:02x}{:02x}".format(*(min(int(c), 255) for c in colour))
        for colour in colours
        if not len(palette) or np.abs(palette - colour).max(axis=1).min() > tolerance
    ]


def test_the_colour_check_catches_the_default_colours(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    from guide.style import STYLE

    def draw(path: Path) -> Path:
        figure, ax = plt.subplots()
        ax.plot([0, 1], [0, 1], color="C0", lw=8)  # "C0" is looked up when the figure is drawn
        figure.savefig(path)
        plt.close(figure)
        return path

    with plt.style.context(STYLE):
        site = _palette(draw(tmp_path / "site.png"), 0.0005)
        assert _unmatched(site, _palette(draw(tmp_path / "again.png"), 0.0001)) == []
    with plt.rc_context():  # matplotlib's defaults, whatever style an earlier test applied
        plt.rcdefaults()
        default = draw(tmp_path / "default.png")
    assert _unmatched(site, _palette(default, 0.0001))


def test_the_chinese_figures_keep_the_english_colours() -> None:
    """A redrawn figure changes its text only: its colours are the English figure's, the site's
    colour-blind-safe palette (a colour written "C0" is resolved when the figure is drawn, so
    a redraw outside the site's style turns it into matplotlib's default colours)."""
    site = ROOT / "site"
    pairs = [
        (en, site / "zh" / en.relative_to(site))
        for en in sorted((site / "generated").glob("**/images/*.png"))
        if gallery_format.IMAGE.fullmatch(en.name)
    ]
    pairs = [(en, zh) for en, zh in pairs if zh.exists()]
    if not pairs:
        pytest.skip("the docs have not been built (nox -s docs)")
    assert len(pairs) >= 37
    # a colour covering 0.05% of one image must cover 0.01% of the other: a borderline colour
    # is not lost by a line drawn a pixel shorter
    lost = [
        f"{en.name}: {colours}"
        for en, zh in pairs
        for a, b in ((en, zh), (zh, en))
        if (colours := _unmatched(_palette(a, 0.0005), _palette(b, 0.0001)))
    ]
    assert not lost, "colours of one edition missing in the other:\n" + "\n".join(lost)


#: The theme's labels that mkdocs.zh.yml gives in Chinese (the toggles' and the links' titles)
THEME_ENGLISH = ["Switch to dark mode", "Switch to light mode", "Source code on GitHub"]


def test_the_theme_speaks_chinese() -> None:
    found = [
        f"{page.relative_to(SITE_ZH)}: {label}"
        for page in _built_pages(SITE_ZH)
        for label in THEME_ENGLISH
        if label in page.read_text()
    ]
    assert not found, "\n".join(found[:10])


#: English inside a formula's \text{} that stays: names from code (FlashAttention's headdim)
CODE_IN_FORMULAS = {"fan\\_in", "headdim"}
# \text{} that is not a subscript (d_\text{model})
_TEXT_IN_FORMULA = re.compile(r"(?<!_\{)(?<!_)\\text\{([^{}]*)\}")


def _english_in_formulas(text: str) -> list[str]:
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)  # the English a translation follows
    formulas = re.findall(r"\$\$.*?\$\$|\$[^$\n]+\$|\\\(.*?\\\)|\\\[.*?\\\]", text, flags=re.S)
    return [
        m[0]
        for formula in formulas
        for m in _TEXT_IN_FORMULA.finditer(formula)
        if re.search(r"[A-Za-z]{2,}", m[1]) and m[1] not in CODE_IN_FORMULAS
    ]


def test_formulas_speak_chinese() -> None:
    """Words inside a Chinese page's formulas (\\text{for}, \\text{independent}) are Chinese;
    subscripts (d_\\text{model}) and names from code stay."""
    assert _english_in_formulas("$x \\ \\text{for } y$, $d_\\text{model}$, $d_{\\text{k}}$") == [
        "\\text{for }"
    ]
    pages = [*FILES, *sorted(catalogue.CATALOGUE.glob("*.md"))]
    found = [f"{p.name}: {t}" for p in pages for t in _english_in_formulas(p.read_text())]
    assert not found, found


def test_the_pages_say_simplified_chinese() -> None:
    """<html lang="zh-CN">: a browser picks Simplified Chinese glyphs for the characters that
    Chinese, Japanese and Korean share (a bare "zh" leaves the choice to it)."""
    wrong = [
        page.relative_to(SITE_ZH).as_posix()
        for page in _built_pages(SITE_ZH)
        if '<html lang="zh-CN"' not in page.read_text()
    ]
    assert not wrong, wrong[:10]


def test_the_term_notes_list_terms_only() -> None:
    """A page's 本页术语 note leaves out the term table's plain words (原文, 离散程度)."""
    assert {"原文", "离散程度"} <= glossary.plain_words()
    note = re.compile(r'<p class="admonition-title">本页术语</p>\s*<p>(.*?)</p>', re.S)
    found = [
        f"{page.relative_to(SITE_ZH).as_posix()}: {word}"
        for page in _built_pages(SITE_ZH)
        for listed in note.findall(page.read_text())
        for word in glossary.plain_words()
        if re.search(rf"(^|、){word}（", listed)
    ]
    assert not found, found[:10]


# --- code on the Chinese pages and in their downloads --------------------------------------------

#: A fenced code block of a Markdown page (indented inside an admonition or a list, too).
_FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<lang>[^\n`]*)\n(?P<code>.*?)^(?P=indent)```", re.S | re.M
)
_SHELL_COMMENT = re.compile(r"(?:^|\s)#(?!!)\s*(.*)$", re.M)


def _english_in_python(code: str, script: bool = False) -> list[str]:
    """The comments and documentation strings (string-only statements: docstrings) of some
    Python code that have English words; ``script``: a whole gallery script, whose module
    docstring and text cells are its prose (translated as blocks, not here)."""
    tree_ = ast.parse(code)  # the translated code is still Python
    strings = [
        node.value.value
        for node in ast.walk(tree_)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        and not (script and node is tree_.body[0])
    ]
    texts = strings + [text for *_, text in catalogue.comments(code)]
    return [" ".join(t.split()) for t in texts if _english(t)]


_CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def _english(text: str) -> bool:
    """A text in English: English words, no Chinese, and not kept in English on purpose (a
    catalogue entry whose Chinese is its English: a shape comment, ``(rows, n)``)."""
    key = catalogue.shape(" ".join(text.split()))[0]
    kept = _KEPT_IN_ENGLISH.get(key) == key
    return bool(catalogue.english_words(text)) and not _CJK.search(text) and not kept


_KEPT_IN_ENGLISH = catalogue.load()


def _english_in_fences(markdown: str) -> list[str]:
    found = []
    for m in _FENCE.finditer(markdown):
        lang = m["lang"].strip(" {}.").split()[0] if m["lang"].strip(" {}.") else ""
        code = "\n".join(line.removeprefix(m["indent"]) for line in m["code"].split("\n"))
        if lang in ("python", "py"):
            found += _english_in_python(code)
        elif lang in ("bash", "sh", "shell", "console"):
            found += [t for t in _SHELL_COMMENT.findall(code) if _english(t)]
    return found


def _ignore(key: str) -> None:
    """A text with no catalogue entry: it stays English, which the caller looks for."""


def _english_code_text() -> list[str]:
    """English comments and docstrings in the code a Chinese reader sees: each example page's
    code cells as the build translates them, the code blocks of the translation files (the home
    page's, the prose's), and the downloadable scripts."""
    texts = catalogue.load()
    found = [  # the code cells (the prose's code blocks are the translation files')
        f"{page.relative_to(catalogue.GENERATED).as_posix()}: {text}"
        for page in catalogue._pages()
        for cell in gallery_format.CODE_BLOCK.finditer(
            catalogue.translate(page.read_text(), texts, _ignore)
        )
        for text in _english_in_python(cell[2])
    ]
    for path in FILES:
        found += [f"{path.relative_to(ROOT)}: {t}" for t in _english_in_fences(path.read_text())]
    for source in sources.SCRIPTS:
        tr = sources.Translation.load(sources.translation_path(source))
        script = catalogue.translate_code(tree.chinese_script(source, tr), texts, _ignore)
        found += [f"{source} (download): {t}" for t in _english_in_python(script, script=True)]
    return found


def test_code_on_the_chinese_pages_speaks_chinese() -> None:
    """No English comment or docstring in the code of a Chinese page or download (the code
    itself, names and the words the field keeps in English aside)."""
    if not catalogue.GENERATED.exists():
        pytest.skip("the English build has not run (nox -s docs)")
    if sources.problems():
        pytest.skip("translations incomplete (see test_every_translation_is_present_and_current)")
    found = _english_code_text()
    assert not found, f"{len(found)} English texts in Chinese code:\n" + "\n".join(found)


def _columns(line: str) -> int:
    """A line's width on screen: a wide (CJK) character takes two columns."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def test_chinese_code_cells_fit_the_page() -> None:
    """The Chinese code cells, comments and docstrings translated, fit the 88 columns the
    English ones do (test_gallery_format.test_code_cells_fit_the_page), a Chinese character
    counted as two: a longer line scrolls sideways in its box."""
    if not catalogue.GENERATED.exists():
        pytest.skip("the English build has not run (nox -s docs)")
    texts = catalogue.load()
    long = [
        f"{page.relative_to(catalogue.GENERATED).as_posix()}: {_columns(line)} columns: {line}"
        for page in catalogue._pages()
        for cell in gallery_format.CODE_BLOCK.finditer(
            catalogue.translate(page.read_text(), texts, _ignore)
        )
        for line in cell[2].splitlines()
        if _columns(line) > 88
    ]
    assert not long, "\n".join(long)


def test_columns_count_chinese_as_two() -> None:
    assert _columns("ab") == 2 and _columns("中文") == 4 and _columns("x = 1  # 注释") == 13


def test_links_to_the_english_reference_say_so() -> None:
    """The API reference exists in English only: a link to it from a Chinese page says so
    right after it, as the nav's "API 参考（英文）" does."""
    unmarked = [
        f"{path.relative_to(sources.I18N)}: {m[0]}"
        for path in sorted(sources.I18N.rglob("*.md"))
        for m in re.finditer(r"\[[^\]]*\]\((?:\.\./)*reference/[^)]*\)(.{0,3})", path.read_text())
        if not m[1].startswith("（英文")
    ]
    assert not unmarked, "\n".join(unmarked)
