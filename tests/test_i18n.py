"""The Chinese edition: every translation present and current, its downloads the English code,
its terms the glossary's, and its navigation the English one's."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import i18n  # noqa: E402

GLOSSARY = i18n.I18N / "glossary.md"
FILES = sorted(i18n.translation_path(s) for s in [*i18n.SCRIPTS, *i18n.PAGES])


def test_every_translation_is_present_and_current():
    found = i18n.problems()
    assert not found, "run `python tools/i18n.py skeleton` and translate:\n" + "\n".join(found)


def _mini_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """One gallery script and one page, translated, in a tree of their own."""
    script = tmp_path / "examples" / "01_a" / "plot_01_a.py"
    script.parent.mkdir(parents=True)
    script.write_text('r"""\n# Title\n\nIntro.\n"""\n\n# %%\n# ## Step\n#\n# Text.\n\nx = 1\n')
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n")
    monkeypatch.setattr(i18n, "ROOT", tmp_path)
    monkeypatch.setattr(i18n, "I18N", tmp_path / "i18n" / "zh")
    monkeypatch.setattr(i18n, "SCRIPTS", ["examples/01_a/plot_01_a.py"])
    monkeypatch.setattr(i18n, "PAGES", ["docs/index.md"])
    for source in [*i18n.SCRIPTS, *i18n.PAGES]:
        path = i18n.skeleton(source)
        path.write_text(path.read_text().replace(" todo -->", " -->"))
    return script


def test_changed_english_makes_its_block_stale(tmp_path, monkeypatch):
    script = _mini_project(tmp_path, monkeypatch)
    assert i18n.problems() == []
    script.write_text(script.read_text().replace("# Text.", "# Other text."))
    (tmp_path / "docs" / "index.md").write_text("# Home, edited\n")
    assert i18n.problems() == [
        "i18n/zh/examples/01_a/plot_01_a.md: block 1 stale: its English changed",
        "i18n/zh/docs/index.md: stale: docs/index.md changed",
    ]


def test_missing_and_untranslated_entries_are_reported(tmp_path, monkeypatch):
    script = _mini_project(tmp_path, monkeypatch)
    script.write_text(script.read_text() + "\n# %%\n# A new cell.\n\ny = 2\n")
    i18n.translation_path("docs/index.md").unlink()
    assert i18n.problems() == [
        "i18n/zh/examples/01_a/plot_01_a.md: block 2 missing",
        "i18n/zh/docs/index.md: missing (translates docs/index.md)",
    ]
    i18n.skeleton("examples/01_a/plot_01_a.py")  # keeps blocks 0 and 1, adds 2 as todo
    assert (
        i18n.problems()[0]
        == "i18n/zh/examples/01_a/plot_01_a.md: block 2 not translated yet (todo)"
    )


@pytest.mark.parametrize("source", i18n.SCRIPTS)
def test_chinese_download_runs_the_english_code(source: str, tmp_path: Path) -> None:
    """The Chinese .py differs from the English one in its prose only: same code, same run."""
    if i18n.problems():
        pytest.skip("translations incomplete (see test_every_translation_is_present_and_current)")
    tr = i18n.Translation.load(i18n.translation_path(source))
    chinese = i18n.chinese_script(source, tr)
    english = (ROOT / source).read_text()
    code = [ast.dump(ast.Module(ast.parse(t).body[1:], [])) for t in (english, chinese)]
    assert code[0] == code[1]
    copy = tmp_path / Path(source).name
    copy.write_text(chinese)
    zh = [tr.blocks[n][1].strip() for n in sorted(tr.blocks)]
    assert [b.strip() for b in i18n.text_blocks(copy)] == zh


# --- terms ---------------------------------------------------------------------------------------


TERMS = i18n.glossary()


def _chinese_text(path: Path) -> str:
    """The Chinese of a translation file: markers, code and math removed."""
    tr = i18n.Translation.load(path)
    parts = [zh for _, zh, _ in tr.blocks.values()] + list(tr.strings.values())
    parts += [tr.page[1]] if tr.page else []
    text = "\n".join(parts)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]*\$|\\\(.*?\\\)|`[^`\n]*`", "", text, flags=re.S)
    return re.sub(r"\]\([^)]*\)", "]", text)


def test_glossary_is_well_formed():
    assert len(TERMS) >= 30
    english = [en for _, en, _, _ in TERMS]
    assert len(english) == len(set(english)), "an English term appears twice"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(i18n.I18N).as_posix())
def test_pages_use_the_glossary(path: Path) -> None:
    text = _chinese_text(path)
    wrong = [f"{a} (use {zh})" for zh, _, _, avoid in TERMS for a in avoid if a in text]
    assert not wrong, f"translations the glossary rules out: {wrong}"
    # An English term glossed in parentheses is glossed after its one Chinese translation.
    glossed = {en.lower(): zh for zh, en, _, _ in TERMS}
    for m in re.finditer(r"([\u4e00-\u9fff\w -]{0,20}?) ?[（(]([A-Za-z][A-Za-z -]*)[）)]", text):
        zh = glossed.get(m[2].lower())
        if zh is not None and not m[1].rstrip().endswith(zh):
            wrong.append(f"{m[0]!r}: the glossary says {zh}（{m[2]}）")
    assert not wrong, f"terms glossed with another translation: {wrong}"


def _body(text: str) -> str:
    """Text without headings, where a gloss would clutter a title."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(i18n.I18N).as_posix())
def test_terms_are_glossed_at_first_use(path: Path) -> None:
    text = _body(_chinese_text(path))
    missing = []
    for zh, en, gloss, _ in TERMS:
        if not gloss:
            continue
        # Skip occurrences inside a longer glossary term (掩码 in 填充掩码).
        covered = [
            k.span()
            for z, *_ in TERMS
            if zh in z and z != zh
            for k in re.finditer(re.escape(z), text)
        ]
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
    """Every all-Chinese glossary term goes to jieba with a frequency that keeps it whole."""
    path = tmp_path / "jieba_user.txt"
    i18n.write_jieba_dictionary(path)
    entries = dict(line.split() for line in path.read_text().splitlines())
    chinese = {zh for zh, *_ in TERMS if re.fullmatch(r"[\u4e00-\u9fff]+", zh)}
    assert set(entries) == chinese and {"缩放", "雅可比矩阵", "注意力汇聚点"} <= chinese
    assert all(int(f) >= 10**6 for f in entries.values())
