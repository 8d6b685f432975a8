"""The two distributions of this repository: ``attnscale`` (the library, alone in its wheel) and
``attnscale-guide`` (the site's figures, tables, studies and stored results, import name
``guide``). The library never imports the guide."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import attnscale
import guide

ROOT = Path(__file__).parents[1]
LIBRARY = ROOT / "src" / "attnscale"
#: The library's wheel stays small: code and py.typed, no stored runs or figures.
MAX_LIBRARY_WHEEL = 300_000
PIP_WHEEL = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w"]


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both wheels, built from this checkout the way a release builds them."""
    out = tmp_path_factory.mktemp("wheels")
    # from a copy of the sources: a checkout's build/ may hold stale files of an earlier build
    src = tmp_path_factory.mktemp("checkout")
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "src", src / "src", ignore=skip)
    shutil.copytree(ROOT / "guide", src / "guide", ignore=skip)
    subprocess.run(
        [*PIP_WHEEL, str(out), str(src), str(src / "guide")],
        check=True,
        capture_output=True,
        timeout=300,
    )
    found = {w.name.split("-")[0]: w for w in out.glob("*.whl")}
    assert set(found) == {"attnscale", "attnscale_guide"}, found
    return found


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def test_library_wheel_holds_the_library_alone(wheels: dict[str, Path]) -> None:
    names = _names(wheels["attnscale"])
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"attnscale"}, tops
    unwanted = [
        n
        for n in names
        if any(w in n for w in ("_docs", "guide", "results/", "studies/", "mplstyle"))
        or n.endswith((".npz", ".json"))
    ]
    assert not unwanted, unwanted
    assert "attnscale/py.typed" in names
    size = wheels["attnscale"].stat().st_size
    assert size < MAX_LIBRARY_WHEEL, f"the attnscale wheel is {size} bytes"


def test_guide_wheel_holds_the_stored_runs_and_the_style(wheels: dict[str, Path]) -> None:
    names = set(_names(wheels["attnscale_guide"]))
    assert "guide/attnscale.mplstyle" in names
    stored = Path(guide.__file__).parent / "results"
    expected = {
        f"guide/{p.relative_to(stored.parent).as_posix()}"
        for p in stored.glob("*/*")
        if p.suffix in {".json", ".npz"}
    }
    assert expected, "no stored run in the checkout"
    assert expected <= names, sorted(expected - names)
    assert not any(n.startswith("attnscale/") for n in names)


def test_guide_is_released_with_the_library_at_its_version() -> None:
    meta = tomllib.loads((ROOT / "guide" / "pyproject.toml").read_text())["project"]
    assert meta["version"] == attnscale.__version__ == guide.__version__
    pins = [d for d in meta["dependencies"] if d.startswith("attnscale")]
    assert pins == [f"attnscale[plot]=={attnscale.__version__}"], pins


def _imported(path: Path) -> set[str]:
    """Top-level names of every module a file imports (relative imports stay in the package)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_library_never_imports_the_guide_or_posix_only_modules() -> None:
    """The guide's helpers (and the file locking of its results tier, POSIX-only ``fcntl``)
    stay out of what ``import attnscale`` can reach."""
    files = sorted(LIBRARY.rglob("*.py"))
    assert len(files) > 10
    found = {
        f"{p.relative_to(ROOT)}: {name}"
        for p in files
        for name in _imported(p) & {"guide", "fcntl"}
    }
    assert not found, sorted(found)


def test_import_attnscale_loads_no_guide_module() -> None:
    code = (
        "import sys, attnscale; print(sorted(m for m in sys.modules if m.split('.')[0] == 'guide'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout
