r"""Scaled dot-product attention with a pluggable score-scaling strategy.

[scaled_dot_product_attention][attnscale.scaled_dot_product_attention] computes
$\mathrm{softmax}(\ell + \text{mask})\,V$ with logits $\ell = \alpha\, \phi(q) \cdot \psi(k)$ from a
[strategy][attnscale.ScoreScaling], optionally soft-capped as $c \tanh(\ell / c)$
([soft_cap][attnscale.soft_cap]), on tensors of shape ``(batch, heads, length, head_dim)``, and
returns an [AttentionResult][attnscale.AttentionResult] ``(output, weights, logits)``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from . import _checks
from ._masks import LOW_PRECISION, check_mask, dead_rows, merge_causal
from ._strategies import ScoreScaling, make_strategy

__all__ = ["AttentionResult", "scaled_dot_product_attention", "soft_cap"]


class AttentionResult(NamedTuple):
    """What attention returns: the output and, when requested, weights and logits.

    Attributes
    ----------
    output : Tensor
        Attention output; ``(batch, heads, q_len, d_v)`` from the function,
        ``(batch, q_len, d_model)`` from the module, ``(batch, q_len, d_v)`` from
        [AdditiveAttention][attnscale.AdditiveAttention] (whose weights and logits have no heads
        dimension either).
    weights : Tensor or None
        Attention probabilities per head, ``(batch, heads, q_len, k_len)``, after masking; ``None``
        unless ``need_weights=True``.
    logits : Tensor or None
        Pre-softmax scores per head, ``(batch, heads, q_len, k_len)``, after scaling and
        soft-capping but *before* the mask is applied (so they stay finite); ``None`` unless
        ``need_logits=True``.
    """

    output: torch.Tensor
    weights: torch.Tensor | None
    logits: torch.Tensor | None


def soft_cap(logits: torch.Tensor, cap: float) -> torch.Tensor:
    r"""Tanh soft-capping of logits, $c \tanh(\ell / c)$.

    Smooth, odd and monotonic; close to the identity for $|\ell| \ll c$, and
    $|c \tanh(\ell / c)| < c$ always. Cost: three element-wise operations per logit
    (divide, tanh, multiply), no parameters. Used by Gemma 2 ($c = 50$) and Grok-1 ($c = 30$).

    Parameters
    ----------
    logits : Tensor
        Any floating-point tensor.
    cap : float
        The cap $c > 0$.

    Returns
    -------
    Tensor
        Capped logits, same shape and dtype.

    Raises
    ------
    ValueError
        If ``cap`` is not a finite number > 0.

    Examples
    --------
    >>> import torch
    >>> from attnscale import soft_cap
    >>> float(soft_cap(torch.tensor(1000.0), 50.0))
    50.0
    """
    _checks.float_tensor(logits, "logits", min_dim=0)
    return _soft_cap(logits, _checks.positive_float(cap, "cap"))


def _soft_cap(logits: torch.Tensor, cap: float) -> torch.Tensor:
    info = torch.finfo(logits.dtype)
    if info.tiny <= cap <= info.max:
        return torch.tanh(logits / cap) * cap
    # The dtype would hold this cap as 0 or inf (then 0/0 or 0*inf = NaN): work in float64.
    return (torch.tanh(logits.double() / cap) * cap).to(logits.dtype)


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    *,
    strategy: str | ScoreScaling = "inverse_sqrt",
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    softcap: float | None = None,
    need_weights: bool = False,
    need_logits: bool = False,
) -> AttentionResult:
    r"""Multi-head scaled dot-product attention with a chosen score-scaling strategy.

    Computes $\mathrm{softmax}(\ell + M)\,V$ with logits
    $\ell = \alpha\,\phi(q)\cdot\psi(k)$ given by ``strategy`` (see
    [ScoreScaling][attnscale.ScoreScaling]), optionally soft-capped as $c\tanh(\ell/c)$
    (see [soft_cap][attnscale.soft_cap]). When neither weights, logits nor a soft-cap are
    requested, the work is done by ``torch.nn.functional.scaled_dot_product_attention`` (fused
    kernels where available), with a learnable multiplier folded into the query; otherwise the
    logits are formed explicitly, scaling the query before the product (the order that does not
    overflow in float16), and the softmax runs in float32 for float16/bfloat16 inputs. Under
    ``torch.func.vmap`` prefer the explicit path (e.g. ``need_weights=True``): torch 2.13 has no
    batching rule for the CPU fused kernel and falls back to a loop, with a warning.

    Parameters
    ----------
    query : Tensor
        ``(batch, heads, q_len, d_k)``.
    key : Tensor
        ``(batch, heads, k_len, d_k)``.
    value : Tensor
        ``(batch, heads, k_len, d_v)``.
    strategy : str or ScoreScaling
        A name from [SCALING_STRATEGIES][attnscale.SCALING_STRATEGIES] (a learnable strategy given
        by name starts at its initial value) or a strategy object built for this ``d_k`` and head
        count (its parameters are used and receive gradients).
    attn_mask : Tensor, optional
        2 to 4 dimensions, broadcastable to ``(batch, heads, q_len, k_len)``. Boolean: ``True``
        marks positions that take part (as in torch SDPA). Floating point: added to the logits.
    is_causal : bool
        Causal mask, top-left aligned (query $i$ sees keys $0..i$); may be combined with
        ``attn_mask``.
    softcap : float, optional
        Tanh soft-cap $c > 0$ applied to the scaled logits (Gemma 2 uses 50).
    need_weights : bool
        Also return the attention probabilities.
    need_logits : bool
        Also return the logits (scaled, capped, unmasked).

    Returns
    -------
    AttentionResult
        ``output`` of shape ``(batch, heads, q_len, d_v)``, and ``weights``/``logits`` of shape
        ``(batch, heads, q_len, k_len)`` when requested (else ``None``). A query row whose keys
        are all masked (all ``False`` or $-\infty$ in ``attn_mask``, alone or combined with
        ``is_causal``; or ``k_len = 0``) gets zero weights and a zero output, on the fused and the
        explicit path alike (torch's fused CPU kernel gives zeros, a plain softmax NaN); its
        gradients are zero too. Non-finite inputs are not checked (that would need a
        data-dependent branch, which ``vmap`` and ``torch.compile`` cannot follow) and propagate.

    Raises
    ------
    TypeError
        If an input is not a floating-point tensor, key or value has another dtype than query,
        ``attn_mask`` is neither boolean nor floating point, ``is_causal`` is not a bool, or
        ``strategy`` has the wrong type.
    ValueError
        If an input is not 4-D, shapes or devices do not agree, the mask has fewer than 2 or more
        than 4 dimensions or does not broadcast (the same error on both paths), the strategy name
        is unknown or was built for other sizes, or ``softcap`` is not > 0.

    Examples
    --------
    >>> import torch
    >>> from attnscale import scaled_dot_product_attention
    >>> q = k = v = torch.randn(2, 4, 5, 16)
    >>> out = scaled_dot_product_attention(q, k, v, strategy="cosine", need_weights=True)
    >>> out.output.shape, out.weights.shape
    (torch.Size([2, 4, 5, 16]), torch.Size([2, 4, 5, 5]))
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        _checks.float_tensor(t, name, min_dim=4)
        if t.dim() != 4:
            raise ValueError(
                f"{name} must have shape (batch, heads, length, dim), got {tuple(t.shape)}"
            )
    _checks.matches(key, "key", query, "query")
    _checks.matches(value, "value", query, "query")
    batch, heads, q_len, d_k = query.shape
    if key.shape[:2] != (batch, heads) or value.shape[:2] != (batch, heads):
        raise ValueError(
            "query, key and value must agree in (batch, heads), got "
            f"{tuple(query.shape[:2])}, {tuple(key.shape[:2])}, {tuple(value.shape[:2])}"
        )
    if key.shape[-1] != d_k:
        raise ValueError(f"key must have head dim {d_k} like query, got {key.shape[-1]}")
    k_len = key.shape[2]
    if value.shape[2] != k_len:
        raise ValueError(f"value must have k_len={k_len} like key, got {value.shape[2]}")
    if softcap is not None:
        softcap = _checks.positive_float(softcap, "softcap")
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal must be a bool, got {type(is_causal).__name__}")
    mask = check_mask(attn_mask, (batch, heads, q_len, k_len), query)
    strat = make_strategy(strategy, d_k, heads)

    if is_causal and mask is not None:
        mask = merge_causal(mask, q_len, k_len, query.device)
        is_causal = False

    # Rows with every key masked get zero weights and output on both paths (torch's fused CPU
    # kernel does this, a plain softmax gives NaN). They are unmasked for the softmax and
    # zeroed after it, so no NaN reaches the output or the gradients on any backend. No
    # data-dependent branch: this also runs under vmap and torch.compile.
    dead = None if mask is None else dead_rows(mask)  # (..., q_len, 1)
    if dead is not None and mask is not None:
        mask = mask | dead if mask.dtype == torch.bool else mask.masked_fill(dead, 0.0)

    q, k, alpha = strat.prepare(query, key)
    fused = not (need_weights or need_logits or softcap is not None)
    if fused:
        if isinstance(alpha, torch.Tensor):
            q, scale = q * alpha, 1.0  # (batch, heads, q_len, d_k)
        else:
            scale = alpha
        out = F.scaled_dot_product_attention(
            q, k, value, attn_mask=mask, is_causal=is_causal, scale=scale
        )
        if dead is not None:
            out = out.masked_fill(dead, 0.0)
        return AttentionResult(out, None, None)

    if isinstance(alpha, torch.Tensor) or alpha != 1.0:
        q = q * alpha  # (batch, heads, q_len, d_k)
    logits = q @ k.transpose(-2, -1)  # (batch, heads, q_len, k_len)
    if softcap is not None:
        logits = _soft_cap(logits, softcap)
    scores = logits
    if is_causal:
        mask = merge_causal(None, q_len, k_len, query.device)
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask
    if scores.dtype in LOW_PRECISION:
        weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(scores.dtype)
    else:
        weights = torch.softmax(scores, dim=-1)
    if dead is not None:
        weights = weights.masked_fill(dead, 0.0)
    out = weights @ value  # (batch, heads, q_len, d_v)
    return AttentionResult(out, weights if need_weights else None, logits if need_logits else None)
