r"""Entropy, peakedness and gradients of the softmax over attention logits.

For a row of logits $z \in \mathbb{R}^n$ the softmax is
$p_i = e^{z_i} / \sum_j e^{z_j}$. Every function here works on a tensor of any
shape ``(..., n)``: the softmax runs along the last dimension and the leading
dimensions are batch dimensions (for attention, ``(batch, heads, q_len, k_len)``).

Numerics, shared by every function:

- float16 and bfloat16 inputs are computed in float32; float32 and float64 stay
  as they are. Results come back in that computation dtype.
- The logits are shifted by their row maximum before anything else
  (softmax ignores a shift), and the entropy is computed from the log-softmax,
  so logits of $\pm 10^4$ give finite results, not NaN.
- Masked entries, $-\infty$, are allowed and get probability exactly 0.
- A row whose entries are all $-\infty$ has no softmax. It raises a
  ``ValueError`` naming the first such row's index; so do NaN and $+\infty$
  logits.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from . import _checks

__all__ = [
    "SoftmaxStats",
    "gaussian_logit_entropy",
    "logit_gradient",
    "max_probability",
    "saturated_fraction",
    "softmax_entropy",
    "softmax_jacobian",
    "softmax_jacobian_norm",
    "softmax_stats",
    "tempered_softmax",
]

_NORMS = ("frobenius", "spectral")
# zeta(2), ..., zeta(5), for the series of gaussian_logit_entropy's frozen phase.
_ZETA = (math.pi**2 / 6, 1.2020569031595942, math.pi**4 / 90, 1.0369277551433699)


def _prepare(logits: object, temperature: float = 1.0, name: str = "logits") -> torch.Tensor:
    """Validate ``logits``; return them upcast, shifted by the row max and divided by T."""
    z = _checks.float_tensor(logits, name, min_dim=1)
    if z.shape[-1] == 0:
        raise ValueError(f"{name} must have a non-empty last dimension, got shape {tuple(z.shape)}")
    temperature = _checks.positive_float(temperature, "temperature")
    if z.dtype in (torch.float16, torch.bfloat16):
        z = z.float()
    if bool(torch.isnan(z).any()) or bool(torch.isposinf(z).any()):
        raise ValueError(f"{name} must not contain NaN or +inf (use -inf to mask an entry)")
    dead = torch.isneginf(z).all(dim=-1)  # (...,) True where a row is entirely masked
    if bool(dead.any()):
        row = tuple(int(i) for i in dead.nonzero()[0].tolist())
        raise ValueError(
            f"{name} row {row} is entirely masked (all -inf); its softmax is undefined"
        )
    # The row max is finite because every row has an unmasked entry.
    z = z - z.amax(dim=-1, keepdim=True)  # (..., n), max 0 in every row
    if temperature != 1.0:
        # Dividing after the shift keeps T -> 0 finite: the max stays at 0. A T that the
        # logits' dtype cannot hold (1e-300 or 1e39 in float32) would be cast to 0 or inf,
        # giving NaN; divide in float64 instead. The quotient is 0 at the max and <= 0
        # elsewhere, so casting it back only rounds, or turns huge negatives into -inf.
        info = torch.finfo(z.dtype)
        if info.tiny <= temperature <= info.max:
            z = z / temperature
        else:
            z = (z.double() / temperature).to(z.dtype)
    return z


def _one_minus(p: torch.Tensor) -> torch.Tensor:
    """$1 - p_i$ without cancellation: for the row's largest entry, sum the others."""
    top = p.argmax(dim=-1, keepdim=True)  # (..., 1)
    others = p.scatter(-1, top, 0.0)  # (..., n), the max entry zeroed
    rest = others.sum(dim=-1, keepdim=True)  # (..., 1), = 1 - p_max, accurately
    return (1.0 - p).scatter(-1, top, rest)


def _jacobian(p: torch.Tensor) -> torch.Tensor:
    """diag(p) - p p^T with the diagonal p_i (1 - p_i) computed without cancellation."""
    n = p.shape[-1]
    off = torch.ones(n, n, dtype=p.dtype, device=p.device) - torch.eye(
        n, dtype=p.dtype, device=p.device
    )
    jac = -p.unsqueeze(-1) * p.unsqueeze(-2) * off  # (..., n, n), zero diagonal
    return jac + torch.diag_embed(p * _one_minus(p))


