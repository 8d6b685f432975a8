"""One name per quantity: retired names are gone, and every metric is defined on one page."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from attnscale import METRICS, AttentionStats, SoftmaxStats

ROOT = Path(__file__).resolve().parents[1]
METRICS_PAGE = ROOT / "docs" / "reference" / "metrics.md"

# Retired name -> the name that replaced it.
RETIRED = {
    "entropy_normalized": "normalized_entropy",
    "entropy_fraction": "normalized_entropy",
    "min_head_entropy_fraction": "min_head_normalized_entropy",
    "max_prob": "max_probability",
    "logit_max": "max_abs_logit",
    "n_heads": "num_heads",
}


def _sources() -> list[Path]:
    files = [
        *(ROOT / "src").rglob("*.py"),
        *(ROOT / "examples").rglob("*.py"),
        *(ROOT / "examples").rglob("*.md"),
        *(ROOT / "factcheck").rglob("*.py"),
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "docs" / "reference").glob("*.md"),
        ROOT / "README.md",
    ]
    assert len(files) > 30  # the globs found the tree
    return files


@pytest.mark.parametrize("old", sorted(RETIRED))
def test_retired_names_are_gone(old: str) -> None:
    word = re.compile(rf"\b{re.escape(old)}\b")
    hits = [
        f"{path.relative_to(ROOT)}:{i}"
        for path in _sources()
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if word.search(line)
    ]
    assert not hits, f"{old!r} is now {RETIRED[old]!r}; still used at {hits}"


def _defined_names() -> set[str]:
    """Names in the first column of the metrics page's table."""
    rows = re.findall(
        r"^\| (`[^|]+`(?:, `[^|]+`)*) \|", METRICS_PAGE.read_text(encoding="utf-8"), re.M
    )
    return {name for row in rows for name in re.findall(r"`(\w+)`", row)}


def test_every_reported_metric_is_defined_once() -> None:
    defined = _defined_names()
    reported = set(METRICS) | set(SoftmaxStats._fields)
    # the monitor's statistics that are attention metrics (the rest are bookkeeping:
    # shapes, counts of masked or non-finite entries, where a scale was read from)
    reported |= {f.name for f in dataclasses.fields(AttentionStats)} & (
        set(METRICS)
        | {"logit_mean", "saturated_fraction", "min_head_normalized_entropy", "logit_grad_norm"}
    )
    missing = reported - defined
    assert not missing, f"not defined on {METRICS_PAGE.name}: {sorted(missing)}"
    text = METRICS_PAGE.read_text(encoding="utf-8")
    for name in defined:
        assert len(re.findall(rf"^\| `{name}`", text, re.M)) <= 1, f"{name} defined twice"
