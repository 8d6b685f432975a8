"""CONTRIBUTING.md's recipes stay true: the files and names each one points to exist, and the
monitor-path recipe's code, run as written there, gives the monitor a new path."""

from __future__ import annotations

import ast
import dataclasses
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from attnscale import AttentionMonitor
from attnscale._monitor import calls, facts

ROOT = Path(__file__).resolve().parents[1]
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
RECIPES = ["Add an example", "Add a monitor path", "Add a threshold or a finding"]
CODE = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"^[\w.<>-]+(?:/[\w.<>-]*)+$|^[\w.-]+\.(?:py|md|yml|yaml|toml)$")
# "`NAME` in `path/to/file.py`": a name the recipe says a file defines
NAME_IN_FILE = re.compile(r"`([\w.]+)` in\s+`([\w./-]+\.py)`")


def _recipe(title: str) -> str:
    """The text of one recipe: from its heading to the next heading of its level or above."""
    text = CONTRIBUTING.read_text(encoding="utf-8")
    found = re.search(rf"^### {re.escape(title)}\n(.*?)(?=^#{{1,3}} )", text, re.M | re.S)
    assert found, f"CONTRIBUTING.md has no recipe '### {title}'"
    return found.group(1)


def _paths(text: str) -> Iterator[str]:
    """Every file or folder path in the text's code spans, commands' arguments included."""
    for span in CODE.findall(text):
        for word in span.split():
            # .nox/...: made by a session, not part of a clone
            if PATH.match(word) and not word.startswith(("http", ".nox/")):
                yield word


def _exists(path: str) -> bool:
    """A plain path exists; a template (examples/<section>/plot_NN_name.py) matches a file."""
    if "<" not in path and "NN" not in path:
        return (ROOT / path).exists()
    pattern = re.sub(r"<\w+>", "*", path).replace("NN", "[0-9][0-9]").replace("name", "*")
    return any(ROOT.glob(pattern))


@pytest.mark.parametrize("title", RECIPES)
def test_every_path_a_recipe_names_exists(title: str) -> None:
    paths = sorted(set(_paths(_recipe(title))))
    assert len(paths) >= 3, paths  # the pattern still finds the recipe's paths
    missing = [p for p in paths if not _exists(p)]
    assert not missing, f"'{title}' names paths that do not exist: {missing}"


def _defines(path: Path, dotted: str) -> bool:
    """Whether the module at ``path`` defines ``dotted`` (``NAME`` or ``Class.method``)."""
    body: list[ast.stmt] = ast.parse(path.read_text(encoding="utf-8")).body
    for part in dotted.split("."):
        for node in body:
            names = []
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            if part in names:
                body = node.body if isinstance(node, ast.ClassDef) else []
                break
        else:
            return False
    return True


def test_every_name_a_recipe_places_in_a_file_is_defined_there() -> None:
    pairs = {pair for title in RECIPES for pair in NAME_IN_FILE.findall(_recipe(title))}
    assert len(pairs) >= 8, pairs  # the pattern still finds the recipes' names
    wrong = [f"{name} in {path}" for name, path in sorted(pairs) if not _defines(ROOT / path, name)]
    assert not wrong, f"CONTRIBUTING.md places names where they are not defined: {wrong}"


def test_the_fields_the_recipes_name_are_the_tables_fields() -> None:
    path_facts = {f.name for f in dataclasses.fields(calls.Path)} - {"kind"}
    threshold = {f.name for f in dataclasses.fields(facts.Threshold)}
    monitor_path, threshold_text = _recipe(RECIPES[1]), _recipe(RECIPES[2])
    for name in path_facts:
        assert f"`{name}`" in monitor_path, f"the monitor-path recipe omits `{name}`"
    for name in ("low", "high", "error_at", "why"):
        assert name in threshold and f"`{name}`" in threshold_text, name


def _recipe_code() -> str:
    blocks = re.findall(r"^```python\n(.*?)^```$", _recipe("Add a monitor path"), re.M | re.S)
    assert len(blocks) == 1, "the monitor-path recipe has one Python block"
    return blocks[0]


@pytest.fixture
def recipe() -> Iterator[dict[str, Any]]:
    """The recipe's namespace after its code ran; the handler tables restored afterwards."""
    handlers, paths = dict(calls.HANDLERS), dict(calls.PATHS)
    namespace: dict[str, Any] = {"__name__": "contributing_recipe"}
    try:
        exec(compile(_recipe_code(), "CONTRIBUTING.md", "exec"), namespace)
        yield namespace
    finally:
        calls.HANDLERS.clear()
        calls.HANDLERS.update(handlers)
        calls.PATHS.clear()
        calls.PATHS.update(paths)


class _ToyModel(nn.Module):
    def __init__(self, attention: Any, scale: float | None) -> None:
        super().__init__()
        self.attention, self.scale = attention, scale
        self.proj = nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = k = v = self.proj(x).view(2, 10, 4, 8).transpose(1, 2)  # (batch, heads, seq, d)
        return self.attention(q, k, v, scale=self.scale)


def _report(recipe: dict[str, Any], scale: float | None) -> Any:
    model = _ToyModel(recipe["toy_attention"], scale)
    x = torch.randn(2, 10, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        plain = model(x)
        with AttentionMonitor(model) as monitor:
            watched = model(x)
    assert torch.equal(plain, watched)  # the monitor leaves the model's output alone
    return monitor.report()


def test_the_monitor_path_recipe_adds_a_path(recipe: dict[str, Any]) -> None:
    assert calls.HANDLERS[recipe["toy_attention"]] == ("toy", recipe["on_toy"])
    assert calls.PATHS["toy"].fused and "toy_attention" in calls.PATHS["toy"].what
    report = _report(recipe, scale=None)
    (record,) = report.records
    assert (record.kind, record.last.path, record.last.num_heads) == ("toy", "toy", 4)
    assert record.last.scale == pytest.approx(1 / math.sqrt(8))
    assert not report.findings, report.findings


def test_the_recipes_path_catches_a_missing_scale(recipe: dict[str, Any]) -> None:
    report = _report(recipe, scale=1.0)
    assert [f.code for f in report.findings] == ["scale-mismatch"]
    assert report.records[0].last.scale == 1.0


def test_the_recipes_path_is_gone_after_the_test() -> None:
    """The recipe registers its path only inside the fixture: the library has no toy path."""
    assert "toy" not in calls.PATHS
    assert all(kind != "toy" for kind, _ in calls.HANDLERS.values())
