"""Every snippet a reader sees runs as written: the examples in the API reference (the
library's docstrings, and the guide package's) and the code blocks of the README and the
hand-written pages, each in a fresh namespace, as when pasted into a new interpreter. This is the one place the docstrings'
examples run: pytest's ``--doctest-modules`` would share each module's globals, so an example
without its imports would pass there."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import attnscale
import guide

ROOT = Path(__file__).parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs" / "reference").glob("*.md")),
    *sorted((ROOT / "i18n" / "zh" / "docs").glob("*.md")),
]
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)
# the library's modules, and the guide's (its site-only helpers, documented the same way)
MODULES = [
    *(package.__name__ for package in (attnscale, guide)),
    *(
        m.name
        for package in (attnscale, guide)
        for m in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")
        if not m.name.endswith("__main__")
    ),
]


def _docstring_examples() -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder()
    tests = []
    for name in MODULES:
        module = importlib.import_module(name)
        tests += [t for t in finder.find(module, name, globs={}) if t.examples]
    return tests


def _page_blocks() -> list[tuple[str, str]]:
    return [
        (f"{page.relative_to(ROOT)}#{n}", code)
        for page in PAGES
        for n, code in enumerate(BLOCK.findall(page.read_text()))
    ]


def test_there_are_snippets() -> None:
    assert len(_docstring_examples()) >= 30
    assert len(_page_blocks()) >= 4


@pytest.mark.parametrize("test", _docstring_examples(), ids=lambda t: t.name)
def test_api_example_runs_in_a_fresh_interpreter(test: doctest.DocTest) -> None:
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    result = runner.run(test, out=report.append)
    assert not result.failed, "".join(report)


@pytest.mark.parametrize(("where", "code"), _page_blocks(), ids=lambda v: v if "#" in v else "")
def test_page_snippet_runs_as_written(where: str, code: str) -> None:
    exec(compile(code, where, "exec"), {"__name__": "__main__"})
