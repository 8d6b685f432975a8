"""Tests of the dot-product attention and its strategies: SDPA equivalence, strategy properties, gradients, validation."""

from __future__ import annotations

import copy
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from bad_input import (
    FUZZ,
    INF,
    attempt,
    elements,
    finite,
    float_dtypes,
    junk,
    small_sizes,
    strategy_junk,
    tensor_or_junk,
    tensors,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.func import functional_call, stack_module_state, vmap

import attnscale as asc
from attnscale import (
    SCALING_STRATEGIES,
    CosineScale,
    InverseSqrt,
    LearnableTemperature,
    MultiHeadAttention,
    QKLayerNorm,
    QKRMSNorm,
    ScoreScaling,
    make_strategy,
    scaled_dot_product_attention,
    soft_cap,
)

LEARNABLE = ("learnable_temperature", "qk_layernorm", "qk_rmsnorm", "cosine")
# Tolerances: float64 results agree to rounding; float32 to a few ulps of O(1) values.
TOL = {torch.float64: {"atol": 1e-12, "rtol": 1e-10}, torch.float32: {"atol": 2e-6, "rtol": 1e-5}}


def _qkv(
    dtype: torch.dtype, *, q_len: int = 5, k_len: int = 7, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 3, q_len, 8, generator=g, dtype=dtype)
    k = torch.randn(2, 3, k_len, 8, generator=g, dtype=dtype)
    v = torch.randn(2, 3, k_len, 4, generator=g, dtype=dtype)
    return q, k, v


def _mask(kind: str, dtype: torch.dtype, q_len: int, k_len: int) -> torch.Tensor | None:
    g = torch.Generator().manual_seed(1)
    if kind == "bool":
        m = torch.rand(2, 1, q_len, k_len, generator=g) > 0.3
        m[..., 0] = True  # every row keeps a key
        return m
    if kind == "float":
        return torch.randn(q_len, k_len, generator=g, dtype=dtype)
    return None


# --------------------------------------------------------------------- SDPA equivalence


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mask_kind", ["none", "bool", "float"])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("need_weights", [False, True])
def test_inverse_sqrt_matches_torch_sdpa(
    dtype: torch.dtype, mask_kind: str, is_causal: bool, need_weights: bool
) -> None:
    q, k, v = _qkv(dtype)
    mask = _mask(mask_kind, dtype, 5, 7)
    ref_mask = mask
    if is_causal and mask is not None:  # torch SDPA refuses both; give it the combined mask
        causal = torch.ones(5, 7, dtype=torch.bool).tril()
        ref_mask = (
            mask & causal if mask.dtype == torch.bool else mask.masked_fill(~causal, -math.inf)
        )
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    ref_leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    res = scaled_dot_product_attention(
        *leaves, attn_mask=mask, is_causal=is_causal, need_weights=need_weights
    )
    ref = F.scaled_dot_product_attention(
        *ref_leaves, attn_mask=ref_mask, is_causal=is_causal and mask is None
    )
    torch.testing.assert_close(res.output, ref, **TOL[dtype])
    assert (res.weights is not None) == need_weights
    upstream = torch.randn_like(ref)
    (res.output * upstream).sum().backward()
    (ref * upstream).sum().backward()
    for mine, theirs in zip(leaves, ref_leaves, strict=True):
        assert mine.grad is not None and theirs.grad is not None
        torch.testing.assert_close(mine.grad, theirs.grad, **TOL[dtype])


def test_weights_and_logits_are_consistent() -> None:
    q, k, v = _qkv(torch.float64)
    mask = _mask("bool", torch.float64, 5, 7)
    assert mask is not None
    res = scaled_dot_product_attention(q, k, v, attn_mask=mask, need_weights=True, need_logits=True)
    assert res.weights is not None and res.logits is not None
    torch.testing.assert_close(res.logits, q @ k.transpose(-2, -1) / math.sqrt(8))
    expected = torch.softmax(res.logits.masked_fill(~mask, -math.inf), dim=-1)
    torch.testing.assert_close(res.weights, expected)
    assert torch.all(res.weights[~mask.expand_as(res.weights)] == 0)
    torch.testing.assert_close(res.weights.sum(-1), torch.ones(2, 3, 5, dtype=torch.float64))
    torch.testing.assert_close(res.output, res.weights @ v)


def test_fused_path_returns_no_weights() -> None:
    res = scaled_dot_product_attention(*_qkv(torch.float32))
    assert res.weights is None and res.logits is None


@pytest.mark.parametrize("name", SCALING_STRATEGIES)
@pytest.mark.parametrize("is_causal", [False, True])
def test_fused_and_explicit_paths_agree(name: str, is_causal: bool) -> None:
    q, k, v = _qkv(torch.float64)
    strat = make_strategy(name, d_k=8, num_heads=3)
    fused = scaled_dot_product_attention(q, k, v, strategy=strat, is_causal=is_causal)
    explicit = scaled_dot_product_attention(
        q, k, v, strategy=strat, is_causal=is_causal, need_weights=True
    )
    torch.testing.assert_close(fused.output, explicit.output, **TOL[torch.float64])


def test_module_inverse_sqrt_matches_nn_multihead_attention() -> None:
    torch.manual_seed(0)
    d_model, heads = 16, 4
    mine = MultiHeadAttention(d_model, heads).double()
    ref = torch.nn.MultiheadAttention(d_model, heads, batch_first=True).double()
    with torch.no_grad():
        ref.in_proj_weight.copy_(
            torch.cat([mine.q_proj.weight, mine.k_proj.weight, mine.v_proj.weight])
        )
        assert ref.in_proj_bias is not None
        ref.in_proj_bias.copy_(torch.cat([mine.q_proj.bias, mine.k_proj.bias, mine.v_proj.bias]))
        ref.out_proj.weight.copy_(mine.out_proj.weight)
        ref.out_proj.bias.copy_(mine.out_proj.bias)
    x = torch.randn(3, 6, d_model, dtype=torch.float64)
    out = mine(x, need_weights=True)
    ref_out, ref_w = ref(x, x, x, need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(out.output, ref_out)
    torch.testing.assert_close(out.weights, ref_w)


# --------------------------------------------------------------------- strategy properties


def _logits(mha: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    logits = mha(x, need_logits=True).logits
    assert logits is not None
    return logits


def _grow(mha: MultiHeadAttention, g: float) -> None:
    """Multiply W_q and W_k (and their biases) by g."""
    with torch.no_grad():
        for proj in (mha.q_proj, mha.k_proj):
            proj.weight.mul_(g)
            if proj.bias is not None:
                proj.bias.mul_(g)


def test_defining_scales() -> None:
    q, k, v = _qkv(torch.float64)
    raw = q @ k.transpose(-2, -1)
    expected = {"none": raw, "inverse_sqrt": raw / math.sqrt(8), "inverse_d": raw / 8}
    expected["learnable_temperature"] = expected["inverse_sqrt"]  # at initialisation
    expected["folded_init"] = raw
    for name, want in expected.items():
        got = scaled_dot_product_attention(q, k, v, strategy=name, need_logits=True).logits
        torch.testing.assert_close(got, want, msg=name)


def test_inverse_d_equals_inverse_sqrt_at_dk_1() -> None:
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 5, 1, generator=g, dtype=torch.float64) for _ in range(3))
    a = scaled_dot_product_attention(q, k, v, strategy="inverse_d", need_logits=True)
    b = scaled_dot_product_attention(q, k, v, strategy="inverse_sqrt", need_logits=True)
    assert a.logits is not None and b.logits is not None
    assert torch.equal(a.logits, b.logits)
    assert torch.equal(a.output, b.output)


def test_cosine_logits_bounded_by_scale_and_clamped() -> None:
    strat = CosineScale(8, 3)
    torch.testing.assert_close(strat.effective_scale(), torch.full((3,), 10.0))
    q, k, v = _qkv(torch.float64)
    logits = scaled_dot_product_attention(q * 1e3, k, v, strategy=strat, need_logits=True).logits
    assert logits is not None and logits.abs().max() <= 10.0 + 1e-4
    # Cosine of a vector with itself is 1, so the bound is attained.
    same = scaled_dot_product_attention(q, q, q, strategy=strat.double(), need_logits=True).logits
    assert same is not None
    torch.testing.assert_close(
        same.diagonal(dim1=-2, dim2=-1), torch.full((2, 3, 5), 10.0, dtype=torch.float64)
    )
    with torch.no_grad():
        strat.log_scale.fill_(math.log(1e4))  # beyond the clamp
    torch.testing.assert_close(
        strat.effective_scale(), torch.full((3,), 100.0, dtype=torch.float64)
    )
    same = scaled_dot_product_attention(q, q, q, strategy=strat, need_logits=True).logits
    assert same is not None and same.abs().max() <= 100.0 + 1e-9


def test_softcap_bounds_logits_and_composes() -> None:
    q, k, v = _qkv(torch.float64)
    cap = 50.0
    for name in SCALING_STRATEGIES:
        base = scaled_dot_product_attention(q * 30, k * 30, v, strategy=name, need_logits=True)
        capped = scaled_dot_product_attention(
            q * 30, k * 30, v, strategy=name, softcap=cap, need_logits=True
        )
        assert base.logits is not None and capped.logits is not None
        torch.testing.assert_close(capped.logits, cap * torch.tanh(base.logits / cap))
        # Strictly below the cap wherever tanh is not rounded to 1 (|x| < 18 c in float64)...
        moderate = base.logits.abs() < 18 * cap
        assert torch.all(capped.logits[moderate].abs() < cap)
        # ...and never above it.
        assert capped.logits.abs().max() <= cap
    assert float(soft_cap(torch.tensor(1e6), cap)) == pytest.approx(cap)


@pytest.mark.parametrize("name", ["qk_layernorm", "qk_rmsnorm", "cosine"])
def test_normalised_logits_do_not_depend_on_weight_scale(name: str) -> None:
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4, strategy=name).double()
    x = torch.randn(2, 6, 32, dtype=torch.float64)
    before = _logits(mha, x)
    _grow(mha, 100.0)
    after = _logits(mha, x)
    # LayerNorm/RMSNorm epsilon (1e-5, 1e-6) against Var(q_i) of about 1/3 bounds the change.
    torch.testing.assert_close(after, before, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["none", "inverse_sqrt", "inverse_d", "learnable_temperature"])
def test_plain_logits_grow_quadratically_with_weight_scale(name: str) -> None:
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4, strategy=name).double()
    x = torch.randn(2, 6, 32, dtype=torch.float64)
    before = _logits(mha, x)
    _grow(mha, 10.0)
    torch.testing.assert_close(_logits(mha, x), 100.0 * before)


def test_qk_layernorm_logits_bounded_by_sqrt_dk() -> None:
    q, k, v = _qkv(torch.float64)
    logits = scaled_dot_product_attention(
        q * 1e4, k, v, strategy="qk_layernorm", need_logits=True
    ).logits
    assert logits is not None and logits.abs().max() <= math.sqrt(8) + 1e-9


def test_folded_init_sets_t5_projection_std() -> None:
    torch.manual_seed(0)
    d_model, d_k = 64, 64
    mha = MultiHeadAttention(d_model, 1, strategy="folded_init")
    # Sample std of n = 4096 normals has relative sd 1/sqrt(2n) = 1.1%; allow 5%.
    assert mha.q_proj.weight.std().item() == pytest.approx((d_model * d_k) ** -0.5, rel=0.05)
    assert mha.k_proj.weight.std().item() == pytest.approx(d_model**-0.5, rel=0.05)
    assert mha.q_proj.bias is not None and torch.all(mha.q_proj.bias == 0)
    # Default nn.Linear init has std 1/sqrt(3 d_model), about 4.6x smaller than T5's key init.
    assert mha.v_proj.weight.std().item() == pytest.approx((3 * d_model) ** -0.5, rel=0.05)


def test_float16_logits_do_not_overflow_when_raw_product_would() -> None:
    # q . k = 64 * 40 * 40 = 102400 > 65504 (float16 max), but the scaled logit is 12800.
    q = torch.full((1, 1, 2, 64), 40.0, dtype=torch.float16)
    raw = q @ q.transpose(-2, -1)
    assert torch.isinf(raw).all()
    res = scaled_dot_product_attention(q, q, q, need_logits=True, need_weights=True)
    assert res.logits is not None and torch.isfinite(res.logits).all()
    assert res.logits[0, 0, 0, 0].item() == 12800.0
    assert torch.isfinite(res.output).all()


# --------------------------------------------------------------------- gradients


@pytest.mark.parametrize("name", LEARNABLE)
@pytest.mark.parametrize("need_weights", [False, True])
def test_learnable_parameters_receive_gradients(name: str, need_weights: bool) -> None:
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2, strategy=name, softcap=5.0 if need_weights else None)
    x = torch.randn(3, 5, 16)
    mha(x, is_causal=True, need_weights=need_weights).output.square().sum().backward()
    strategy_params = dict(mha.strategy.named_parameters())
    assert strategy_params
    for pname, p in strategy_params.items():
        assert p.grad is not None, pname
        assert torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, pname


@pytest.mark.parametrize("name", SCALING_STRATEGIES)
def test_gradcheck(name: str) -> None:
    strat = make_strategy(name, d_k=3, num_heads=2).double()
    g = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(1, 2, 3, 3, generator=g, dtype=torch.float64, requires_grad=True)
        for _ in range(3)
    )

    def f(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return scaled_dot_product_attention(
            q, k, v, strategy=strat, softcap=4.0, is_causal=True, need_weights=True
        ).output

    assert torch.autograd.gradcheck(f, (q, k, v))


def test_effective_scale_is_differentiable() -> None:
    strat = LearnableTemperature(16, 2)
    torch.testing.assert_close(strat.effective_scale(), torch.full((2,), 0.25))
    strat.effective_scale().sum().backward()
    assert strat.log_scale.grad is not None
    torch.testing.assert_close(InverseSqrt(16, 2).effective_scale(), torch.full((2,), 0.25))


# --------------------------------------------------------------------- determinism, vmap


@pytest.mark.parametrize("name", SCALING_STRATEGIES)
def test_deterministic(name: str) -> None:
    outs = []
    for _ in range(2):
        torch.manual_seed(3)
        mha = MultiHeadAttention(16, 2, strategy=name, softcap=20.0)
        x = torch.randn(2, 4, 16)
        outs.append(mha(x, need_weights=True).output)
    assert torch.equal(outs[0], outs[1])


def test_vmap_over_stacked_models_matches_loop() -> None:
    torch.manual_seed(0)
    models = [MultiHeadAttention(16, 2, strategy="cosine") for _ in range(3)]
    params, buffers = stack_module_state(models)  # type: ignore[no-untyped-call]
    base = copy.deepcopy(models[0]).to("meta")
    x = torch.randn(4, 5, 16)

    def run(
        p: dict[str, torch.Tensor], b: dict[str, torch.Tensor], x: torch.Tensor
    ) -> torch.Tensor:
        out = functional_call(base, (p, b), (x,), {"need_weights": True, "is_causal": True})
        return out.output  # type: ignore[no-any-return]

    batched = vmap(run, in_dims=(0, 0, None))(params, buffers, x)
    looped = torch.stack([m(x, is_causal=True).output for m in models])
    torch.testing.assert_close(batched, looped)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", SCALING_STRATEGIES)
def test_cuda_matches_cpu(name: str) -> None:
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4, strategy=name, softcap=30.0)
    x = torch.randn(2, 6, 32)
    cpu = mha(x, need_weights=True)
    gpu = copy.deepcopy(mha).cuda()(x.cuda(), need_weights=True)
    assert gpu.weights is not None and cpu.weights is not None
    torch.testing.assert_close(gpu.output.cpu(), cpu.output, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(gpu.weights.cpu(), cpu.weights, atol=1e-4, rtol=1e-4)


# --------------------------------------------------------------------- validation


def test_unknown_strategy_name() -> None:
    q, k, v = _qkv(torch.float32)
    with pytest.raises(ValueError, match="strategy"):
        scaled_dot_product_attention(q, k, v, strategy="sqrt")
    with pytest.raises(ValueError, match="strategy"):
        MultiHeadAttention(16, 2, strategy="softcap")
    with pytest.raises(ValueError, match="strategy"):
        make_strategy("cosine_sim", d_k=4)
    with pytest.raises(TypeError, match="strategy"):
        scaled_dot_product_attention(q, k, v, strategy=0.125)  # type: ignore[arg-type]


def test_strategy_built_for_other_sizes() -> None:
    q, k, v = _qkv(torch.float32)
    with pytest.raises(ValueError, match="d_k"):
        scaled_dot_product_attention(q, k, v, strategy=CosineScale(16, 3))
    with pytest.raises(ValueError, match="num_heads"):
        scaled_dot_product_attention(q, k, v, strategy=CosineScale(8, 2))
    with pytest.raises(ValueError, match="num_heads"):
        MultiHeadAttention(16, 2, strategy=QKLayerNorm(8, 4))


def test_heads_must_divide_width() -> None:
    with pytest.raises(ValueError, match="num_heads"):
        MultiHeadAttention(30, 4)
    assert MultiHeadAttention(30, 4, head_dim=8).q_proj.out_features == 32
    with pytest.raises(ValueError, match="d_model"):
        MultiHeadAttention(0, 4)
    with pytest.raises(ValueError, match="num_heads"):
        MultiHeadAttention(16, 2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="head_dim"):
        MultiHeadAttention(16, 2, head_dim=-1)


@pytest.mark.parametrize(
    "shape", [(5, 6), (4, 5, 7), (2, 3, 5, 7, 1), (3, 3, 5, 7)], ids=["len", "heads", "5d", "bat"]
)
def test_mask_of_wrong_shape(shape: tuple[int, ...]) -> None:
    q, k, v = _qkv(torch.float32)
    with pytest.raises(ValueError, match="attn_mask"):
        scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(shape, dtype=torch.bool))


def test_mask_of_wrong_type() -> None:
    q, k, v = _qkv(torch.float32)
    with pytest.raises(TypeError, match="attn_mask"):
        scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(5, 7, dtype=torch.long))
    with pytest.raises(TypeError, match="attn_mask"):
        scaled_dot_product_attention(q, k, v, attn_mask=[[True]])  # type: ignore[arg-type]
    mha = MultiHeadAttention(16, 2)
    with pytest.raises(ValueError, match="attn_mask"):
        mha(torch.randn(2, 5, 16), attn_mask=torch.ones(4, 4, dtype=torch.bool))


@pytest.mark.parametrize("cap", [0.0, -1.0, math.inf, math.nan])
def test_softcap_must_be_positive(cap: float) -> None:
    q, k, v = _qkv(torch.float32)
    with pytest.raises(ValueError, match="softcap"):
        scaled_dot_product_attention(q, k, v, softcap=cap)
    with pytest.raises(ValueError, match="softcap"):
        MultiHeadAttention(16, 2, softcap=cap)
    with pytest.raises(ValueError, match=r"^cap "):
        soft_cap(torch.ones(3), cap)


def test_is_causal_and_soft_cap_types() -> None:
    q, k, v = _qkv(torch.float32)
    with pytest.raises(TypeError, match="is_causal"):
        scaled_dot_product_attention(q, k, v, is_causal=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="logits"):
        soft_cap([1.0], 5.0)  # type: ignore[arg-type]