def _frobenius(p: torch.Tensor) -> torch.Tensor:
    r"""$\lVert \mathrm{diag}(p) - p p^\top \rVert_F$ per row, accurate for near one-hot rows.

    Splits off the largest entry $a = p_{\max}$ so that no term cancels:
    $\lVert J \rVert_F^2 = \sum_i p_i^2 (1 - p_i)^2 + 2 a^2 b + b^2 - \sum_{i \ne \max} p_i^4$
    with $b = \sum_{i \ne \max} p_i^2$. Every term is at least of order $s^2$, with
    $s = 1 - a = \sum_{i \ne \max} p_i$, and squares of the small entries underflow long
    before the norm does (for the row $[0, -80]$ in float32, $p_2^2 \approx 10^{-70}$), so
    the sum is taken in units of $s$: with $u_i = p_i / s$,
    $\lVert J \rVert_F = s \bigl(\sum_{i \ne \max} u_i^2 (1 - p_i)^2 + a^2 (1 + 2 B)
    + s^2 (B^2 - \sum_{i \ne \max} u_i^4)\bigr)^{1/2}$, $B = \sum_{i \ne \max} u_i^2$.
    """
    top = p.argmax(dim=-1, keepdim=True)  # (..., 1)
    others = p.scatter(-1, top, 0.0)  # (..., n), the max entry zeroed
    a = p.gather(-1, top).squeeze(-1)  # (...), p_max
    s = others.sum(dim=-1, keepdim=True)  # (..., 1), 1 - p_max without cancellation
    u = others / torch.where(s > 0, s, 1.0)  # (..., n), in [0, 1]; 0 for a one-hot row
    u2 = u * u
    b = u2.sum(dim=-1)  # (...)
    s = s.squeeze(-1)  # (...)
    diag = (u2 * (1.0 - others) ** 2).sum(dim=-1)
    inner = diag + a * a * (1 + 2 * b) + s * s * (b * b - (u2 * u2).sum(dim=-1)).clamp_min(0.0)
    return s * inner.sqrt()


