"""Translation files against their English sources: blocks, fingerprints, problems, skeletons."""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from textwrap import dedent
from typing import NamedTuple

from attnscale_tools import ROOT, gallery_format

I18N = ROOT / "i18n" / "zh"
GENERATED = ROOT / "docs" / "generated"
LANG = "zh"

#: Hand-written pages translated as a whole, by source path.
PAGES = [
    "docs/index.md",
    "docs/get-started.md",
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


#: What a problem's kind means, as ``python -m attnscale_tools.i18n check`` prints it.
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
        # By the English text, not the block's place: a block inserted or removed above
        # others leaves their translations in use.
        done = {h: zh for h, zh, todo in tr.blocks.values() if not todo}
        for n, english in enumerate(text_blocks(ROOT / source)):
            h = fingerprint(english)
            if h in done:
                parts.append(f"<!-- block {n} en {h} -->\n\n{done[h]}")
            else:
                parts.append(f"<!-- block {n} en {h} todo -->\n\n{english.strip()}\n")
    for en in dict.fromkeys([*tr.strings, *strings]):
        parts.append(f"<!-- string: {en} -->\n\n{tr.strings.get(en, '')}\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts))
    return path


def generated_page(source: str) -> Path:
    """The Markdown page the English build generated from a gallery script."""
    top, *rest = Path(source).with_suffix(".md").parts
    return GENERATED.joinpath("gallery" if top == "examples" else "factcheck", *rest)


def alt_texts(source: str) -> list[str]:
    """The alt text of every figure on a generated example page, in order."""
    page = generated_page(source)
    return list(
        dict.fromkeys(m["alt"] for m in gallery_format.FIGURE_ALT.finditer(page.read_text()))
    )


def page_strings(source: str) -> list[str]:
    """The strings of a generated page that its translation must cover: the figures' alt text.
    (Tables and printed output go through the catalogue, attnscale_tools.catalogue.)"""
    return alt_texts(source)


class TranslationError(ValueError):
    """A translation that is missing, stale or does not fit its English page."""