def test_bad_strategy_settings() -> None:
    with pytest.raises(ValueError, match="init_scale"):
        CosineScale(8, init_scale=200.0)
    with pytest.raises(ValueError, match="max_scale"):
        CosineScale(8, max_scale=0.0)
    with pytest.raises(ValueError, match="init_scale"):
        LearnableTemperature(8, init_scale=-0.1)
    with pytest.raises(ValueError, match="eps"):
        QKRMSNorm(8, eps=0.0)
    with pytest.raises(ValueError, match="d_k"):
        make_strategy("inverse_sqrt", d_k=0)
    with pytest.raises(NotImplementedError):
        ScoreScaling(4).prepare(torch.ones(1), torch.ones(1))


def test_project_qk_reproduces_module_logits() -> None:
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 2, strategy="qk_rmsnorm").double()
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    q, k = mha.project_qk(x)
    assert q.shape == k.shape == (2, 2, 5, 8)
    res = scaled_dot_product_attention(q, k, k, strategy=mha.strategy, need_logits=True)
    torch.testing.assert_close(res.logits, _logits(mha, x))
    with pytest.raises(ValueError, match="key"):
        mha.project_qk(x, torch.randn(2, 5, 3, dtype=torch.float64))


# -- bad input: a clear error naming the argument, or the right answer (helpers in bad_input.py) --


@pytest.mark.parametrize("name", asc.SCALING_STRATEGIES)
def test_strategies_with_huge_sizes(name: str) -> None:
    for d_k, heads in ((10**30, 1), (10**400, 1)):
        try:
            strat = asc.make_strategy(name, d_k, heads)
        except ValueError as err:  # the strategies with (d_k,) parameters cannot allocate them
            assert "d_k" in str(err)
            continue
        scale = strat.effective_scale().detach()
        assert finite(scale)
        # d_k is a power of 100, so isqrt is exact; Fraction -> float rounds correctly (0.0 for
        # 1/10**400).
        expected = {"none": 1.0, "folded_init": 1.0, "cosine": 10.0}
        expected["inverse_d"] = float(Fraction(1, d_k))
        inv_sqrt = float(Fraction(1, math.isqrt(d_k)))
        # Below the dtype's smallest normal number a relative tolerance means nothing.
        tol = {"rel": 1e-5, "abs": torch.finfo(scale.dtype).tiny}
        assert float(scale) == pytest.approx(expected.get(name, inv_sqrt), **tol)
    # a per-head tensor of 2**64 entries cannot exist
    with pytest.raises(ValueError, match="num_heads"):
        asc.make_strategy(name, 4, 2**64)


def _modules():
    return [
        ("query", asc.MultiHeadAttention(8, 2)),
        ("x", asc.make_model("simple", d_model=8, d_k=4)),
        ("x", asc.make_model("block", d_model=8, num_heads=2)),
        ("x", asc.SimpleAttentionModel(8, 4, strategy="qk_layernorm")),
    ]


@pytest.mark.parametrize(
    "bad, error",
    [
        (torch.randn(2, 3, 7), ValueError),
        (torch.randn(2, 8), ValueError),
        (torch.randn(1, 2, 3, 8), ValueError),
        (torch.ones(2, 3, 8, dtype=torch.long), TypeError),
        (torch.ones(2, 3, 8, dtype=torch.bool), TypeError),
        (torch.randn(2, 3, 8).tolist(), TypeError),
        (np.zeros((2, 3, 8), dtype=np.float32), TypeError),
        (torch.randn(2, 3, 8, dtype=torch.float64), TypeError),
        (torch.randn(2, 3, 8, dtype=torch.float16), TypeError),
        (None, TypeError),
    ],
)
def test_module_inputs(bad: object, error: type) -> None:
    for name, module in _modules():
        with pytest.raises(error, match=name):
            module(bad)
    mha = asc.MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8)
    if bad is not None:
        with pytest.raises(error, match="key"):
            mha(x, bad)
        with pytest.raises(error, match="value"):
            mha(x, x, bad)


def test_module_inputs_that_disagree() -> None:
    mha = asc.MultiHeadAttention(8, 2)
    x = torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match="batch"):
        mha(x, torch.randn(3, 5, 8))
    with pytest.raises(ValueError, match="length"):
        mha(x, x, torch.randn(2, 4, 8))


def _qkv_of_shapes(dtype: torch.dtype = torch.float32):
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 2, 3, 4, generator=gen, dtype=dtype)
    k = torch.randn(2, 2, 5, 4, generator=gen, dtype=dtype)
    v = torch.randn(2, 2, 5, 6, generator=gen, dtype=dtype)
    return q, k, v


@pytest.mark.parametrize(
    "args, error, name",
    [
        (lambda q, k, v: (q, k[..., :3], v), ValueError, "key"),
        (lambda q, k, v: (q.long(), k, v), TypeError, "query"),
        (lambda q, k, v: (q.tolist(), k, v), TypeError, "query"),
        (lambda q, k, v: (q.double(), k, v), TypeError, "key"),
        (lambda q, k, v: (q, k, v.double()), TypeError, "value"),
        (lambda q, k, v: (q[0], k, v), ValueError, "query"),
        (lambda q, k, v: (q, k, v[:, :, :4]), ValueError, "value"),
        (lambda q, k, v: (q, k[:1], v), ValueError, "key"),
        (lambda q, k, v: (q, k.unsqueeze(0), v), ValueError, "key"),
        (lambda q, k, v: (q, k, v.long()), TypeError, "value"),
        (lambda q, k, v: (q, k[..., :2], v), ValueError, "head dim"),
        (lambda q, k, v: (q, k, v[:, :, :3]), ValueError, "k_len"),
        (lambda q, k, v: (q, k[:1], v[:1]), ValueError, "batch"),
    ],
)
def test_attention_function_inputs(args, error: type, name: str) -> None:
    with pytest.raises(error, match=name):
        asc.scaled_dot_product_attention(*args(*_qkv_of_shapes()))


_BAD_MASKS = [
    torch.tensor(True),
    torch.tensor(0.0),
    torch.ones(5, dtype=torch.bool),
    torch.ones(4, 5, dtype=torch.bool),
    torch.ones(3, 4),
    torch.ones(3, 2, 3, 5, dtype=torch.bool),
    torch.ones(1, 1, 1, 3, 5, dtype=torch.bool),
    torch.ones(3, 5, dtype=torch.long),
    [[True] * 5] * 3,
]


@pytest.mark.parametrize("mask", _BAD_MASKS, ids=lambda m: str(getattr(m, "shape", "list")))
@pytest.mark.parametrize("strategy", ["inverse_sqrt", "learnable_temperature"])
def test_bad_masks_fail_alike_on_both_paths(mask: object, strategy: str) -> None:
    q, k, v = _qkv_of_shapes()
    errors = []
    for kwargs in ({}, {"need_weights": True}, {"need_logits": True}, {"softcap": 30.0}):
        with pytest.raises((ValueError, TypeError), match="attn_mask") as info:
            asc.scaled_dot_product_attention(q, k, v, attn_mask=mask, strategy=strategy, **kwargs)
        errors.append((info.type, str(info.value)))
    assert len(set(errors)) == 1, errors
    mha = asc.MultiHeadAttention(8, 2, strategy=strategy)
    x, y = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    module_errors = []
    for need_weights in (False, True):
        with pytest.raises((ValueError, TypeError), match="attn_mask") as info:
            mha(x, y, attn_mask=mask, need_weights=need_weights)
        module_errors.append((info.type, str(info.value)))
    assert len(set(module_errors)) == 1, module_errors


def _dead_row_masks():
    bool_mask = torch.ones(3, 5, dtype=torch.bool)
    bool_mask[1] = False
    float_mask = torch.zeros(3, 5)
    float_mask[1] = -INF
    per_head = torch.ones(2, 2, 3, 5, dtype=torch.bool)
    per_head[1, 0, 2] = False
    row1 = (slice(None), slice(None), 1)  # query row 1 of every batch and head
    return [(bool_mask, row1), (float_mask, row1), (per_head, (1, 0, 2))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("strategy", asc.SCALING_STRATEGIES)
def test_fully_masked_rows_give_zeros_on_both_paths(strategy: str, dtype: torch.dtype) -> None:
    q, k, v = _qkv_of_shapes(dtype)
    for mask, dead in _dead_row_masks():
        mask = mask if mask.dtype == torch.bool else mask.to(dtype)
        fused = asc.scaled_dot_product_attention(q, k, v, attn_mask=mask, strategy=strategy)
        explicit = asc.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, strategy=strategy, need_weights=True
        )
        capped = asc.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, strategy=strategy, softcap=20.0, need_weights=True
        )
        for res in (fused, explicit, capped):
            assert finite(res.output)
            assert res.output[dead].abs().max().item() == 0.0
        for res in (explicit, capped):
            assert finite(res.weights)
            assert res.weights[dead].abs().max().item() == 0.0
        tol = 3e-2 if dtype == torch.bfloat16 else 1e-5
        assert torch.allclose(fused.output, explicit.output, atol=tol, rtol=tol)


def test_fully_masked_rows_have_zero_finite_gradients() -> None:
    q, k, v = (t.requires_grad_() for t in _qkv_of_shapes())
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False
    for kwargs in ({}, {"need_weights": True}):
        out = asc.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kwargs).output
        grads = torch.autograd.grad(out.sum(), (q, k, v))
        assert all(finite(g) for g in grads)
        assert grads[0][:, :, 1].abs().max().item() == 0.0


def test_causal_mask_combined_into_dead_rows_and_empty_keys() -> None:
    q, k, v = _qkv_of_shapes()
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[:, 0] = False  # with is_causal, query 0 sees only key 0: nothing left
    fused = asc.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True)
    explicit = asc.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=True, need_weights=True
    )
    assert fused.output[:, :, 0].abs().max().item() == 0.0
    assert torch.allclose(fused.output, explicit.output, atol=1e-6)
    empty_k, empty_v = k[:, :, :0], v[:, :, :0]
    for kwargs in ({}, {"need_weights": True}):
        res = asc.scaled_dot_product_attention(q, empty_k, empty_v, **kwargs)
        assert res.output.shape == (2, 2, 3, 6) and res.output.abs().max().item() == 0.0


