"""The monitor against real attention-scaling bugs from public threads, and their look-alikes.

Each case of ``attnscale._docs.real_bugs`` reproduces the code path of one public issue or
pull request. The target: every bug's reported version gets a scaling finding (warning or
worse) and its fixed version gets no warning at all; neither version of a trap (a
deliberate design that looks like a bug) gets any warning. The cases the current monitor
gets wrong are strict xfails whose reason says what it does wrong: each is a to-do for the
monitor, and turns into a failure (XPASS) once the monitor is fixed, so the mark must go.
"""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from attnscale import AttentionMonitor, MonitorReport
from attnscale._docs.real_bugs import CASES, Case

# the finding codes that say "the scale is wrong" (rather than "the logits are large")
SCALING_CODES = frozenset({"scale-mismatch", "fp16-overflow-risk", "non-finite"})

# case name -> what the current monitor does wrong on it
KNOWN_MISSES: dict[str, str] = {
    "maxtext_mla_inverted_dot_product_kernel": (
        "attention is only recognised at a softmax call (or sdpa / nn.MultiheadAttention); "
        "MaxText's dot_product kernel normalises by hand (exp(s - rowmax), weighted values, "
        "division by the row sum), so nothing is measured: both versions get only a "
        "no-attention warning, and the buggy q / softmax_scale (a scale of qk_head_dim "
        "instead of its inverse square root) goes unreported"
    ),
}


def _report(case: Case, fixed: bool) -> MonitorReport:
    model = case.build(fixed)
    with AttentionMonitor(model, expected_scale=case.expected_scale) as monitor:
        model(*case.inputs(torch.Generator().manual_seed(0)))
    return monitor.report()


def _cases(kind: str) -> list[object]:
    params: list[object] = []
    for case in CASES:
        if case.kind != kind:
            continue
        reason = KNOWN_MISSES.get(case.name)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        params.append(pytest.param(case, id=case.name, marks=marks))
    return params


@pytest.mark.parametrize("case", _cases("bug"))
def test_bug_is_flagged_and_its_fix_is_not(case: Case) -> None:
    buggy = _report(case, fixed=False)
    assert buggy.codes("warning") & SCALING_CODES, f"{case.title}: bug not flagged\n{buggy}"
    fixed = _report(case, fixed=True)
    assert not fixed.codes("warning"), f"{case.title}: the fixed code is flagged\n{fixed}"


@pytest.mark.parametrize("case", _cases("trap"))
def test_trap_is_not_flagged(case: Case) -> None:
    for fixed in (False, True):
        report = _report(case, fixed)
        assert not report.codes("warning"), f"{case.title}: flagged\n{report}"


def _outputs(case: Case, fixed: bool) -> tuple[torch.Tensor, ...]:
    model = case.build(fixed)
    with torch.no_grad():
        out = model(*case.inputs(torch.Generator().manual_seed(0)))
    return out if isinstance(out, tuple) else (out,)


def _same(a: tuple[torch.Tensor, ...], b: tuple[torch.Tensor, ...]) -> bool:
    return all(
        torch.allclose(x, y, rtol=0, atol=0, equal_nan=True) for x, y in zip(a, b, strict=True)
    )


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_case_is_well_formed(case: Case) -> None:
    assert case.kind in ("bug", "trap")
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+", case.thread)
    assert case.thread.startswith(f"https://github.com/{case.project}/")
    assert case.title and case.what
    assert bool(case.fix) == (case.kind == "bug")
    assert case.expected_scale is None or case.expected_scale > 0
    for fixed in (False, True):
        assert isinstance(case.build(fixed), nn.Module)
    # both versions are seeded: the same version twice gives the same numbers
    assert _same(_outputs(case, False), _outputs(case, False))
    # a fix changes what the code computes; a trap has one version only
    assert _same(_outputs(case, False), _outputs(case, True)) == (case.kind == "trap")


def test_catalogue() -> None:
    names = [c.name for c in CASES]
    assert len(set(names)) == len(names)
    assert sum(c.kind == "bug" for c in CASES) >= 14
    assert sum(c.kind == "trap" for c in CASES) >= 4
    assert set(KNOWN_MISSES) <= set(names)
