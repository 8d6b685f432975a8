r"""Monte Carlo samples of attention scores $q \cdot k$.

Draws are vectorised and chunked, so $10^7$ samples at $d_k = 1024$ need only a
few tens of megabytes at a time. For zero-mean, independent Gaussian components
an exact shortcut draws each score in $O(1)$ instead of $O(d_k)$: by rotational
symmetry $q \cdot k$ has the same law as $\lVert q \rVert\, z$ with
$\lVert q \rVert \sim \sigma_q \chi(d_k)$ and $z \sim \mathcal{N}(0, \sigma_k^2)$
independent.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from . import _checks

__all__ = ["DISTRIBUTIONS", "VarianceEstimate", "sample_scores", "variance_estimate"]

#: Component distributions understood by [sample_scores][attnscale.sample_scores].
DISTRIBUTIONS = ("gaussian", "uniform", "rademacher")
_METHODS = ("auto", "dot", "chi")
# Floats drawn per chunk: 2**24 float32 values are 64 MiB.
_CHUNK_ELEMENTS = 2**24


def _standardised(
    shape: tuple[int, ...], distribution: str, generator: torch.Generator, dtype: torch.dtype
) -> torch.Tensor:
    """Draw i.i.d. values with mean 0 and variance 1."""
    if distribution == "gaussian":
        return torch.randn(shape, generator=generator, dtype=dtype)
    if distribution == "uniform":
        # U(-sqrt(3), sqrt(3)) has variance 1.
        return (torch.rand(shape, generator=generator, dtype=dtype) * 2 - 1) * math.sqrt(3.0)
    bits = torch.randint(0, 2, shape, generator=generator)
    return (bits * 2 - 1).to(dtype)


def _sample_gamma(shape: float, n: int, generator: torch.Generator) -> torch.Tensor:
    """Exact Gamma(shape, 1) draws by Marsaglia and Tsang's method (float64)."""
    boost = shape < 1
    a = shape + 1 if boost else shape
    d = a - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    out = torch.empty(n, dtype=torch.float64)
    todo = torch.arange(n)
    while todo.numel():
        m = todo.numel()
        x = torch.randn(m, generator=generator, dtype=torch.float64)
        u = torch.rand(m, generator=generator, dtype=torch.float64)
        v = (1 + c * x) ** 3
        ok = v > 0
        accept = ok & (
            torch.log(u) < 0.5 * x**2 + d - d * v + d * torch.log(torch.where(ok, v, 1.0))
        )
        out[todo[accept]] = d * v[accept]
        todo = todo[~accept]  # about 2% are redrawn
    if boost:
        # Gamma(a) = Gamma(a + 1) * U**(1/a) for a < 1.
        out *= torch.rand(n, generator=generator, dtype=torch.float64) ** (1.0 / shape)
    return out


