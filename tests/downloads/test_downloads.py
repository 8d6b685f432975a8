"""What a reader downloads from the built site runs: every .py and every .ipynb.

Run by ``nox -s downloads`` in a fresh environment holding the two wheels the site offers,
attnscale's and the guide's (with their runtime dependencies), plus the notebook runner, never
the source tree.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# installed by nox -s downloads, which runs these tests: without them, they are skipped
nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

SITE = Path(__file__).parents[2] / "site"
SCRIPTS = sorted(SITE.glob("generated/**/plot_*.py"))
NOTEBOOKS = sorted(SITE.glob("generated/**/plot_*.ipynb"))
# The Chinese edition's downloads: the English code with Chinese prose.
ZH = SITE / "zh"
ZH_SCRIPTS = sorted(ZH.glob("generated/**/plot_*.py"))
ZH_NOTEBOOKS = sorted(ZH.glob("generated/**/plot_*.ipynb"))
# One of them runs for real (the others carry the same code, checked below): the quickest.
ZH_RUN = "generated/gallery/02_softmax/plot_01_shift_vs_scale"


def _id(path: Path) -> str:
    return path.relative_to(SITE).as_posix()


def test_site_offers_downloads():
    if not SITE.exists():
        pytest.fail("site/ is not built: run `nox -s docs` first")
    assert SCRIPTS and NOTEBOOKS
    assert {p.stem for p in SCRIPTS} == {p.stem for p in NOTEBOOKS}


def test_chinese_edition_offers_the_same_downloads():
    english = {p.relative_to(SITE) for p in SCRIPTS + NOTEBOOKS}
    chinese = {p.relative_to(ZH) for p in ZH_SCRIPTS + ZH_NOTEBOOKS}
    assert english and chinese == english


def _what_runs(source: str) -> ast.Module:
    """The parsed code with the text of its string-only statements blanked: the Chinese edition
    translates docstrings, as it translates comments, and neither runs."""
    module = ast.parse(source)
    for node in ast.walk(module):
        value = node.value if isinstance(node, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            value.value = ""
    return module


def _code(script: Path) -> str:
    """The code of a gallery script: everything but its docstring and comments."""
    return ast.dump(ast.Module(_what_runs(script.read_text()).body[1:], []))


@pytest.mark.parametrize("script", ZH_SCRIPTS, ids=lambda p: p.relative_to(ZH).as_posix())
def test_chinese_script_is_the_english_code(script: Path) -> None:
    text = script.read_text()
    assert re.search("[\u4e00-\u9fff]", text), "no Chinese text in the Chinese download"
    assert _code(script) == _code(SITE / script.relative_to(ZH))


def _code_cells(notebook: Path) -> list[str]:
    """The code of each code cell, comments and docstrings aside (the Chinese edition translates them);
    IPython magics (%matplotlib inline) are left out, being no Python."""
    nb = nbformat.read(notebook, as_version=nbformat.NO_CONVERT)
    nbformat.validate(nb)
    cells = [c.source for c in nb.cells if c.cell_type == "code"]
    return [
        ast.dump(_what_runs("\n".join(x for x in c.splitlines() if not x.startswith("%"))))
        for c in cells
    ]


@pytest.mark.parametrize("notebook", ZH_NOTEBOOKS, ids=lambda p: p.relative_to(ZH).as_posix())
def test_chinese_notebook_is_the_english_code(notebook: Path) -> None:
    assert re.search("[\u4e00-\u9fff]", notebook.read_text(encoding="utf-8"))
    assert _code_cells(notebook) == _code_cells(SITE / notebook.relative_to(ZH))


def test_site_offers_the_two_wheels():
    names = sorted(w.name.split("-")[0] for w in SITE.glob("downloads/*.whl"))
    assert names == ["attnscale", "attnscale_guide"], names


@pytest.mark.parametrize("package", ["attnscale", "guide"])
def test_package_comes_from_the_installed_wheel(package: str) -> None:
    module = __import__(package)
    assert "site-packages" in Path(module.__file__).parts, module.__file__


@pytest.mark.parametrize("script", [*SCRIPTS, ZH / f"{ZH_RUN}.py"], ids=_id)
def test_script_runs(script: Path, tmp_path: Path) -> None:
    env = os.environ | {"MPLBACKEND": "Agg", "MPLCONFIGDIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]


@pytest.mark.parametrize("notebook", [*NOTEBOOKS, ZH / f"{ZH_RUN}.ipynb"], ids=_id)
def test_notebook_runs(notebook: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = nbformat.read(notebook, as_version=nbformat.NO_CONVERT)
    assert nb.nbformat == 4
    nbformat.validate(nb)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path))
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors
