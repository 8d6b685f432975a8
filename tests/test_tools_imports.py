"""No module of the build's package (attnscale_tools, in tools/src/) imports one that imports it
back, at the top of the file or inside a function: a cycle makes the order of imports matter and
hides which module owns a piece."""

from __future__ import annotations

import ast
import runpy
import shutil
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "tools" / "src" / "attnscale_tools"


def _module_name(path: Path) -> str:
    """The name a file of the package is imported as: ``attnscale_tools.i18n.tree``."""
    parts = (PACKAGE.name, *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of the package that ``path`` imports, anywhere in it."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from .sources import x, from . import x
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(f) for f in files}
    return {_module_name(f): _imports(f, modules) for f in files}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each import cycle once, as the path that closes it (depth-first search)."""
    found, done = [], set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            found.append([*path[path.index(node) :], node])
            return
        if node in done:
            return
        for target in sorted(graph.get(node, ())):
            visit(target, [*path, node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])
    return found


def test_the_graph_sees_the_imports() -> None:
    graph = import_graph()
    name = {m: f"attnscale_tools.{m}" for m in ("catalogue", "figure_copies", "gallery_format")}
    assert name["gallery_format"] in graph[name["catalogue"]]
    assert {name["catalogue"], name["figure_copies"]} <= graph["attnscale_tools.zh_figures"]
    tree = graph["attnscale_tools.i18n.tree"]  # relative imports
    assert {"attnscale_tools.i18n.sources", "attnscale_tools.i18n.glossary"} <= tree


def test_the_cycle_finder_finds_a_cycle() -> None:
    """A cycle through a function-level import, as catalogue and zh_figures had, is found."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_in_tools_imports_itself_back() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles in attnscale_tools: " + "; ".join(
        " -> ".join(c) for c in found
    )


def test_the_package_finds_the_clone_it_is_installed_from(tmp_path: Path) -> None:
    """``attnscale_tools.ROOT`` is this clone (the package is installed editable from it); a copy
    of the package outside a clone refuses to import, naming the install command."""
    import attnscale_tools

    clone = PACKAGE.parents[2].resolve()
    assert clone == attnscale_tools.ROOT
    copy = tmp_path / "site-packages" / "attnscale_tools" / "__init__.py"
    copy.parent.mkdir(parents=True)
    shutil.copy2(PACKAGE / "__init__.py", copy)
    with pytest.raises(ImportError, match=r"pip install -e \./tools"):
        runpy.run_path(str(copy))
