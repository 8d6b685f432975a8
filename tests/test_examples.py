"""The gallery scripts' shape.

That each one runs is checked where it already runs: `nox -s docs` executes every script and
fails on an error (abort_on_example_error), and `nox -s downloads` runs each one again as the
reader downloads it, as .py and as .ipynb. A fourth run here would only lengthen CI.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
EXAMPLES = sorted([*ROOT.glob("examples/*/plot_*.py"), *ROOT.glob("factcheck/plot_*.py")])


def test_examples_exist():
    assert EXAMPLES, "no gallery scripts found"


def test_example_file_names_are_unique() -> None:
    """mkdocs-gallery names its outputs after the file alone: two scripts of one name in two
    sections break links, and the strict build stops on its warning."""
    names = [p.name for p in EXAMPLES]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_example_has_a_plain_title(script: Path) -> None:
    """The title is a Markdown H1 without math: navigation and cards show it as raw text."""
    text = script.read_text()
    assert text.startswith('r"""'), "the first statement is a raw docstring"
    title = next(line for line in text[4:].splitlines() if line.strip())
    assert title.startswith("# "), f"first docstring line is not a '# ' title: {title!r}"
    assert "$" not in title, f"math in the title: {title!r}"


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_tables_end_their_cell(script: Path) -> None:
    """The gallery shows a cell's value only if it is the cell's last statement: a ``Table(...)``
    anywhere else in a cell would silently not appear on the page."""
    import ast

    cells = re.split(r"^# %%.*$", script.read_text(), flags=re.M)[1:]
    for n, cell in enumerate(cells, start=1):
        body = ast.parse(cell).body
        last = body[-1] if body else None
        for node in ast.walk(ast.Module(body=body, type_ignores=[])):
            is_table = (
                isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "id", None) == "Table"
            )
            assert not is_table or node is last, (
                f"cell {n}: Table(...) at line {node.lineno} is not the cell's last statement"
            )


def test_running_box_names_what_each_script_needs() -> None:
    """The "Running this example" box lists the packages a script imports, directly or through
    the attnscale modules it uses, leaving out optional imports guarded by ImportError."""
    from attnscale_tools import mkdocs_hooks

    needs = mkdocs_hooks.imported_packages
    assert needs(ROOT / "examples/01_variance/plot_01_variance_growth.py") == [
        "attnscale-guide",
        "matplotlib",
        "numpy",
        "torch",
    ]
    assert "transformers" in needs(ROOT / "examples/05_debugging/plot_06_real_architectures.py")
    # through guide.calibration, which trains transformers' GPT-2
    assert "transformers" in needs(ROOT / "examples/05_debugging/plot_09_real_bugs.py")
    assert all("pandas" not in needs(s) for s in EXAMPLES)  # to_dataframe's optional import
