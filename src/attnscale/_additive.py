r"""Additive (Bahdanau) attention: the other scoring function, for comparison with the dot product.

The score of a query $q$ and a key $k$ is $s(q, k) = w_v^\top \tanh(W_q q + W_k k)$
(Bahdanau, Cho, Bengio 2015, arXiv:1409.0473), then masked and passed through a softmax as in
[scaled_dot_product_attention][attnscale.scaled_dot_product_attention].

Public API
----------
- [AdditiveAttention][attnscale.AdditiveAttention] ``(query_dim, key_dim, hidden, *,
  device=None, dtype=None)``: an ``nn.Module`` with bias-free projections ``q_proj``
  ($W_q$), ``k_proj`` ($W_k$) and ``score_proj`` ($w_v^\top$); its ``forward(query, key,
  value, *, attn_mask=None, need_weights=False, need_logits=False)`` takes
  ``(batch, length, dim)`` tensors and returns an [AttentionResult][attnscale.AttentionResult].
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from . import _checks
from ._attention import AttentionResult
from ._masks import LOW_PRECISION, check_mask, dead_rows

__all__ = ["AdditiveAttention"]


class AdditiveAttention(nn.Module):
    r"""Additive (Bahdanau) attention: a small tanh network scores each query-key pair.

    $$
    s(q, k) = w_v^\top \tanh(W_q q + W_k k), \qquad
    \mathrm{out}_i = \sum_j \mathrm{softmax}_j\big(s(q_i, k_j) + M_{ij}\big)\, v_j ,
    $$

    with $W_q \in \mathbb{R}^{h \times d_q}$, $W_k \in \mathbb{R}^{h \times d_k}$ and
    $w_v \in \mathbb{R}^{h}$ (Bahdanau et al. 2015, arXiv:1409.0473; the form and the bias-free
    layers of d2l's ``AdditiveAttention``). Queries and keys may have different widths, and
    there is no scale to choose: each hidden unit $\tanh(\cdot)$ lies in $[-1, 1]$, so
    $|s| \le \lVert w_v \rVert_1$ whatever $d_k$. With PyTorch's default ``nn.Linear`` init,
    $U(\pm 1/\sqrt{\text{fan\_in}})$, each component of $W_q q$ has variance
    $\lVert q \rVert^2 / (3 d_q)$, i.e. $1/3$ for unit-variance $q$, independent of $d_q$.
    Vaswani et al. (2017, arXiv:1706.03762, §3.2.1), citing Britz et al. (2017,
    arXiv:1703.03906), report that additive attention outperforms dot-product attention
    *without* scaling for larger $d_k$; dividing the dot product by $\sqrt{d_k}$ is their
    cheaper fix.

    **Cost.** For $n$ queries and $m$ keys, the forward pass materialises the
    ``(batch, q_len, k_len, hidden)`` tensor $\tanh(W_q q_i + W_k k_j)$ (memory
    $n m h$ per batch element, against $n m$ for the dot product's logits) and does about
    $n m h$ additions, $n m h$ tanh and $n m h$ multiply-adds ($2nmh$ FLOPs) for $w_v$, plus
    $h(n d_q + m d_k)$ multiply-adds for the projections; the unscaled or scaled dot product
    $QK^\top$ costs $n m d$ multiply-adds ($2nmd$ FLOPs) and no intermediate tensor. The same
    count is in the class attribute ``cost``.

    One head: inputs are ``(batch, length, dim)``. For several heads, fold them into the
    batch, ``(batch * heads, length, dim)``, or use one module per head.

    Parameters
    ----------
    query_dim : int
        Width $d_q$ of each query.
    key_dim : int
        Width $d_k$ of each key.
    hidden : int
        Number $h$ of tanh units (d2l's ``num_hiddens``).
    device, dtype : optional
        Where and in which floating ``torch.dtype`` to create the parameters.

    Attributes
    ----------
    q_proj, k_proj : nn.Linear
        $W_q$ (``query_dim -> hidden``) and $W_k$ (``key_dim -> hidden``), without bias.
    score_proj : nn.Linear
        $w_v^\top$ (``hidden -> 1``), without bias.
    cost : str
        Parameters / FLOPs of the scores for $n$ queries, $m$ keys and $h$ hidden units
        (the dot product $QK^\top$ costs $2nmd$ FLOPs and has no parameters).
    citation : tuple of str
        arXiv identifiers of the technique's paper and of the comparison with the dot product.

    Raises
    ------
    TypeError
        If a size is not an integer or ``dtype`` is not a floating ``torch.dtype``.
    ValueError
        If a size is not positive or too large for torch to allocate, or ``device`` cannot
        hold data or is not available.

    Examples
    --------
    >>> import torch
    >>> from attnscale import AdditiveAttention
    >>> attn = AdditiveAttention(query_dim=20, key_dim=2, hidden=8)
    >>> q, k, v = torch.randn(2, 1, 20), torch.randn(2, 10, 2), torch.randn(2, 10, 4)
    >>> res = attn(q, k, v, need_weights=True, need_logits=True)
    >>> res.output.shape, res.weights.shape
    (torch.Size([2, 1, 4]), torch.Size([2, 1, 10]))
    >>> bool(res.logits.abs().max() <= attn.score_proj.weight.abs().sum())  # |s| <= |w_v|_1
    True
    """

    cost: ClassVar[str] = "(d_q + d_k + 1)·h / 2h(n·d_q + m·d_k) + nm·h (add) + nm·h tanh + 2nm·h"
    citation: ClassVar[tuple[str, ...]] = ("arXiv:1409.0473", "arXiv:1703.03906")

    def __init__(
        self,
        query_dim: int,
        key_dim: int,
        hidden: int,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.query_dim = _checks.positive_int(query_dim, "query_dim")
        self.key_dim = _checks.positive_int(key_dim, "key_dim")
        self.hidden = _checks.positive_int(hidden, "hidden")
        dev, dt = _checks.placement(device, dtype)
        widest = max(self.query_dim, self.key_dim)
        _checks.allocation((self.hidden, widest), dt, "hidden, query_dim or key_dim")
        kw: dict[str, object] = {"device": dev, "dtype": dt}
        self.q_proj = nn.Linear(self.query_dim, self.hidden, bias=False, **kw)
        self.k_proj = nn.Linear(self.key_dim, self.hidden, bias=False, **kw)
        self.score_proj = nn.Linear(self.hidden, 1, bias=False, **kw)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        *,
        attn_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        need_logits: bool = False,
    ) -> AttentionResult:
        r"""Attend from ``query`` to ``key``/``value`` with additive scores.

        Parameters
        ----------
        query : Tensor
            ``(batch, q_len, query_dim)``.
        key : Tensor
            ``(batch, k_len, key_dim)``.
        value : Tensor
            ``(batch, k_len, d_v)``, any $d_v$.
        attn_mask : Tensor, optional
            2 or 3 dimensions, broadcastable to ``(batch, q_len, k_len)``. Boolean: ``True``
            marks positions that take part (as in torch SDPA). Floating point: added to the
            scores.
        need_weights : bool
            Also return the attention probabilities.
        need_logits : bool
            Also return the scores $s(q_i, k_j)$ (before the mask).

        Returns
        -------
        AttentionResult
            ``output`` of shape ``(batch, q_len, d_v)``, and ``weights``/``logits`` of shape
            ``(batch, q_len, k_len)`` when requested (else ``None``); there is no heads
            dimension. As in [scaled_dot_product_attention][attnscale.scaled_dot_product_attention],
            a query row whose keys are all masked (all ``False`` or $-\infty$; or
            ``k_len = 0``) gets zero weights, a zero output and zero gradients, not NaN. For
            float16/bfloat16 inputs the softmax runs in float32.

        Raises
        ------
        TypeError
            If an input is not a floating tensor or its dtype differs from the parameters', or
            ``attn_mask`` is neither boolean nor floating point.
        ValueError
            If an input is not 3-D, ``query``/``key`` do not have width ``query_dim``/``key_dim``,
            batch sizes or key/value lengths differ, an input or the mask is on another device,
            or the mask has fewer than 2 or more than 3 dimensions or does not broadcast.
        """
        weight = self.q_proj.weight
        _checks.tokens(query, "query", self.query_dim, weight)
        _checks.tokens(key, "key", self.key_dim, weight)
        _checks.float_tensor(value, "value", min_dim=3)
        if value.dim() != 3:
            raise ValueError(f"value must have shape (batch, k_len, d_v), got {tuple(value.shape)}")
        _checks.matches(value, "value", weight, "the module's parameters")
        batch, q_len, _ = query.shape
        k_len = key.shape[1]
        if key.shape[0] != batch or value.shape[0] != batch:
            raise ValueError(
                "query, key and value must share the batch size, got "
                f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
            )
        if value.shape[1] != k_len:
            raise ValueError(f"value must have k_len={k_len} like key, got {value.shape[1]}")
        mask = check_mask(attn_mask, (batch, q_len, k_len), query, "(batch, q_len, k_len)")
        _checks.allocation((batch, q_len, k_len, self.hidden), query.dtype, "query, key or hidden")

        # Rows with every key masked: unmasked for the softmax, zeroed after it (no NaN).
        dead = None if mask is None else dead_rows(mask)  # (..., q_len, 1)
        if dead is not None and mask is not None:
            mask = mask | dead if mask.dtype == torch.bool else mask.masked_fill(dead, 0.0)

        q = self.q_proj(query)  # (batch, q_len, hidden)
        k = self.k_proj(key)  # (batch, k_len, hidden)
        # Every query against every key: (batch, q_len, 1, hidden) + (batch, 1, k_len, hidden).
        features = torch.tanh(q.unsqueeze(2) + k.unsqueeze(1))  # (batch, q_len, k_len, hidden)
        logits = self.score_proj(features).squeeze(-1)  # (batch, q_len, k_len)

        scores = logits
        if mask is not None:
            if mask.dtype == torch.bool:
                scores = scores.masked_fill(~mask, float("-inf"))  # mask broadcasts to scores
            else:
                scores = scores + mask  # (batch, q_len, k_len)
        if scores.dtype in LOW_PRECISION:
            weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(scores.dtype)
        else:
            weights = torch.softmax(scores, dim=-1)  # (batch, q_len, k_len)
        if dead is not None:
            weights = weights.masked_fill(dead, 0.0)
        out = weights @ value  # (batch, q_len, d_v)
        return AttentionResult(
            out, weights if need_weights else None, logits if need_logits else None
        )

    def extra_repr(self) -> str:
        return f"query_dim={self.query_dim}, key_dim={self.key_dim}, hidden={self.hidden}"
