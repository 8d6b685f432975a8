"""Tests for attnscale._softmax: references are torch.softmax, torch.autograd and closed forms."""

from __future__ import annotations

import math

import pytest
import torch
from bad_input import (
    FLOAT_DTYPES,
    FUZZ,
    INF,
    NAN,
    attempt,
    finite,
    junk,
    reals,
    tensor_or_junk,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import attnscale as asc
from attnscale import (
    gaussian_logit_entropy,
    logit_gradient,
    max_probability,
    saturated_fraction,
    softmax_entropy,
    softmax_jacobian,
    softmax_jacobian_norm,
    softmax_stats,
    tempered_softmax,
)

# float64 reference computations agree to rounding; 1e-10 leaves room for sums over n <= 64.
TOL64 = 1e-10


def _logits(*shape: int, scale: float = 3.0, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return scale * torch.randn(*shape, generator=gen, dtype=torch.float64)


def _reference_entropy(z: torch.Tensor) -> torch.Tensor:
    p = torch.softmax(z, dim=-1)
    return -torch.special.xlogy(p, p).sum(dim=-1)


# --- correctness against references -------------------------------------------------------


def test_tempered_softmax_matches_torch() -> None:
    z = _logits(2, 3, 7)
    for t in (0.3, 1.0, 5.0):
        torch.testing.assert_close(
            tempered_softmax(z, t), torch.softmax(z / t, -1), atol=TOL64, rtol=0
        )


def test_tempered_softmax_limits() -> None:
    z = torch.tensor([[1.0, 3.0, -2.0, 3.0]], dtype=torch.float64)
    cold = tempered_softmax(z, 1e-12)  # ties at the max share the mass
    torch.testing.assert_close(cold, torch.tensor([[0.0, 0.5, 0.0, 0.5]], dtype=torch.float64))
    hot = tempered_softmax(z, 1e12)
    torch.testing.assert_close(hot, torch.full((1, 4), 0.25, dtype=torch.float64))


def test_entropy_matches_reference_and_bounds() -> None:
    z = _logits(4, 5, 64)
    h = softmax_entropy(z)
    assert h.shape == (4, 5)
    torch.testing.assert_close(h, _reference_entropy(z), atol=TOL64, rtol=0)
    assert bool((h >= 0).all()) and bool((h <= math.log(64) + TOL64).all())
    hn = softmax_entropy(z, normalized=True)
    torch.testing.assert_close(hn, h / math.log(64), atol=TOL64, rtol=0)


def test_entropy_extremes_of_the_bounds() -> None:
    assert softmax_entropy(torch.zeros(10)).item() == pytest.approx(math.log(10), abs=1e-6)
    assert softmax_entropy(torch.tensor([1e4, 0.0, -1e4])).item() == 0.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-50, 50, allow_nan=False), min_size=2, max_size=20),
    st.floats(-1e3, 1e3, allow_nan=False),
)
def test_shift_invariance(values: list[float], shift: float) -> None:
    z = torch.tensor(values, dtype=torch.float64)
    torch.testing.assert_close(tempered_softmax(z + shift), tempered_softmax(z), atol=1e-9, rtol=0)
    assert softmax_entropy(z + shift).item() == pytest.approx(softmax_entropy(z).item(), abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-20, 20, allow_nan=False), min_size=2, max_size=20),
    st.lists(st.floats(0, 20, allow_nan=False), min_size=2, max_size=8),
)
def test_entropy_non_increasing_in_beta(values: list[float], betas: list[float]) -> None:
    # dH/dβ = -β Var_p(z) <= 0, so H(softmax(βz)) never rises with β >= 0.
    z = torch.tensor(values, dtype=torch.float64)
    b = torch.tensor(sorted(betas), dtype=torch.float64)
    h = softmax_entropy(b[:, None] * z[None, :])  # (len(betas),)
    assert bool((h.diff() <= 1e-9).all()), h.tolist()
    assert bool((h >= 0).all()) and bool((h <= math.log(len(values)) + 1e-12).all())