def tempered_softmax(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    r"""Softmax at temperature $T$: $\mathrm{softmax}(z / T)$ along the last dimension.

    $$
    p_i(T) = \frac{e^{z_i / T}}{\sum_j e^{z_j / T}}.
    $$

    As $T \to 0$ the output tends to the argmax (one-hot, ties shared
    equally); as $T \to \infty$ it tends to the uniform distribution over the
    unmasked entries. Scaled dot-product attention,
    $\mathrm{softmax}(q \cdot k / \sqrt{d_k})$, is the softmax of the raw
    scores at temperature $T = \sqrt{d_k}$.

    Parameters
    ----------
    logits : torch.Tensor
        Floating tensor of shape ``(..., n)``; $-\infty$ masks an entry.
    temperature : float
        $T > 0$. Any finite value is safe, from ``1e-300`` to ``1e300``: the
        logits are shifted by their row maximum before dividing (so the max
        stays 0 and the others go to $-\infty$ as $T \to 0$), and a $T$ the
        logits' dtype cannot hold (``1e-300`` or ``1e39`` for float32) is
        applied in float64.

    Returns
    -------
    torch.Tensor
        Probabilities of shape ``(..., n)`` (float32 for half inputs).

    Raises
    ------
    TypeError
        If ``logits`` is not a floating tensor.
    ValueError
        If the last dimension is empty, a logit is NaN or $+\infty$, a row is
        entirely masked (the message names the row), or ``temperature`` is
        not a finite number $> 0$.

    Examples
    --------
    >>> import torch
    >>> from attnscale import tempered_softmax
    >>> z = torch.tensor([1.0, 0.5, -0.5])
    >>> tempered_softmax(z, 1e-6).tolist()
    [1.0, 0.0, 0.0]
    >>> round(tempered_softmax(z, 1e6)[0].item(), 4)
    0.3333
    """
    return torch.softmax(_prepare(logits, temperature), dim=-1)


def softmax_entropy(
    logits: torch.Tensor, *, normalized: bool = False, temperature: float = 1.0
) -> torch.Tensor:
    r"""Entropy of each row's softmax, in nats or normalised by $\log n$.

    $$
    H(p) = -\sum_{i=1}^n p_i \log p_i, \qquad 0 \le H \le \log n,
    $$

    computed as $-\sum_i p_i \log p_i$ with $\log p$ from the log-softmax, so
    entries whose probability underflows contribute 0 instead of NaN. $H = 0$
    for a one-hot row and $H = \log n$ for a uniform one. With
    ``normalized=True`` the result is $H / \log n$, in $[0, 1]$, where $n$ is
    the size of the last dimension (masked entries count in $n$; divide
    [softmax_entropy][attnscale.softmax_entropy] by the log of the unmasked
    count yourself if you want that instead).

    Parameters
    ----------
    logits : torch.Tensor
        Floating tensor of shape ``(..., n)``; $-\infty$ masks an entry.
    normalized : bool
        Divide by $\log n$.
    temperature : float
        Compute the entropy of $\mathrm{softmax}(z / T)$ instead.

    Returns
    -------
    torch.Tensor
        Shape ``(...)``, the logits' shape without its last dimension.

    Raises
    ------
    TypeError
        If ``logits`` is not a floating tensor.
    ValueError
        As in [tempered_softmax][attnscale.tempered_softmax], and if
        ``normalized`` is set with $n = 1$ ($\log 1 = 0$).

    Examples
    --------
    >>> import torch
    >>> from attnscale import softmax_entropy
    >>> z = torch.zeros(2, 8)
    >>> softmax_entropy(z).shape
    torch.Size([2])
    >>> round(softmax_entropy(z)[0].item(), 4)  # log 8
    2.0794
    >>> round(softmax_entropy(z, normalized=True)[0].item(), 4)
    1.0
    """
    z = _prepare(logits, temperature)
    n = z.shape[-1]
    if normalized and n == 1:
        raise ValueError("normalized entropy needs n >= 2 entries in the last dimension of logits")
    logp = torch.log_softmax(z, dim=-1)  # (..., n)
    p = logp.exp()
    terms = torch.where(p > 0, p * logp, torch.zeros_like(p))  # 0 log 0 = 0
    h = -terms.sum(dim=-1)  # (...)
    # Rounding can give -1e-8 for a one-hot row; entropy is never negative.
    h = h.clamp_min(0.0)
    return h / math.log(n) if normalized else h


def max_probability(logits: torch.Tensor, *, temperature: float = 1.0) -> torch.Tensor:
    r"""Largest softmax probability of each row, $\max_i p_i \in [1/n, 1]$.

    A peakedness measure: $1/n$ for a uniform row, 1 for a one-hot row.

    Parameters
    ----------
    logits : torch.Tensor
        Floating tensor of shape ``(..., n)``; $-\infty$ masks an entry.
    temperature : float
        Use $\mathrm{softmax}(z / T)$ instead.

    Returns
    -------
    torch.Tensor
        Shape ``(...)``.

    Raises
    ------
    TypeError
        If ``logits`` is not a floating tensor.
    ValueError
        As in [tempered_softmax][attnscale.tempered_softmax].

    Examples
    --------
    >>> import torch
    >>> from attnscale import max_probability
    >>> max_probability(torch.tensor([[0.0, 0.0], [100.0, 0.0]])).tolist()
    [0.5, 1.0]
    """
    z = _prepare(logits, temperature)
    # The max logit is 0 after the shift, so max p = 1 / sum_j exp(z_j).
    return torch.exp(-torch.logsumexp(z, dim=-1))


def saturated_fraction(
    logits: torch.Tensor, *, threshold: float = 0.99, temperature: float = 1.0
) -> float:
    r"""Fraction of rows whose largest probability exceeds ``threshold``.

    A row with $\max_i p_i > $ ``threshold`` is *saturated*: its softmax is
    nearly one-hot and its Jacobian nearly zero (see
    [softmax_jacobian_norm][attnscale.softmax_jacobian_norm]).

    Parameters
    ----------
    logits : torch.Tensor
        Floating tensor of shape ``(..., n)`` with at least one row.
    threshold : float
        In the open interval $(0, 1)$.
    temperature : float
        Use $\mathrm{softmax}(z / T)$ instead.

    Returns
    -------
    float
        A number in $[0, 1]$.

    Raises
    ------
    TypeError
        If ``logits`` is not a floating tensor.
    ValueError
        As in [tempered_softmax][attnscale.tempered_softmax], if there are
        no rows, or if ``threshold`` is not in $(0, 1)$.

    Examples
    --------
    >>> import torch
    >>> from attnscale import saturated_fraction
    >>> saturated_fraction(torch.tensor([[0.0, 0.0], [100.0, 0.0]]))
    0.5
    """
    threshold = _checks.probability(threshold, "threshold", open_interval=True)
    p_max = max_probability(logits, temperature=temperature)
    if p_max.numel() == 0:
        raise ValueError(f"logits must contain at least one row, got shape {tuple(logits.shape)}")
    return float((p_max > threshold).double().mean())


def softmax_jacobian(logits: torch.Tensor) -> torch.Tensor:
    r"""Jacobian of the softmax with respect to its logits, in closed form.

    $$
    J = \frac{\partial p}{\partial z} = \mathrm{diag}(p) - p p^\top,
    \qquad J_{ij} = p_i(\delta_{ij} - p_j).
    $$

    $J$ is symmetric and positive semi-definite, its rows sum to 0 (softmax
    ignores a shift, so $J \mathbf{1} = 0$), and it vanishes both for a
    one-hot row and, entry by entry, as $n$ grows with $p$ uniform.

    Parameters
    ----------
    logits : torch.Tensor
        Floating tensor of shape ``(..., n)``; $-\infty$ masks an entry
        (its row and column of $J$ are 0).

    Returns
    -------
    torch.Tensor
        Shape ``(..., n, n)``.

    Raises
    ------
    TypeError
        If ``logits`` is not a floating tensor.
    ValueError
        As in [tempered_softmax][attnscale.tempered_softmax].

    Examples
    --------
    >>> import torch
    >>> from attnscale import softmax_jacobian
    >>> softmax_jacobian(torch.zeros(4, 3)).shape
    torch.Size([4, 3, 3])
    >>> round(softmax_jacobian(torch.zeros(2))[0, 0].item(), 4)  # 1/2 - 1/4
    0.25
    """
    p = torch.softmax(_prepare(logits), dim=-1)  # (..., n)
    return _jacobian(p)


def softmax_jacobian_norm(logits: torch.Tensor, *, norm: str = "frobenius") -> torch.Tensor:
    r"""Frobenius or spectral norm of the softmax Jacobian of each row.

    The Frobenius norm has a closed form in $O(n)$ per row (evaluated in a
    rearranged form, in units of $1 - p_{\max}$, that stays accurate for
    nearly one-hot rows, where the norm is tiny: about $2 e^{-80}$ for the
    float32 row $[0, -80]$, whose squared entries underflow):

    $$
    \lVert J \rVert_F^2 = \sum_i p_i^2 - 2 \sum_i p_i^3
        + \Bigl(\sum_i p_i^2\Bigr)^2 .
    $$

    The spectral norm is the largest eigenvalue of the positive
    semi-definite $J$ (computed with ``torch.linalg.eigvalsh`` in float64,
    $O(n^3)$ per row). Both are 0 for a one-hot row; for a uniform row they
    are $\sqrt{(n-1)}/n$ and $1/n$. The largest possible spectral norm is
    $1/2$, for two entries with $p = 1/2$.

    Parameters
    ----------
    logits : torch.Tensor
        Floating tensor of shape ``(..., n)``; $-\infty$ masks an entry.
    norm : {"frobenius", "spectral"}
        Which norm.

    Returns
    -------
    torch.Tensor
        Shape ``(...)``.

    Raises
    ------
    TypeError
        If ``logits`` is not a floating tensor.
    ValueError
        As in [tempered_softmax][attnscale.tempered_softmax], or for an
        unknown ``norm``.

    Examples
    --------
    >>> import torch
    >>> from attnscale import softmax_jacobian_norm
    >>> softmax_jacobian_norm(torch.zeros(5, 4)).shape
    torch.Size([5])
    >>> round(softmax_jacobian_norm(torch.zeros(4)).item(), 4)  # sqrt(3) / 4
    0.433
    >>> softmax_jacobian_norm(torch.zeros(2), norm="spectral").item()
    0.5
    """
    norm = _checks.one_of(norm, "norm", _NORMS)
    z = _prepare(logits)
    p = torch.softmax(z, dim=-1)  # (..., n)
    if norm == "frobenius":
        return _frobenius(p)
    jac = _jacobian(p.double())  # (..., n, n)
    eigenvalues: torch.Tensor = torch.linalg.eigvalsh(jac)  # (..., n), ascending
    return eigenvalues[..., -1].clamp_min(0.0).to(p.dtype)


def logit_gradient(logits: torch.Tensor, grad_probs: torch.Tensor) -> torch.Tensor:
    r"""Gradient with respect to the logits, given the gradient with respect to the softmax.

    Backpropagation through the softmax multiplies the upstream gradient
    $g = \partial L / \partial p$ by the (symmetric) Jacobian:

    $$
    \frac{\partial L}{\partial z} = J^\top g
        = p \odot \bigl(g - \langle p, g \rangle\,\mathbf{1}\bigr),
    $$

    in $O(n)$ per row, without forming $J$. A saturated row ($p$ near
    one-hot) passes almost nothing back, whatever $g$ is.

    Parameters
    ----------
    logits : torch.Tensor
        Floating tensor of shape ``(..., n)``; $-\infty$ masks an entry
        (its gradient is 0).
    grad_probs : torch.Tensor
        Upstream gradient $g$, a finite floating tensor of the same shape.

    Returns
    -------
    torch.Tensor
        Shape ``(..., n)``.

    Raises
    ------
    TypeError
        If either argument is not a floating tensor.
    ValueError
        As in [tempered_softmax][attnscale.tempered_softmax], if the shapes
        differ, or if ``grad_probs`` is not finite.

    Examples
    --------
    >>> import torch
    >>> from attnscale import logit_gradient
    >>> z = torch.zeros(3, 4)
    >>> g = torch.ones(3, 4)
    >>> logit_gradient(z, g).abs().max().item()  # a constant g changes nothing
    0.0
    """
    # The logits first: a list or an integer tensor is named as the logits' fault.
    p = torch.softmax(_prepare(logits), dim=-1)  # (..., n)
    g = _checks.float_tensor(grad_probs, "grad_probs", min_dim=1)
    if g.shape != p.shape:
        raise ValueError(
            f"grad_probs must have the logits' shape {tuple(p.shape)}, got {tuple(g.shape)}"
        )
    if not bool(torch.isfinite(g).all()):
        raise ValueError("grad_probs must be finite (no NaN or inf)")
    g = g.to(torch.promote_types(g.dtype, p.dtype))
    p = p.to(g.dtype)
    inner = (p * g).sum(dim=-1, keepdim=True)  # (..., 1)
    return p * (g - inner)


class SoftmaxStats(NamedTuple):
    """Per-row summaries of a softmax, as returned by [softmax_stats][attnscale.softmax_stats]."""

    entropy: torch.Tensor
    normalized_entropy: torch.Tensor
    max_probability: torch.Tensor
    jacobian_frobenius: torch.Tensor


def softmax_stats(logits: torch.Tensor, *, temperature: float = 1.0) -> SoftmaxStats:
    r"""Entropy, normalised entropy, max probability and Jacobian norm in one pass.

    Equivalent to calling [softmax_entropy][attnscale.softmax_entropy] (twice),
    [max_probability][attnscale.max_probability] and
    [softmax_jacobian_norm][attnscale.softmax_jacobian_norm] on
    $\mathrm{softmax}(z / T)$, but computes the softmax once, which matters
    for large batches of rows. The Jacobian norm is that of the softmax
    with respect to its input $z / T$. The [metric definitions][metric-definitions] give
    each formula.

    Parameters
    ----------
    logits : torch.Tensor
        Floating tensor of shape ``(..., n)`` with $n \ge 2$.
    temperature : float
        Temperature $T > 0$.

    Returns
    -------
    SoftmaxStats
        ``(entropy, normalized_entropy, max_probability, jacobian_frobenius)``,
        each of shape ``(...)``.

    Raises
    ------
    TypeError
        If ``logits`` is not a floating tensor.
    ValueError
        As in [softmax_entropy][attnscale.softmax_entropy] with
        ``normalized=True``.

    Examples
    --------
    >>> import torch
    >>> from attnscale import softmax_stats
    >>> stats = softmax_stats(torch.zeros(3, 16))
    >>> stats.normalized_entropy.shape
    torch.Size([3])
    >>> round(stats.max_probability[0].item(), 4)
    0.0625
    """
    z = _prepare(logits, temperature)
    n = z.shape[-1]
    if n == 1:
        raise ValueError("normalized entropy needs n >= 2 entries in the last dimension of logits")
    logp = torch.log_softmax(z, dim=-1)  # (..., n)
    p = logp.exp()
    h = -torch.where(p > 0, p * logp, torch.zeros_like(p)).sum(dim=-1)
    h = h.clamp_min(0.0)
    return SoftmaxStats(h, h / math.log(n), p.amax(dim=-1), _frobenius(p))


def gaussian_logit_entropy(n: int, sigma: float) -> float:
    r"""Large-$n$ approximation of the mean entropy of softmax of Gaussian logits.

    For $n$ i.i.d. logits $z_i \sim \mathcal{N}(0, \sigma^2)$ this is the
    random energy model of statistical physics (Derrida 1981), with a phase
    transition at $\sigma_c = \sqrt{2 \log n}$:

    $$
    \mathbb{E}[H] \approx
    \begin{cases}
        \log n - \sigma^2 / 2, & \sigma < \sigma_c
            \quad\text{(many entries share the mass)},\\
        \psi(1) - \psi(1 - \sigma_c / \sigma), & \sigma > \sigma_c
            \quad\text{(a few entries hold it)},
    \end{cases}
    $$

    with $\psi$ the digamma function. The first branch is the log-normal
    (law of large numbers) approximation: $\sum_j e^{z_j} \approx n e^{\sigma^2/2}$
    and the softmax-weighted mean of $z$ is $\sigma^2$. The second uses the
    Poisson-Dirichlet limit of the weights in the frozen phase and decays
    like $(\pi^2/6)\,\sigma_c / \sigma$.

    Validity: both branches are limits as $n \to \infty$ with
    $\sigma / \sigma_c$ fixed. At finite $n$ the first is accurate while
    $\sigma^2$ is well below $\log n$ (within about 0.01 nats at $\sigma = 1$
    for $n \ge 128$) and falls too fast as $\sigma \to \sigma_c$, where it
    reaches 0. The second overestimates the entropy at finite $n$
    (by roughly 20 to 40% for $n \le 1024$) and diverges as
    $\sigma \to \sigma_c^+$. Near $\sigma_c$ neither branch is usable; a
    reasonable rule is to trust the first for $\sigma^2 \le \log n$ and the
    second for $\sigma \ge 2 \sigma_c$.

    Parameters
    ----------
    n : int
        Number of logits in a row, at least 2.
    sigma : float
        Standard deviation of the logits, $\ge 0$.

    Returns
    -------
    float
        Approximate $\mathbb{E}[H]$ in nats, clipped to $[0, \log n]$.

    Raises
    ------
    TypeError
        If ``n`` is not an integer or ``sigma`` not a real number.
    ValueError
        If ``n`` is not an integer $\ge 2$ or ``sigma`` is negative or not finite.

    Examples
    --------
    >>> from attnscale import gaussian_logit_entropy
    >>> round(gaussian_logit_entropy(1024, 1.0), 4)  # log 1024 - 1/2
    6.4315
    >>> gaussian_logit_entropy(16, 1e9) < 1e-6
    True
    """
    n = _checks.positive_int(n, "n")
    if n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    sigma = _checks.non_negative_float(sigma, "sigma")
    log_n = math.log(n)
    sigma_c = math.sqrt(2.0 * log_n)
    if sigma <= sigma_c:
        h = log_n - sigma**2 / 2.0
    elif (m := sigma_c / sigma) < 1e-3:
        # psi(1) - psi(1 - m) = sum_k zeta(k + 1) m^k; the digamma difference would cancel
        # (to 0 for m < 1e-16). Four terms leave a relative error below 1e-12.
        h = m * (_ZETA[0] + m * (_ZETA[1] + m * (_ZETA[2] + m * _ZETA[3])))
    else:
        mt = torch.tensor(m, dtype=torch.float64)
        one = torch.ones((), dtype=torch.float64)
        h = float(torch.special.digamma(one) - torch.special.digamma(one - mt))
    return min(max(h, 0.0), log_n)
