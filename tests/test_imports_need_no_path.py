"""Every module of the repository imports what it needs from an installed distribution (the
library, ``guide``, the build's ``attnscale_tools``), never by putting a folder on ``sys.path``:
a path added at import time makes a module's imports depend on who imported it first, and hides
a package that is not installed where it runs."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Folders that hold no source of ours: environments, caches and build outputs (docs/generated
#: holds the gallery's copies of the examples).
OUTPUTS = {"node_modules", "site", "build", "dist", "__pycache__", ROOT / "docs" / "generated"}


def python_files(root: Path = ROOT) -> Iterator[Path]:
    for folder, subfolders, files in os.walk(root):
        here = Path(folder)
        subfolders[:] = [
            d
            for d in subfolders
            if not d.startswith(".") and d not in OUTPUTS and here / d not in OUTPUTS
        ]
        yield from (here / f for f in files if f.endswith(".py"))


def path_changes(source: str) -> list[int]:
    """The lines where ``source`` changes ``sys.path``: ``sys.path.insert(...)``, ``.append``,
    ``.extend``, or an assignment to it (``sys.path = ...``, ``sys.path += ...``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        target = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("insert", "append", "extend"):
                target = node.func.value
        elif isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            target = next((t for t in targets if ast.unparse(t) == "sys.path"), None)
        if target is not None and ast.unparse(target) == "sys.path":
            found.append(node.lineno)
    return sorted(found)


def test_the_check_finds_a_path_change() -> None:
    planted = "import sys\nsys.path.insert(0, 'tools')\nsys.path += ['x']\npaths.append(1)\n"
    assert path_changes(planted) == [2, 3]
    assert path_changes("import sys\nprint(sys.path)\n") == []


def test_the_walk_sees_the_sources() -> None:
    files = {p.relative_to(ROOT).as_posix() for p in python_files()}
    assert {"noxfile.py", "tools/src/attnscale_tools/mkdocs_hooks.py", "tests/conftest.py"} <= files
    assert not any(f.startswith((".nox/", "docs/generated/", "site/")) for f in files)


def test_no_module_puts_a_folder_on_the_path() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in python_files()
        for line in path_changes(path.read_text(encoding="utf-8"))
    ]
    assert not found, "sys.path changed (import from an installed package instead): " + ", ".join(
        found
    )


def test_the_build_code_is_all_in_its_package() -> None:
    """tools/ holds the package's pyproject.toml and its code under src/attnscale_tools/ only: a
    module beside them would be importable by nothing."""
    package = ROOT / "tools" / "src" / "attnscale_tools"
    stray = [
        p.relative_to(ROOT).as_posix()
        for p in python_files(ROOT / "tools")
        if package not in p.parents
    ]
    assert not stray, stray