def test_max_probability_and_saturation() -> None:
    z = _logits(3, 50, 16)
    torch.testing.assert_close(
        max_probability(z), torch.softmax(z, -1).amax(-1), atol=TOL64, rtol=0
    )
    rows = torch.tensor([[0.0, 0.0], [10.0, 0.0], [3.0, 0.0], [100.0, -100.0]])
    # max p: 0.5, 0.99995, 0.9526, 1.0
    assert saturated_fraction(rows) == 0.5
    assert saturated_fraction(rows, threshold=0.9) == 0.75
    assert saturated_fraction(rows, threshold=0.999) == 0.5
    assert saturated_fraction(rows, temperature=1e3) == 0.0


def test_jacobian_matches_autograd() -> None:
    z = _logits(3, 2, 6)
    jac = softmax_jacobian(z)
    assert jac.shape == (3, 2, 6, 6)
    for idx in ((0, 0), (1, 1), (2, 0)):
        ref = torch.autograd.functional.jacobian(lambda x: torch.softmax(x, -1), z[idx])
        torch.testing.assert_close(jac[idx], ref, atol=TOL64, rtol=0)
    # J is symmetric with zero row sums (shift invariance).
    torch.testing.assert_close(jac, jac.transpose(-1, -2))
    torch.testing.assert_close(jac.sum(-1), torch.zeros(3, 2, 6, dtype=torch.float64))


def test_jacobian_norms_match_dense_norms() -> None:
    z = _logits(40, 16, scale=4.0)
    jac = softmax_jacobian(z)
    fro = torch.linalg.matrix_norm(jac, ord="fro")
    spec = torch.linalg.matrix_norm(jac, ord=2)
    torch.testing.assert_close(softmax_jacobian_norm(z), fro, atol=TOL64, rtol=0)
    torch.testing.assert_close(softmax_jacobian_norm(z, norm="spectral"), spec, atol=1e-9, rtol=0)


def test_jacobian_norm_closed_forms() -> None:
    n = 8
    u = torch.zeros(n, dtype=torch.float64)
    assert softmax_jacobian_norm(u).item() == pytest.approx(math.sqrt(n - 1) / n, abs=1e-12)
    assert softmax_jacobian_norm(u, norm="spectral").item() == pytest.approx(1 / n, abs=1e-12)
    one_hot = torch.tensor([1e4, 0.0, 0.0])
    assert softmax_jacobian_norm(one_hot).item() == 0.0


def test_logit_gradient_matches_autograd() -> None:
    z = _logits(4, 9).requires_grad_(True)
    g = _logits(4, 9, seed=1)
    torch.softmax(z, -1).backward(g)
    assert z.grad is not None
    ours = logit_gradient(z.detach(), g)
    torch.testing.assert_close(ours, z.grad, atol=TOL64, rtol=0)
    # Same as J^T g with the dense Jacobian.
    dense = (softmax_jacobian(z.detach()).transpose(-1, -2) @ g.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(ours, dense, atol=TOL64, rtol=0)


def test_softmax_stats_agrees_with_single_functions() -> None:
    z = _logits(5, 32)
    for t in (1.0, 2.5):
        stats = softmax_stats(z, temperature=t)
        torch.testing.assert_close(stats.entropy, softmax_entropy(z, temperature=t))
        torch.testing.assert_close(
            stats.normalized_entropy, softmax_entropy(z, normalized=True, temperature=t)
        )
        torch.testing.assert_close(stats.max_probability, max_probability(z, temperature=t))
        torch.testing.assert_close(stats.jacobian_frobenius, softmax_jacobian_norm(z / t))


# --- numerics: extreme, masked and half-precision inputs ---------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_extreme_logits_are_finite(dtype: torch.dtype) -> None:
    z = torch.tensor([[1e4, -1e4, 0.0], [-1e4, -1e4, -1e4], [1e4, 1e4, -1e4]], dtype=dtype)
    stats = softmax_stats(z)
    for value in stats:
        assert bool(torch.isfinite(value).all())
    torch.testing.assert_close(
        stats.entropy[:2], torch.tensor([0.0, math.log(3)], dtype=stats.entropy.dtype)
    )
    assert stats.entropy[2].item() == pytest.approx(math.log(2), abs=1e-6)
    assert max_probability(z).tolist() == pytest.approx([1.0, 1 / 3, 0.5], abs=1e-6)
    assert bool(torch.isfinite(softmax_jacobian(z)).all())
    assert bool(torch.isfinite(softmax_jacobian_norm(z, norm="spectral")).all())
    assert bool(torch.isfinite(logit_gradient(z, torch.ones_like(z))).all())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_computed_in_float32(dtype: torch.dtype) -> None:
    z = _logits(6, 20, scale=5.0)
    half = z.to(dtype)
    h = softmax_entropy(half)
    assert h.dtype == torch.float32
    # Reference: the same (rounded) half inputs, computed in float64.
    ref = _reference_entropy(half.double()).float()
    torch.testing.assert_close(h, ref, atol=1e-5, rtol=1e-5)
    assert tempered_softmax(half).dtype == torch.float32
    assert logit_gradient(half, torch.ones_like(half)).dtype == torch.float32


def test_masked_entries() -> None:
    inf = float("inf")
    z = torch.tensor([[2.0, -inf, 0.0, -inf], [-inf, -inf, -inf, 5.0]], dtype=torch.float64)
    p = tempered_softmax(z)
    assert p[0, 1].item() == 0.0 and p[0, 3].item() == 0.0
    torch.testing.assert_close(p[0, [0, 2]], torch.softmax(z[0, [0, 2]], -1))
    h = softmax_entropy(z)
    assert h[0].item() == pytest.approx(_reference_entropy(z[0, [0, 2]]).item(), abs=TOL64)
    assert h[1].item() == 0.0
    assert max_probability(z)[1].item() == 1.0
    jac = softmax_jacobian(z)
    assert bool(torch.isfinite(jac).all())
    assert bool((jac[0, 1] == 0).all()) and bool((jac[0, :, 1] == 0).all())
    assert softmax_jacobian_norm(z)[1].item() == 0.0
    grad = logit_gradient(z, torch.randn(2, 4, dtype=torch.float64))
    assert grad[0, 1].item() == 0.0 and bool((grad[1] == 0).all())


def test_fully_masked_row_raises_naming_the_row() -> None:
    z = torch.zeros(2, 3, 4)
    z[1, 2] = -float("inf")
    for fn in (tempered_softmax, softmax_entropy, max_probability, softmax_jacobian):
        with pytest.raises(ValueError, match=r"row \(1, 2\) is entirely masked"):
            fn(z)
    with pytest.raises(ValueError, match=r"row \(1, 2\)"):
        softmax_jacobian_norm(z)
    with pytest.raises(ValueError, match=r"row \(1, 2\)"):
        saturated_fraction(z)
    with pytest.raises(ValueError, match=r"row \(1, 2\)"):
        logit_gradient(z, torch.zeros_like(z))
    with pytest.raises(ValueError, match=r"row \(0,\)"):
        softmax_stats(torch.full((1, 3), -float("inf")))


# --- validation errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        tempered_softmax,
        softmax_entropy,
        max_probability,
        saturated_fraction,
        softmax_jacobian,
        softmax_jacobian_norm,
        softmax_stats,
    ],
)
def test_bad_logits(fn) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match=r"logits must be a torch\.Tensor"):
        fn([1.0, 2.0])
    with pytest.raises(TypeError, match="logits must have a floating-point dtype"):
        fn(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="logits must have at least 1 dimension"):
        fn(torch.tensor(1.0))
    with pytest.raises(ValueError, match="logits must have a non-empty last dimension"):
        fn(torch.zeros(3, 0))
    with pytest.raises(ValueError, match="logits must not contain NaN"):
        fn(torch.tensor([0.0, float("nan")]))
    with pytest.raises(ValueError, match=r"logits must not contain NaN or \+inf"):
        fn(torch.tensor([0.0, float("inf")]))


def _logit_gradient_of(logits):  # type: ignore[no-untyped-def]
    """logit_gradient with a valid upstream gradient, so that only ``logits`` can be at fault."""
    shape = logits.shape if isinstance(logits, torch.Tensor) else (2,)
    return logit_gradient(logits, torch.ones(shape))


