"""Masks are read from the mask tensor, whatever value it uses, on every path."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from attnscale import AttentionMonitor, MonitorReport

B, H, N, D = 2, 4, 16, 32


def _qkv(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, H, N, D, generator=g) for _ in range(3))  # type: ignore[return-value]


def _window_mask(value: float) -> torch.Tensor:
    """Swin's shifted-window mask: 0 inside a window, ``value`` across windows."""
    window = torch.arange(N) // 4
    return torch.where(window[:, None] == window[None, :], 0.0, value)  # (N, N)


def _hand(mask_op: str, value: float) -> MonitorReport:
    q, k, v = _qkv()
    mask = _window_mask(value)
    with AttentionMonitor() as mon:
        s = q @ k.transpose(-2, -1) * D**-0.5
        if mask_op == "add":
            s = s + mask
        elif mask_op == "add-view":  # the mask added per window, then the heads merged
            s = (s.view(B * H, N, N) + mask).view(B, H, N, N)
        elif mask_op == "masked_fill":
            s = s.masked_fill(mask != 0, value)
        elif mask_op == "where":
            s = torch.where(mask == 0, s, torch.tensor(value))
        else:
            raise AssertionError(mask_op)
        torch.softmax(s, dim=-1) @ v
    return mon.report()


@pytest.mark.parametrize("mask_op", ["add", "add-view", "masked_fill", "where"])
@pytest.mark.parametrize("value", [-100.0, -1e4, torch.finfo(torch.float32).min])
def test_a_mask_of_any_value_is_a_mask(mask_op: str, value: float) -> None:
    rep = _hand(mask_op, value)
    stats = rep.records[0].last
    assert stats.masked_fraction == pytest.approx(0.75)  # 3 of 4 windows per row
    assert stats.logit_std < 2.0  # the healthy logits alone (std ~1)
    assert rep.codes("warning") == set(), str(rep)


@pytest.mark.parametrize("value", [-100.0, torch.finfo(torch.float32).min])
def test_sdpa_and_mha_read_an_additive_mask_of_any_value(value: float) -> None:
    q, k, v = _qkv()
    with AttentionMonitor() as mon:
        F.scaled_dot_product_attention(q, k, v, attn_mask=_window_mask(value))
    rep = mon.report()
    assert rep.records[0].last.masked_fraction == pytest.approx(0.75)
    assert rep.codes("warning") == set(), str(rep)
    mha = nn.MultiheadAttention(H * D, H, batch_first=True).eval()
    x = torch.randn(B, N, H * D, generator=torch.Generator().manual_seed(1))
    with AttentionMonitor(mha) as mon, torch.no_grad():
        mha(x, x, x, attn_mask=_window_mask(value))
    rep = mon.report()
    assert rep.records[0].last.masked_fraction == pytest.approx(0.75)
    assert rep.codes("warning") == set(), str(rep)


def test_a_position_bias_is_not_a_mask() -> None:
    """ALiBi-like biases take many values: they are logits, not masked entries."""
    q, k, v = _qkv()
    dist = (torch.arange(N)[:, None] - torch.arange(N)[None, :]).abs().float()
    with AttentionMonitor() as mon:
        s = q @ k.transpose(-2, -1) * D**-0.5 - 0.5 * dist
        torch.softmax(s, dim=-1) @ v
    assert mon.report().records[0].last.masked_fraction == 0.0


def test_a_mask_too_weak_for_the_logits_is_its_own_finding() -> None:
    """-2 does not mask logits of spread ~1: keys across windows keep real probability."""
    rep = _hand("add", -2.0)
    stats = rep.records[0].last
    assert stats.masked_fraction == pytest.approx(0.75)
    assert stats.mask_leak is not None and stats.mask_leak > 0.1
    (finding,) = [f for f in rep.findings if f.code == "leaky-mask"]
    assert finding.severity == "warning"
    assert f"{100 * stats.mask_leak:.3g}%" in finding.message and "finfo" in finding.message
    # -100 leaks nothing measurable: no finding
    strong = _hand("add", -100.0)
    assert strong.records[0].last.mask_leak < 1e-30
    assert "leaky-mask" not in strong.codes("info")


def test_a_mask_through_untraced_ops_falls_back_on_the_threshold() -> None:
    """Without a mask tensor in sight, values at or below mask_value still count as masked."""
    q, k, v = _qkv()
    keep = _window_mask(1.0) == 0
    with AttentionMonitor() as mon:
        s = q @ k.transpose(-2, -1) * D**-0.5
        s = torch.clamp(s.masked_fill(~keep, -1e9), min=-1e9)  # clamp: not followed
        torch.softmax(s, dim=-1) @ v
    stats = mon.report().records[0].last
    assert stats.masked_fraction == pytest.approx(0.75)
    assert math.isfinite(stats.logit_std) and stats.logit_std < 2.0


def test_mask_leak_threshold_is_a_probability() -> None:
    with pytest.raises(ValueError, match="mask_leak"):
        AttentionMonitor(mask_leak=1.5)
    rep = _hand("add", -2.0)
    assert "leaky-mask" in rep.codes()
    q, k, v = _qkv()
    with AttentionMonitor(mask_leak=0.9) as mon:  # a looser rule: that leak is tolerated
        torch.softmax(q @ k.transpose(-2, -1) * D**-0.5 + _window_mask(-2.0), dim=-1) @ v
    assert "leaky-mask" not in mon.report().codes("info")


def test_where_every_mask_is_known_a_very_negative_logit_is_a_logit() -> None:
    """SDPA and nn.MultiheadAttention give the monitor all their masks: huge logits (a model
    whose logits grew past 1e4 in training) are measured, not read as masked keys."""
    q, k, v = _qkv()
    q = q * 3e4  # logits of size ~1e4 to ~1e5, both signs
    with AttentionMonitor() as mon:
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
    stats = mon.report().records[0].last
    assert stats.masked_rows == 0
    assert stats.masked_fraction == pytest.approx((N - 1) / (2 * N))  # the causal half only
    assert stats.max_abs_logit > 1e4
    mha = nn.MultiheadAttention(H * D, H, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight.mul_(300.0)
    x = torch.randn(B, N, H * D, generator=torch.Generator().manual_seed(1))
    causal = torch.ones(N, N, dtype=torch.bool).triu(1)
    with AttentionMonitor(mha) as mon, torch.no_grad():
        mha(x, x, x, attn_mask=causal, need_weights=False)
    stats = mon.report().records[0].last
    assert stats.masked_rows == 0 and stats.max_abs_logit > 1e4
    assert stats.masked_fraction == pytest.approx((N - 1) / (2 * N))


@pytest.mark.parametrize("queries", [N, N // 4])
def test_sdpas_is_causal_is_read_as_torch_applies_it(queries: int) -> None:
    """``is_causal`` aligns the mask at the top left (query i sees keys 0..i) also where there
    are fewer queries than keys: the monitor reads the same logits as from that mask given."""
    q, k, v = _qkv()
    q = q[:, :, :queries]
    seen = torch.ones(queries, N, dtype=torch.bool).tril()
    records = []
    for kwargs in ({"is_causal": True}, {"attn_mask": seen}):
        with AttentionMonitor() as mon:
            F.scaled_dot_product_attention(q, k, v, **kwargs)
        records.append(mon.report().records[0].last)
    causal, given = records
    assert causal.masked_fraction == pytest.approx(given.masked_fraction)
    assert causal.masked_fraction == pytest.approx(1 - float(seen.float().mean()))
    for name in ("max_abs_logit", "logit_std", "entropy"):
        assert getattr(causal, name) == pytest.approx(getattr(given, name)), name
