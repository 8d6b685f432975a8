"""The monitor against real attention-scaling bugs from public threads, and their look-alikes.

Each case of ``guide.real_bugs`` reproduces the code path of one public issue or
pull request. The target: every bug's reported version gets a scaling finding (warning or
worse) and its fixed version gets no warning at all; neither version of a trap (a
deliberate design that looks like a bug) gets any warning.
"""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from guide import real_bugs
from guide.real_bugs import CASES, SCALING_CODES, Case

# The likely cause a scale-mismatch finding gives for a bug's reported version, where the
# thread leaves no doubt about it: case name -> (pattern every such message must match,
# pattern none may match). Only cases whose finding lists causes (no expected_scale).
CAUSES: dict[str, tuple[str, str | None]] = {
    "opt_double_scale": (r"double scaling", None),
    "gemma2_9b_query_pre_attn_scalar": (r"instead of √32", None),
    "llamacpp_gemma2_9b_q_scale": (r"instead of √32", None),
    "maxtext_mla_inverted_softmax_scale": (r"invert", None),
    "mlc_fallback_sm_scale": (r"no scale at all", None),
    "vit_pytorch_scale_from_dim": (r"√d_model", None),
    "perceiver_io_divides_by_scale": (r"invert", None),
    "vit_tutorial_scale_after_softmax": (r"no scale at all", None),
    "cntkx_scale_without_sqrt": (r"square root", None),
    "ttnn_clip_scale_from_num_heads": (r"instead of √64", None),
    "lecture_gpt_scale_from_n_embd": (r"instead of √16", r"layer index"),
    "minference_unscaled_estimate": (r"no scale at all", None),
    "dfdx_scale_from_model_dim": (r"√64 instead of √16", None),
    "timm_attention2d_scale_from_num_heads": (r"√4 instead of √16", None),
}

# Cases the monitor gets wrong today, with what it does: a strict xfail, so that the test fails
# loudly once the monitor gets one right (then delete its line here).
KNOWN_MISSES: dict[str, str] = {}


def _cases(kind: str) -> list[object]:
    return [
        pytest.param(
            c,
            id=c.name,
            marks=[pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[c.name])]
            if c.name in KNOWN_MISSES
            else [],
        )
        for c in CASES
        if c.kind == kind
    ]


@pytest.mark.parametrize("case", _cases("bug"))
def test_bug_is_flagged_and_its_fix_is_not(case: Case) -> None:
    buggy = real_bugs.report(case, fixed=False)
    assert buggy.codes("warning") & SCALING_CODES, f"{case.title}: bug not flagged\n{buggy}"
    fixed = real_bugs.report(case, fixed=True)
    assert not fixed.codes("warning"), f"{case.title}: the fixed code is flagged\n{fixed}"


def _cause_params() -> list[object]:
    by_name = {c.name: c for c in CASES}
    return [pytest.param(by_name[n], *CAUSES[n], id=n) for n in CAUSES]


@pytest.mark.parametrize(("case", "must", "must_not"), _cause_params())
def test_likely_cause_names_the_bug(case: Case, must: str, must_not: str | None) -> None:
    report = real_bugs.report(case, fixed=False)
    messages = [
        f.message
        for f in report.findings
        if f.code == "scale-mismatch" and f.severity in ("warning", "error")
    ]
    assert messages, f"{case.title}: no scale-mismatch finding\n{report}"
    for message in messages:
        assert re.search(must, message), f"{case.title}: cause not named\n{message}"
        if must_not is not None:
            assert not re.search(must_not, message), f"{case.title}: wrong cause\n{message}"


@pytest.mark.parametrize("case", _cases("trap"))
def test_trap_is_not_flagged(case: Case) -> None:
    for fixed in (False, True):
        report = real_bugs.report(case, fixed)
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
    assert len(CASES) >= 30
    assert sum(c.kind == "bug" for c in CASES) >= 18
    assert sum(c.kind == "trap" for c in CASES) >= 12
    assert set(CAUSES) <= set(names)
    assert set(KNOWN_MISSES) <= set(names)
    assert not set(KNOWN_MISSES) & set(CAUSES)
    # every case is in a group of its own kind, and every group has a case
    assert all(real_bugs.GROUPS[c.group][0] == c.kind for c in CASES)
    assert {c.group for c in CASES} == set(real_bugs.GROUPS)
    assert all(next(c for c in CASES if c.name == n).expected_scale is None for n in CAUSES)
