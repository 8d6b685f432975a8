r"""Closed-form moments of attention scores.

For a query $q$ and key $k$ in $\mathbb{R}^{d_k}$ the raw score is
$s = q \cdot k = \sum_{i=1}^{d_k} q_i k_i$. When the pairs $(q_i, k_i)$ are
independent and identically distributed across $i$, the mean and variance of
$s$ are $d_k$ times those of one product $q_i k_i$, which this module gives in
closed form.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from . import _checks

__all__ = [
    "Moments",
    "dot_product_moments",
    "init_projection_variance",
    "scaled_dot_product_moments",
    "unit_variance_scale",
]


class Moments(NamedTuple):
    """Mean and variance of a random variable."""

    mean: float
    variance: float

    @property
    def std(self) -> float:
        """Standard deviation, $\\sqrt{\\mathrm{variance}}$."""
        return math.sqrt(self.variance)


def _product_moments(
    mean_q: float, mean_k: float, var_q: float, var_k: float, rho: float
) -> Moments:
    mean_q = _checks.finite_float(mean_q, "mean_q")
    mean_k = _checks.finite_float(mean_k, "mean_k")
    var_q = _checks.non_negative_float(var_q, "var_q")
    var_k = _checks.non_negative_float(var_k, "var_k")
    rho = _checks.finite_float(rho, "rho")
    if abs(rho) > 1:
        raise ValueError(f"rho must lie in [-1, 1], got {rho!r}")
    sd_q, sd_k = math.sqrt(var_q), math.sqrt(var_k)
    cov = rho * sd_q * sd_k
    mean = mean_q * mean_k + cov
    var = (
        mean_q**2 * var_k
        + mean_k**2 * var_q
        + 2 * mean_q * mean_k * cov
        + var_q * var_k * (1 + rho**2)
    )
    return Moments(mean, var)


def dot_product_moments(
    d_k: int,
    *,
    mean_q: float = 0.0,
    mean_k: float = 0.0,
    var_q: float = 1.0,
    var_k: float = 1.0,
    rho: float = 0.0,
) -> Moments:
    r"""Mean and variance of the unscaled score $s = q \cdot k$.

    Assumes the pairs $(q_i, k_i)$ are i.i.d. across the $d_k$ components,
    with $\mathbb{E}[q_i] = \mu_q$, $\mathbb{E}[k_i] = \mu_k$,
    $\mathrm{Var}(q_i) = \sigma_q^2$, $\mathrm{Var}(k_i) = \sigma_k^2$ and
    correlation $\rho$ between $q_i$ and $k_i$. Then

    $$
    \mathbb{E}[s] = d_k\,(\mu_q \mu_k + \rho \sigma_q \sigma_k),
    $$

    $$
    \mathrm{Var}[s] = d_k\,\bigl(\mu_q^2 \sigma_k^2 + \mu_k^2 \sigma_q^2
        + 2 \rho \mu_q \mu_k \sigma_q \sigma_k + (1 + \rho^2)\,\sigma_q^2 \sigma_k^2\bigr).
    $$

    With $\rho = 0$ the formula holds for any distribution of the components
    (only independence is used). With $\rho \neq 0$ it assumes $(q_i, k_i)$ is
    jointly Gaussian, since it uses Isserlis' theorem for the fourth moment.
    At the textbook point ($\mu = 0$, $\sigma^2 = 1$, $\rho = 0$) it gives
    $\mathbb{E}[s] = 0$ and $\mathrm{Var}[s] = d_k$.

    Parameters
    ----------
    d_k : int
        Dimension of queries and keys, a positive integer.
    mean_q, mean_k : float
        Component means $\mu_q$, $\mu_k$.
    var_q, var_k : float
        Component variances $\sigma_q^2$, $\sigma_k^2$ (non-negative).
    rho : float
        Correlation between $q_i$ and $k_i$, in $[-1, 1]$.

    Returns
    -------
    Moments
        ``(mean, variance)`` of $s$.

    Raises
    ------
    ValueError
        If ``d_k`` is not a positive integer, a variance is negative or
        $|\rho| > 1$.

    Examples
    --------
    >>> dot_product_moments(64)
    Moments(mean=0.0, variance=64.0)
    >>> dot_product_moments(64, var_q=2.0).variance
    128.0
    """
    d_k = _checks.positive_int(d_k, "d_k")
    one = _product_moments(mean_q, mean_k, var_q, var_k, rho)
    return Moments(d_k * one.mean, d_k * one.variance)


def scaled_dot_product_moments(
    d_k: int,
    *,
    scale: float | None = None,
    mean_q: float = 0.0,
    mean_k: float = 0.0,
    var_q: float = 1.0,
    var_k: float = 1.0,
    rho: float = 0.0,
) -> Moments:
    r"""Mean and variance of the scaled score $\alpha\, q \cdot k$.

    Scaling multiplies the mean by $\alpha$ and the variance by $\alpha^2$.
    With the default $\alpha = 1/\sqrt{d_k}$ and the assumptions of
    [dot_product_moments][attnscale.dot_product_moments], the variance is
    $\mu_q^2 \sigma_k^2 + \mu_k^2 \sigma_q^2 + 2 \rho \mu_q \mu_k \sigma_q \sigma_k
    + (1 + \rho^2)\sigma_q^2 \sigma_k^2$, independent of $d_k$, while the mean
    $\sqrt{d_k}\,(\mu_q \mu_k + \rho \sigma_q \sigma_k)$ still grows.

    Parameters
    ----------
    d_k : int
        Dimension of queries and keys.
    scale : float, optional
        The factor $\alpha$; defaults to $1/\sqrt{d_k}$.
    mean_q, mean_k, var_q, var_k, rho : float
        As in [dot_product_moments][attnscale.dot_product_moments].

    Returns
    -------
    Moments
        ``(mean, variance)`` of $\alpha s$.

    Examples
    --------
    >>> scaled_dot_product_moments(1024)
    Moments(mean=0.0, variance=1.0)
    """
    raw = dot_product_moments(d_k, mean_q=mean_q, mean_k=mean_k, var_q=var_q, var_k=var_k, rho=rho)
    alpha = 1.0 / math.sqrt(d_k) if scale is None else _checks.finite_float(scale, "scale")
    return Moments(alpha * raw.mean, alpha**2 * raw.variance)


def unit_variance_scale(
    d_k: int,
    *,
    mean_q: float = 0.0,
    mean_k: float = 0.0,
    var_q: float = 1.0,
    var_k: float = 1.0,
    rho: float = 0.0,
) -> float:
    r"""The factor $\alpha$ that makes $\mathrm{Var}[\alpha\, q \cdot k] = 1$.

    Solving $\alpha^2\,\mathrm{Var}[s] = 1$ gives $\alpha = 1/\sqrt{\mathrm{Var}[s]}$,
    which at the textbook point is Vaswani et al.'s $1/\sqrt{d_k}$.

    Parameters
    ----------
    d_k : int
        Dimension of queries and keys.
    mean_q, mean_k, var_q, var_k, rho : float
        As in [dot_product_moments][attnscale.dot_product_moments].

    Returns
    -------
    float
        $\alpha = \mathrm{Var}[s]^{-1/2}$.

    Raises
    ------
    ValueError
        If the score has zero variance (no scale can give it unit variance),
        or an argument is invalid.

    Examples
    --------
    >>> unit_variance_scale(64)
    0.125
    """
    var = dot_product_moments(
        d_k, mean_q=mean_q, mean_k=mean_k, var_q=var_q, var_k=var_k, rho=rho
    ).variance
    if var == 0:
        raise ValueError("the score has zero variance; no scale gives it unit variance")
    return 1.0 / math.sqrt(var)


_INITS = ("default", "xavier_uniform", "xavier_normal", "kaiming_uniform", "lecun")


def init_projection_variance(init: str, d_in: int, d_out: int) -> float:
    r"""Variance of one output of a bias-free linear projection at initialisation.

    For inputs with i.i.d. unit-variance components, $q_i = \sum_j W_{ij} x_j$
    has $\mathrm{Var}(q_i) = d_\mathrm{in}\,\mathrm{Var}(W_{ij})$. The weight
    variance depends on the scheme:

    | ``init`` | $\mathrm{Var}(W_{ij})$ | $\mathrm{Var}(q_i)$ |
    |---|---|---|
    | ``"default"`` (``nn.Linear``) | $1 / (3 d_\mathrm{in})$ | $1/3$ |
    | ``"xavier_uniform"``, ``"xavier_normal"`` | $2 / (d_\mathrm{in} + d_\mathrm{out})$ | $2 d_\mathrm{in} / (d_\mathrm{in} + d_\mathrm{out})$ |
    | ``"kaiming_uniform"`` (ReLU gain) | $2 / d_\mathrm{in}$ | $2$ |
    | ``"lecun"`` | $1 / d_\mathrm{in}$ | $1$ |

    Only LeCun (linear-gain) initialisation gives unit-variance queries and keys.

    Parameters
    ----------
    init : str
        One of ``"default"``, ``"xavier_uniform"``, ``"xavier_normal"``,
        ``"kaiming_uniform"``, ``"lecun"``.
    d_in, d_out : int
        Input and output widths of the projection.

    Returns
    -------
    float
        $\mathrm{Var}(q_i)$.

    Examples
    --------
    >>> round(init_projection_variance("xavier_uniform", 128, 64), 4)
    1.3333
    """
    init = _checks.one_of(init, "init", _INITS)
    d_in = _checks.positive_int(d_in, "d_in")
    d_out = _checks.positive_int(d_out, "d_out")
    if init == "default":
        return 1.0 / 3.0
    if init.startswith("xavier"):
        return 2.0 * d_in / (d_in + d_out)
    if init == "kaiming_uniform":
        return 2.0
    return 1.0
