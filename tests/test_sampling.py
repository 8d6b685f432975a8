import math

import numpy as np
import pytest
import torch
from bad_input import (
    FUZZ,
    TINY_TRAIN,
    attempt,
    dtypes,
    finite,
    junk,
    reals,
    rhos,
    seeds,
    sizes,
    tensor_or_junk,
    variances,
)
from hypothesis import given
from hypothesis import strategies as st

import attnscale as asc
from attnscale import _sampling as sampling
from attnscale._training import tasks
from guide import factcheck


def ks_statistic(a: torch.Tensor, b: torch.Tensor) -> float:
    """Two-sample Kolmogorov-Smirnov statistic sup |F_a - F_b|."""
    a, b = a.double().sort().values, b.double().sort().values
    grid = torch.cat([a, b])
    fa = torch.searchsorted(a, grid, right=True) / a.numel()
    fb = torch.searchsorted(b, grid, right=True) / b.numel()
    return (fa - fb).abs().max().item()


@pytest.mark.parametrize("d_k", [1, 3, 64, 1024])
def test_chi_shortcut_matches_dot_product(d_k):
    n = 40_000
    dot = asc.sample_scores(d_k, n, method="dot", seed=1, var_q=2.0, var_k=0.5)
    chi = asc.sample_scores(d_k, n, method="chi", seed=2, var_q=2.0, var_k=0.5)
    est_dot, est_chi = asc.variance_estimate(dot), asc.variance_estimate(chi)
    diff_se = math.hypot(est_dot.stderr, est_chi.stderr)
    assert abs(est_dot.variance - est_chi.variance) < 5 * diff_se
    assert abs(dot.mean().item() - chi.mean().item()) < 5 * math.sqrt(2 * d_k / n)
    # KS critical value at alpha = 0.001 is 1.949 * sqrt((n + m) / (n m)).
    assert ks_statistic(dot, chi) < 1.949 * math.sqrt(2 / n)


def test_chi_shortcut_variance_against_closed_form():
    s = asc.sample_scores(1024, 1_000_000, seed=3)
    est = asc.variance_estimate(s)
    assert abs(est.variance - 1024) < 5 * est.stderr


def test_auto_picks_chi_only_when_exact():
    a = asc.sample_scores(16, 1000, seed=5)
    b = asc.sample_scores(16, 1000, seed=5, method="chi")
    assert torch.equal(a, b)
    c = asc.sample_scores(16, 1000, seed=5, mean_q=0.1)
    d = asc.sample_scores(16, 1000, seed=5, mean_q=0.1, method="dot")
    assert torch.equal(c, d)


@pytest.mark.parametrize("method", ["dot", "chi"])
def test_deterministic_for_fixed_seed(method):
    a = asc.sample_scores(32, 5000, seed=11, method=method)
    b = asc.sample_scores(32, 5000, seed=11, method=method)
    c = asc.sample_scores(32, 5000, seed=12, method=method)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    gen = torch.Generator().manual_seed(11)
    assert torch.equal(asc.sample_scores(32, 5000, generator=gen, method=method), a)


def test_chunking_bounds_memory_and_keeps_the_law(monkeypatch):
    shapes = []
    original = sampling._standardised

    def spy(shape, *args):
        shapes.append(shape)
        return original(shape, *args)

    monkeypatch.setattr(sampling, "_standardised", spy)
    monkeypatch.setattr(sampling, "_CHUNK_ELEMENTS", 2 * 64 * 1000)
    s = asc.sample_scores(64, 10_500, method="dot", seed=0)
    assert s.shape == (10_500,)
    assert len(shapes) == 11
    assert max(math.prod(sh) for sh in shapes) <= 2 * 64 * 1000
    est = asc.variance_estimate(s)
    assert abs(est.variance - 64) < 5 * est.stderr


def test_default_chunk_keeps_large_runs_bounded(monkeypatch):
    # With the default chunk size, a run at d_k = 1024 draws its components in blocks of at
    # most 64 MiB of float32, however many samples it asks for.
    blocks = []
    original = sampling._standardised

    def spy(shape, *args):
        z = original(shape, *args)
        blocks.append((shape, z.numel() * z.element_size()))
        return z

    monkeypatch.setattr(sampling, "_standardised", spy)
    n = 20_000
    s = asc.sample_scores(1024, n, method="dot", seed=0)
    assert len(blocks) > 1, "a 160 MiB draw was not split"
    assert max(size for _, size in blocks) <= 64 * 2**20
    assert sum(shape[1] for shape, _ in blocks) == n
    est = asc.variance_estimate(s)
    assert abs(est.variance - 1024) < 5 * est.stderr


@pytest.mark.parametrize("distribution", ["uniform", "rademacher"])
def test_non_gaussian_components_have_requested_moments(distribution):
    z = sampling._standardised(
        (200_000,), distribution, torch.Generator().manual_seed(0), torch.float64
    )
    assert abs(z.mean().item()) < 5 / math.sqrt(z.numel())
    assert z.var().item() == pytest.approx(1.0, abs=0.02)


