"""Generated text in Chinese: the cells of result tables, the lines examples print, the
comments of their code, and the text of their figures (figure_copies, redrawn by
zh_figures).

The examples run once, in English; their tables and printed output hold numbers of that run. The
Chinese edition translates them by *shape*: a text with every number replaced by ``{}``.
``"converged in 12 of 20 seeds"`` has the shape ``"converged in {} of {} seeds"``, and the
catalogue maps it to ``"{} 个随机种子中有 {} 个收敛"``; the numbers of the run go back in, in order
(or by position, ``{2}`` for the second). One entry serves every run and every page.

The catalogue is ``i18n/zh/catalogue/*.md``, one file per page (the texts first seen on it),
made of entries::

    <!-- en: converged in {} of {} seeds -->

    {} 个随机种子中有 {} 个收敛

Only texts with English words need an entry: a cell that holds numbers, formulas, code names or
names of models (``arXiv:1706.03762``, ``layers.0.self_attn``, ``GPT-2``) is shown as it is. An
entry whose Chinese is its English keeps a text in English on purpose (a printed source line).

``python -m attnscale_tools.catalogue missing`` lists the shapes on the generated pages that
have no entry, and the entries no page shows any more;
``python -m attnscale_tools.catalogue skeleton`` adds them, empty, to the file of the page they
first appear on.
"""

from __future__ import annotations

import ast
import functools
import html
import io
import re
import sys
import tokenize
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path

from attnscale_tools import ROOT, figure_copies, gallery_format

CATALOGUE = ROOT / "i18n" / "zh" / "catalogue"
GENERATED = ROOT / "docs" / "generated"

# a number, or a hex digest (a code hash, a commit: 7 or more hex digits, letters and digits
# both), which is one value, not a word with numbers in it. A sign is part of its number
# ("+150" and "-150" have one shape, so a run whose number changes sign needs no new entry)
# where it stands before it alone, not after a word or a number ("Gemma-2", "2026-12-02"); so
# are the spaces that pad it to a column's width ("d_k =   16" and "d_k = 256" share a shape).
_DIGITS = r"\d+(?:\.\d+)?(?:e[+-]?\d+)?"
_PADDING = r"(?:(?<= ) +)?"
_NUMBER = re.compile(
    r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b"
    rf"|{_PADDING}(?<![\w.)}}\]])[-+\u2212]?{_DIGITS}|{_DIGITS}|{_PADDING}[-+]?\b(?:inf|nan)\b"
)
_SLOT = re.compile(r"\{(\d*)\}")
_ENTRY = re.compile(r"^<!-- en: (?P<en>.*?) -->[ \t]*$", re.M)

# Words that stay in English on Chinese pages: terms the field does not translate (the reader's
# glossary page lists them), units, function names used as words, and projects named in
# lowercase. A text needs a translation when it has an English word outside them.
KEPT = {
    *("softmax", "logit", "logits", "argmax", "sigmoid", "tanh", "bootstrap", "bug", "bugs"),
    *("nats", "nat", "ms", "arxiv", "dtype", "inf", "nan", "cpu", "gpu", "eager", "sdpa"),
    *("cos", "exp", "log", "ln", "lr", "et", "al"),
    *("torch", "transformers", "attnscale", "numpy", "matplotlib", "sglang", "mlc-llm"),
    *("ultralytics", "flash-attention", "x-transformers", "lm-evaluation-harness"),
    *("huggingface", "flashinfer", "flashinfer-ai", "vs", "z-loss", "cntkx", "torchtitan"),
    *("sentence-transformers",),
}
# Code and names: dotted or snake_case identifiers, CamelCase, words with digits, code spans,
# URLs, and the monitor's name for a call outside every module.
_CODE = re.compile(
    r"[A-Za-z_][\w]*(?:[._][\w]+)+|\b[A-Z][a-z]*[A-Z]\w*|\b\w*\d\w*\b|`[^`]*`|https?://\S+"
    r"|<top level>"
)
_WORD = re.compile(r"\b[a-z][a-z'-]*[a-z]\b")
# A capitalised word joined by a hyphen (QK-Clip, Muon-Clip) is part of a name: not English.
_CAPITALISED = re.compile(r"(?<![\w-])[A-Z][a-z]+\b")


@functools.cache
def _vocabulary() -> frozenset[str]:
    """The words the English pages' prose writes in lowercase and never capitalised inside a
    sentence: a capitalised one of them (Claim, Verdict) is English, not a name (Llama)."""
    words: set[str] = set()
    names: set[str] = set()  # capitalised inside a sentence: Llama, Falcon
    for page in GENERATED.glob("*/**/plot_*.md"):
        prose = _CODE.sub(" ", re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M))
        words.update(_WORD.findall(prose))
        names.update(m.lower() for m in re.findall(r"(?:\b[a-z]+|[,;(])\s+([A-Z][a-z]+)\b", prose))
    return frozenset(words - KEPT - names)


