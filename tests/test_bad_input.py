"""Bad input (issue 12): every case ends in a clear ValueError/TypeError or the right answer.

A clear error names the argument (asserted with ``match=``). Cases the library cannot yet
handle would be kept as strict xfails, with the bug in the reason; there are none now.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attnscale as asc
from attnscale import training
from attnscale._docs import factcheck

NAN, INF = float("nan"), float("inf")
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
TINY_TRAIN = {"epochs": 2, "num_samples": 8, "test_samples": 4, "d_model": 8, "d_k": 4}
TINY_TRAIN["batch_size"] = 4


def _finite(value: object) -> bool:
    """True if every number in ``value`` (floats, tensors, tuples, module parameters) is finite."""
    if isinstance(value, torch.nn.Module):
        return all(_finite(p) for p in value.parameters())
    if isinstance(value, torch.Tensor):
        return not value.is_floating_point() or bool(torch.isfinite(value).all())
    if isinstance(value, tuple | list):
        return all(_finite(v) for v in value)
    if isinstance(value, float):
        return math.isfinite(value)
    return True


# --------------------------------------------------------------------------- integers


def test_theory_takes_d_k_beyond_float_range() -> None:
    assert asc.scaled_dot_product_moments(10**400) == (0.0, 1.0)
    # sqrt(10**400) * (mu_q mu_k) = 1e200; variance mu_q^2 + mu_k^2 + 1 = 3.
    assert asc.scaled_dot_product_moments(10**400, mean_q=1.0, mean_k=1.0) == (1e200, 3.0)
    assert asc.unit_variance_scale(10**400) == 1e-200
    assert asc.dot_product_moments(10**300) == (0.0, 1e300)
    assert asc.init_projection_variance("xavier_uniform", 10**400, 10**400) == 1.0
    assert asc.init_projection_variance("xavier_normal", 3 * 10**400, 10**400) == 1.5
    assert asc.gaussian_logit_entropy(10**400, 1.0) == pytest.approx(400 * math.log(10) - 0.5)


@pytest.mark.parametrize(
    "call",
    [
        lambda: asc.dot_product_moments(10**400),
        lambda: asc.scaled_dot_product_moments(10**400, scale=1.0),
        lambda: asc.unit_variance_scale(10**400, var_q=0.0, mean_k=0.0, mean_q=1e200),
    ],
)
def test_theory_refuses_answers_beyond_float_range(call) -> None:
    with pytest.raises(ValueError, match=r"beyond float range.*d_k"):
        call()


def test_moments_with_a_mean_of_1e200() -> None:
    m = asc.dot_product_moments(4, mean_q=1e200, mean_k=1e-200, var_q=1e-300, var_k=1e-300)
    exact_mean = 4 * Fraction(1e200) * Fraction(1e-200)
    assert m.mean == pytest.approx(float(exact_mean), rel=1e-15)
    assert m.variance == pytest.approx(4e100, rel=1e-15)
    s = asc.scaled_dot_product_moments(
        4, mean_q=1e200, mean_k=1e100, var_q=0, var_k=0, scale=1e-300
    )
    assert s == pytest.approx((4.0, 0.0), rel=1e-14)
    # Var[s] = mu_q^2 var_k = 1e400, beyond float range; its inverse square root is not.
    assert asc.unit_variance_scale(1, mean_q=1e200) == pytest.approx(1e-200, rel=1e-15)
    with pytest.raises(ValueError, match=r"variance.*mean_q"):
        asc.dot_product_moments(1, mean_q=1e200)
    scores = asc.sample_scores(
        4, 3, mean_q=1e200, mean_k=1.0, var_q=0, var_k=0, dtype=torch.float64
    )
    assert scores.tolist() == [4e200] * 3
    with pytest.raises(ValueError, match="float64"):
        asc.sample_scores(4, 3, mean_q=1e200, mean_k=1.0, var_q=0, var_k=0)


@pytest.mark.parametrize("seed", [2**64, 2**100, -1])
def test_seeds_outside_64_bits_are_refused(seed: int) -> None:
    with pytest.raises(ValueError, match="seed"):
        asc.sample_scores(4, 3, seed=seed)
    with pytest.raises(ValueError, match="seed"):
        asc.make_model(d_model=8, d_k=4, seed=seed)
    with pytest.raises(ValueError, match="seed"):
        asc.make_task("mean", 2, 2, 2, seed=seed)
    with pytest.raises(ValueError, match="seeds"):
        asc.train("mean", seeds=seed, **TINY_TRAIN)
    with pytest.raises(ValueError, match="seed"):
        factcheck.check_claims(seed=seed)


@pytest.mark.parametrize("seed", [1.0, True, "1", None, torch.tensor(1)])
def test_non_integer_seeds_are_refused(seed: object) -> None:
    if seed is None:  # None means "the default" where it is allowed
        with pytest.raises(TypeError, match="seed"):
            asc.make_model(d_model=8, d_k=4, seed=seed)  # type: ignore[arg-type]
        return
    with pytest.raises(TypeError, match="seed"):
        asc.sample_scores(4, 3, seed=seed)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="seed"):
        asc.make_model(d_model=8, d_k=4, seed=seed)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="seeds"):
        asc.train("mean", seeds=[seed], **TINY_TRAIN)  # type: ignore[list-item]


def test_largest_seed_is_torchs_largest() -> None:
    top = 2**64 - 1
    gen = torch.Generator().manual_seed(top)
    assert torch.equal(asc.sample_scores(8, 5, seed=top), asc.sample_scores(8, 5, generator=gen))
    a = asc.make_model(d_model=8, d_k=4, seed=top)
    b = asc.make_model(d_model=8, d_k=4, seed=top)
    assert torch.equal(a.q_proj.weight, b.q_proj.weight)


def test_seeds_that_overflow_only_after_the_shuffle_offset() -> None:
    top = 2**64 - 1
    # The shuffle seed is seed + 1000003, wrapped into 64 bits.
    assert training._shuffle_seed(top) == 1_000_002
    assert training._shuffle_seed(2**64 - 1_000_003) == 0
    seeds = [top, 2**64 - 1_000_003, 2**64 - 1_000_004]
    first = asc.train("mean", seeds=seeds, **TINY_TRAIN)
    again = asc.train("mean", seeds=seeds, **TINY_TRAIN)
    assert first.seeds == tuple(seeds)
    assert all(_finite(first.metric(name)) for name in asc.METRICS)
    assert torch.equal(first.loss, again.loss)
    assert torch.equal(first.test_loss, again.test_loss)


@pytest.mark.parametrize("np_int", [np.int64, np.int32, np.uint64, np.int8, np.uint16])
def test_numpy_integer_seeds_act_as_python_ints(np_int: type) -> None:
    seed = 7
    assert torch.equal(
        asc.sample_scores(8, 5, seed=np_int(seed)), asc.sample_scores(8, 5, seed=seed)
    )
    x_np, y_np = asc.make_task("retrieval", 3, 4, 6, seed=np_int(seed))
    x, y = asc.make_task("retrieval", 3, 4, 6, seed=seed)
    assert torch.equal(x_np, x) and torch.equal(y_np, y)
    a = asc.make_model("block", d_model=8, num_heads=2, seed=np_int(seed))
    b = asc.make_model("block", d_model=8, num_heads=2, seed=seed)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    res_np = asc.train("mean", seeds=[np_int(seed), np_int(seed + 1)], **TINY_TRAIN)
    res = asc.train("mean", seeds=[seed, seed + 1], **TINY_TRAIN)
    assert torch.equal(res_np.loss, res.loss)
    assert res_np.seeds == res.seeds and all(type(s) is int for s in res_np.seeds)
    one = asc.train("mean", seeds=np_int(seed), **TINY_TRAIN)
    assert torch.equal(one.loss, res.loss[:1])


def test_numpy_uint64_top_seed() -> None:
    top = np.uint64(2**64 - 1)
    assert torch.equal(asc.sample_scores(8, 5, seed=top), asc.sample_scores(8, 5, seed=2**64 - 1))
    res = asc.train("mean", seeds=np.array([2**64 - 1], dtype=np.uint64), **TINY_TRAIN)
    assert res.seeds == (2**64 - 1,)


@pytest.mark.parametrize("size", [10**30, 2**64, 10**400])
def test_sizes_too_large_to_allocate_are_a_clear_error(size: int) -> None:
    for method in ("auto", "dot"):
        with pytest.raises(ValueError, match="num_samples"):
            asc.sample_scores(4, size, method=method)
    with pytest.raises(ValueError, match="d_k"):
        asc.sample_scores(size, 1, method="dot")
    with pytest.raises(ValueError, match="num_samples"):
        asc.make_task("mean", size, 2, 2)
    with pytest.raises(ValueError, match="d_model"):
        asc.make_task("mean", 2, 2, size)
    with pytest.raises(ValueError, match="num_samples"):
        asc.train("mean", **{**TINY_TRAIN, "num_samples": size})
    with pytest.raises(ValueError, match="d_model"):
        asc.make_model(d_model=size, d_k=4)
    with pytest.raises(ValueError, match="d_k"):
        asc.make_model(d_model=4, d_k=size)
    with pytest.raises(ValueError, match="d_model"):
        asc.MultiHeadAttention(size, 1)
    with pytest.raises(ValueError, match="head_dim"):
        asc.MultiHeadAttention(8, 2, head_dim=size)


def test_chi_method_needs_d_k_within_float_range() -> None:
    assert _finite(asc.sample_scores(10**30, 4, seed=0))
    with pytest.raises(ValueError, match="d_k"):
        asc.sample_scores(10**400, 4)


@pytest.mark.parametrize("name", asc.SCALING_STRATEGIES)
def test_strategies_with_huge_sizes(name: str) -> None:
    for d_k, heads in ((10**30, 1), (10**400, 1)):
        try:
            strat = asc.make_strategy(name, d_k, heads)
        except ValueError as err:  # the strategies with (d_k,) parameters cannot allocate them
            assert "d_k" in str(err)
            continue
        scale = strat.effective_scale().detach()
        assert _finite(scale)
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


# --------------------------------------------------------------------------- types


def test_string_dtype_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="dtype"):
        asc.sample_scores(4, 3, dtype="float32")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dtype"):
        asc.sample_scores(4, 3, dtype=torch.int32)
    with pytest.raises(TypeError, match="dtype"):
        asc.MultiHeadAttention(8, 2, dtype="float32")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dtype"):
        asc.SimpleAttentionModel(8, 4, dtype="float32")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dtype"):
        asc.AttentionBlock(8, 2, dtype="float32")  # type: ignore[arg-type]


@pytest.mark.parametrize("device", ["meta", torch.device("meta"), "nope", 3.5])
def test_device_that_cannot_hold_data(device: object) -> None:
    with pytest.raises(ValueError, match="device"):
        asc.make_model(d_model=8, d_k=4, device=device)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="device"):
        asc.MultiHeadAttention(8, 2, device=device)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="device"):
        asc.SimpleAttentionModel(8, 4, device=device)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="device"):
        asc.AttentionBlock(8, 2, device=device)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="device"):
        asc.train("mean", device=device, **TINY_TRAIN)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "lrs", [torch.tensor([1e-3, 1e-2]), np.array([1e-3, 1e-2]), np.array([1e-3, 1e-2], "f4")]
)
def test_learning_rates_as_a_tensor_or_array_train_like_the_list(lrs: object) -> None:
    res = asc.train("mean", lrs=lrs, **TINY_TRAIN)
    ref = asc.train("mean", lrs=[1e-3, 1e-2], **TINY_TRAIN)
    assert torch.equal(res.loss, ref.loss)
    assert torch.equal(res.test_loss, ref.test_loss)
    assert res.lrs == pytest.approx(ref.lrs, rel=1e-7)


@pytest.mark.parametrize(
    "lrs",
    [
        torch.tensor([1e-3, 1e-2]),
        np.array([1e-3, 1e-2], "f4"),
        [np.float32(1e-3), np.float16(1e-2)],
    ],
)
def test_float32_learning_rates_are_recorded_as_given(lrs: object) -> None:
    res = asc.train("mean", lrs=lrs, **TINY_TRAIN)
    assert res.lrs == (1e-3, 1e-2)
    assert res.select(lr=1e-3) == [0]


@pytest.fixture(scope="module")
def small_result() -> asc.TrainingResult:
    return asc.train("mean", strategies=["none", "cosine"], **TINY_TRAIN)


@pytest.mark.parametrize("index", [1.5, 1.0, True, "0", None, torch.tensor(0)])
def test_state_dict_index_must_be_an_integer(small_result, index: object) -> None:
    with pytest.raises(TypeError, match="index"):
        small_result.state_dict(index)


@pytest.mark.parametrize("index", [2, -1, 2**64, 10**400])
def test_state_dict_index_must_be_in_range(small_result, index: int) -> None:
    with pytest.raises(ValueError, match="index"):
        small_result.state_dict(index)


def test_state_dict_takes_numpy_integers(small_result) -> None:
    a, b = small_result.state_dict(np.int64(1)), small_result.state_dict(1)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("name", ["nope", "", 3, None, "test_loss"])
def test_metric_name_must_be_known(small_result, name: object) -> None:
    with pytest.raises(ValueError, match="name"):
        small_result.metric(name)  # type: ignore[arg-type]
    if name != "test_loss":
        with pytest.raises(ValueError, match="name"):
            small_result.by_variant(name)  # type: ignore[arg-type]


def test_select_needs_a_finite_lr(small_result) -> None:
    with pytest.raises(TypeError, match="lr"):
        small_result.select(lr="1e-3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lr"):
        small_result.select(lr=NAN)


# --------------------------------------------------------------------------- temperatures


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("temperature", [1e-300, 5e-324, 1e-45, 1e-8])
def test_tiny_temperature_gives_the_argmax(dtype: torch.dtype, temperature: float) -> None:
    z = torch.tensor([[0.5, 1.0, -0.5, 0.25], [2.0, 2.0, -INF, 0.0]], dtype=dtype)
    p = asc.tempered_softmax(z, temperature)
    assert p.tolist() == [[0.0, 1.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]]  # ties shared equally
    assert asc.max_probability(z, temperature=temperature).tolist() == [1.0, 0.5]
    h = asc.softmax_entropy(z, temperature=temperature)
    assert h.tolist() == pytest.approx([0.0, math.log(2)], abs=1e-6)
    assert asc.saturated_fraction(z, temperature=temperature) == 0.5
    stats = asc.softmax_stats(z, temperature=temperature)
    assert all(_finite(t) for t in stats)
    assert stats.max_probability.tolist() == [1.0, 0.5]
    assert stats.jacobian_frobenius[0].item() == 0.0


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("temperature", [1e39, 1e300, 1.7e308])
def test_huge_temperature_gives_uniform(dtype: torch.dtype, temperature: float) -> None:
    z = torch.tensor([[0.5, 1.0, -0.5, 0.25], [100.0, -100.0, -INF, 0.0]], dtype=dtype)
    p = asc.tempered_softmax(z, temperature)
    expected = torch.tensor([[0.25] * 4, [1 / 3, 1 / 3, 0.0, 1 / 3]], dtype=p.dtype)
    assert torch.allclose(p, expected, rtol=1e-6, atol=0)
    h = asc.softmax_entropy(z, temperature=temperature)
    assert h.tolist() == pytest.approx([math.log(4), math.log(3)], rel=1e-6)
    stats = asc.softmax_stats(z, temperature=temperature)
    assert all(_finite(t) for t in stats)
    assert stats.normalized_entropy[0].item() == pytest.approx(1.0, rel=1e-6)
    assert stats.jacobian_frobenius[0].item() == pytest.approx(math.sqrt(3) / 4, rel=1e-6)
    assert asc.saturated_fraction(z, temperature=temperature) == 0.0


@pytest.mark.parametrize("temperature", [0.0, -1.0, NAN, INF, 10**400, "1", None, True])
def test_invalid_temperature(temperature: object) -> None:
    error = TypeError if isinstance(temperature, str | type(None) | bool) else ValueError
    with pytest.raises(error, match="temperature"):
        asc.tempered_softmax(torch.zeros(3), temperature)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- nearly one-hot rows


def _reference_frobenius(row: list[float]) -> float:
    """||diag(p) - p p^T||_F in float64, diagonal p_i (1 - p_i) with 1 - p_i summed exactly."""
    p = torch.softmax(torch.tensor(row, dtype=torch.float64), dim=-1)
    jac = -torch.outer(p, p)
    for i in range(len(row)):
        jac[i, i] = p[i] * torch.cat([p[:i], p[i + 1 :]]).sum()
    return float(torch.linalg.matrix_norm(jac))


@pytest.mark.parametrize("dtype, rel", [(torch.float32, 1e-5), (torch.float64, 1e-12)])
@pytest.mark.parametrize("row", [[0.0, -80.0], [0.0, -80.0, -85.0], [-80.0, 0.0, -100.0, -81.0]])
def test_jacobian_norm_of_nearly_one_hot_rows(row, dtype, rel) -> None:
    expected = _reference_frobenius(row)
    assert expected > 0
    if len(row) == 2:  # J = p1 p2 [[1, -1], [-1, 1]]
        p2 = math.exp(-80) / (1 + math.exp(-80))
        assert expected == pytest.approx(2 * (1 - p2) * p2, rel=1e-14)
    z = torch.tensor(row, dtype=dtype)
    got = asc.softmax_jacobian_norm(z).item()
    assert got != 0 and got == pytest.approx(expected, rel=rel)
    assert asc.softmax_stats(z).jacobian_frobenius.item() == pytest.approx(expected, rel=rel)
    jac = asc.softmax_jacobian(z).double()
    assert float(torch.linalg.matrix_norm(jac)) == pytest.approx(expected, rel=rel)


# --------------------------------------------------------------------------- module inputs


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


def _qkv(dtype: torch.dtype = torch.float32):
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
    ],
)
def test_attention_function_inputs(args, error: type, name: str) -> None:
    with pytest.raises(error, match=name):
        asc.scaled_dot_product_attention(*args(*_qkv()))


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
    q, k, v = _qkv()
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
    q, k, v = _qkv(dtype)
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
            assert _finite(res.output)
            assert res.output[dead].abs().max().item() == 0.0
        for res in (explicit, capped):
            assert _finite(res.weights)
            assert res.weights[dead].abs().max().item() == 0.0
        tol = 3e-2 if dtype == torch.bfloat16 else 1e-5
        assert torch.allclose(fused.output, explicit.output, atol=tol, rtol=tol)


def test_fully_masked_rows_have_zero_finite_gradients() -> None:
    q, k, v = (t.requires_grad_() for t in _qkv())
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False
    for kwargs in ({}, {"need_weights": True}):
        out = asc.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kwargs).output
        grads = torch.autograd.grad(out.sum(), (q, k, v))
        assert all(_finite(g) for g in grads)
        assert grads[0][:, :, 1].abs().max().item() == 0.0


def test_causal_mask_combined_into_dead_rows_and_empty_keys() -> None:
    q, k, v = _qkv()
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


# --------------------------------------------------------------------------- degenerate data


@pytest.mark.parametrize("model", asc.MODELS)
@pytest.mark.parametrize("task", asc.TASKS)
def test_one_token_sequences_train_cleanly(model: str, task: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = asc.train(
            task,
            model=model,
            num_heads=2 if model == "block" else 1,
            strategies=list(asc.SCALING_STRATEGIES),
            seq_len=1,
            **TINY_TRAIN,
        )
    for name in asc.METRICS:
        assert _finite(res.metric(name)), name
    assert _finite(res.final_train_loss) and _finite(res.test_loss)
    assert res.metric("normalized_entropy").abs().max().item() == 0.0
    assert res.metric("logit_std").abs().max().item() == 0.0
    assert res.metric("max_probability").min().item() == pytest.approx(1.0)


@pytest.fixture
def plt():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    yield pyplot
    pyplot.close("all")


@pytest.mark.parametrize(
    "rows, match",
    [
        ({"a": []}, r"rows\['a'\]"),
        ({"a": torch.zeros(0)}, r"rows\['a'\]"),
        ({"a": [0.5, NAN]}, r"rows\['a'\]"),
        ({"a": [0.5, 0.5], "b": [INF, 0.0]}, r"rows\['b'\]"),
        ({"a": "ab"}, r"rows\['a'\]"),
        ({}, "rows"),
    ],
)
def test_probability_rows_refuse_empty_and_non_finite(plt, rows, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        asc.plot_probability_rows(rows)


@pytest.mark.parametrize(
    "x, curves, match",
    [
        ([], {"a": []}, "x"),
        ([1, NAN, 4], {"a": [1.0, 2.0, 3.0]}, "x"),
        ([1, INF, 4], {"a": [1.0, 2.0, 3.0]}, "x"),
        ([[1, 2]], {"a": [[1.0, 2.0]]}, "x"),
        ([1, 2], {"a": [1.0]}, r"curves\['a'\]"),
        ([1, 2], {"a": ["p", "q"]}, r"curves\['a'\]"),
        ([1, 2], {}, "curves"),
    ],
)
def test_strategy_curves_refuse_bad_x_and_curves(plt, x, curves, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        asc.plot_strategy_curves(x, curves)


def test_strategy_curves_leave_non_finite_values_out(plt) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ax = asc.plot_strategy_curves([1, 2, 4], {"a": [1.0, NAN, 2.0], "b": [INF, 1.0, -INF]})
    assert len(ax.get_lines()) == 2


@pytest.mark.parametrize(
    "curves",
    [{"a": []}, {"a": np.zeros((0, 3))}, {"a": np.zeros((3, 0))}, {"a": torch.zeros(2, 2, 2)}],
)
def test_seed_bands_refuse_empty_curves(plt, curves) -> None:
    with pytest.raises(ValueError, match=r"curves\['a'\]"):
        asc.plot_seed_bands(curves)


@pytest.mark.parametrize("band", ["range", "std"])
def test_seed_bands_leave_non_finite_points_out(plt, band: str) -> None:
    curves = {
        "diverged": [[1.0, NAN, 2.0, 3.0], [1.0, 2.0, -INF, 3.0]],
        "ok": [[1.0, 2.0, 3.0, 4.0], [2.0, 3.0, 4.0, 5.0]],
        "all nan": [[NAN] * 4],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ax = asc.plot_seed_bands(curves, band=band)
    mean = ax.get_lines()[0].get_ydata()
    assert np.isnan(mean[1]) and np.isnan(mean[2]) and mean[0] == 1.0 and mean[3] == 3.0
    assert np.array_equal(ax.get_lines()[1].get_ydata(), [1.5, 2.5, 3.5, 4.5])
    with pytest.raises(ValueError, match="band"):
        asc.plot_seed_bands(curves, band="iqr")


def test_training_metric_plot_needs_a_result(plt, small_result) -> None:
    with pytest.raises(TypeError, match="result"):
        asc.plot_training_metric({"loss": [1.0]}, "loss")
    with pytest.raises(ValueError, match="name"):
        asc.plot_training_metric(small_result, "nope")


# --------------------------------------------------------------------------- side effects


def test_check_claims_leaves_the_global_rng_alone(monkeypatch) -> None:
    # The cheap checks; 5.3 builds nn layers, which draw from the global generator.
    cheap = [c for c in factcheck._CHECKS if c.__name__ in ("_check_2_1", "_check_5_3")]
    assert len(cheap) == 2
    monkeypatch.setattr(factcheck, "_CHECKS", tuple(cheap))
    torch.manual_seed(123)
    before = torch.get_rng_state()
    first = factcheck.check_claims(seed=np.int64(4))
    assert torch.equal(torch.get_rng_state(), before)
    second = factcheck.check_claims(seed=4)
    assert [c.numbers for c in first] == [c.numbers for c in second]


def test_model_and_training_leave_the_global_rng_alone() -> None:
    torch.manual_seed(321)
    before = torch.get_rng_state()
    asc.make_model("simple", d_model=8, d_k=4, seed=2**64 - 1)
    asc.make_model("block", d_model=8, num_heads=2, seed=3, strategy="folded_init")
    asc.train("retrieval", strategies=["cosine", "none"], model="block", num_heads=2, **TINY_TRAIN)
    asc.sample_scores(4, 10, seed=1)
    asc.make_task("retrieval", 2, 3, 4, seed=1)
    assert torch.equal(torch.get_rng_state(), before)


def test_failed_calls_leave_the_global_rng_alone() -> None:
    before = torch.get_rng_state()
    with pytest.raises(ValueError, match="strategy"):
        asc.make_model(d_model=8, d_k=4, strategy="nope")
    with pytest.raises(ValueError, match="strategy"):
        asc.train("mean", strategies=["none", "nope"], **TINY_TRAIN)
    assert torch.equal(torch.get_rng_state(), before)


# --------------------------------------------------------------------------- fuzz

FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

_JUNK_SCALARS = [
    None,
    "x",
    "float32",
    NAN,
    INF,
    -INF,
    -1,
    0,
    -2.5,
    2.5,
    1e-300,
    1e300,
    10**400,
    -(10**400),
    2**64,
    True,
    np.int64(-3),
    np.float32(NAN),
    Fraction(1, 3),
    [],
    [1.0],
    torch.tensor(2.0),
    torch.empty(0),
]
junk = st.sampled_from(_JUNK_SCALARS)
sizes = st.one_of(st.integers(1, 12), junk, st.integers(1, 12).map(np.int32))
reals = st.one_of(st.floats(-1e3, 1e3), st.floats(allow_nan=True, allow_infinity=True), junk)
variances = st.one_of(st.floats(0, 10), reals)
rhos = st.one_of(st.floats(-1, 1), reals)
seeds = st.one_of(st.integers(0, 2**64 - 1), junk, st.integers(-5, 5).map(np.int64))
float_dtypes = st.sampled_from(FLOAT_DTYPES)
dtypes = st.one_of(float_dtypes, st.sampled_from([torch.int64, torch.bool, "float32", None]))
elements = st.one_of(
    st.floats(-50, 50), st.sampled_from([NAN, INF, -INF, 1e30, -1e30, 0.0, 65504.0])
)


@st.composite
def tensors(draw, min_dim: int = 1, max_dim: int = 3, max_side: int = 4) -> torch.Tensor:
    shape = draw(st.lists(st.integers(0, max_side), min_size=min_dim, max_size=max_dim))
    values = draw(st.lists(elements, min_size=math.prod(shape), max_size=math.prod(shape)))
    dtype = draw(
        st.sampled_from([*FLOAT_DTYPES, torch.float32, torch.float32, torch.int64, torch.bool])
    )
    t = torch.tensor(values, dtype=torch.float64).reshape(shape)
    if dtype in (torch.int64, torch.bool):
        return torch.nan_to_num(t).clamp(-100, 100).to(dtype)
    return t.to(dtype)


tensor_or_junk = st.one_of(tensors(), tensors(min_dim=0, max_dim=0), junk)


def _attempt(call, *args, **kwargs):
    """Run ``call``; return ``(True, result)``, or ``(False, None)`` for ValueError/TypeError."""
    try:
        return True, call(*args, **kwargs)
    except (ValueError, TypeError):
        return False, None


@FUZZ
@given(d_k=sizes, mean_q=reals, mean_k=reals, var_q=variances, var_k=variances, rho=rhos)
def test_fuzz_theory(d_k, mean_q, mean_k, var_q, var_k, rho) -> None:
    kw = {"mean_q": mean_q, "mean_k": mean_k, "var_q": var_q, "var_k": var_k, "rho": rho}
    for fn in (asc.dot_product_moments, asc.scaled_dot_product_moments):
        ok, res = _attempt(fn, d_k, **kw)
        if ok:
            assert isinstance(res, asc.Moments) and _finite(tuple(res)) and res.variance >= 0
    ok, res = _attempt(asc.unit_variance_scale, d_k, **kw)
    if ok:
        assert math.isfinite(res) and res > 0


@FUZZ
@given(d_k=sizes, scale=reals, init=st.one_of(st.sampled_from(["lecun", "xavier_normal"]), junk))
def test_fuzz_theory_scale_and_init(d_k, scale, init) -> None:
    ok, res = _attempt(asc.scaled_dot_product_moments, d_k, scale=scale)
    if ok:
        assert _finite(tuple(res)) and res.variance >= 0
    ok, res = _attempt(asc.init_projection_variance, init, d_k, d_k)
    if ok:
        assert math.isfinite(res) and res > 0
    ok, res = _attempt(asc.gaussian_logit_entropy, d_k, scale)
    if ok:
        assert 0 <= res <= math.log(int(d_k)) + 1e-12


@FUZZ
@given(
    d_k=sizes,
    num_samples=sizes,
    distribution=st.one_of(st.sampled_from(asc.DISTRIBUTIONS), junk),
    method=st.one_of(st.sampled_from(["auto", "dot", "chi"]), junk),
    mean_q=reals,
    var_k=variances,
    rho=rhos,
    scale=reals,
    seed=seeds,
    dtype=dtypes,
)
def test_fuzz_sampling(
    d_k, num_samples, distribution, method, mean_q, var_k, rho, scale, seed, dtype
):
    ok, res = _attempt(
        asc.sample_scores,
        d_k,
        num_samples,
        distribution=distribution,
        method=method,
        mean_q=mean_q,
        var_k=var_k,
        rho=rho,
        scale=scale,
        seed=seed,
        dtype=dtype,
    )
    if ok:
        assert res.shape == (int(num_samples),) and res.dtype == dtype and _finite(res)


@FUZZ
@given(samples=tensor_or_junk, z=reals)
def test_fuzz_variance_estimate(samples, z) -> None:
    ok, res = _attempt(asc.variance_estimate, samples, z=z)
    if ok:
        assert _finite(tuple(res)) and res.variance >= 0 and res.low <= res.high


@FUZZ
@given(
    logits=tensor_or_junk,
    temperature=st.one_of(st.floats(1e-300, 1e300), reals),
    threshold=st.one_of(st.floats(0.01, 0.99), reals),
    norm=st.one_of(st.sampled_from(["frobenius", "spectral"]), junk),
    normalized=st.booleans(),
)
def test_fuzz_softmax(logits, temperature, threshold, norm, normalized) -> None:
    ok, p = _attempt(asc.tempered_softmax, logits, temperature)
    if ok:
        assert _finite(p) and bool(((p >= 0) & (p <= 1)).all())
        if p.numel():
            assert torch.allclose(p.double().sum(-1), torch.ones(()).double(), atol=1e-2)
    ok, h = _attempt(asc.softmax_entropy, logits, normalized=normalized, temperature=temperature)
    if ok:
        assert _finite(h) and bool((h >= 0).all())
    ok, m = _attempt(asc.max_probability, logits, temperature=temperature)
    if ok:
        assert _finite(m) and bool(((m > 0) & (m <= 1)).all())
    ok, frac = _attempt(
        asc.saturated_fraction, logits, threshold=threshold, temperature=temperature
    )
    if ok:
        assert 0 <= frac <= 1
    for fn, kwargs in (
        (asc.softmax_jacobian, {}),
        (asc.softmax_jacobian_norm, {"norm": norm}),
        (asc.softmax_stats, {"temperature": temperature}),
    ):
        ok, res = _attempt(fn, logits, **kwargs)
        if ok:
            assert _finite(res)
    grad = logits if isinstance(logits, torch.Tensor) else torch.ones(3)
    ok, res = _attempt(asc.logit_gradient, logits, grad)
    if ok:
        assert _finite(res)


@FUZZ
@given(logits=tensor_or_junk, cap=st.one_of(st.floats(1e-30, 1e30), junk))
def test_fuzz_soft_cap(logits, cap) -> None:
    if isinstance(cap, float) and math.isfinite(cap) and not 1e-30 <= cap <= 1e30:
        cap = 2.5  # caps beyond float32's range: see test_soft_cap_with_extreme_caps
    ok, res = _attempt(asc.soft_cap, logits, cap)
    if ok and _finite(logits):
        # |c tanh(x / c)| <= c, up to rounding c to the logits' dtype (half an ulp; bfloat16's
        # relative spacing is 2^-7, so a fixed 0.1% is not enough)
        tol = 1 + torch.finfo(res.dtype).eps
        assert _finite(res) and bool((res.double().abs() <= float(cap) * tol).all())


@pytest.mark.parametrize("cap", [1e300, 1e39, 1e-300])
def test_soft_cap_with_extreme_caps(cap: float) -> None:
    z = torch.tensor([0.0, 1.0, -3.0])
    expected = (torch.tanh(z.double() / cap) * cap).float()
    assert torch.equal(asc.soft_cap(z, cap), expected)
    q = torch.randn(1, 1, 2, 4)
    assert _finite(asc.scaled_dot_product_attention(q, q, q, softcap=cap).output)


_STRATEGY_JUNK = st.one_of(st.sampled_from(asc.SCALING_STRATEGIES), junk)
_SMALL_SIZES = st.one_of(
    st.integers(1, 8), st.sampled_from([None, "4", NAN, -1, 0, 2.5, 4.0, True, torch.tensor(4)])
)


@FUZZ
@given(name=_STRATEGY_JUNK, d_k=_SMALL_SIZES, num_heads=_SMALL_SIZES)
def test_fuzz_make_strategy(name, d_k, num_heads) -> None:
    ok, strat = _attempt(asc.make_strategy, name, d_k, num_heads)
    if ok:
        assert isinstance(strat, asc.ScoreScaling) and _finite(strat)
        scale = strat.effective_scale().detach()
        assert scale.shape == (int(num_heads),) and _finite(scale)


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
    strategy=_STRATEGY_JUNK,
    mask=st.one_of(st.none(), tensors(0, 5, 3), junk),
    is_causal=st.one_of(st.booleans(), junk),
    softcap=_SOFTCAPS,
    need_weights=st.booleans(),
)
def test_fuzz_attention(tensors_, strategy, mask, is_causal, softcap, need_weights) -> None:
    q, k, v = tensors_
    ok, res = _attempt(
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
        if _finite((q, k, v)) and _tame(q, k, v, mask):
            assert _finite(tuple(res))


@FUZZ
@given(
    model=st.one_of(st.sampled_from(asc.MODELS), junk),
    d_model=st.one_of(st.sampled_from([4, 8, 12]), junk),
    d_k=_SMALL_SIZES,
    num_heads=st.one_of(st.sampled_from([1, 2, 4]), _SMALL_SIZES),
    strategy=_STRATEGY_JUNK,
    seed=seeds,
    device=st.sampled_from([None, "cpu", torch.device("cpu"), "meta", "cuda:7", "nope", 3]),
)
def test_fuzz_make_model(model, d_model, d_k, num_heads, strategy, seed, device) -> None:
    before = torch.get_rng_state()
    ok, built = _attempt(
        asc.make_model,
        model,
        d_model=d_model,
        d_k=d_k,
        num_heads=num_heads,
        strategy=strategy,
        seed=seed,
        device=device,
    )
    assert torch.equal(torch.get_rng_state(), before)
    if ok:
        assert _finite(built)
        out = built(torch.randn(2, 3, int(d_model)), need_weights=True)
        assert _finite(tuple(out))


@settings(max_examples=8, deadline=None)
@given(
    seeds_=st.one_of(st.integers(0, 2**64 - 1), junk),
    lrs=st.one_of(st.floats(1e-4, 1e-1), junk),
    seq_len=st.one_of(st.integers(1, 3), junk),
    batch_size=st.one_of(st.integers(1, 8), junk),
)
def test_fuzz_train(seeds_, lrs, seq_len, batch_size) -> None:
    kw = {**TINY_TRAIN, "epochs": 1, "seq_len": seq_len, "batch_size": batch_size}
    ok, res = _attempt(asc.train, "mean", seeds=seeds_, lrs=lrs, **kw)
    if ok and max(res.lrs) <= 10:  # a learning rate of 1e300 may diverge, honestly
        assert all(_finite(res.metric(name)) for name in asc.METRICS)
