import math
from fractions import Fraction

import pytest
import torch
from bad_input import (
    FUZZ,
    attempt,
    finite,
    junk,
    reals,
    rhos,
    sizes,
    variances,
)
from hypothesis import given
from hypothesis import strategies as st

import attnscale as asc

CASES = [
    {},
    {"mean_q": 0.5, "mean_k": -1.0},
    {"var_q": 2.0, "var_k": 0.25},
    {"rho": 0.6},
    {"rho": -0.4, "mean_q": 0.3, "mean_k": 0.7, "var_q": 1.5},
    {"distribution": "uniform", "mean_q": 0.5, "mean_k": 0.5, "var_k": 3.0},
    {"distribution": "rademacher", "mean_q": -0.2, "var_q": 0.5},
]


def test_textbook_point():
    assert asc.dot_product_moments(64) == (0.0, 64.0)
    assert asc.scaled_dot_product_moments(1024) == (0.0, 1.0)
    assert asc.unit_variance_scale(64) == pytest.approx(1 / 8)
    assert asc.dot_product_moments(9).std == 3.0


def test_scale_argument_multiplies_moments():
    raw = asc.dot_product_moments(16, mean_q=1.0, mean_k=2.0)
    scaled = asc.scaled_dot_product_moments(16, scale=0.5, mean_q=1.0, mean_k=2.0)
    assert scaled.mean == pytest.approx(0.5 * raw.mean)
    assert scaled.variance == pytest.approx(0.25 * raw.variance)


def test_unit_variance_scale_gives_unit_variance():
    params = {"mean_q": 0.3, "var_q": 2.0, "rho": 0.2}
    alpha = asc.unit_variance_scale(32, **params)
    assert asc.scaled_dot_product_moments(32, scale=alpha, **params).variance == pytest.approx(1)


@pytest.mark.parametrize("params", CASES)
def test_theory_matches_monte_carlo(params):
    """Closed form against Monte Carlo; tolerance is 5 standard errors of the estimate."""
    d_k, n = 48, 400_000
    moments = {k: v for k, v in params.items() if k != "distribution"}
    theory = asc.dot_product_moments(d_k, **moments)
    s = asc.sample_scores(d_k, n, seed=1, dtype=torch.float64, method="dot", **params)
    est = asc.variance_estimate(s)
    assert abs(est.variance - theory.variance) < 5 * est.stderr
    assert abs(s.mean().item() - theory.mean) < 5 * math.sqrt(theory.variance / n)


def test_init_projection_variance_matches_nn_init():
    torch.manual_seed(0)
    d_in, d_out = 512, 256
    x = torch.randn(4096, d_in)
    layer = torch.nn.Linear(d_in, d_out, bias=False)
    inits = {
        "default": lambda w: w,
        "xavier_uniform": torch.nn.init.xavier_uniform_,
        "xavier_normal": torch.nn.init.xavier_normal_,
        "kaiming_uniform": lambda w: torch.nn.init.kaiming_uniform_(w, nonlinearity="relu"),
        "lecun": lambda w: torch.nn.init.normal_(w, std=d_in**-0.5),
    }
    for name, init in inits.items():
        with torch.no_grad():
            init(layer.weight)
            measured = layer(x).var().item()
        # 4096 x 256 outputs: the relative sampling error of the variance is ~1%.
        assert measured == pytest.approx(asc.init_projection_variance(name, d_in, d_out), rel=0.05)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"d_k": 0}, "d_k"),
        ({"d_k": -3}, "d_k"),
        ({"d_k": 2.5}, "d_k"),
        ({"d_k": 8, "var_q": -1.0}, "var_q"),
        ({"d_k": 8, "var_k": -0.1}, "var_k"),
        ({"d_k": 8, "rho": 1.5}, "rho"),
        ({"d_k": 8, "mean_q": float("nan")}, "mean_q"),
    ],
)
def test_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        asc.dot_product_moments(**kwargs)


