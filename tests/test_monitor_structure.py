"""The monitor's code keeps the shape issue 42 asked for: one handler per path in one table,
one table per fact, no import cycle, no function over 60 lines."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import pytest

from attnscale import THRESHOLDS, AttentionMonitor
from attnscale._monitor import calls, facts

MONITOR = Path(__file__).resolve().parents[1] / "src" / "attnscale" / "_monitor"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "05_debugging"


def _modules() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text()) for p in sorted(MONITOR.glob("*.py"))}


def test_no_import_cycle_in_the_monitor() -> None:
    """Type-only imports count too: a cycle through them is one for a reader all the same."""
    graph = {
        name: {
            node.module.lstrip(".").split(".")[0] or (node.names[0].name)
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is not None
        }
        | {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is None
            for alias in node.names
        }
        for name, tree in _modules().items()
        if name != "__init__"  # it only re-exports
    }
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for dep in sorted(graph.get(name, ())):
            assert state.get(dep) != 1, f"import cycle: {' -> '.join([*path, name, dep])}"
            if dep not in state:
                visit(dep, [*path, name])
        state[name] = 2

    for name in graph:
        if name not in state:
            visit(name, [])


def test_no_monitor_function_is_over_60_lines() -> None:
    long = [
        f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines"  # type: ignore[operator]
        for name, tree in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > 60  # type: ignore[operator]
    ]
    assert not long, long


def test_the_package_init_only_re_exports() -> None:
    tree = _modules()["__init__"]
    kinds = {type(node).__name__ for node in tree.body}
    assert kinds <= {"Expr", "ImportFrom", "Assign"}, kinds


def _literal_codes() -> set[str]:
    """Every finding code written in the monitor's code: the first argument of ``Finding``."""
    found = set()
    for tree in _modules().values():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "Finding"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                found.add(node.args[0].value)
    return found


def test_every_finding_code_has_a_row_and_a_page() -> None:
    codes = _literal_codes()
    assert len(codes) >= 8
    assert codes <= set(facts.FINDINGS), codes - set(facts.FINDINGS)
    for code, row in facts.FINDINGS.items():
        assert (EXAMPLES / f"{row.page.rstrip('/')}.py").exists(), (code, row.page)
        assert row.meaning


def test_every_path_the_handlers_name_has_a_row() -> None:
    named = {
        kw.value.value
        for tree in _modules().values()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Call"
        for kw in node.keywords
        if kw.arg == "path" and isinstance(kw.value, ast.Constant)
    }
    named |= {"multihead_attention:encoder-fastpath"}  # passed to on_mha as an argument
    assert named <= set(calls.PATHS), named - set(calls.PATHS)
    kinds = {kind for kind, _ in calls.HANDLERS.values()}
    assert {"sdpa", "softmax(QK^T)", "multihead_attention", "flex_attention"} <= kinds


@pytest.mark.parametrize("name", sorted(facts.THRESHOLD_TABLE))
def test_threshold_validation_is_the_tables_domain(name: str) -> None:
    row = facts.THRESHOLD_TABLE[name]
    assert THRESHOLDS[name] == row.default and row.admits(row.default)
    outside = [row.low] if row.low_open and math.isfinite(row.low) else []
    outside += [row.high] if row.high_open and math.isfinite(row.high) else []
    outside += [row.high * 2 + 1] if math.isfinite(row.high) else []
    outside += [row.low - 1] if math.isfinite(row.low) else []
    assert outside
    for v in outside:
        with pytest.raises(ValueError, match=re.escape(f"{name} must be {row.domain()}")):
            AttentionMonitor(**{name: v})
    with pytest.raises(TypeError, match=name):
        AttentionMonitor(**{name: "1"})
    assert AttentionMonitor(**{name: row.default}).thresholds[name] == row.default