def english_words(text: str) -> list[str]:
    """The English words of ``text`` a Chinese reader would have to read as English."""
    rest = _CODE.sub(" ", text)
    found = [w for w in _WORD.findall(rest) if w.lower() not in KEPT]
    return found + [w for w in _CAPITALISED.findall(rest) if w.lower() in _vocabulary()]


def shape(text: str) -> tuple[str, list[str]]:
    """The text with each number as ``{}``, and the numbers."""
    return _NUMBER.sub("{}", text), _NUMBER.findall(text)


def fill(template: str, numbers: list[str]) -> str:
    """A Chinese template with the run's numbers put back."""
    counter = iter(range(len(numbers)))

    def slot(m: re.Match[str]) -> str:
        i = int(m[1]) - 1 if m[1] else next(counter)
        return numbers[i]

    return _SLOT.sub(slot, template)


def load(folder: Path = CATALOGUE) -> dict[str, str]:
    """Every entry of the catalogue: English shape -> Chinese template."""
    found: dict[str, str] = {}
    for path in sorted(folder.glob("*.md")):
        text = path.read_text()
        marks = list(_ENTRY.finditer(text))
        for mark, after in zip(marks, [*marks[1:], None], strict=True):
            zh = text[mark.end() : after.start() if after else len(text)].strip()
            en = mark["en"]
            if en in found and found[en] != zh and zh:
                raise ValueError(f"{path.name}: {en!r} is translated twice, differently")
            if zh or en not in found:
                found[en] = zh
            if zh and len(_SLOT.findall(zh)) != en.count("{}"):
                raise ValueError(f"{path.name}: {en!r} has {en.count('{}')} numbers, {zh!r} not")
    return found


# Where generated text lives on a gallery page: table cells (HTML-escaped) and the lines of
# printed output.
_CELL = re.compile(r"(<t[hd]>(?:<a [^>]*>)?)(.*?)((?:</a>)?</t[hd]>)", re.S)


_LABELLED = re.compile(r"[\w .()/-]{1,32}: ")


def _units(block: str) -> list[tuple[str, str, str | None]]:
    """The printed lines of an output block, the lines of a wrapped paragraph joined, as
    (indentation, text, indentation of its continuation lines; None for one line). A line
    continues the one before when that one is long (a wrap at 80 to 100 columns), neither is a
    row of an aligned table (runs of spaces inside), and it is indented under the first line
    or starts in lowercase."""
    units: list[tuple[str, str, str | None]] = []
    wrapped = False  # the line before was long prose: the next may continue it
    for line in block.split("\n"):
        indent, text = line[: len(line) - len(line.lstrip())], line.strip()
        prose = "  " not in text
        # a continuation is indented under its first line, or goes on mid-sentence (not a
        # "label: value" line, nor code)
        line_of_its_own = _LABELLED.match(text) or " = " in text
        goes_on = units and (
            len(indent) > len(units[-1][0]) or (text[:1].islower() and not line_of_its_own)
        )
        if text and prose and wrapped and goes_on:
            first, joined, cont = units[-1]
            units[-1] = (first, f"{joined} {text}", cont if cont is not None else indent)
        else:
            units.append((indent, text, None))
        wrapped = prose and 60 <= len(line) <= 100
    return units


def _printed(block: str, units: list[tuple[str, str, str | None]]) -> list[str]:
    """Each unit's lines as printed."""
    lines, found = block.split("\n"), []
    i = 0
    for _, text, cont in units:
        n = 1
        if cont is not None:  # as many lines as it takes to rebuild the text
            while " ".join(x.strip() for x in lines[i : i + n]) != text and i + n < len(lines):
                n += 1
        found.append("\n".join(lines[i : i + n]))
        i += n
    return found


_DIRECTIVE = re.compile(r"(noqa|type:|pragma|fmt:|ruff:|%%)")


