"""Tests for attnscale._monitor: planted bugs, healthy models, invariance, restoration."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from attnscale import THRESHOLDS, AttentionMonitor, MonitorReport

D_MODEL, HEADS, SEQ, BATCH = 256, 4, 32, 4
D_HEAD = D_MODEL // HEADS  # 64


class HandAttention(nn.Module):
    """Hand-written multi-head self-attention with a planted bug selected by ``mode``."""

    def __init__(self, mode: str = "ok", d_model: int = D_MODEL, heads: int = HEADS) -> None:
        super().__init__()
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.heads, self.mode = heads, mode
        if mode == "t5":  # T5 init: the scale lives in W_q, no division at run time
            dh = d_model // heads
            nn.init.normal_(self.q.weight, std=(d_model * dh) ** -0.5)
            nn.init.normal_(self.k.weight, std=d_model**-0.5)
            nn.init.zeros_(self.q.bias)
            nn.init.zeros_(self.k.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        dh = d // self.heads
        q = self.q(x).view(b, n, self.heads, dh).transpose(1, 2)  # (b, heads, n, dh)
        k = self.k(x).view(b, n, self.heads, dh).transpose(1, 2)  # (b, heads, n, dh)
        v = self.v(x).view(b, n, self.heads, dh).transpose(1, 2)  # (b, heads, n, dh)
        if self.mode == "double":
            q = q * dh**-0.5
        scores = q @ k.transpose(-2, -1)
        if self.mode in ("ok", "double"):
            scores = scores / math.sqrt(dh)
        elif self.mode == "dmodel":
            scores = scores / math.sqrt(d)
        elif self.mode == "huge":
            scores = scores * 30.0
        weights = torch.softmax(scores, dim=-1)
        return (weights @ v).transpose(1, 2).reshape(b, n, d)  # (b, n, d)


def _x(seed: int = 0, batch: int = BATCH, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, SEQ, D_MODEL, generator=g).to(dtype)


def _monitor(model: nn.Module, x: torch.Tensor, **kw: float) -> MonitorReport:
    with AttentionMonitor(model, **kw) as mon:
        model(x)
    return mon.report()


def _sev(report: MonitorReport, code: str) -> set[str]:
    return {f.severity for f in report.findings if f.code == code}


# --- planted bugs --------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "cause"),
    [("none", "no scale"), ("dmodel", "√d_model"), ("double", "double scaling")],
)
def test_scale_bugs_are_warnings_with_cause(mode: str, cause: str) -> None:
    torch.manual_seed(0)
    report = _monitor(HandAttention(mode, heads=HEADS if mode != "dmodel" else 8), _x())
    found = [f for f in report.findings if f.code == "scale-mismatch"]
    assert len(found) == 1
    assert found[0].severity in ("warning", "error")
    assert cause in found[0].message
    assert found[0].where.startswith("HandAttention")


def test_scale_ratio_is_measured() -> None:
    torch.manual_seed(0)
    expected = {"ok": 1.0, "none": math.sqrt(D_HEAD), "double": 1 / math.sqrt(D_HEAD)}
    for mode, ratio in expected.items():
        rec = _monitor(HandAttention(mode), _x()).records[0]
        assert rec.last.head_dim == D_HEAD
        assert rec.last.scale_ratio == pytest.approx(ratio, rel=1e-3)


def test_large_logits_and_entropy_collapse() -> None:
    torch.manual_seed(0)
    report = _monitor(HandAttention("huge"), _x())
    assert _sev(report, "large-logits") & {"warning", "error"}
    assert _sev(report, "entropy-collapse") & {"warning", "error"}


def test_sdpa_unscaled_large_logits() -> None:
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 4, 64, 256, generator=g), torch.randn(2, 4, 64, 256, generator=g)
    with AttentionMonitor() as mon:
        F.scaled_dot_product_attention(q, k, k, scale=1.0)
    codes = mon.report().codes()
    assert {"scale-mismatch", "large-logits"} <= codes


def test_non_finite_and_fp16_overflow() -> None:
    q = torch.full((1, 2, 8, 64), 40.0, dtype=torch.float16)
    q[..., 1::2] = -40.0
    with AttentionMonitor() as mon:
        scores = q @ q.transpose(-2, -1)  # 64 * 1600 = 102400 > 65504: inf
        torch.softmax(scores / 8.0, dim=-1)
    report = mon.report()
    assert "error" in _sev(report, "fp16-overflow-risk")
    assert "error" in _sev(report, "non-finite")


def test_fp16_overflow_risk_before_overflow() -> None:
    g = torch.Generator().manual_seed(0)
    q = (torch.randn(1, 2, 16, 64, generator=g) * 10).half()  # |q.q| ~ 64 * 100 = 6400
    with AttentionMonitor(fp16_headroom=16) as mon:
        F.scaled_dot_product_attention(q, q, q)
    assert "fp16-overflow-risk" in mon.report().codes()


def test_softcap_path_bounds_logits() -> None:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 32, 64, generator=g) * 4
    cap = 10.0
    with AttentionMonitor() as mon:
        s = q @ q.transpose(-2, -1) / 8.0
        torch.softmax(torch.tanh(s / cap) * cap, dim=-1)
    rec = mon.report().records[0]
    assert rec.last.max_abs_logit <= cap + 1e-4


# --- healthy models ------------------------------------------------------


def _healthy_models() -> dict[str, nn.Module]:
    torch.manual_seed(0)
    return {
        "mha": nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True),
        "encoder": nn.TransformerEncoder(
            nn.TransformerEncoderLayer(D_MODEL, HEADS, 512, batch_first=True),
            2,
            enable_nested_tensor=False,
        ),
        "decoder": nn.TransformerDecoderLayer(D_MODEL, HEADS, 512, batch_first=True),
        "hand": HandAttention("ok"),
        "t5": HandAttention("t5"),
    }


def _call(name: str, model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    if name == "mha":
        out: torch.Tensor = model(x, x, x)[0]
        return out
    if name == "mha_sdpa":
        out = model(x, x, x, need_weights=False)[0]
        return out
    if name == "decoder":
        out = model(x, x)
        return out
    out = model(x)
    return out


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("name", ["mha", "encoder", "decoder", "hand", "t5"])
def test_healthy_models_have_no_warnings(name: str, train: bool) -> None:
    model = _healthy_models()[name].train(train)
    x = _x()
    with AttentionMonitor(model) as mon:
        _call(name, model, x)
    report = mon.report()
    assert report.records, "no attention captured"
    assert report.codes("warning") == set(), str(report)


def test_t5_scale_mismatch_is_info_only() -> None:
    report = _monitor(HandAttention("t5"), _x())
    assert _sev(report, "scale-mismatch") == {"info"}


def test_healthy_sdpa_default_scale() -> None:
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 4, 64, 64, generator=g), torch.randn(2, 4, 64, 64, generator=g)
    with AttentionMonitor() as mon:
        F.scaled_dot_product_attention(q, k, k, is_causal=True)
    report = mon.report()
    assert report.records[0].last.scale_ratio == pytest.approx(1.0)
    assert report.codes("warning") == set()


def test_module_paths_and_time_series() -> None:
    model = _healthy_models()["encoder"]
    with AttentionMonitor(model) as mon:
        for _ in range(3):
            model(_x())
    report = mon.report()
    assert [r.where for r in report.records] == ["layers.0.self_attn", "layers.1.self_attn"]
    assert all(len(r.series) == 3 for r in report.records)
    assert [s.step for s in report.records[0].series] == [0, 1, 2]
    assert len(report.records[0].values("entropy")) == 3


# --- MHA paths -----------------------------------------------------------


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("train", [True, False])
def test_mha_every_path_captured_same_stats(need_weights: bool, train: bool) -> None:
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(64, 4, batch_first=True).train(train)
    mha.dropout = 0.0
    x = torch.randn(2, 10, 64)
    with AttentionMonitor(mha) as mon, torch.no_grad():
        mha(x, x, x, need_weights=need_weights)
    rec = mon.report().records
    assert len(rec) == 1
    assert rec[0].last.head_dim == 16
    assert rec[0].last.scale_ratio == pytest.approx(1.0)


def _mha_reference(
    mha: nn.MultiheadAttention, x: torch.Tensor, pad: torch.Tensor
) -> dict[str, float]:
    """Logit statistics of a batch-first self-attention computed by hand."""
    b, n, e = x.shape
    h = mha.num_heads
    d = e // h
    wq, wk, _ = mha.in_proj_weight.chunk(3)
    bq, bk, _ = mha.in_proj_bias.chunk(3)
    q = F.linear(x, wq, bq).view(b, n, h, d).transpose(1, 2)  # (b, h, n, d)
    k = F.linear(x, wk, bk).view(b, n, h, d).transpose(1, 2)  # (b, h, n, d)
    logits = q @ k.transpose(-2, -1) / math.sqrt(d)  # (b, h, n, n)
    valid = ~pad[:, None, None, :].expand_as(logits)
    v = logits[valid]
    centred = (logits - logits.masked_fill(~valid, 0).sum(-1, keepdim=True) / valid.sum(-1, True))[
        valid
    ]
    p = torch.softmax(logits.masked_fill(~valid, -math.inf), dim=-1)
    ent = -(p * torch.log(p.clamp_min(1e-30))).sum(-1)
    real = ~pad[:, None, :].expand_as(ent)  # padding queries: left out of the entropy
    return {
        "logit_mean": float(v.mean()),
        "logit_std": float(centred.pow(2).mean().sqrt()),
        "max_abs_logit": float(v.abs().max()),
        "entropy": float(ent[real].mean()),
        "max_probability": float(p.max(-1).values[real].mean()),
    }


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("train", [True, False])
def test_mha_paths_match_hand_computed_stats(need_weights: bool, train: bool) -> None:
    # need_weights=False in training goes through SDPA (its q, k and merged mask are read
    # there); the other paths are recomputed from the weights: all must agree with a
    # hand computation, key padding included
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(64, 4, batch_first=True).train(train)
    mha.dropout = 0.0
    x = torch.randn(2, 10, 64)
    pad = torch.zeros(2, 10, dtype=torch.bool)
    pad[1, 7:] = True
    with AttentionMonitor(mha) as mon, torch.no_grad():
        mha(x, x, x, key_padding_mask=pad, need_weights=need_weights)
    got = mon.report().records[0].last
    with torch.no_grad():
        ref = _mha_reference(mha, x, pad)
    for name, value in ref.items():
        assert getattr(got, name) == pytest.approx(value, rel=1e-4, abs=1e-5), name


def test_mha_fast_path_is_taken_and_captured() -> None:
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(64, 4, batch_first=True).eval()
    x = torch.randn(2, 10, 64)
    called = []
    original = torch._native_multi_head_attention

    def spy(*args: object, **kwargs: object) -> object:
        called.append(1)
        return original(*args, **kwargs)

    torch._native_multi_head_attention = spy
    try:
        with torch.no_grad(), AttentionMonitor(mha) as mon:
            out = mha(x, x, x, need_weights=False)[0]
    finally:
        torch._native_multi_head_attention = original
    assert called, "fast path not taken"
    with torch.no_grad():
        assert torch.equal(out, mha(x, x, x, need_weights=False)[0])
    assert len(mon.report().records) == 1


def test_encoder_layer_fused_fast_path_captured() -> None:
    model = _healthy_models()["encoder"].eval()
    x = _x()
    with torch.no_grad():
        ref = model(x)
        with AttentionMonitor(model) as mon:
            out = model(x)
    assert torch.equal(ref, out)
    recs = mon.report().records
    assert [r.last.path for r in recs] == ["multihead_attention:encoder-fastpath"] * 2
    assert recs[0].last.normalized_entropy > 0.5


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")
def test_encoder_nested_tensor_padding_mask() -> None:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
    model = nn.TransformerEncoder(layer, 2).eval()
    x = torch.randn(3, 12, 64)
    pad = torch.zeros(3, 12, dtype=torch.bool)
    pad[1, 8:] = True
    with torch.no_grad():
        ref = model(x, src_key_padding_mask=pad)
        with AttentionMonitor(model) as mon:
            out = model(x, src_key_padding_mask=pad)
    assert torch.equal(torch.nan_to_num(ref), torch.nan_to_num(out))
    report = mon.report()
    assert len(report.records) == 2
    assert report.records[0].last.masked_fraction > 0
    # the padded query rows do not exist in the nested tensor; the layer returns 0 there
    assert torch.isfinite(out).all() and out[1, 8:].abs().max() == 0
    assert report.records[0].last.masked_rows_nonfinite == 0
    assert report.codes("warning") == set(), str(report)


# --- guarantees ----------------------------------------------------------


@pytest.mark.parametrize("name", ["mha", "mha_sdpa", "encoder", "decoder", "hand"])
def test_outputs_and_gradients_bitwise_identical(name: str) -> None:
    # mha_sdpa: need_weights=False, so MHA runs SDPA and the monitor hooks its output
    model = _healthy_models()[name.removesuffix("_sdpa")].train()
    x = _x(1)

    def run() -> tuple[torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        torch.manual_seed(123)  # same dropout masks
        out = _call(name, model, x)
        out.square().sum().backward()
        return out.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    ref_out, ref_grads = run()
    with AttentionMonitor(model) as mon:
        out, grads = run()
    assert torch.equal(ref_out, out)
    assert len(grads) == len(ref_grads)
    assert all(torch.equal(a, b) for a, b in zip(ref_grads, grads, strict=True))
    assert mon.report().records


def test_softmax_path_gradient_norm_matches_autograd() -> None:
    # a hand-written softmax(q k^T / sqrt(d)) @ v; batch 2 is within sample_batch, so the
    # monitor sees the whole tensor and its norm must equal autograd's
    torch.manual_seed(0)
    model = HandAttention("ok")
    x = _x(batch=2)
    with AttentionMonitor(model) as mon:
        model(x).sum().backward()
    got = mon.report().records[0].last.logit_grad_norm
    with torch.no_grad():
        q, k, v = (
            lin(x).view(2, SEQ, HEADS, D_HEAD).transpose(1, 2)  # (b, heads, n, d)
            for lin in (model.q, model.k, model.v)
        )
    ref = _reference_grad_norm(q, k, v, None, torch.ones_like(q))
    assert got == pytest.approx(ref, rel=1e-4)


@pytest.mark.parametrize("owner", ["torch", "F", "Tensor"])
def test_each_softmax_spelling_recorded_once(owner: str) -> None:
    q = torch.randn(2, 4, 10, 16)
    with AttentionMonitor() as mon:
        # looked up inside the block, as model code does
        softmax: Callable[..., torch.Tensor] = {
            "torch": lambda: torch.softmax,
            "F": lambda: F.softmax,
            "Tensor": lambda: torch.Tensor.softmax,
        }[owner]()
        softmax(q @ q.transpose(-2, -1) / 4.0, dim=-1)
    assert [len(r.series) for r in mon.report().records] == [1]


def _reference_grad_norm(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, w: torch.Tensor
) -> float:
    """||dL/dS|| for L = sum(w * softmax(S) V), S = q k^T / sqrt(d) (+ mask), by autograd."""
    q = q.detach().requires_grad_()
    s = q @ k.detach().transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., q_len, k_len)
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    s.retain_grad()
    (torch.softmax(s, dim=-1) @ v * w).sum().backward()
    assert s.grad is not None
    return float(s.grad.norm())


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_gradient_norm_matches_autograd(causal: bool) -> None:
    # batch 2 and 10 rows: the sample is the whole tensor, so the norms must agree
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 10, 16, generator=g) for _ in range(3))
    w = torch.randn(2, 4, 10, 16, generator=g)
    mask = torch.ones(10, 10, dtype=torch.bool).tril() if causal else None
    ref = _reference_grad_norm(q, k, v, mask, w)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    with AttentionMonitor() as mon:
        (F.scaled_dot_product_attention(*leaves, is_causal=causal) * w).sum().backward()
    got = mon.report().records[0].last.logit_grad_norm
    assert got == pytest.approx(ref, rel=1e-4)


@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_gradient_norm_matches_autograd(need_weights: bool) -> None:
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(64, 4, batch_first=True, dropout=0.0)
    x = torch.randn(2, 10, 64, requires_grad=True)
    w = torch.randn(2, 10, 64)
    with AttentionMonitor(mha) as mon:
        (mha(x, x, x, need_weights=need_weights)[0] * w).sum().backward()
    got = mon.report().records[0].last.logit_grad_norm
    # reference: the same computation by hand, with w pulled back through out_proj
    wq, wk, wv = mha.in_proj_weight.detach().chunk(3)
    bq, bk, bv = mha.in_proj_bias.detach().chunk(3)
    xd = x.detach()
    q, k, v = (
        F.linear(xd, wt, bt).view(2, 10, 4, 16).transpose(1, 2)  # (b, heads, n, d)
        for wt, bt in ((wq, bq), (wk, bk), (wv, bv))
    )
    w_heads = (w @ mha.out_proj.weight.detach()).view(2, 10, 4, 16).transpose(1, 2)
    ref = _reference_grad_norm(q, k, v, None, w_heads)
    assert got == pytest.approx(ref, rel=1e-4)


def test_gradient_norm_not_recorded_under_dropout() -> None:
    # SDPA with dropout: the dropout mask is unknown, so the gradient at the softmax
    # input cannot be reconstructed; the monitor leaves it empty rather than guess
    q = torch.randn(2, 4, 10, 16, requires_grad=True)
    with AttentionMonitor() as mon:
        F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).sum().backward()
    assert mon.report().records[0].last.logit_grad_norm is None


def _patched_objects() -> list[object]:
    return [
        F.scaled_dot_product_attention,
        F.softmax,
        torch.softmax,
        torch.Tensor.softmax,
        torch.matmul,
        torch.bmm,
        torch.Tensor.matmul,
        torch.Tensor.__matmul__,
        torch.Tensor.bmm,
        nn.MultiheadAttention.forward,
        nn.TransformerEncoderLayer.forward,
    ]


def test_state_restored_after_exception() -> None:
    from torch.nn.modules import module as module_mod

    before = _patched_objects()
    hooks = (len(module_mod._global_forward_hooks), len(module_mod._global_forward_pre_hooks))
    model = HandAttention("ok")
    with pytest.raises(RuntimeError, match="boom"), AttentionMonitor(model):
        model(_x())
        raise RuntimeError("boom")
    assert _patched_objects() == before
    assert (len(module_mod._global_forward_hooks), len(module_mod._global_forward_pre_hooks)) == (
        hooks
    )


@pytest.mark.parametrize("model_name", ["mha", "hand"])
def test_exception_inside_a_module_is_unchanged_and_cleaned_up(model_name: str) -> None:
    model = _healthy_models()[model_name].eval()
    bad = torch.randn(2, 5, D_MODEL + 1)  # wrong width: the model itself raises

    def call() -> None:
        _call(model_name, model, bad)

    with pytest.raises(Exception) as plain:
        call()
    before = _mode_stack()
    with AttentionMonitor(model), pytest.raises(Exception) as watched:
        call()
    assert (type(watched.value), str(watched.value)) == (type(plain.value), str(plain.value))
    assert _mode_stack() == before
    with AttentionMonitor(model) as mon:  # and the monitor still works afterwards
        _call(model_name, model, _x())
    assert mon.report().records


def test_statistics_failure_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    import attnscale._monitor.capture as mod

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(mod, "grouped_logit_stats", broken)
    model = HandAttention("ok")
    x = _x()
    ref = model(x)
    with AttentionMonitor(model) as mon:
        out = model(x)
    assert torch.equal(ref, out)
    found = [f for f in mon.report().findings if f.code == "monitor-error"]
    assert found
    assert "planted" in found[0].message


@pytest.mark.parametrize("broken", [False, True])
def test_thread_count_restored_inside_model(broken: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # statistics run on one thread; the model must see its own thread count again
    # right after each attention call, also when the statistics fail
    import attnscale._monitor.capture as mod

    if broken:

        def fail(*args: object, **kwargs: object) -> None:
            raise ZeroDivisionError("planted")

        monkeypatch.setattr(mod, "grouped_logit_stats", fail)
    seen: list[int] = []

    class Probe(nn.Module):
        def forward(self, q: torch.Tensor) -> torch.Tensor:
            out = F.scaled_dot_product_attention(q, q, q)
            seen.append(torch.get_num_threads())
            w = torch.softmax(q @ q.transpose(-2, -1) / 4.0, dim=-1)
            seen.append(torch.get_num_threads())
            return out + w @ q

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        probe = Probe()
        with AttentionMonitor(probe) as mon:
            probe(torch.randn(2, 3, 8, 16))
        assert seen == [2, 2]
        assert torch.get_num_threads() == 2
        assert len(mon.report().records) == (0 if broken else 2)
    finally:
        torch.set_num_threads(before)


def test_no_attention_found() -> None:
    lin = nn.Linear(4, 3)
    with AttentionMonitor(lin) as mon:
        lin(torch.randn(5, 4)).softmax(-1)
    report = mon.report()
    assert report.records == []
    assert report.codes("info") == {"no-attention"}
    assert "no attention computation was captured" in str(report)


def test_to_dict_round_trips_through_json() -> None:
    model = HandAttention("none")
    report = _monitor(model, _x())
    data = report.to_dict()
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    assert data["findings"][0]["code"] == "scale-mismatch"
    assert data["records"][0]["series"][0]["head_dim"] == D_HEAD
    assert "scale-mismatch" in str(report)


def _saved_and_loaded(report: MonitorReport) -> tuple[dict[str, Any], MonitorReport]:
    """The report's dict through strict JSON, and the report loaded back from it."""
    saved = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    return saved, MonitorReport.from_dict(saved)


def test_a_report_without_records_round_trips_exactly() -> None:
    lin = nn.Linear(4, 3)
    with AttentionMonitor(lin) as mon:
        lin(torch.randn(5, 4))
    finding = mon.report().findings[0]
    listed = dataclasses.replace(finding, sites=["a", "b"])  # type: ignore[arg-type]
    reports = (
        mon.report(),
        AttentionMonitor().report(),
        MonitorReport([], []),
        MonitorReport((), ()),  # type: ignore[arg-type]
        MonitorReport([], [listed]),
    )
    for report in reports:
        saved, loaded = _saved_and_loaded(report)
        assert loaded == report and loaded.to_dict() == saved
        assert str(loaded) == str(report)


def test_a_report_with_records_round_trips_exactly() -> None:
    report = _monitor(HandAttention("none"), _x())
    assert report.records and report.findings
    saved, loaded = _saved_and_loaded(report)
    assert loaded == report and loaded.to_dict() == saved


def test_non_finite_statistics_are_strict_json_and_load_back() -> None:
    """NaN and the infinities are written as the strings "nan", "inf" and "-inf" (JSON has no
    such numbers), at the top level and inside per-head tuples and lists, and read back."""
    report = _monitor(HandAttention("none"), _x())
    stats = dataclasses.replace(
        report.records[0].last,
        max_abs_qk=math.inf,
        logit_mean=-math.inf,
        logit_std=math.nan,
        scale=math.nan,
        head_rest_entropy=(0.5, math.nan, math.inf),
        heads={"max_logit": [1.0, None, math.inf], "entropy": [math.nan, -math.inf, 0.0]},
    )
    report.records[0].series[-1] = stats
    saved, loaded = _saved_and_loaded(report)
    series = saved["records"][0]["series"][-1]
    assert (series["max_abs_qk"], series["logit_mean"], series["logit_std"]) == (
        "inf",
        "-inf",
        "nan",
    )
    assert series["head_rest_entropy"] == [0.5, "nan", "inf"]
    assert loaded.to_dict() == saved
    back = loaded.records[0].last
    assert back.max_abs_qk == math.inf and back.logit_mean == -math.inf
    assert math.isnan(back.logit_std) and math.isnan(back.scale)
    assert back.head_rest_entropy[0] == 0.5 and math.isnan(back.head_rest_entropy[1])
    assert back.head_rest_entropy[2] == math.inf
    assert back.heads is not None and back.heads["max_logit"] == [1.0, None, math.inf]
    assert math.isnan(back.heads["entropy"][0]) and back.heads["entropy"][1] == -math.inf
    assert str(loaded) == str(report)


@pytest.mark.parametrize(
    ("data", "error", "match"),
    [
        ({}, ValueError, "MonitorReport.from_dict: the dict lacks 'records', 'findings'"),
        ({"records": []}, ValueError, "lacks 'findings'.*MonitorReport.to_dict"),
        ([], TypeError, "MonitorReport.from_dict needs a dict .*got list"),
        ({"records": [{}], "findings": []}, ValueError, "AttentionRecord.* lacks 'where'"),
        ({"records": [], "findings": [{"code": "x"}]}, ValueError, "Finding.* lacks 'severity'"),
    ],
)
def test_from_dict_names_what_is_missing(data: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        MonitorReport.from_dict(data)  # type: ignore[arg-type]


def test_monitor_not_reentrant() -> None:
    mon = AttentionMonitor()
    with mon, pytest.raises(RuntimeError, match="already active"), mon:
        pass


# --- validation ----------------------------------------------------------


def test_validation_errors() -> None:
    with pytest.raises(TypeError, match="model"):
        AttentionMonitor("not a module")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown argument 'scale_ration': did you mean the th"):
        AttentionMonitor(scale_ration=2.0)
    with pytest.raises(TypeError, match="scale_ratio"):
        AttentionMonitor(scale_ratio="2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="scale_ratio"):
        AttentionMonitor(scale_ratio=0.5)
    with pytest.raises(ValueError, match="fp16_headroom"):
        AttentionMonitor(fp16_headroom=-1.0)
    with pytest.raises(ValueError, match="saturation"):
        AttentionMonitor(saturation=1.0)
    with pytest.raises(ValueError, match="max_logit_std"):
        AttentionMonitor(max_logit_std=0.0)
    with pytest.raises(ValueError, match="mask_value"):
        AttentionMonitor(mask_value=float("nan"))
    with pytest.raises(TypeError, match="gradients"):
        AttentionMonitor(gradients=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sample_batch"):
        AttentionMonitor(sample_batch=0)
    with pytest.raises(ValueError, match="max_query_rows"):
        AttentionMonitor(max_query_rows=1.5)
    report = MonitorReport(records=[], findings=[])
    with pytest.raises(ValueError, match="severity"):
        report.by_severity("fatal")
    with pytest.raises(ValueError, match="min_severity"):
        report.codes("fatal")
    with pytest.raises(KeyError, match="nowhere"):
        report.record("nowhere")
    rec = _monitor(HandAttention("ok"), _x()).records[0]
    with pytest.raises(ValueError, match="name"):
        rec.values("entropyy")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"evry": 10}, "unknown argument 'evry': did you mean 'every'\\?"),
        ({"all_row": True}, "unknown argument 'all_row': did you mean 'all_rows'\\?"),
        ({"sink_wieght": 0.4}, "did you mean the threshold 'sink_weight'\\?"),
        ({"frobnicate": 1}, "unknown argument 'frobnicate'; AttentionMonitor takes .*every"),
    ],
)
def test_a_misspelt_argument_gets_the_close_name(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        AttentionMonitor(nn.Linear(2, 2), **kwargs)


def test_a_bad_model_in_a_list_is_named_by_its_index() -> None:
    with pytest.raises(TypeError, match=r"model\[1\] must be a torch\.nn\.Module, got str 'x'"):
        AttentionMonitor([nn.Linear(2, 2), "x"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="model is an empty list"):
        AttentionMonitor([])


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("sink_weight", 5.0),
        ("sink_weight", 1.0),
        ("sink_weight", 0.0),
        ("positional_share", 1.5),
        ("positional_share", 0.0),
        ("mask_leak", 2.0),
        ("normalized_entropy", -0.1),
        ("saturated_fraction", 1.0),
        ("mask_value", 0.0),
        ("mask_value", 100.0),
        ("large_logit_std", 0.0),
        ("max_logit", -1.0),
        ("max_logit", math.inf),
    ],
)
def test_thresholds_out_of_their_range_are_refused(name: str, value: float) -> None:
    """sink_weight=5 would switch sink detection off without a word: a weight is in (0, 1)."""
    with pytest.raises(ValueError, match=name):
        AttentionMonitor(**{name: value})


def test_thresholds_at_the_edge_of_their_range_are_taken() -> None:
    mon = AttentionMonitor(sink_weight=0.99, positional_share=1.0, mask_value=-100.0)
    assert mon.thresholds["positional_share"] == 1.0 and mon.thresholds["mask_value"] == -100.0


def test_threshold_overrides_change_the_verdict_and_stay_local() -> None:
    # Gemma-2-9B's bug: 224**-0.5 where head_dim is 256, a factor 1.069 off 1/sqrt(256).
    # Logits of std ~4 across 16 keys: some rows have a max probability above 0.9, few above 0.99.
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 2, 16, 256, generator=g), torch.randn(1, 2, 16, 256, generator=g)
    q = q * 4.0
    scale = 224**-0.5
    defaults = dict(THRESHOLDS)

    def run(**overrides: float) -> MonitorReport:
        with AttentionMonitor(**overrides) as mon:
            F.scaled_dot_product_attention(q, k, k, scale=scale)
        return mon.report()

    def saturated(threshold: float) -> float:  # by hand, over every (head, query) row
        p = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)
        return float((p.amax(-1) > threshold).double().mean())

    default = run()
    assert "scale-mismatch" in default.codes("warning")
    assert default.records[0].last.saturated_fraction == pytest.approx(saturated(0.99))
    loose = run(scale_ratio=1.1, saturation=0.9)
    assert "scale-mismatch" not in loose.codes("info")
    assert loose.records[0].last.saturated_fraction == pytest.approx(saturated(0.9))
    assert saturated(0.9) > saturated(0.99)  # the override made a difference
    # an override changes neither the module's defaults nor a later monitor
    assert defaults == THRESHOLDS
    assert run().codes("warning") == default.codes("warning")


# --- every way attention is written (issue: the monitor on real code) ----


class WrittenAttention(nn.Module):
    """Causal self-attention written one of several ways, with a fused qkv projection.

    ``product`` picks the q·kᵀ operation; ``scale_on`` picks where 1/sqrt(d) goes
    (``"q"`` is a slice of the fused projection, as timm writes it); ``scale`` is
    the factor itself, so a wrong or missing one can be planted.
    """

    def __init__(self, product: str, scale_on: str, scale: float | None = None) -> None:
        super().__init__()
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.product, self.scale_on = product, scale_on
        self.scale = D_HEAD**-0.5 if scale is None else scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, HEADS, D_HEAD).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # each (b, heads, n, d)
        if self.scale_on == "q":
            q = qkv[0] * self.scale
        elif self.scale_on == "k":
            k = k / (1 / self.scale)
        alpha = self.scale if self.scale_on == "product" else 1.0
        if self.product == "einsum":
            s = torch.einsum("bhqd,bhkd->bhqk", q, k) * alpha
        elif self.product == "baddbmm":
            qf, kf = q.reshape(b * HEADS, n, D_HEAD), k.reshape(b * HEADS, n, D_HEAD)
            s = torch.baddbmm(
                torch.empty(b * HEADS, n, n), qf, kf.transpose(1, 2), beta=0, alpha=alpha
            ).view(b, HEADS, n, n)
        elif self.product == "bmm-kw":
            qf, kf = q.reshape(b * HEADS, n, D_HEAD), k.reshape(b * HEADS, n, D_HEAD)
            s = torch.bmm(input=qf, mat2=kf.transpose(1, 2)).view(b, HEADS, n, n) * alpha
        else:  # matmul with keywords
            s = torch.matmul(input=q, other=k.transpose(-2, -1)) * alpha
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        s = s.masked_fill(~causal, float("-inf"))
        w = F.softmax(input=s, dim=-1)
        return (w @ v).transpose(1, 2).reshape(b, n, D_MODEL)


@pytest.mark.parametrize("product", ["matmul-kw", "bmm-kw", "baddbmm", "einsum"])
@pytest.mark.parametrize("scale_on", ["q", "k", "product"])
def test_every_product_and_scale_place_is_read(product: str, scale_on: str) -> None:
    torch.manual_seed(0)
    x = _x()
    healthy = WrittenAttention(product, scale_on)
    ref = healthy(x)
    with AttentionMonitor(healthy) as mon:
        out = healthy(x)
    assert torch.equal(ref, out)
    rec = mon.report()
    assert len(rec.records) == 1
    assert rec.records[0].last.scale_ratio == pytest.approx(1.0, rel=1e-6)
    assert rec.records[0].last.scale_source == "traced"
    assert rec.codes("warning") == set(), str(rec)
    unscaled = WrittenAttention(product, scale_on, scale=1.0)
    with AttentionMonitor(unscaled) as mon:
        unscaled(x)
    rep = mon.report()
    assert rep.records[0].last.scale_ratio == pytest.approx(math.sqrt(D_HEAD), rel=1e-6)
    assert _sev(rep, "scale-mismatch") & {"warning", "error"}, str(rep)
    assert "no scale at all" in str(rep)


def test_missing_scale_is_a_warning_even_with_tiny_logits() -> None:
    # fresh models have tiny logits whatever their scale: the verdict must follow the code
    torch.manual_seed(0)
    model = WrittenAttention("matmul-kw", "q", scale=1.0)
    with torch.no_grad():
        model.qkv.weight.mul_(0.01)
    with AttentionMonitor(model) as mon:
        model(_x())
    rep = mon.report()
    assert rep.records[0].last.logit_std < 0.1
    assert _sev(rep, "scale-mismatch") == {"warning"}


def test_short_causal_rows_are_not_saturation() -> None:
    # the first causal row has one key and a max probability of 1 by construction
    torch.manual_seed(0)
    model = WrittenAttention("matmul-kw", "q")
    with AttentionMonitor(model) as mon:
        model(torch.randn(2, 6, D_MODEL))
    rep = mon.report()
    assert rep.records[0].last.saturated_fraction == 0.0
    assert rep.codes("warning") == set(), str(rep)


@pytest.mark.parametrize(
    "call",
    [
        lambda s: torch.softmax(input=s, dim=-1),
        lambda s: F.softmax(input=s, dim=-1),
        lambda s: s.softmax(dim=-1),
        lambda s: torch.matmul(input=s, other=s),
        lambda s: torch.bmm(input=s[0], mat2=s[0]),
        lambda s: s.matmul(other=s),
        lambda s: torch.einsum("bhij,bhjk->bhik", s, s),
        lambda s: torch.baddbmm(s[0], s[0], s[0], beta=0.5, alpha=2.0),
    ],
)
def test_keyword_calls_behave_as_without_monitor(call: Callable[[torch.Tensor], object]) -> None:
    s = torch.randn(2, 3, 5, 5)
    ref = call(s)
    with AttentionMonitor():
        out = call(s)
    assert isinstance(out, torch.Tensor) and isinstance(ref, torch.Tensor)
    assert torch.equal(ref, out)


def test_exceptions_are_the_same_with_monitor() -> None:
    a, b = torch.randn(2, 3), torch.randn(4, 5)
    with pytest.raises(RuntimeError) as plain:
        torch.matmul(a, b)
    with AttentionMonitor(), pytest.raises(RuntimeError) as watched:
        torch.matmul(a, b)
    assert str(plain.value) == str(watched.value)


def test_softmax_bound_before_the_block_is_seen() -> None:
    softmax = torch.softmax  # a local name made before the monitor starts
    q = torch.randn(2, 4, 10, 16)
    with AttentionMonitor() as mon:
        softmax(q @ q.transpose(-2, -1) / 4.0, -1)
    assert len(mon.report().records) == 1


def _mode_stack() -> list[object]:
    return [torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack())]


def test_out_of_order_exit_leaves_torch_as_it_was() -> None:
    before = (_patched_objects(), _mode_stack())
    first, second = AttentionMonitor(), AttentionMonitor()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # out of order
    second.__exit__(None, None, None)
    assert (_patched_objects(), _mode_stack()) == before
    s = torch.randn(2, 5, 5)
    assert torch.equal(torch.softmax(input=s, dim=-1), s.softmax(-1))


def test_monitor_can_be_reused() -> None:
    model = HandAttention("ok")
    mon = AttentionMonitor(model)
    for _ in range(2):
        with mon:
            model(_x())
    # a second block goes on where the first stopped (issue 25: it dropped the first's)
    assert [s.run_step for s in mon.report().records[0].series] == [0, 1]
    assert mon.step == 1
    assert _mode_stack() == []


def test_nested_monitors_see_the_same_sites_and_no_phantoms() -> None:
    model = HandAttention("ok")
    with AttentionMonitor(model) as outer:
        with AttentionMonitor(model) as inner:
            model(_x()).sum().backward()
        model(_x()).sum().backward()
    outer_rep, inner_rep = outer.report(), inner.report()
    assert [r.where for r in inner_rep.records] == ["HandAttention"]
    assert [r.where for r in outer_rep.records] == ["HandAttention"]
    assert len(inner_rep.records[0].series) == 1
    assert len(outer_rep.records[0].series) == 2
    assert (
        outer_rep.records[0].series[0].logit_grad_norm
        == inner_rep.records[0].series[0].logit_grad_norm
    )


def test_records_only_the_given_model() -> None:
    torch.manual_seed(0)
    watched, other = HandAttention("ok"), HandAttention("none")
    with AttentionMonitor(watched) as mon:
        watched(_x())
        other(_x())
    rep = mon.report()
    assert [(r.where, len(r.series)) for r in rep.records] == [("HandAttention", 1)]
    assert rep.codes("warning") == set()
    with AttentionMonitor([watched, other]) as both:
        watched(_x())
        other(_x())
    assert [r.where for r in both.report().records] == ["0", "1"]


def test_classifier_softmax_is_not_attention() -> None:
    torch.manual_seed(0)
    head = nn.Linear(D_MODEL, 10)

    class Classifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.head = head

        def forward(self, h: torch.Tensor) -> torch.Tensor:
            return torch.softmax(h @ self.head.weight.T * 30.0, dim=-1)

    model = Classifier()
    with AttentionMonitor(model) as mon:
        model(torch.randn(4, 7, D_MODEL))
    rep = mon.report()
    assert rep.records == []
    assert rep.codes("warning") == {"no-attention"}
    assert "1 softmax calls" in str(rep)


def test_fully_masked_row_is_its_own_finding() -> None:
    torch.manual_seed(0)
    q = torch.randn(1, 2, 6, 16)
    keep = torch.ones(6, 6, dtype=torch.bool)
    keep[3] = False  # query row 3 sees no key
    with AttentionMonitor() as mon:
        s = (q @ q.transpose(-2, -1) / 4.0).masked_fill(~keep, float("-inf"))
        torch.softmax(s, dim=-1)
    rep = mon.report()
    stats = rep.records[0].last
    assert (stats.masked_rows, stats.masked_rows_nonfinite) == (2, 2)  # one per head
    assert stats.first_masked_row == (0, 0, 3)
    assert math.isfinite(stats.entropy)
    assert _sev(rep, "masked-rows") == {"error"}
    assert "entropy-collapse" not in rep.codes("info")
    assert "non-finite" not in rep.codes("info")
    with AttentionMonitor() as mon:  # SDPA gives zeros there: finite, info only
        F.scaled_dot_product_attention(q, q, q, attn_mask=keep)
    assert _sev(mon.report(), "masked-rows") == {"info"}


def test_expected_scale_declares_an_intended_scale() -> None:
    torch.manual_seed(0)
    model = WrittenAttention("matmul-kw", "product", scale=1 / D_HEAD)  # muP-style 1/d
    for declared in (1 / D_HEAD, {"Written*": 1 / D_HEAD}, lambda site, d: 1 / d):
        with AttentionMonitor(model, expected_scale=declared) as mon:
            model(_x())
        assert _sev(mon.report(), "scale-mismatch") == {"info"}, declared
    with AttentionMonitor(model, expected_scale=1.0) as mon:
        model(_x())
    assert _sev(mon.report(), "scale-mismatch") == {"warning"}
    with pytest.raises(ValueError, match="expected_scale"):
        AttentionMonitor(expected_scale=-1.0)
    with pytest.raises(ValueError, match="expected_scale must be a number or one of the designs"):
        AttentionMonitor(expected_scale="1/8")
    with pytest.raises(TypeError, match="expected_scale"):
        AttentionMonitor(expected_scale=[1.0])  # type: ignore[arg-type]


def test_a_named_design_is_declared_and_named_in_the_message() -> None:
    torch.manual_seed(0)
    model = WrittenAttention("matmul-kw", "product", scale=1 / D_HEAD)  # muP-style 1/d
    with AttentionMonitor(model, expected_scale="mup") as mon:
        model(_x())
    (finding,) = [f for f in mon.report().findings if f.code == "scale-mismatch"]
    assert finding.severity == "info" and "'mup' (μP's 1/head_dim)" in finding.message
    with AttentionMonitor(model, expected_scale="deberta") as mon:  # the wrong design
        model(_x())
    (finding,) = [f for f in mon.report().findings if f.code == "scale-mismatch"]
    assert finding.severity == "warning" and "smaller than declared" in finding.message


@pytest.mark.parametrize(
    "strategy", ["inverse_d", "folded_init", "cosine", "learnable_temperature"]
)
def test_the_librarys_own_strategies_are_designs_not_bugs(strategy: str) -> None:
    from attnscale import MultiHeadAttention

    torch.manual_seed(0)
    model = MultiHeadAttention(D_MODEL, HEADS, strategy=strategy)
    with torch.no_grad():
        if strategy == "learnable_temperature":  # a temperature trained away from 1/sqrt(d)
            model.strategy.log_scale.add_(1.0)
        with AttentionMonitor(model) as mon:
            model(_x())
    report = mon.report()
    assert not report.codes("warning") & {"scale-mismatch"}, str(report)


_FLEX_SLOPES = torch.tensor([0.5, 0.25, 0.125, 0.0625])  # per head: ALiBi slopes, multipliers


def _flex_cases() -> dict[str, tuple[dict[str, Any], float, set[str]]]:
    """flex_attention's keyword arguments, the scale the monitor should read (times sqrt(d)),
    and the findings it should give."""
    d = 16
    return {
        "default scale": ({}, 1.0, set()),
        "scale= argument": ({"scale": 1.0}, math.sqrt(d), {"scale-mismatch"}),
        "double scaling in score_mod": (
            {"score_mod": lambda s, b, h, i, j: s / math.sqrt(d)},
            1 / math.sqrt(d),
            {"scale-mismatch"},
        ),
        "soft-cap": ({"score_mod": lambda s, b, h, i, j: 2 * torch.tanh(s / 2)}, 1.0, set()),
        "ALiBi bias": (
            {"score_mod": lambda s, b, h, i, j: s + _FLEX_SLOPES[h] * (j - i), "causal": True},
            1.0,
            set(),
        ),
        "per-head multiplier": (
            {"score_mod": lambda s, b, h, i, j: s * 4 * _FLEX_SLOPES[h]},
            2**-0.5,  # the geometric mean of the heads' scales (1/2, 1/4, 1/8, 1/16), times 4
            {"scale-mismatch"},
        ),
    }


@pytest.mark.filterwarnings("ignore:.*flex_attention called without torch.compile")
@pytest.mark.parametrize("case", list(_flex_cases()))
def test_flex_attention_scale_and_score_mod_are_read(case: str) -> None:
    """Eager flex_attention runs its operator through the monitor's mode: the scale is its
    scale= times the score_mod's slope, measured on a probe; a bias or a cap is no scale
    (issue 24: FlexAttention was not seen, and a double scaling in score_mod went unnoticed)."""
    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    kwargs, ratio, codes = _flex_cases()[case]
    kwargs = dict(kwargs)
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 32, 16) for _ in range(3))
    if kwargs.pop("causal", False):
        kwargs["block_mask"] = flex.create_block_mask(
            lambda b, h, i, j: i >= j, None, None, 32, 32, device="cpu"
        )
    expected = flex.flex_attention(q, k, v, **kwargs)
    with AttentionMonitor() as monitor:
        out = flex.flex_attention(q, k, v, **kwargs)
    report = monitor.report()
    assert torch.equal(out, expected)
    (record,) = report.records
    s = record.series[0]
    assert s.path == "flex_attention"
    assert s.scale_ratio == pytest.approx(ratio, rel=1e-5)
    assert report.codes("warning") | report.codes("error") == codes, str(report)
    if "block_mask" in kwargs:  # the causal block mask masks about half of each row
        assert 0.4 < s.masked_fraction < 0.5
    if case == "per-head multiplier":
        assert s.scale_per_head == pytest.approx([1 / 2, 1 / 4, 1 / 8, 1 / 16], rel=1e-5)


@pytest.mark.filterwarnings("ignore:.*flex_attention called without torch.compile")
def test_flex_attention_with_grouped_query_heads() -> None:
    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    q, kv = torch.randn(1, 4, 16, 8), torch.randn(1, 2, 16, 8)
    with AttentionMonitor() as monitor:
        flex.flex_attention(q, kv, kv, enable_gqa=True)
    (record,) = monitor.report().records
    assert record.series[0].scale_ratio == pytest.approx(1.0)
    assert record.series[0].num_heads == 4


def test_entropy_of_one_hot_rows_is_never_negative() -> None:
    """lse - sum(p x) on uncentred logits cancels in float32 for large, one-hot rows; the
    monitor centres each row on its maximum first (issue 24: it printed -0.000257 of log n)."""
    from attnscale._monitor.stats import logit_stats

    gen = torch.Generator().manual_seed(0)
    logits = 3000 + 40 * torch.randn(2, 4, 64, 64, generator=gen)  # far from 0, one-hot rows
    stats = logit_stats(logits, mask_value=-1e4, saturation=0.99)
    assert stats["entropy"] >= 0
    assert stats["normalized_entropy"] >= 0
    assert stats["min_head_normalized_entropy"] >= 0
    exact = torch.special.entr(torch.softmax(logits.double(), -1)).sum(-1).mean()
    assert abs(stats["entropy"] - float(exact)) < 1e-4


@pytest.mark.parametrize("kind", ["plain", "finite mask", "-inf mask", "nan and +inf", "sink"])
def test_logit_stats_match_a_float64_reference(kind: str) -> None:
    """The statistics (computed in few passes, exp floored at e^-80 for speed) agree with a
    direct float64 softmax over the valid keys of every row."""
    from attnscale._monitor.stats import logit_stats

    gen = torch.Generator().manual_seed(1)
    x = 3 * torch.randn(2, 3, 16, 24, generator=gen)
    x[1] += 500  # rows far from 0: sums of squares must not cancel
    valid = torch.ones_like(x, dtype=torch.bool)
    mask = sink = None
    if kind in ("finite mask", "-inf mask"):
        mask = torch.arange(24)[None, :] > torch.arange(16)[:, None] + 4  # causal-like
        x = x.masked_fill(mask, torch.finfo(x.dtype).min if kind == "finite mask" else -math.inf)
        mask = mask.expand_as(x).clone()
        mask[..., 5, :] = True  # one row with no valid key
        valid = ~mask
    if kind == "nan and +inf":
        x[0, 0, 0, 0], x[1, 2, 3, 4] = math.nan, math.inf
        valid = torch.isfinite(x)
    if kind == "sink":
        sink = torch.zeros(24, dtype=torch.bool)
        sink[0] = True
        valid = valid & ~sink
    stats = logit_stats(x, mask=mask, sink=sink, mask_value=-1e4, saturation=0.5)
    xd = x.double().masked_fill(~valid, -math.inf)
    live = valid.sum(-1) >= 2
    p = torch.softmax(xd, -1)[live]
    entropy = torch.special.entr(p).sum(-1)
    assert stats["entropy"] == pytest.approx(float(entropy.mean()), rel=1e-5)
    frac = entropy / valid.sum(-1)[live].double().log()
    assert stats["normalized_entropy"] == pytest.approx(float(frac.mean()), rel=1e-5)
    assert stats["max_probability"] == pytest.approx(float(p.max(-1).values.mean()), rel=1e-5)
    sat = float((p.max(-1).values > 0.5).double().mean())
    assert stats["saturated_fraction"] == pytest.approx(sat)
    xv = x.double()[valid]
    assert stats["logit_mean"] == pytest.approx(float(xv.mean()), rel=1e-5)
    assert stats["max_abs_logit"] == pytest.approx(float(xv.abs().max()), rel=1e-6)
    xr = x.double().masked_fill(~valid, 0.0)  # within-row spread: each row about its own mean
    row_mean = xr.sum(-1, keepdim=True) / valid.sum(-1, keepdim=True).clamp_min(1)
    within = ((xr - row_mean) * valid).square().sum() / valid.sum()
    assert stats["logit_std"] == pytest.approx(float(within.sqrt()), rel=1e-5)
    assert stats["masked_rows"] == int((valid.sum(-1) == 0).sum())


def _same_statistics(a: dict, b: dict, rel: float = 1e-5) -> None:
    """Equal statistics: counts and indices exactly, values to float32 rounding."""
    assert a.keys() == b.keys()
    for key, va in a.items():
        vb = b[key]
        floats = isinstance(va, float) or (
            isinstance(va, tuple | list) and bool(va) and isinstance(va[0], float)
        )
        if floats:
            assert vb == pytest.approx(va, rel=rel, abs=1e-6, nan_ok=True), key
        else:
            assert va == vb, key


@pytest.mark.parametrize("kind", ["plain", "finite mask", "-inf mask", "nan and +inf", "padding"])
def test_calls_measured_together_match_each_alone(kind: str) -> None:
    """Calls of one shape joined along the heads axis (as the monitor measures a model's
    layers) give each call the statistics it has alone, masked rows and NaN included."""
    from attnscale._monitor.stats import grouped_logit_stats, logit_stats

    gen = torch.Generator().manual_seed(2)
    calls = [3 * c * torch.randn(2, 3, 12, 12, generator=gen) for c in (1, 4, 20)]
    masks: list[torch.Tensor | None] = [None] * 3
    if kind in ("finite mask", "-inf mask", "padding"):
        fill = torch.finfo(torch.float32).min if kind == "finite mask" else -math.inf
        for i, x in enumerate(calls):
            m = torch.arange(12)[None, :] > torch.arange(12)[:, None]  # causal
            m = m.expand_as(x).clone()
            if kind == "padding" or i == 1:
                m[..., 9:] = True  # the last keys are padding: their queries are left out
            if i == 2:
                m[0, 1, 4, :] = True  # a row with no valid key, in the last call only
            calls[i], masks[i] = x.masked_fill(m, fill), m
    if kind == "nan and +inf":
        calls[1][0, 2, 3, 4], calls[2][1, 0, 0, 0] = math.nan, math.inf
    rows = torch.arange(12)
    alone = [
        logit_stats(x, mask=m, mask_value=-1e4, saturation=0.9, rows=rows, queries=12)
        for x, m in zip(calls, masks, strict=True)
    ]
    together = grouped_logit_stats(
        torch.cat(calls, dim=-3),
        mask=None if masks[0] is None else torch.cat(masks, dim=-3),  # type: ignore[arg-type]
        mask_value=-1e4,
        saturation=0.9,
        rows=rows,
        queries=12,
        calls=3,
    )
    for one, joined in zip(alone, together, strict=True):
        _same_statistics(one, joined)
    if kind == "-inf mask":
        assert together[2]["first_masked_row"] == (0, 1, 4)
        assert together[0]["masked_rows"] == 0


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_a_models_layers_measured_together_match_each_alone(
    impl: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hugging Face GPT-2 (others' code, random weights): the monitor measures its layers'
    calls together at the end of the forward pass; every statistic of every layer is what
    measuring each call alone gives."""
    from attnscale._monitor import capture

    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=3, n_embd=64, n_head=4, n_positions=64)
    model = transformers.GPT2Model._from_config(config, attn_implementation=impl).eval()
    ids = torch.randint(0, config.vocab_size, (2, 40))
    attention = torch.ones(2, 40, dtype=torch.long)
    attention[1, 30:] = 0  # padding in the second sequence

    def run() -> list:
        with torch.no_grad(), AttentionMonitor(model) as monitor:
            model(input_ids=ids, attention_mask=attention)
        return [dataclasses.asdict(r.last) for r in monitor.report().records]

    joined: list[int] = []
    measure = capture.grouped_logit_stats

    def counted(*args: Any, calls: int = 1, **kwargs: Any) -> list:
        joined.append(calls)
        return measure(*args, calls=calls, **kwargs)

    monkeypatch.setattr(capture, "grouped_logit_stats", counted)
    together = run()
    assert joined == [3]  # the three layers, in one measurement
    monkeypatch.setattr(capture, "_group_key", lambda entry: (None, id(entry)))
    alone = run()
    assert joined == [3, 1, 1, 1]
    assert len(together) == 3
    for a, b in zip(alone, together, strict=True):
        _same_statistics(a, b)


def test_a_findings_site_is_a_record() -> None:
    """``Finding.where`` names the call site as the records do; the step is its own field
    (issue 24: ``report.record(f.where)`` raised on the " (step 0)" suffix)."""
    report = _monitor(HandAttention("none"), _x())
    finding = next(f for f in report.findings if f.code == "scale-mismatch")
    assert report.record(finding.where).where == finding.where
    assert finding.step == 0
    assert f"{finding.where} (step 0)" in str(report)


@pytest.mark.parametrize(("declared", "word"), [(1.0, "smaller"), (1 / D_HEAD**2, "larger")])
def test_expected_scale_mismatch_says_which_way(declared: float, word: str) -> None:
    """The code applies 1/d; declaring 1 means the code's scale is smaller than declared, and
    declaring 1/d² that it is larger (issue 24: the message had the direction inverted)."""
    model = WrittenAttention("matmul-kw", "product", scale=1 / D_HEAD)
    report = _monitor(model, _x(), expected_scale=declared)
    (finding,) = [f for f in report.findings if f.code == "scale-mismatch"]
    assert f"applies a scale {word} than declared" in finding.message


def test_two_likely_causes_make_one_sentence() -> None:
    """With as many heads as head dimensions, 1/head_dim is both a double 1/√head_dim and a
    division by √d_model: the causes are joined inside one sentence (issue 24: " Or: ")."""

    class Heads(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q = x.view(2, 8, 16, 16).transpose(1, 2)  # (batch, heads 16, length, head_dim 16)
            return torch.softmax(q @ q.transpose(-2, -1) / 16, dim=-1) @ q

    gen = torch.Generator().manual_seed(0)
    report = _monitor(Heads(), torch.randn(2, 8, 256, generator=gen))
    (finding,) = [f for f in report.findings if f.code == "scale-mismatch"]
    assert "double scaling" in finding.message and "√d_model" in finding.message
    assert " Or: " not in finding.message and "; or the scores" in finding.message


def test_fp16_advice_on_an_sdpa_site_does_not_say_use_sdpa() -> None:
    """Issue 24: the float16 advice at an SDPA site recommended SDPA."""
    g = torch.Generator().manual_seed(0)
    q = (60 * torch.randn(1, 2, 8, 64, generator=g)).half()
    with AttentionMonitor() as mon:
        F.scaled_dot_product_attention(q, q, q)
    risks = [f for f in mon.report().findings if f.code == "fp16-overflow-risk"]
    assert risks, "the product of these q and k is within the float16 headroom"
    assert all("scaled_dot_product_attention" not in f.message for f in risks)
    with AttentionMonitor() as mon:  # the same product written by hand keeps the advice
        torch.softmax((q @ q.transpose(-2, -1)).float() / 8, dim=-1)
    hand = [f for f in mon.report().findings if f.code == "fp16-overflow-risk"]
    assert hand and all("scaled_dot_product_attention" in f.message for f in hand)


def test_a_learnable_0d_temperature_raises_no_warning() -> None:
    """Issue 24: the monitor's own float() of a 0-d parameter warned (an error under
    ``filterwarnings=error``); the user's code warns of nothing."""

    class Temperature(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inv_t = nn.Parameter(torch.tensor(0.25))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(x @ x.transpose(-2, -1) * self.inv_t, dim=-1) @ x

    import warnings

    model, x = Temperature(), torch.randn(2, 8, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model(x)  # the user's own code is silent
        report = _monitor(model, x)
    assert report.records, "the softmax was seen"


def test_autocast_does_not_change_the_monitors_dtype() -> None:
    """Issue 24: under float16 autocast the monitor recomputed the scores in float16 and
    reported non-finite logits for a model whose output is finite."""
    g = torch.Generator().manual_seed(0)
    q = 40 * torch.randn(1, 2, 8, 64, generator=g)
    with torch.autocast("cpu", dtype=torch.float16), AttentionMonitor() as mon:
        out = F.scaled_dot_product_attention(q, q, q)
    assert torch.isfinite(out).all()
    assert "non-finite" not in mon.report().codes()


def test_a_caught_keyboard_interrupt_leaves_the_sites_intact() -> None:
    """Issue 24: a KeyboardInterrupt inside the model, caught in the monitored block, left its
    modules on the monitor's stack, and later calls became new sites."""

    class Inner(nn.Module):
        interrupt = False

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            p = torch.softmax(x @ x.transpose(-2, -1) / 4, dim=-1)
            if self.interrupt:
                raise KeyboardInterrupt
            return p @ x

    class Outer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = Inner()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner(x)

    def sites(interrupt_first: bool) -> list[str]:
        model, x = Outer(), torch.randn(2, 8, 16)
        with AttentionMonitor(model) as mon:
            if interrupt_first:
                model.inner.interrupt = True
                with contextlib.suppress(KeyboardInterrupt):
                    model(x)
                model.inner.interrupt = False
            model(x)
            model(x)
        return sorted(r.where for r in mon.report().records)

    assert sites(interrupt_first=True) == sites(interrupt_first=False)