@FUZZ
@given(logits=tensor_or_junk, cap=st.one_of(st.floats(1e-30, 1e30), junk))
def test_fuzz_soft_cap(logits, cap) -> None:
    if isinstance(cap, float) and math.isfinite(cap) and not 1e-30 <= cap <= 1e30:
        cap = 2.5  # caps beyond float32's range: see test_soft_cap_with_extreme_caps
    ok, res = attempt(asc.soft_cap, logits, cap)
    if ok and finite(logits):
        # |c tanh(x / c)| <= c, up to rounding c to the logits' dtype (half an ulp; bfloat16's
        # relative spacing is 2^-7, so a fixed 0.1% is not enough)
        tol = 1 + torch.finfo(res.dtype).eps
        assert finite(res) and bool((res.double().abs() <= float(cap) * tol).all())


@pytest.mark.parametrize("cap", [1e300, 1e39, 1e-300])
def test_soft_cap_with_extreme_caps(cap: float) -> None:
    z = torch.tensor([0.0, 1.0, -3.0])
    expected = (torch.tanh(z.double() / cap) * cap).float()
    assert torch.equal(asc.soft_cap(z, cap), expected)
    q = torch.randn(1, 1, 2, 4)
    assert finite(asc.scaled_dot_product_attention(q, q, q, softcap=cap).output)


@FUZZ
@given(name=strategy_junk, d_k=small_sizes, num_heads=small_sizes)
def test_fuzz_make_strategy(name, d_k, num_heads) -> None:
    ok, strat = attempt(asc.make_strategy, name, d_k, num_heads)
    if ok:
        assert isinstance(strat, asc.ScoreScaling) and finite(strat)
        scale = strat.effective_scale().detach()
        assert scale.shape == (int(num_heads),) and finite(scale)


def _tame(*values: object) -> bool:
    """True if the tensors among ``values`` hold no NaN or +inf and nothing above 50 in size."""
    for t in values:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            body = t.double().masked_fill(torch.isneginf(t), 0.0)
            if not bool((body.abs() <= 50).all()):
                return False
    return True


@st.composite
def qkv(draw):
    """Query, key and value of agreeing shapes, one of them sometimes replaced by junk."""
    b, h, lq, lk, d, dv = (draw(st.integers(0 if i > 1 else 1, 3)) for i in range(6))
    dtype = draw(float_dtypes)
    out = []
    for shape in ((b, h, lq, d), (b, h, lk, d), (b, h, lk, dv)):
        n = math.prod(shape)
        values = draw(st.lists(elements, min_size=n, max_size=n))
        out.append(torch.tensor(values, dtype=torch.float64).reshape(shape).to(dtype))
    swap = draw(st.integers(0, 5))
    if swap < 3:
        out[swap] = draw(st.one_of(tensors(3, 5, 3), junk))
    return out


_SOFTCAPS = st.one_of(
    st.none(),
    st.floats(1e-3, 1e3),
    junk.filter(lambda c: not (isinstance(c, float) and c in (1e300, 1e-300))),
)


@settings(FUZZ, max_examples=60)
@given(
    tensors_=qkv(),
    strategy=strategy_junk,
    mask=st.one_of(st.none(), tensors(0, 5, 3), junk),
    is_causal=st.one_of(st.booleans(), junk),
    softcap=_SOFTCAPS,
    need_weights=st.booleans(),
)
def test_fuzz_attention(tensors_, strategy, mask, is_causal, softcap, need_weights) -> None:
    q, k, v = tensors_
    ok, res = attempt(
        asc.scaled_dot_product_attention,
        q,
        k,
        v,
        strategy=strategy,
        attn_mask=mask,
        is_causal=is_causal,
        softcap=softcap,
        need_weights=need_weights,
    )
    if ok:
        assert res.output.shape == (*q.shape[:3], v.shape[-1])
        if finite((q, k, v)) and _tame(q, k, v, mask):
            assert finite(tuple(res))