def test_correlated_components():
    s = asc.sample_scores(1, 200_000, seed=4, rho=0.8, method="dot", dtype=torch.float64)
    # For d_k = 1, E[q k] = rho.
    assert s.mean().item() == pytest.approx(0.8, abs=5 * math.sqrt(1.64 / 200_000))


def test_variance_estimate_by_hand():
    # 1, 2, 3, 4: deviations ±1.5, ±0.5, so mu_2 = 5/4, mu_4 = 41/16, the unbiased variance is
    # 5/3 and the standard error sqrt((41/16 - 25/16) / 4) = 1/2.
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    est = asc.variance_estimate(x)
    assert est.variance == pytest.approx(5 / 3, rel=1e-12)
    assert est.stderr == pytest.approx(0.5, rel=1e-12)
    assert (est.low, est.high) == pytest.approx((5 / 3 - 0.98, 5 / 3 + 0.98), rel=1e-12)
    narrow = asc.variance_estimate(x, z=1.0)
    assert (narrow.low, narrow.high) == pytest.approx((5 / 3 - 0.5, 5 / 3 + 0.5), rel=1e-12)
    # Large values: every moment scales exactly, with no overflow of the fourth powers.
    big = asc.variance_estimate(x.double() * 1e150)
    assert (big.variance, big.stderr) == pytest.approx((5 / 3 * 1e300, 0.5 * 1e300), rel=1e-12)


def test_variance_estimate_stderr_matches_the_spread_of_variances():
    # The standard error must predict how much the variance varies between samples: for
    # normal data, sd(sample variance) = sigma^2 sqrt(2 / (n - 1)).
    n, reps = 400, 2000
    gen = torch.Generator().manual_seed(0)
    x = 3.0 * torch.randn(reps, n, generator=gen, dtype=torch.float64)
    ests = [asc.variance_estimate(row) for row in x]
    spread = torch.tensor([e.variance for e in ests]).std().item()
    mean_se = sum(e.stderr for e in ests) / reps
    expected = 9.0 * math.sqrt(2 / (n - 1))
    # 2000 replicates: the spread is within ~3% of its expectation; the mean SE within ~1%.
    assert spread == pytest.approx(expected, rel=0.1)
    assert mean_se == pytest.approx(expected, rel=0.05)


def test_dtype_is_respected():
    assert asc.sample_scores(4, 10, seed=0, dtype=torch.float64).dtype == torch.float64
    assert (
        asc.sample_scores(4, 10, seed=0, method="dot", dtype=torch.float64).dtype == torch.float64
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"d_k": 0}, "d_k"),
        ({"d_k": 1.5}, "d_k"),
        ({"num_samples": 0}, "num_samples"),
        ({"num_samples": -5}, "num_samples"),
        ({"var_q": -1.0}, "var_q"),
        ({"var_k": -1.0}, "var_k"),
        ({"rho": -1.01}, "rho"),
        ({"distribution": "cauchy"}, "distribution"),
        ({"method": "fast"}, "method"),
        ({"method": "chi", "mean_q": 1.0}, "chi"),
        ({"rho": 0.5, "distribution": "uniform"}, "rho"),
        ({"seed": -1}, "seed"),
        ({"seed": 1, "generator": torch.Generator()}, "generator or seed"),
    ],
)
def test_validation(kwargs, match):
    args = {"d_k": 8, "num_samples": 10} | kwargs
    with pytest.raises(ValueError, match=match):
        asc.sample_scores(**args)


def test_validation_types():
    with pytest.raises(TypeError, match="dtype"):
        asc.sample_scores(8, 10, dtype=torch.int64)
    with pytest.raises(TypeError, match="num_samples"):
        asc.sample_scores(8, "10")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="samples"):
        asc.variance_estimate([1.0, 2.0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="samples"):
        asc.variance_estimate(torch.ones(2, 2))
    with pytest.raises(ValueError, match="z"):
        asc.variance_estimate(torch.ones(4), z=0)


# -- bad input: a clear error naming the argument, or the right answer (helpers in bad_input.py) --


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
    assert tasks.shuffle_seed(top) == 1_000_002
    assert tasks.shuffle_seed(2**64 - 1_000_003) == 0
    seeds = [top, 2**64 - 1_000_003, 2**64 - 1_000_004]
    first = asc.train("mean", seeds=seeds, **TINY_TRAIN)
    again = asc.train("mean", seeds=seeds, **TINY_TRAIN)
    assert first.seeds == tuple(seeds)
    assert all(finite(first.metric(name)) for name in asc.METRICS)
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
    assert finite(asc.sample_scores(10**30, 4, seed=0))
    with pytest.raises(ValueError, match="d_k"):
        asc.sample_scores(10**400, 4)


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
    ok, res = attempt(
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
        assert res.shape == (int(num_samples),) and res.dtype == dtype and finite(res)


@FUZZ
@given(samples=tensor_or_junk, z=reals)
def test_fuzz_variance_estimate(samples, z) -> None:
    ok, res = attempt(asc.variance_estimate, samples, z=z)
    if ok:
        assert finite(tuple(res)) and res.variance >= 0 and res.low <= res.high