def comments(code: str) -> list[tuple[int, int, int, str]]:
    """The comments of some Python code, as (first line, last line, column, text): the lines
    of a comment block (comment-only lines at one column) joined; a comment after code on
    its line is one of its own, its column given as -column - 1. Tool directives (noqa, type: ignore) and the text cells of a
    gallery script (the comment lines after ``# %%``, translated as blocks) are left out."""
    found: list[tuple[int, int, int, str]] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return found
    lines = code.split("\n")
    prose = False  # in a text cell of a gallery script: the comment lines after "# %%"
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            if tok.type not in (tokenize.NL, tokenize.NEWLINE) or not tok.line.strip():
                prose = False  # code, or a blank line, ends a text cell
            continue
        row, col = tok.start
        text = tok.string.lstrip("#").strip()
        if text.startswith("%%"):
            prose = True
        if prose or not text or _DIRECTIVE.match(text):
            continue
        alone = not lines[row - 1][:col].strip()
        last = found[-1] if found else None
        if alone and last and last[1] == row - 1 and last[2] == col and last[2] >= 0:
            found[-1] = (last[0], row, col, f"{last[3]} {text}")
        else:
            found.append((row, row, col if alone else -col - 1, text))
    return found


#: The widest line of a code cell: the page's code box at a 1280-px-wide window (a CJK
#: character takes two columns).
CODE_WIDTH = 88


def docstrings(code: str) -> list[tuple[int, int, int, int, str]]:
    """The documentation strings of some Python code: string-only statements (the docstrings
    of functions and classes, a bare string between statements), as (first line, its column,
    last line, the column after it, text with its whitespace runs as one space). f-strings and
    bytes are code. A string on line 1 at column 0 is a whole script's module docstring: its
    gallery page's text, translated as a block (as the text cells ``comments`` leaves out)."""
    found: list[tuple[int, int, int, int, str]] = []
    try:
        tokens = [
            t
            for t in tokenize.generate_tokens(io.StringIO(code).readline)
            if t.type not in (tokenize.NL, tokenize.COMMENT)
        ]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return found
    starts = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
    for before, tok, after in zip([None, *tokens], tokens, [*tokens[1:], None], strict=False):
        if tok.type != tokenize.STRING or set(_prefix(tok.string).lower()) & {"f", "b"}:
            continue
        alone = (before is None or before.type in starts) and (
            after is None or after.type in (tokenize.NEWLINE, tokenize.ENDMARKER)
        )
        if alone and tok.start != (1, 0):
            text = " ".join(ast.literal_eval(tok.string).split())
            found.append((*tok.start, *tok.end, text))
    return found


def _prefix(literal: str) -> str:
    return re.match(r"[A-Za-z]*", literal)[0]  # type: ignore[index]


def _docstring_lines(lines: list[str], zh: str, where: tuple[int, int, int, int]) -> None:
    """Replace a docstring's text (at ``where``, as ``docstrings`` gives it) with ``zh``: the
    same prefix and quotes (triple ones where it takes more than a line), wrapped within
    CODE_WIDTH, its further lines at the indentation of its first."""
    first, col, last, end = where
    head, tail = lines[first - 1][:col], lines[last - 1][end:]
    joined = "\n".join(lines[first - 1 : last])
    literal = joined[col : len(joined) - len(tail)]
    prefix = _prefix(literal)
    quote = literal[len(prefix) : len(prefix) + 3]
    quote = quote if quote in ('"""', "'''") else quote[0]
    body = zh if "r" in prefix.lower() else zh.replace("\\", "\\\\")
    indent = " " * (len(head) - len(head.lstrip()))
    for q in dict.fromkeys([quote, quote[0] * 3]):
        # room for the closing quotes, and for a full-width mark wrap() lets hang past the width
        text = wrap(body, head + prefix + q, indent, CODE_WIDTH - len(q) - 2 - _width(tail))
        if "\n" not in text or len(q) == 3:
            break
    new = text[len(head) :] + q
    try:
        same = "".join(ast.literal_eval(new).split()) == "".join(zh.split())
    except (SyntaxError, ValueError):
        same = False
    if not same:
        raise ValueError(f"the translation {zh!r} makes no string literal as {literal!r}")
    lines[first - 1 : last] = (head + new + tail).split("\n")


def _comment_lines(lines: list[str], zh: str, where: tuple[int, int, int]) -> None:
    """Replace a comment (at ``where``, as ``comments`` gives it) with ``zh``."""
    first, last, col = where
    if col < 0:  # after code: the comment's text replaced in place
        at = -col - 1
        lines[first - 1] = lines[first - 1][:at] + "# " + zh
    else:
        # a block re-wrapped as wide as the English one was (at least 40 columns of text)
        pad = " " * col + "# "
        width = max(max(_width(x) for x in lines[first - 1 : last]), col + 40)
        lines[first - 1 : last] = wrap(zh, pad, pad, width).split("\n")


