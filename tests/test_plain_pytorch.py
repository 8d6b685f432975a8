"""Each section ends with its idea in plain PyTorch: code a reader can lift (no attnscale
import, at most 30 lines), which must compute what the library computes."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

import attnscale

ROOT = Path(__file__).parents[1]
SECTIONS = sorted(
    p.name for p in (ROOT / "examples").iterdir() if p.is_dir() and p.name[0] not in "._"
)
PAGES = {p.parent.name: p for p in sorted(ROOT.glob("examples/*/plot_*_in_plain_pytorch.py"))}


def _liftable(section: str) -> str:
    """The page's first code block: between the docstring and the first cell marker."""
    return PAGES[section].read_text().split('"""', 2)[2].split("# %%")[0]


def _load(section: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "plain"}
    exec(compile(_liftable(section), str(PAGES[section]), "exec"), namespace)
    return namespace


def test_every_section_ends_with_one() -> None:
    assert sorted(PAGES) == SECTIONS
    for section, page in PAGES.items():
        last = sorted((ROOT / "examples" / section).glob("plot_*.py"))[-1]
        assert last == page, f"{section}: the plain-PyTorch page comes last"


@pytest.mark.parametrize("section", sorted(PAGES))
def test_the_code_needs_nothing_but_torch(section: str) -> None:
    code = _liftable(section)
    assert "attnscale" not in code
    lines = [line for line in code.splitlines() if line.strip()]
    assert 0 < len(lines) <= 30, len(lines)
    imports = {
        line.split()[1].split(".")[0] for line in lines if line.startswith(("import", "from"))
    }
    assert imports <= {"math", "torch"}, imports


def test_variance() -> None:
    qk_scores = _load("01_variance")["qk_scores"]
    n = 100_000
    for d_k in (4, 64, 512):
        theory = attnscale.dot_product_moments(d_k).variance
        error = theory * math.sqrt((2 + 6 / d_k) / n)
        assert abs(qk_scores(d_k, n, scaled=False).var().item() - theory) < 5 * error
        scaled = attnscale.scaled_dot_product_moments(d_k).variance
        assert abs(qk_scores(d_k, n, scaled=True).var().item() - scaled) < 5 * error / theory


def test_softmax() -> None:
    health = _load("02_softmax")["softmax_health"]
    logits = 5 * torch.randn(
        50, 33, generator=torch.Generator().manual_seed(1), dtype=torch.float64
    )
    ours = health(logits)
    expected = {
        "entropy / log n": attnscale.softmax_entropy(logits, normalized=True),
        "largest weight": attnscale.max_probability(logits),
        "Jacobian, Frobenius norm": attnscale.softmax_jacobian_norm(logits, norm="frobenius"),
        "Jacobian, spectral norm": attnscale.softmax_jacobian_norm(logits, norm="spectral"),
    }
    assert ours.keys() == expected.keys()
    for name, values in expected.items():
        torch.testing.assert_close(ours[name], values, msg=name)


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("inverse_sqrt", "inverse_sqrt"),
        ("learnable", "learnable_temperature"),
        ("rmsnorm", "qk_rmsnorm"),
        ("cosine", "cosine"),
    ],
)
def test_normalization(kind: str, name: str) -> None:
    """The same logits as the library's strategy, at initialisation and after the learned
    parameters move (so the parametrisations agree too)."""
    module = _load("03_normalization")["ScaledLogits"](kind, 16, 3)
    strategy = attnscale.make_strategy(name, 16, 3)
    gen = torch.Generator().manual_seed(2)
    q, k, v = (3 * torch.randn(2, 3, 5, 16, generator=gen) for _ in range(3))
    with torch.no_grad():
        shift = torch.tensor([0.5, -1.0, 7.0])  # the cosine clamp at log 100 is passed by head 3
        module.log_scale += shift.view(3, 1, 1)
        gains = 1 + 0.1 * torch.randn(2, 16, generator=gen)
        module.q_gain.copy_(gains[0]), module.k_gain.copy_(gains[1])
        if hasattr(strategy, "log_scale"):
            strategy.log_scale += shift
        if hasattr(strategy, "q_norm"):
            strategy.q_norm.weight.copy_(gains[0]), strategy.k_norm.weight.copy_(gains[1])
    theirs = attnscale.scaled_dot_product_attention(q, k, v, strategy=strategy, need_logits=True)
    torch.testing.assert_close(module(q, k), theirs.logits)


def test_training_reparametrisation() -> None:
    train_pair = _load("04_training")["train_pair"]
    assert train_pair(steps=20) < 1e-10
    assert train_pair(steps=20, transform=False) > 1e-3  # the control: not the same model


@pytest.mark.parametrize("causal", [False, True])
def test_debugging(causal: bool) -> None:
    health = _load("05_debugging")["attention_health"]
    gen = torch.Generator().manual_seed(3)
    q = 4 * torch.randn(2, 3, 17, 8, generator=gen, dtype=torch.float64)
    k = -torch.randn(2, 3, 17, 8, generator=gen, dtype=torch.float64)  # float64: both exact
    ours = health(q, k, scale=0.7, causal=causal, tau=5.0)
    theirs = attnscale.head_stats(q, k, scale=0.7, is_causal=causal)
    torch.testing.assert_close(ours["max_logit"], theirs.max_logit)
    torch.testing.assert_close(ours["entropy"], theirs.entropy)
    torch.testing.assert_close(ours["qk_clip_factor"], theirs.qk_clip_factor(5.0))