def sample_scores(
    d_k: int,
    num_samples: int,
    *,
    distribution: str = "gaussian",
    mean_q: float = 0.0,
    mean_k: float = 0.0,
    var_q: float = 1.0,
    var_k: float = 1.0,
    rho: float = 0.0,
    scale: float = 1.0,
    method: str = "auto",
    generator: torch.Generator | None = None,
    seed: int | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    r"""Draw Monte Carlo samples of the attention score $\alpha\, q \cdot k$.

    Each sample draws a fresh query and key whose components are i.i.d. with
    the given means and variances; ``scale`` is the factor $\alpha$ (pass
    ``d_k ** -0.5`` for scaled scores).

    Parameters
    ----------
    d_k : int
        Dimension of queries and keys.
    num_samples : int
        Number of scores to draw.
    distribution : {"gaussian", "uniform", "rademacher"}
        Law of the standardised components; uniform and Rademacher are
        shifted and scaled to the requested mean and variance.
    mean_q, mean_k : float
        Component means.
    var_q, var_k : float
        Component variances (non-negative).
    rho : float
        Correlation between $q_i$ and $k_i$, in $[-1, 1]$; non-zero values
        need ``distribution="gaussian"``.
    scale : float
        Factor $\alpha$ applied to every score.
    method : {"auto", "dot", "chi"}
        ``"dot"`` forms the full dot products, $O(d_k)$ per sample.
        ``"chi"`` uses the exact $\chi$ shortcut, $O(1)$ per sample, valid
        only for zero-mean, uncorrelated Gaussian components. ``"auto"`` picks
        ``"chi"`` whenever it is valid.
    generator : torch.Generator, optional
        Source of randomness. Give this or ``seed``, not both.
    seed : int, optional
        Seed for a fresh generator, in $[0, 2^{64})$ (default 0 when neither
        is given).
    dtype : torch.dtype
        Floating dtype of the result.

    Returns
    -------
    torch.Tensor
        Shape ``(num_samples,)``.

    Raises
    ------
    TypeError
        If a size or moment has the wrong type, ``dtype`` is not a floating
        ``torch.dtype`` (strings such as ``"float32"`` are refused, as torch
        refuses them), ``seed`` is not an integer (Python or numpy) or
        ``generator`` not a ``torch.Generator``.
    ValueError
        For a non-positive or non-integral ``d_k`` or ``num_samples``, sizes
        whose tensors torch cannot index (more than $2^{63}$ bytes), a
        non-finite moment or ``scale``, a negative variance, $|\rho| > 1$,
        an unknown ``distribution`` or ``method``, ``method="chi"`` where it
        is not exact, a seed outside $[0, 2^{64})$, both ``seed`` and
        ``generator``, or scores that overflow ``dtype`` (the message
        suggests float64).

    Examples
    --------
    >>> from attnscale import sample_scores
    >>> s = sample_scores(256, 10_000, seed=0)
    >>> s.shape
    torch.Size([10000])
    >>> bool(abs(s.var().item() / 256 - 1) < 0.05)
    True
    """
    d_k = _checks.positive_int(d_k, "d_k")
    num_samples = _checks.positive_int(num_samples, "num_samples")
    distribution = _checks.one_of(distribution, "distribution", DISTRIBUTIONS)
    method = _checks.one_of(method, "method", _METHODS)
    mean_q = _checks.finite_float(mean_q, "mean_q")
    mean_k = _checks.finite_float(mean_k, "mean_k")
    sd_q = math.sqrt(_checks.non_negative_float(var_q, "var_q"))
    sd_k = math.sqrt(_checks.non_negative_float(var_k, "var_k"))
    rho = _checks.finite_float(rho, "rho")
    if abs(rho) > 1:
        raise ValueError(f"rho must lie in [-1, 1], got {rho!r}")
    if rho != 0 and distribution != "gaussian":
        raise ValueError(f"rho != 0 needs distribution='gaussian', got {distribution!r}")
    scale = _checks.finite_float(scale, "scale")
    dtype = _checks.float_dtype(dtype)
    gen = _checks.make_generator(generator, seed)

    chi_ok = distribution == "gaussian" and mean_q == 0 and mean_k == 0 and rho == 0
    if method == "chi" and not chi_ok:
        raise ValueError(
            "method='chi' is exact only for zero-mean, uncorrelated Gaussian components"
        )
    if method == "chi" or (method == "auto" and chi_ok):
        # Check sizes before torch sees them: it cannot even read an integer beyond int64.
        _checks.allocation((num_samples,), torch.float64, "num_samples")
        try:
            shape = d_k / 2
        except OverflowError:
            raise ValueError(
                f"d_k={_checks.show(d_k)} is beyond float range, which method='chi' needs"
            ) from None
        # ||q||^2 / sd_q^2 ~ chi^2(d_k) = 2 * Gamma(d_k / 2).
        norm_q = torch.sqrt(2.0 * _sample_gamma(shape, num_samples, gen))
        z = torch.randn(num_samples, generator=gen, dtype=torch.float64)
        out = (scale * sd_q * sd_k * norm_q * z).to(dtype)
    else:
        _checks.allocation((num_samples,), dtype, "num_samples")
        _checks.allocation((2, 1, d_k), dtype, "d_k")  # one sample's query and key
        out = torch.empty(num_samples, dtype=dtype)
        chunk = max(1, _CHUNK_ELEMENTS // (2 * d_k))
        for start in range(0, num_samples, chunk):
            m = min(chunk, num_samples - start)
            z = _standardised((2, m, d_k), distribution, gen, dtype)  # (q/k, samples, d_k)
            q, k = z[0], z[1]
            if rho != 0:
                k = rho * q + math.sqrt(1 - rho**2) * k
            # Skip the affine maps in the common standard case: sampling is memory-bound.
            if (mean_q, sd_q) != (0.0, 1.0):
                q = mean_q + sd_q * q
            if (mean_k, sd_k) != (0.0, 1.0):
                k = mean_k + sd_k * k
            out[start : start + m] = scale * torch.einsum("nd,nd->n", q, k)
    if not bool(torch.isfinite(out).all()):
        raise ValueError(
            f"the scores overflow {dtype}: reduce scale, mean_q, mean_k, var_q, var_k or d_k, "
            "or pass dtype=torch.float64"
        )
    return out


class VarianceEstimate(NamedTuple):
    """A sample variance with its standard error and a normal-theory interval."""

    variance: float
    stderr: float
    low: float
    high: float


def variance_estimate(samples: torch.Tensor, *, z: float = 1.96) -> VarianceEstimate:
    r"""Sample variance with a standard error from the sample's own fourth moment.

    The standard error of the sample variance is
    $\sqrt{(\hat\mu_4 - \hat\mu_2^2)/n}$, with $\hat\mu_2$, $\hat\mu_4$ the sample's
    second and fourth central moments; it holds for any distribution with a finite fourth moment.
    The interval is $\hat\sigma^2 \pm z \cdot \mathrm{SE}$.

    Parameters
    ----------
    samples : torch.Tensor
        One-dimensional, at least two values.
    z : float
        Half-width of the interval in standard errors (1.96 for 95%).

    Returns
    -------
    VarianceEstimate
        ``(variance, stderr, low, high)``.

    Raises
    ------
    TypeError
        If ``samples`` is not a floating tensor or ``z`` not a number.
    ValueError
        If ``samples`` is not one-dimensional with at least 2 values, holds
        NaN or infinities, or has a variance beyond float64 range, or if
        ``z`` is not a finite number > 0.

    Examples
    --------
    >>> from attnscale import sample_scores
    >>> from attnscale import variance_estimate
    >>> est = variance_estimate(sample_scores(64, 100_000, seed=1))
    >>> bool(est.low < 64 < est.high)
    True
    """
    samples = _checks.float_tensor(samples, "samples")
    if samples.dim() != 1 or samples.numel() < 2:
        raise ValueError(
            f"samples must be one-dimensional with at least 2 values, got shape {tuple(samples.shape)}"
        )
    z = _checks.positive_float(z, "z")
    x = samples.double()
    if not bool(torch.isfinite(x).all()):
        raise ValueError("samples must be finite (no NaN or inf)")
    n = x.numel()
    # Work on x / 2**e with 2**e >= max|x| (an exact division) so that squares and fourth
    # powers of large samples cannot overflow.
    unit = math.ldexp(1.0, math.frexp(float(x.abs().max()))[1])
    centred = x / unit
    centred = centred - centred.mean()
    m2 = float(centred.pow(2).mean())
    m4 = float(centred.pow(4).mean())
    var = m2 * n / (n - 1) * unit * unit
    stderr = math.sqrt(max(m4 - m2**2, 0.0) / n) * unit * unit
    if not math.isfinite(var + z * stderr):
        raise ValueError("the variance of samples is beyond float64 range")
    return VarianceEstimate(var, stderr, var - z * stderr, var + z * stderr)