def test_validation_types_and_degenerate():
    with pytest.raises(TypeError, match="d_k"):
        asc.dot_product_moments("64")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="zero variance"):
        asc.unit_variance_scale(8, var_q=0.0)
    with pytest.raises(ValueError, match="scale"):
        asc.scaled_dot_product_moments(8, scale=float("inf"))
    with pytest.raises(ValueError, match="init"):
        asc.init_projection_variance("orthogonal", 8, 8)
    with pytest.raises(ValueError, match="d_in"):
        asc.init_projection_variance("lecun", 0, 8)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_logit_resolution_is_the_gap_to_the_next_float(dtype: torch.dtype) -> None:
    info = torch.finfo(dtype)
    gen = torch.Generator().manual_seed(0)
    # magnitudes from below the smallest normal number to near the largest finite one
    exponents = torch.empty(2000, dtype=torch.float64).uniform_(
        math.log2(info.smallest_normal) - 4, math.log2(info.max) - 1, generator=gen
    )
    values = (2.0**exponents).to(dtype)  # representable by construction
    up = torch.nextafter(values, torch.full_like(values, math.inf)) - values
    for value, gap in zip(values.tolist(), up.tolist(), strict=True):
        assert asc.logit_resolution(value, dtype) == gap
        assert asc.logit_resolution(-value, dtype) == gap


def test_logit_resolution_bfloat16_is_eight_times_float16() -> None:
    for logit in (0.7, 1.0, 30.0, 300.0, 60000.0):
        ratio = asc.logit_resolution(logit, torch.bfloat16) / asc.logit_resolution(
            logit, torch.float16
        )
        assert ratio == 8.0


def test_logit_resolution_bad_input() -> None:
    with pytest.raises(TypeError, match=r"dtype must be a floating-point torch\.dtype"):
        asc.logit_resolution(1.0, torch.int32)
    with pytest.raises(TypeError, match=r"dtype must be a floating-point torch\.dtype"):
        asc.logit_resolution(1.0, "float16")
    with pytest.raises(ValueError, match="logit must be finite"):
        asc.logit_resolution(math.inf, torch.float32)
    with pytest.raises(ValueError, match="logit must be at most 65504 in magnitude"):
        asc.logit_resolution(1e5, torch.float16)
    with pytest.raises(TypeError, match="logit must be a real number"):
        asc.logit_resolution("1", torch.float32)


# -- bad input: a clear error naming the argument, or the right answer (helpers in bad_input.py) --


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


@FUZZ
@given(d_k=sizes, mean_q=reals, mean_k=reals, var_q=variances, var_k=variances, rho=rhos)
def test_fuzz_theory(d_k, mean_q, mean_k, var_q, var_k, rho) -> None:
    kw = {"mean_q": mean_q, "mean_k": mean_k, "var_q": var_q, "var_k": var_k, "rho": rho}
    for fn in (asc.dot_product_moments, asc.scaled_dot_product_moments):
        ok, res = attempt(fn, d_k, **kw)
        if ok:
            assert isinstance(res, asc.Moments) and finite(tuple(res)) and res.variance >= 0
    ok, res = attempt(asc.unit_variance_scale, d_k, **kw)
    if ok:
        assert math.isfinite(res) and res > 0


@FUZZ
@given(d_k=sizes, scale=reals, init=st.one_of(st.sampled_from(["lecun", "xavier_normal"]), junk))
def test_fuzz_theory_scale_and_init(d_k, scale, init) -> None:
    ok, res = attempt(asc.scaled_dot_product_moments, d_k, scale=scale)
    if ok:
        assert finite(tuple(res)) and res.variance >= 0
    ok, res = attempt(asc.init_projection_variance, init, d_k, d_k)
    if ok:
        assert math.isfinite(res) and res > 0
    ok, res = attempt(asc.gaussian_logit_entropy, d_k, scale)
    if ok:
        assert 0 <= res <= math.log(int(d_k)) + 1e-12
