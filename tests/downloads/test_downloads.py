"""What a reader downloads from the built site runs: every .py and every .ipynb.

Run by ``nox -s downloads`` in a fresh environment holding the attnscale wheel (with its
runtime dependencies) plus the notebook runner, never the source tree.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbclient
import nbformat
import pytest

SITE = Path(__file__).parents[2] / "site"
SCRIPTS = sorted(SITE.glob("generated/**/plot_*.py"))
NOTEBOOKS = sorted(SITE.glob("generated/**/plot_*.ipynb"))


def _id(path: Path) -> str:
    return path.relative_to(SITE / "generated").as_posix()


def test_site_offers_downloads():
    if not SITE.exists():
        pytest.fail("site/ is not built: run `nox -s docs` first")
    assert SCRIPTS and NOTEBOOKS
    assert {p.stem for p in SCRIPTS} == {p.stem for p in NOTEBOOKS}


def test_attnscale_comes_from_the_installed_wheel():
    import attnscale

    assert "site-packages" in Path(attnscale.__file__).parts, attnscale.__file__


@pytest.mark.parametrize("script", SCRIPTS, ids=_id)
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


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=_id)
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