def test_bad_logits_of_logit_gradient() -> None:
    """A list of logits is named as such, not reported as a shape mismatch ("shape None")."""
    test_bad_logits(_logit_gradient_of)
    with pytest.raises(TypeError, match=r"logits must be a torch\.Tensor, got list"):
        logit_gradient([0.0, 1.0], [0.0, 1.0])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"grad_probs must be a torch\.Tensor, got str"):
        logit_gradient(torch.zeros(2), "x")  # type: ignore[arg-type]


def test_normalized_entropy_needs_two_entries() -> None:
    assert softmax_entropy(torch.zeros(3, 1)).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="n >= 2"):
        softmax_entropy(torch.zeros(3, 1), normalized=True)
    with pytest.raises(ValueError, match="n >= 2"):
        softmax_stats(torch.zeros(3, 1))


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.1])
def test_bad_threshold(bad: float) -> None:
    with pytest.raises(ValueError, match="threshold"):
        saturated_fraction(torch.zeros(2, 3), threshold=bad)


def test_saturated_fraction_needs_rows() -> None:
    with pytest.raises(ValueError, match="at least one row"):
        saturated_fraction(torch.zeros(0, 3))


def test_bad_norm() -> None:
    with pytest.raises(ValueError, match="norm must be one of"):
        softmax_jacobian_norm(torch.zeros(3), norm="nuclear")


def test_bad_grad_probs() -> None:
    z = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="grad_probs must have the logits' shape"):
        logit_gradient(z, torch.zeros(3, 2))
    with pytest.raises(TypeError, match="grad_probs must have a floating-point dtype"):
        logit_gradient(z, torch.zeros(2, 3, dtype=torch.int64))
    with pytest.raises(TypeError, match=r"grad_probs must be a torch\.Tensor"):
        logit_gradient(z, [[0.0] * 3] * 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="grad_probs must be finite"):
        logit_gradient(z, torch.tensor([[0.0, float("nan"), 0.0], [0.0, 0.0, 0.0]]))
    with pytest.raises(TypeError, match="logits must have a floating-point dtype"):
        logit_gradient(torch.zeros(2, 3, dtype=torch.int64), torch.zeros(2, 3))


# --- theory: Gaussian logits --------------------------------------------------------------


def test_gaussian_logit_entropy_branches() -> None:
    n = 1024
    assert gaussian_logit_entropy(n, 0.0) == pytest.approx(math.log(n))
    assert gaussian_logit_entropy(n, 1.0) == pytest.approx(math.log(n) - 0.5)
    # Frozen phase: psi(1) - psi(1 - m) ~ (pi^2 / 6) m for small m = sigma_c / sigma.
    sigma = 1e4
    m = math.sqrt(2 * math.log(n)) / sigma
    assert gaussian_logit_entropy(n, sigma) == pytest.approx(math.pi**2 / 6 * m, rel=1e-3)


def test_gaussian_logit_entropy_against_monte_carlo() -> None:
    # In its stated range (sigma^2 well below log n) the first branch is within 0.02 nats.
    # Monte Carlo: 4000 rows; the std of H across rows is < 0.3 nats here, so the standard
    # error is < 0.005 nats, far inside the tolerance.
    gen = torch.Generator().manual_seed(0)
    for n, sigma in ((128, 0.5), (128, 1.0), (1024, 1.0)):
        z = sigma * torch.randn(4000, n, generator=gen, dtype=torch.float64)
        measured = softmax_entropy(z).mean().item()
        assert measured == pytest.approx(gaussian_logit_entropy(n, sigma), abs=0.02)


