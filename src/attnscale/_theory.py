r"""Closed forms: the moments of attention scores, and the resolution of a logit in a float format.

For a query $q$ and key $k$ in $\mathbb{R}^{d_k}$ the raw score is
$s = q \cdot k = \sum_{i=1}^{d_k} q_i k_i$. When the pairs $(q_i, k_i)$ are
independent and identically distributed across $i$, the mean and variance of
$s$ are $d_k$ times those of one product $q_i k_i$, which this module gives in
closed form.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import NamedTuple

import torch

from . import _checks

__all__ = [
    "Moments",
    "dot_product_moments",
    "init_projection_variance",
    "logit_resolution",
    "scaled_dot_product_moments",
    "unit_variance_scale",
]


class Moments(NamedTuple):
    """Mean and variance of a random variable."""

    mean: float
    variance: float

    @property
    def std(self) -> float:
        """Standard deviation, $\\sqrt{\\mathrm{variance}}$.

        Raises
        ------
        ValueError
            If ``variance`` is negative or NaN (possible only in a hand-made ``Moments``).
        """
        if not self.variance >= 0:
            raise ValueError(f"variance must be >= 0 to have a std, got {self.variance!r}")
        return math.sqrt(self.variance)


def _exact(value: Fraction, what: str, d_k: int) -> float:
    """``value`` rounded to a float; a ValueError naming ``d_k`` if it is beyond float range."""
    try:
        return float(value)
    except OverflowError:
        raise ValueError(
            f"the score's {what} (about 10**{_log10(value):.0f}) is beyond float range; "
            f"reduce d_k (here {_checks.show(d_k)}), mean_q, mean_k, var_q or var_k"
        ) from None


def _log10(value: Fraction) -> float:
    return math.log10(abs(value.numerator)) - math.log10(value.denominator)


def _sqrt_int(n: int) -> Fraction:
    """sqrt(n) to float precision, for integers of any size (math.sqrt needs float range)."""
    # Above 2**106 the integer square root is exact to better than float precision.
    return Fraction(math.sqrt(n)) if n < 2**106 else Fraction(math.isqrt(n))


def _product_moments(
    mean_q: float, mean_k: float, var_q: float, var_k: float, rho: float
) -> tuple[Fraction, Fraction]:
    """Exact mean and variance of one product $q_i k_i$, as fractions.

    Exact rational arithmetic (floats are binary fractions) cannot overflow or underflow, so
    callers round only the final result: means of 1e200 or variances of 1e-300 stay correct
    wherever the answer itself is a float.
    """
    mean_q = _checks.finite_float(mean_q, "mean_q")
    mean_k = _checks.finite_float(mean_k, "mean_k")
    var_q = _checks.non_negative_float(var_q, "var_q")
    var_k = _checks.non_negative_float(var_k, "var_k")
    rho = _checks.finite_float(rho, "rho")
    if abs(rho) > 1:
        raise ValueError(f"rho must lie in [-1, 1], got {rho!r}")
    mq, mk, vq, vk, r = map(Fraction, (mean_q, mean_k, var_q, var_k, rho))
    cov = r * Fraction(math.sqrt(var_q)) * Fraction(math.sqrt(var_k))
    mean = mq * mk + cov
    var = mq**2 * vk + mk**2 * vq + 2 * mq * mk * cov + vq * vk * (1 + r**2)
    return mean, var


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
    TypeError
        If ``d_k`` is not an integer or a moment is not a real number.
    ValueError
        If ``d_k`` is not a positive integer, a moment is not finite, a
        variance is negative, $|\rho| > 1$, or the mean or variance of $s$
        is beyond float range (``d_k`` may be any integer, e.g. ``10**400``,
        as long as the answer is a float).

    Examples
    --------
    >>> from attnscale import dot_product_moments
    >>> dot_product_moments(64)
    Moments(mean=0.0, variance=64.0)
    >>> dot_product_moments(64, var_q=2.0).variance
    128.0
    """
    d_k = _checks.positive_int(d_k, "d_k")
    mean, var = _product_moments(mean_q, mean_k, var_q, var_k, rho)
    return Moments(_exact(d_k * mean, "mean", d_k), _exact(d_k * var, "variance", d_k))


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

    Raises
    ------
    TypeError, ValueError
        As in [dot_product_moments][attnscale.dot_product_moments], and if
        ``scale`` is not a finite number. With the default scale the
        variance does not grow with $d_k$, so any ``d_k`` works while the
        mean stays within float range.

    Examples
    --------
    >>> from attnscale import scaled_dot_product_moments
    >>> scaled_dot_product_moments(1024)
    Moments(mean=0.0, variance=1.0)
    """
    d_k = _checks.positive_int(d_k, "d_k")
    mean, var = _product_moments(mean_q, mean_k, var_q, var_k, rho)
    if scale is None:
        # alpha^2 d_k = 1 exactly, so the variance is that of one product, for any d_k.
        mean *= _sqrt_int(d_k)
    else:
        alpha = Fraction(_checks.finite_float(scale, "scale"))
        mean, var = alpha * d_k * mean, alpha**2 * d_k * var
    return Moments(_exact(mean, "scaled mean", d_k), _exact(var, "scaled variance", d_k))


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
    TypeError
        If an argument has the wrong type.
    ValueError
        If the score has zero variance (no scale can give it unit variance),
        the scale is beyond float range, or an argument is invalid.

    Examples
    --------
    >>> from attnscale import unit_variance_scale
    >>> unit_variance_scale(64)
    0.125
    """
    d_k = _checks.positive_int(d_k, "d_k")
    var = d_k * _product_moments(mean_q, mean_k, var_q, var_k, rho)[1]
    if var == 0:
        raise ValueError("the score has zero variance; no scale gives it unit variance")
    # 1 / sqrt(var) = 2**-e / sqrt(w) with var = w * 4**e and w near 1: var itself need not
    # be a float (d_k = 10**400 gives 1e-200).
    e = (var.numerator.bit_length() - var.denominator.bit_length()) // 2
    w = var / Fraction(4) ** e
    try:
        alpha = math.ldexp(1.0 / math.sqrt(float(w)), -e)
    except OverflowError:
        alpha = math.inf
    if alpha == 0 or math.isinf(alpha):
        raise ValueError(
            f"the unit-variance scale (about 10**{-_log10(var) / 2:.0f}) is beyond float range; "
            f"change d_k (here {_checks.show(d_k)}), mean_q, mean_k, var_q or var_k"
        )
    return alpha


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

    Raises
    ------
    TypeError, ValueError
        If ``init`` is unknown or a width is not a positive integer.

    Examples
    --------
    >>> from attnscale import init_projection_variance
    >>> round(init_projection_variance("xavier_uniform", 128, 64), 4)
    1.3333
    """
    init = _checks.one_of(init, "init", _INITS)
    d_in = _checks.positive_int(d_in, "d_in")
    d_out = _checks.positive_int(d_out, "d_out")
    if init == "default":
        return 1.0 / 3.0
    if init.startswith("xavier"):
        return 2 * d_in / (d_in + d_out)  # int / int: exact for sizes beyond float range
    if init == "kaiming_uniform":
        return 2.0
    return 1.0


def logit_resolution(logit: float, dtype: torch.dtype) -> float:
    r"""The spacing of ``dtype``'s representable numbers at the magnitude of ``logit``.

    A float format with $m$ explicit mantissa bits stores numbers in $[2^e, 2^{e+1})$ with a
    spacing of $2^{e-m}$, so rounding a logit $\ell$ to it moves it by up to half of
    $\mathrm{eps} \cdot 2^{\lfloor \log_2 |\ell| \rfloor}$ ($\mathrm{eps} = 2^{-m}$; below the
    smallest normal number the spacing stays at its value there). Softmax turns an absolute
    logit error $\delta$ into a relative weight error of about $\delta$, so this spacing is the
    attention weights' resolution. float16 has $m = 10$, bfloat16 $m = 7$: at the same logit,
    bfloat16's spacing is 8 times float16's.

    Parameters
    ----------
    logit : float
        A finite logit (its sign does not matter).
    dtype : torch.dtype
        A floating-point dtype, e.g. ``torch.bfloat16``.

    Returns
    -------
    float
        The distance from $|\ell|$'s binade start to the next representable number.

    Raises
    ------
    TypeError
        If ``dtype`` is not a floating-point ``torch.dtype`` or ``logit`` is not a real number.
    ValueError
        If ``logit`` is not finite or beyond the largest finite value of ``dtype``.

    Examples
    --------
    >>> import torch
    >>> from attnscale import logit_resolution
    >>> logit_resolution(100.0, torch.float16), logit_resolution(100.0, torch.bfloat16)
    (0.0625, 0.5)
    """
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    value = abs(_checks.finite_float(logit, "logit"))
    info = torch.finfo(dtype)
    if value > info.max:
        raise ValueError(
            f"logit must be at most {info.max:g} in magnitude for {dtype}, got {logit!r}"
        )
    exponent = math.frexp(max(value, info.smallest_normal))[1] - 1  # floor(log2 |logit|)
    return math.ldexp(info.eps, exponent)
