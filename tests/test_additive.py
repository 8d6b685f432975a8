"""Tests of attnscale._additive: a loop reference, masks, dead rows, gradients, fp16, bad input."""

from __future__ import annotations

import math

import pytest
import torch

from attnscale import AdditiveAttention, scaled_dot_product_attention
from guide import style

BATCH, Q_LEN, K_LEN, D_Q, D_K, HIDDEN, D_V = 2, 3, 5, 6, 4, 7, 3


def _module(dtype: torch.dtype = torch.float64, seed: int = 0) -> AdditiveAttention:
    torch.manual_seed(seed)
    return AdditiveAttention(query_dim=D_Q, key_dim=D_K, hidden=HIDDEN, dtype=dtype)


def _inputs(
    dtype: torch.dtype = torch.float64, seed: int = 1
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(BATCH, Q_LEN, D_Q, generator=g, dtype=dtype)
    k = torch.randn(BATCH, K_LEN, D_K, generator=g, dtype=dtype)
    v = torch.randn(BATCH, K_LEN, D_V, generator=g, dtype=dtype)
    return q, k, v


def _reference(
    attn: AdditiveAttention,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One (query, key) pair at a time, with plain matrix-vector products and math.exp."""
    w_q = attn.q_proj.weight.detach().double()
    w_k = attn.k_proj.weight.detach().double()
    w_v = attn.score_proj.weight.detach().double()[0]
    q, k, v = q.detach().double(), k.detach().double(), v.detach().double()
    batch, n, m = q.shape[0], q.shape[1], k.shape[1]
    scores = torch.zeros(batch, n, m, dtype=torch.float64)
    weights = torch.zeros(batch, n, m, dtype=torch.float64)
    for b in range(batch):
        for i in range(n):
            for j in range(m):
                scores[b, i, j] = w_v @ torch.tanh(w_q @ q[b, i] + w_k @ k[b, j])
            row = []
            for j in range(m):
                s = float(scores[b, i, j])
                if mask is not None:
                    mb = mask.expand(batch, n, m)[b, i, j]
                    if mask.dtype == torch.bool:
                        s = s if bool(mb) else -math.inf
                    else:
                        s += float(mb)
                row.append(s)
            top = max(row)
            if top == -math.inf:  # every key masked: zero weights
                continue
            e = [math.exp(s - top) for s in row]
            total = sum(e)
            for j in range(m):
                weights[b, i, j] = e[j] / total
    return weights @ v, weights, scores


def test_matches_a_loop_reference_in_float64() -> None:
    attn = _module()
    q, k, v = _inputs()
    res = attn(q, k, v, need_weights=True, need_logits=True)
    out, weights, scores = _reference(attn, q, k, v)
    assert res.output.shape == (BATCH, Q_LEN, D_V)
    assert res.weights is not None and res.logits is not None
    torch.testing.assert_close(res.logits, scores, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(res.weights, weights, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(res.output, out, atol=1e-12, rtol=1e-12)
    assert torch.allclose(res.weights.sum(-1), torch.ones(BATCH, Q_LEN, dtype=torch.float64))


def test_weights_and_logits_only_when_asked() -> None:
    attn = _module()
    res = attn(*_inputs())
    assert res.weights is None and res.logits is None
    assert torch.equal(res.output, attn(*_inputs(), need_weights=True).output)


def test_scores_are_bounded_by_the_l1_norm_of_w_v() -> None:
    attn = _module()
    g = torch.Generator().manual_seed(2)
    q = 1e3 * torch.randn(BATCH, Q_LEN, D_Q, generator=g, dtype=torch.float64)  # saturates tanh
    k = 1e3 * torch.randn(BATCH, K_LEN, D_K, generator=g, dtype=torch.float64)
    logits = attn(q, k, torch.zeros(BATCH, K_LEN, 1, dtype=torch.float64), need_logits=True).logits
    assert logits is not None
    bound = attn.score_proj.weight.abs().sum()
    assert logits.abs().max() <= bound
    assert logits.abs().max() > 0.5 * bound  # saturated units push the scores towards it


@pytest.mark.parametrize(
    "mask",
    [
        torch.tensor([[True, False, True, True, False]] * Q_LEN),  # (q_len, k_len)
        (torch.arange(BATCH * Q_LEN * K_LEN).view(BATCH, Q_LEN, K_LEN) % 3 != 1),
        torch.linspace(-2.0, 1.0, Q_LEN * K_LEN, dtype=torch.float64).view(Q_LEN, K_LEN),
        torch.tensor([[0.0, -math.inf, 0.5, -1.0, -math.inf]], dtype=torch.float64),  # (1, k_len)
    ],
    ids=["bool_2d", "bool_3d", "float_2d", "float_neginf"],
)
def test_masks_match_the_reference(mask: torch.Tensor) -> None:
    attn = _module()
    q, k, v = _inputs()
    res = attn(q, k, v, attn_mask=mask, need_weights=True, need_logits=True)
    out, weights, scores = _reference(attn, q, k, v, mask)
    assert res.weights is not None and res.logits is not None
    torch.testing.assert_close(res.weights, weights, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(res.output, out, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(res.logits, scores, atol=1e-12, rtol=1e-12)  # before the mask
    if mask.dtype == torch.bool:
        assert torch.all(res.weights[~mask.expand_as(res.weights)] == 0)


def test_mask_semantics_match_scaled_dot_product_attention() -> None:
    """Same mask, same weights given the same logits: compare through the logits."""
    attn = _module()
    q, k, v = _inputs()
    mask = torch.tensor([[True, True, False, True, False]])
    res = attn(q, k, v, attn_mask=mask, need_weights=True, need_logits=True)
    assert res.logits is not None and res.weights is not None
    # A dot product whose logits are the additive scores: q' = scores, k' = identity.
    q4 = res.logits.unsqueeze(1)  # (batch, 1, q_len, k_len)
    k4 = torch.eye(K_LEN, dtype=torch.float64).expand(BATCH, 1, K_LEN, K_LEN)
    sdpa = scaled_dot_product_attention(
        q4, k4, v.unsqueeze(1), strategy="none", attn_mask=mask, need_weights=True
    )
    assert sdpa.weights is not None
    torch.testing.assert_close(res.weights, sdpa.weights.squeeze(1), atol=1e-12, rtol=0)
    torch.testing.assert_close(res.output, sdpa.output.squeeze(1), atol=1e-12, rtol=0)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_fully_masked_row_gives_zeros_and_zero_gradients(kind: str) -> None:
    attn = _module()
    q, k, v = _inputs()
    q.requires_grad_(True)
    blocked = torch.zeros(Q_LEN, K_LEN, dtype=torch.bool)
    blocked[1] = True  # query row 1 sees no key
    if kind == "bool":
        mask = ~blocked
    else:
        mask = torch.zeros(Q_LEN, K_LEN, dtype=torch.float64).masked_fill(blocked, -math.inf)
    res = attn(q, k, v, attn_mask=mask, need_weights=True)
    assert res.weights is not None
    assert torch.isfinite(res.output).all() and torch.isfinite(res.weights).all()
    assert torch.all(res.weights[:, 1] == 0) and torch.all(res.output[:, 1] == 0)
    assert torch.all(res.weights[:, [0, 2]].sum(-1) > 0.999)
    res.output.sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()
    assert torch.all(q.grad[:, 1] == 0)  # the dead row's query gets no gradient
    assert q.grad[:, 0].abs().sum() > 0
    for p in attn.parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all()


def test_every_row_masked_gives_zero_parameter_gradients() -> None:
    attn = _module()
    q, k, v = _inputs()
    res = attn(q, k, v, attn_mask=torch.zeros(Q_LEN, K_LEN, dtype=torch.bool))
    assert torch.all(res.output == 0)
    res.output.sum().backward()
    for name, p in attn.named_parameters():
        assert p.grad is not None and torch.all(p.grad == 0), name


def test_no_keys_gives_an_empty_row_of_weights_and_zero_output() -> None:
    attn = _module()
    q, _, _ = _inputs()
    k = torch.zeros(BATCH, 0, D_K, dtype=torch.float64)
    v = torch.zeros(BATCH, 0, D_V, dtype=torch.float64)
    res = attn(q, k, v, need_weights=True)
    assert res.output.shape == (BATCH, Q_LEN, D_V) and torch.all(res.output == 0)
    assert res.weights is not None and res.weights.shape == (BATCH, Q_LEN, 0)


def test_gradients_reach_all_three_weights() -> None:
    attn = _module()
    q, k, v = _inputs()
    target = torch.randn(BATCH, Q_LEN, D_V, generator=torch.Generator().manual_seed(3))
    loss = (attn(q, k, v).output - target.double()).square().sum()
    loss.backward()
    grads = {name: p.grad for name, p in attn.named_parameters()}
    assert set(grads) == {"q_proj.weight", "k_proj.weight", "score_proj.weight"}
    for name, grad in grads.items():
        assert grad is not None and grad.abs().sum() > 0, name
    # and they are the right gradients: a finite difference on one entry of W_q
    eps = 1e-6
    with torch.no_grad():
        attn.q_proj.weight[0, 0] += eps
        up = (attn(q, k, v).output - target.double()).square().sum()
        attn.q_proj.weight[0, 0] -= 2 * eps
        down = (attn(q, k, v).output - target.double()).square().sum()
    fd = (up - down) / (2 * eps)
    assert grads["q_proj.weight"] is not None
    assert float(grads["q_proj.weight"][0, 0]) == pytest.approx(float(fd), rel=1e-6, abs=1e-9)


def test_no_bias_and_default_init_bounds() -> None:
    attn = AdditiveAttention(query_dim=64, key_dim=16, hidden=32)
    assert attn.q_proj.bias is None and attn.k_proj.bias is None and attn.score_proj.bias is None
    assert attn.q_proj.weight.shape == (32, 64) and attn.k_proj.weight.shape == (32, 16)
    assert attn.score_proj.weight.shape == (1, 32)
    assert attn.q_proj.weight.abs().max() <= 1 / math.sqrt(64)  # U(±1/sqrt(fan_in))
    assert attn.score_proj.weight.abs().max() <= 1 / math.sqrt(32)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_softmax_is_float32_accurate(dtype: torch.dtype) -> None:
    attn = _module(torch.float64)
    q, k, v = _inputs()
    low = _module(torch.float64).to(dtype)
    res = low(q.to(dtype), k.to(dtype), v.to(dtype), need_weights=True, need_logits=True)
    assert res.output.dtype == dtype and res.weights is not None and res.logits is not None
    assert res.weights.dtype == dtype
    # The weights are the float32 softmax of the low-precision logits, rounded once to dtype.
    # (torch's CPU softmax already accumulates half precision in float32, so on CPU this checks
    # the result, not that the module asks for float32; the upcast matters on other backends.)
    expected = torch.softmax(res.logits.float(), dim=-1).to(dtype)
    assert torch.equal(res.weights, expected)
    eps = torch.finfo(dtype).eps
    _, ref_weights, _ = _reference(attn, q, k, v)
    assert (res.weights.double() - ref_weights).abs().max() < 8 * eps
    assert torch.isfinite(res.output).all()


def test_float16_with_a_fully_masked_row_has_no_nan() -> None:
    attn = _module(torch.float16)
    q, k, v = (t.half() for t in _inputs())
    mask = torch.ones(Q_LEN, K_LEN, dtype=torch.bool)
    mask[0] = False
    res = attn(q, k, v, attn_mask=mask, need_weights=True)
    assert res.weights is not None and torch.isfinite(res.weights).all()
    assert torch.all(res.weights[:, 0] == 0) and torch.all(res.output[:, 0] == 0)


def test_repr_names_the_sizes() -> None:
    assert "query_dim=6, key_dim=4, hidden=7" in repr(_module())


def test_additive_colour_is_not_a_strategy_colour() -> None:
    taken = {look.colour.lower() for look in [*style.STRATEGIES.values(), *style.VARIANTS.values()]}
    assert style.SCORING["additive"].colour.lower() not in taken


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"query_dim": 0}, ValueError, "query_dim must be a positive integer"),
        ({"key_dim": -3}, ValueError, "key_dim must be a positive integer"),
        ({"hidden": 2.5}, ValueError, "hidden must be a positive integer"),
        ({"hidden": "8"}, TypeError, "hidden must be a positive integer, got str"),
        ({"dtype": torch.int64}, TypeError, "dtype must be a floating dtype"),
        ({"dtype": "float32"}, TypeError, "dtype must be a torch.dtype"),
        ({"device": "meta"}, ValueError, "device='meta' cannot hold data"),
        ({"hidden": 2**62}, ValueError, "hidden, query_dim or key_dim too large"),
    ],
)
def test_bad_constructor_arguments(kwargs: dict, error: type, match: str) -> None:
    args = {"query_dim": 4, "key_dim": 4, "hidden": 8} | kwargs
    with pytest.raises(error, match=match):
        AdditiveAttention(**args)


def _bad_call(**override: object) -> None:
    attn = _module()
    q, k, v = _inputs()
    args = {"query": q, "key": k, "value": v} | override
    attn(args.pop("query"), args.pop("key"), args.pop("value"), **args)


@pytest.mark.parametrize(
    ("override", "error", "match"),
    [
        ({"query": [[1.0]]}, TypeError, "query must be a torch.Tensor, got list"),
        ({"key": torch.ones(BATCH, K_LEN, D_K, dtype=torch.int64)}, TypeError, "key must have a floating"),
        ({"query": torch.ones(Q_LEN, D_Q, dtype=torch.float64)}, ValueError, "query must have at least 3"),
        ({"query": torch.ones(1, BATCH, Q_LEN, D_Q, dtype=torch.float64)}, ValueError, r"query must have shape \(batch, length, 6\)"),
        ({"query": torch.ones(BATCH, Q_LEN, D_K, dtype=torch.float64)}, ValueError, r"query must have shape \(batch, length, 6\), got \(2, 3, 4\)"),
        ({"key": torch.ones(BATCH, K_LEN, D_Q, dtype=torch.float64)}, ValueError, r"key must have shape \(batch, length, 4\)"),
        ({"value": torch.ones(BATCH, K_LEN, dtype=torch.float64)}, ValueError, "value must have at least 3"),
        ({"value": torch.ones(1, BATCH, K_LEN, 2, dtype=torch.float64)}, ValueError, r"value must have shape \(batch, k_len, d_v\)"),
        ({"value": torch.ones(BATCH, K_LEN + 1, D_V, dtype=torch.float64)}, ValueError, "value must have k_len=5 like key"),
        ({"key": torch.ones(BATCH + 1, K_LEN, D_K, dtype=torch.float64)}, ValueError, "must share the batch size"),
        ({"query": torch.ones(BATCH, Q_LEN, D_Q)}, TypeError, r"query has dtype torch.float32, unlike the module's parameters"),
        ({"value": torch.ones(BATCH, K_LEN, D_V)}, TypeError, r"value has dtype torch.float32, unlike"),
        ({"attn_mask": [[True]]}, TypeError, "attn_mask must be a torch.Tensor or None, got list"),
        ({"attn_mask": torch.ones(Q_LEN, K_LEN, dtype=torch.int64)}, TypeError, "attn_mask must be boolean or floating point"),
        ({"attn_mask": torch.ones(K_LEN, dtype=torch.bool)}, ValueError, r"attn_mask must have 2 or 3 dimensions"),
        ({"attn_mask": torch.ones(1, BATCH, Q_LEN, K_LEN, dtype=torch.bool)}, ValueError, r"attn_mask must have 2 or 3 dimensions .* got shape \(1, 2, 3, 5\)"),
        ({"attn_mask": torch.ones(Q_LEN, K_LEN + 1, dtype=torch.bool)}, ValueError, r"broadcast to \(batch, q_len, k_len\) = \(2, 3, 5\)"),
    ],
)  # fmt: skip
def test_bad_forward_arguments_name_the_argument(override: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        _bad_call(**override)