def test_gaussian_logit_entropy_validation() -> None:
    with pytest.raises(ValueError, match="n must be an integer >= 2"):
        gaussian_logit_entropy(1, 1.0)
    with pytest.raises(ValueError, match="n must be a positive integer"):
        gaussian_logit_entropy(0, 1.0)
    with pytest.raises(TypeError, match="n must be a positive integer"):
        gaussian_logit_entropy("8", 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sigma must be >= 0"):
        gaussian_logit_entropy(8, -1.0)
    with pytest.raises(ValueError, match="sigma must be finite"):
        gaussian_logit_entropy(8, float("inf"))


@pytest.mark.parametrize("gap", [10.0, 20.0, 40.0, 80.0])
def test_jacobian_norms_accurate_for_nearly_one_hot_rows(gap: float) -> None:
    # Two entries z = (gap, 0): p_2 = e^-gap / (1 + e^-gap) =: e, and J = e(1-e) [[1, -1], [-1, 1]],
    # so ||J||_F = 2 e (1 - e) and ||J||_2 = 2 e (1 - e). Naive float32 formulas return 0 here.
    e = math.exp(-gap) / (1 + math.exp(-gap))
    expected = 2 * e * (1 - e)
    z = torch.tensor([gap, 0.0])
    assert softmax_jacobian_norm(z).item() == pytest.approx(expected, rel=1e-5)
    assert softmax_jacobian_norm(z, norm="spectral").item() == pytest.approx(expected, rel=1e-5)
    assert softmax_jacobian(z)[0, 0].item() == pytest.approx(e * (1 - e), rel=1e-5)
    assert softmax_stats(z).jacobian_frobenius.item() == pytest.approx(expected, rel=1e-5)


# -- bad input: a clear error naming the argument, or the right answer (helpers in bad_input.py) --


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
    assert all(finite(t) for t in stats)
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
    assert all(finite(t) for t in stats)
    assert stats.normalized_entropy[0].item() == pytest.approx(1.0, rel=1e-6)
    assert stats.jacobian_frobenius[0].item() == pytest.approx(math.sqrt(3) / 4, rel=1e-6)
    assert asc.saturated_fraction(z, temperature=temperature) == 0.0


@pytest.mark.parametrize("temperature", [0.0, -1.0, NAN, INF, 10**400, "1", None, True])
@pytest.mark.parametrize(
    "call",
    [
        lambda t: asc.tempered_softmax(torch.zeros(3), t),
        lambda t: asc.softmax_entropy(torch.zeros(3), temperature=t),
        lambda t: asc.softmax_stats(torch.zeros(3), temperature=t),
        lambda t: asc.max_probability(torch.zeros(3), temperature=t),
        lambda t: asc.saturated_fraction(torch.zeros(1, 3), temperature=t),
    ],
    ids=["tempered_softmax", "softmax_entropy", "softmax_stats", "max_probability", "saturated"],
)
def test_invalid_temperature(call, temperature: object) -> None:  # type: ignore[no-untyped-def]
    error = TypeError if isinstance(temperature, str | type(None) | bool) else ValueError
    with pytest.raises(error, match="temperature"):
        call(temperature)


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


@FUZZ
@given(
    logits=tensor_or_junk,
    temperature=st.one_of(st.floats(1e-300, 1e300), reals),
    threshold=st.one_of(st.floats(0.01, 0.99), reals),
    norm=st.one_of(st.sampled_from(["frobenius", "spectral"]), junk),
    normalized=st.booleans(),
)
def test_fuzz_softmax(logits, temperature, threshold, norm, normalized) -> None:
    ok, p = attempt(asc.tempered_softmax, logits, temperature)
    if ok:
        assert finite(p) and bool(((p >= 0) & (p <= 1)).all())
        if p.numel():
            assert torch.allclose(p.double().sum(-1), torch.ones(()).double(), atol=1e-2)
    ok, h = attempt(asc.softmax_entropy, logits, normalized=normalized, temperature=temperature)
    if ok:
        assert finite(h) and bool((h >= 0).all())
    ok, m = attempt(asc.max_probability, logits, temperature=temperature)
    if ok:
        assert finite(m) and bool(((m > 0) & (m <= 1)).all())
    ok, frac = attempt(asc.saturated_fraction, logits, threshold=threshold, temperature=temperature)
    if ok:
        assert 0 <= frac <= 1
    for fn, kwargs in (
        (asc.softmax_jacobian, {}),
        (asc.softmax_jacobian_norm, {"norm": norm}),
        (asc.softmax_stats, {"temperature": temperature}),
    ):
        ok, res = attempt(fn, logits, **kwargs)
        if ok:
            assert finite(res)
    grad = logits if isinstance(logits, torch.Tensor) else torch.ones(3)
    ok, res = attempt(asc.logit_gradient, logits, grad)
    if ok:
        assert finite(res)
