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
- ``<!-- string: ENGLISH -->``: one string of a generated page (a figure's alt text, a table cell),
  keyed by the English exactly as the English page shows it.

A block or page whose English changed since it was translated is *stale*; ``todo`` after the
hash marks a block not yet translated. ``python tools/i18n.py check`` lists both, and
``python tools/i18n.py skeleton SOURCE...`` writes or refreshes translation files, keeping every
entry that is still current.
"""

from __future__ import annotations

import ast
import hashlib
import html
import json
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from textwrap import dedent

ROOT = Path(__file__).resolve().parent.parent
I18N = ROOT / "i18n" / "zh"
GENERATED = ROOT / "docs" / "generated"
LANG = "zh"

#: Hand-written pages translated as a whole, by source path.
PAGES = [
    "docs/index.md",
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
# The gallery's cell separator and the comment lines that form a text cell (its own pattern).
_CELL = re.compile(r"(?P<header_line>^#{20,}.*|^# ?%%.*)\s(?P<text_content>(?:^#.*\s?)*)", re.M)


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
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)):
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
    for match in _CELL.finditer(rest):
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


def problems() -> list[str]:
    """Every missing, untranslated or stale entry, one line each (empty when all is current)."""
    found = []
    for source in SCRIPTS:
        tr = Translation.load(translation_path(source))
        rel = tr.path.relative_to(ROOT)
        if not tr.path.exists():
            found.append(f"{rel}: missing (translates {source})")
            continue
        english = text_blocks(ROOT / source)
        for n, text in enumerate(english):
            if n not in tr.blocks:
                found.append(f"{rel}: block {n} missing")
            elif tr.blocks[n][2]:
                found.append(f"{rel}: block {n} not translated yet (todo)")
            elif tr.blocks[n][0] != fingerprint(text):
                found.append(f"{rel}: block {n} stale: its English changed")
        found += [f"{rel}: block {n} has no English block" for n in tr.blocks if n >= len(english)]
    for source in PAGES:
        tr = Translation.load(translation_path(source))
        rel = tr.path.relative_to(ROOT)
        if tr.page is None:
            found.append(f"{rel}: missing (translates {source})")
        elif tr.page[2]:
            found.append(f"{rel}: not translated yet (todo)")
        elif tr.page[0] != fingerprint((ROOT / source).read_text()):
            found.append(f"{rel}: stale: {source} changed")
    return found


def skeleton(source: str, strings: list[str] = ()) -> Path:
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


_ALT = re.compile(r"!\[(?P<alt>[^\]]*)\]\(\./images/")


def generated_page(source: str) -> Path:
    """The Markdown page the English build generated from a gallery script."""
    top, *rest = Path(source).with_suffix(".md").parts
    return GENERATED.joinpath("gallery" if top == "examples" else "factcheck", *rest)


def alt_texts(source: str) -> list[str]:
    """The alt text of every figure on a generated example page, in order."""
    page = generated_page(source)
    return list(dict.fromkeys(m["alt"] for m in _ALT.finditer(page.read_text())))


_TABLE = re.compile(r"<table>.*?</table>", re.S)
_CELL_TEXT = re.compile(r"<t([hd])>(?:<a [^>]*>)?(.*?)(?:</a>)?</t[hd]>", re.S)
#: Table columns whose cells are measured output, shared by both languages untranslated.
MEASURED_COLUMNS = {"§", "What was measured"}


def table_texts(source: str) -> list[str]:
    """The translatable cells of the HTML tables on a generated page (headers included)."""
    found = []
    for table in _TABLE.findall(generated_page(source).read_text()):
        cells = _CELL_TEXT.findall(table)
        headers = [text for kind, text in cells if kind == "h"]
        body = [text for kind, text in cells if kind == "d"]
        found += [h for h in headers if h not in MEASURED_COLUMNS]
        found += [
            text
            for i, text in enumerate(body)
            if headers[i % len(headers)] not in MEASURED_COLUMNS
        ]
    return list(dict.fromkeys(found))


def main(argv: list[str]) -> int:
    if argv[:1] == ["check"]:
        found = problems()
        print("\n".join(found) or "every translation is current")
        return 1 if found else 0
    if argv[:1] == ["skeleton"]:
        for source in argv[1:] or [*SCRIPTS, *PAGES]:
            strings = []
            if source in SCRIPTS:
                strings = alt_texts(source) + (table_texts(source) if "factcheck" in source else [])
            print(skeleton(source, strings).relative_to(ROOT))
        return 0
    print(__doc__)
    print("usage: python tools/i18n.py check | skeleton [SOURCE ...]")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