def translate_code(code: str, catalogue: dict[str, str], missing: Callable[[str], None]) -> str:
    """The code with its English comments and docstrings in Chinese; the code itself
    untouched."""
    lines = code.split("\n")
    edits: list[tuple[tuple[int, int], str, Callable[[list[str], str], None]]] = [
        ((first, abs(col)), text, functools.partial(_comment_lines, where=(first, last, col)))
        for first, last, col, text in comments(code)
    ]
    edits += [
        ((first, col), text, functools.partial(_docstring_lines, where=(first, col, last, end)))
        for first, col, last, end, text in docstrings(code)
    ]
    # from the end back, so that a text re-wrapped to more or fewer lines moves none still to do
    for _, text, edit in sorted(edits, key=lambda e: e[0], reverse=True):
        if not english_words(text):
            continue
        key, numbers = shape(text)
        zh = catalogue.get(key)
        if not zh:
            missing(key)
            continue
        edit(lines, fill(zh, numbers))
    return "\n".join(lines)


def texts(markdown: str) -> list[str]:
    """The generated texts of a page that need a translation, in order."""
    found = [html.unescape(m[2]) for m in _CELL.finditer(markdown)]
    for m in gallery_format.OUTPUT_BLOCK.finditer(markdown):
        found += [text for _, text, _ in _units(m[2])]
    for m in gallery_format.CODE_BLOCK.finditer(markdown):
        found += [text for *_, text in comments(m[2])]
        found += [text for *_, text in docstrings(m[2])]
    return [t for t in found if english_words(t)]


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


# a run of anything but spaces and CJK characters and punctuation: a word, a number, a formula
_UNBROKEN = re.compile(r"[^\s\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]+|\s+|.")


def wrap(text: str, indent: str, cont: str, width: int = 80) -> str:
    """Chinese text wrapped at ``width`` columns (a CJK character takes two), never inside a
    Latin word or formula (``1/√head_dim``), nor before closing punctuation."""
    lines, line = [], indent
    for tok in re.findall(_UNBROKEN, text):
        if tok.isspace():
            line += " " if line.strip() else ""
            continue
        if _width(line + tok) > width and line.strip() and tok[0] not in "，。：；、）」":
            lines.append(line.rstrip())
            line = cont
        line += tok
    return "\n".join([*lines, line.rstrip()])


def translate(markdown: str, catalogue: dict[str, str], missing: Callable[[str], None]) -> str:
    """The page with its table cells and printed lines in Chinese; ``missing`` is called with
    the shape of every text that needs an entry and has none."""

    def one(text: str) -> str:
        if not english_words(text):
            return text
        key, numbers = shape(text)
        zh = catalogue.get(key)
        if not zh:
            missing(key)
            return text
        return fill(zh, numbers)

    def cell(m: re.Match[str]) -> str:
        return m[1] + html.escape(one(html.unescape(m[2])), quote=False) + m[3]

    def output(m: re.Match[str]) -> str:
        lines: list[str] = []
        units = _units(m[2])
        for (indent, text, cont), printed in zip(units, _printed(m[2], units), strict=True):
            zh = one(text)
            if cont is None:
                lines.append(indent + zh)
            elif zh == text:  # kept in English (code): the lines as printed
                lines.append(printed)
            else:
                lines.append(wrap(zh, indent, cont))
        return m[1] + "\n".join(lines) + m[3]

    def code(m: re.Match[str]) -> str:
        return m[1] + translate_code(m[2], catalogue, missing) + m[3]

    return gallery_format.CODE_BLOCK.sub(
        code, gallery_format.OUTPUT_BLOCK.sub(output, _CELL.sub(cell, markdown))
    )


def _pages() -> list[Path]:
    return sorted(GENERATED.glob("*/**/plot_*.md"))


def missing_by_page() -> dict[str, list[str]]:
    """The shapes with no entry, by the page they first appear on (its file name)."""
    catalogue, seen = load(), set()
    found: dict[str, list[str]] = {}
    for page, text in _all_texts():
        key = shape(text)[0]
        if not catalogue.get(key) and key not in seen:
            seen.add(key)
            found.setdefault(page, []).append(key)
    return found


def _all_texts() -> Iterator[tuple[str, str]]:
    """Every text of the generated pages and their figures that needs an entry, with its page."""
    for page in _pages():
        for text in texts(page.read_text()):
            yield page.stem, text
    for copy, image in figure_copies.copies():
        found = gallery_format.IMAGE.fullmatch(image.name)
        name = found["script"] if found else image.stem
        for text in figure_texts(copy):
            yield name, text


_MATH = re.compile(r"\$[^$]*\$")


