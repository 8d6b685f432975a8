import math

import pytest
import torch

import attnscale as asc
from attnscale import sampling


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
