import math

import pytest
import torch

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