def english_outside_math(text: str) -> bool:
    """Whether a figure text has English words outside its math (a log axis's tick labels are
    ``$\\mathdefault{10^{3}}$``: math only)."""
    return bool(english_words(_MATH.sub(" ", text)))


def figure_texts(copy: Path) -> list[str]:
    """The lines of a kept figure's texts that need an entry (an entry is one line)."""
    return [line for line in figure_copies.lines(copy) if english_outside_math(line)]


# A format spec that prints a number: the width and precision vary, the text around does not.
_NUMERIC_SPEC = re.compile(r"[-+ ]?#?0?\d*_?(?:\.\d+)?[eEfFgGdn%]")


def _rendered(node: ast.JoinedStr) -> str | None:
    """An f-string with each number it formats rendered as ``0`` (``0%`` for a percentage);
    None where it formats anything but numbers (its text is then not known in advance)."""
    out = []
    for part in node.values:
        if isinstance(part, ast.Constant):
            out.append(str(part.value))
            continue
        spec = part.format_spec  # type: ignore[attr-defined]
        values = spec.values if isinstance(spec, ast.JoinedStr) else []
        if not values or not all(isinstance(v, ast.Constant) for v in values):
            return None
        text = "".join(str(v.value) for v in values)  # type: ignore[attr-defined]
        if not _NUMERIC_SPEC.fullmatch(text):
            return None
        out.append("0%" if text.endswith("%") else "0")
    return "".join(out)


def formatted_texts(source: Path) -> Iterator[tuple[int, str]]:
    """The texts a gallery script can print whole, whichever branch a run takes: f-strings that
    format only numbers and stand as an item of a list (a table row), as ``print``'s one
    argument or as what a function returns, and both arms of a conditional there. Yields
    (line, text with its numbers as 0)."""
    tree = ast.parse(source.read_text())
    for node in ast.walk(tree):
        items: list[ast.expr] = []
        if isinstance(node, ast.List):
            items = list(node.elts)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "print"
            and len(node.args) == 1
        ):
            items = [node.args[0]]
        elif isinstance(node, ast.Return) and node.value is not None:
            items = [node.value]  # a helper that makes a cell
        while items:
            item = items.pop()
            if isinstance(item, ast.IfExp):
                items += [item.body, item.orelse]
                for arm in (item.body, item.orelse):  # a fixed text one run may not print
                    text = arm.value if isinstance(arm, ast.Constant) else None
                    if isinstance(text, str) and english_words(text):
                        yield arm.lineno, text.strip()
            elif isinstance(item, ast.JoinedStr):
                text = _rendered(item)
                if text is not None and "\n" not in text and english_words(text):
                    yield item.lineno, text.strip()


def unprinted_shapes(sources: list[Path]) -> list[str]:
    """The shapes the scripts' format strings can print that the catalogue lacks, not even as
    part of a longer entry (a printed line joined to the one before)."""
    known = load()
    found = []
    for source in sources:
        for line, text in formatted_texts(source):
            key = shape(text)[0]
            if not known.get(key) and not any(key in k for k, zh in known.items() if zh):
                found.append(f"{source.name}:{line}: {key}")
    return found


def scripts() -> list[Path]:
    """The gallery scripts, guide and fact-check."""
    return sorted([*ROOT.glob("examples/*/plot_*.py"), *ROOT.glob("factcheck/plot_*.py")])


def unused() -> list[str]:
    """The catalogue's entries no generated page shows any more (their English changed), and
    no script's format strings can print (a branch this build did not take)."""
    shown = {shape(text)[0] for _, text in _all_texts()}
    shown |= {shape(text)[0] for source in scripts() for _, text in formatted_texts(source)}
    return [key for key in load() if key not in shown]


def main(argv: list[str]) -> int:
    if argv[:1] == ["missing"]:
        found = missing_by_page()
        for page, keys in found.items():
            print(f"{page}: {len(keys)}")
            print("".join(f"  {k}\n" for k in keys), end="")
        stale = unused()
        if stale:
            print(f"no longer on any page: {len(stale)}")
            print("".join(f"  {k}\n" for k in stale), end="")
        return 1 if found or stale else 0
    if argv[:1] == ["skeleton"]:
        CATALOGUE.mkdir(parents=True, exist_ok=True)
        for page, keys in missing_by_page().items():
            path = CATALOGUE / f"{page}.md"
            old = path.read_text() if path.exists() else ""
            present = {m["en"] for m in _ENTRY.finditer(old)}
            new = "".join(f"<!-- en: {k} -->\n\n\n" for k in keys if k not in present)
            path.write_text(old + ("\n" if old and new else "") + new)
            print(path.relative_to(ROOT))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
