r"""Per-head attention statistics over every query row, from q and k in key chunks.

The sampled statistics of [AttentionStats][attnscale.AttentionStats] describe a forward pass;
a training run needs numbers that cover every row, because a maximum over a sample is not the
maximum. These are computed from q and k directly, one chunk of keys at a time, with an
online softmax (the running maximum, sum and entropy term of every row are rescaled as a new
chunk raises the maximum), so memory is O(B·H·L) plus one chunk of logits, never the
$L \times S$ matrix, whatever path the model's attention takes.

Definitions (``FACTS.md`` §8 of the project notes the sources):

- ``max_logit``: the largest softmax input a query row can see, signed, per head, over the
  batch: cuDNN's ``return_max_logit`` and the $S_{\max}$ of Kimi K2's QK-Clip. Scaled
  $c\,q\cdot k$, plus the additive mask or bias where one is given.
- ``entropy``: per row $H / \log n$ with $n$ the row's unmasked keys, averaged over the rows
  with at least two (Zhai et al. 2023). Computed from max-centred logits, so never negative.
- ``lse``: the row's log-sum-exp, averaged; ``first_key_weight``: the probability on key 0
  (where attention sinks form), averaged; ``masked_rows``: the fraction of rows with no
  unmasked key.
- ``max_abs_qk``: the largest $|q\cdot k|$ before the scale, masked entries included (the
  product is formed whatever the mask): float16 overflows past 65504.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from .. import _checks

__all__ = ["HeadStats", "head_stats"]

_EXP_FLOOR = 80.0  # exp below e^-80 is lost against a row sum >= 1, and slow on CPU


@dataclasses.dataclass(frozen=True)
class HeadStats:
    """Per-head attention statistics over every query row of one or more calls.

    Every field is a float64 tensor of shape (heads,). The counts make statistics of several
    calls (or processes) combine exactly: see [merge][attnscale.monitor.head_stats.HeadStats.merge].
    """

    max_logit: torch.Tensor
    min_logit: torch.Tensor
    max_abs_qk: torch.Tensor
    entropy: torch.Tensor
    lse: torch.Tensor
    first_key_weight: torch.Tensor
    rows: torch.Tensor  # query rows with at least one unmasked key
    entropy_rows: torch.Tensor  # ... with at least two: the entropy's weight
    masked: torch.Tensor  # query rows with none

    @property
    def max_abs_logit(self) -> torch.Tensor:
        """The largest logit size a query row sees."""
        return torch.maximum(self.max_logit.abs(), self.min_logit.abs())

    @property
    def masked_rows(self) -> torch.Tensor:
        """The fraction of query rows with no unmasked key."""
        return self.masked / (self.rows + self.masked).clamp_min(1)

    @property
    def fp16_headroom(self) -> torch.Tensor:
        """65504 / max|q·k|: how far the unscaled product is from float16 overflow."""
        return torch.finfo(torch.float16).max / self.max_abs_qk

    def qk_clip_factor(self, tau: float = 100.0) -> torch.Tensor:
        """The factor γ = min(1, τ / max_logit) that QK-Clip would apply to each head's q and k
        weights (1 where the max logit is at most τ, including heads whose max is ≤ 0)."""
        tau = _checks.positive_float(tau, "tau")
        safe = torch.where(self.max_logit > tau, self.max_logit, torch.ones_like(self.max_logit))
        return torch.where(self.max_logit > tau, tau / safe, torch.ones_like(safe))

    def merge(self, other: HeadStats) -> HeadStats:
        """The statistics of both sets of rows: maxima of maxima, weighted means of means."""

        def mean(
            a: torch.Tensor, b: torch.Tensor, wa: torch.Tensor, wb: torch.Tensor
        ) -> torch.Tensor:
            return _mean(a.nan_to_num(0.0) * wa + b.nan_to_num(0.0) * wb, wa + wb)

        return HeadStats(
            max_logit=torch.maximum(self.max_logit, other.max_logit),
            min_logit=torch.minimum(self.min_logit, other.min_logit),
            max_abs_qk=torch.maximum(self.max_abs_qk, other.max_abs_qk),
            entropy=mean(self.entropy, other.entropy, self.entropy_rows, other.entropy_rows),
            lse=mean(self.lse, other.lse, self.rows, other.rows),
            first_key_weight=mean(
                self.first_key_weight, other.first_key_weight, self.rows, other.rows
            ),
            rows=self.rows + other.rows,
            entropy_rows=self.entropy_rows + other.entropy_rows,
            masked=self.masked + other.masked,
        )


@torch.no_grad()
def head_stats(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    scale: float | None = None,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    chunk: int = 128,
) -> HeadStats:
    """Per-head statistics of ``softmax(scale · q kᵀ + mask)`` over every query row.

    Parameters
    ----------
    q, k : torch.Tensor
        Shaped (..., heads, L, d) and (..., kv_heads, S, d), as for
        ``F.scaled_dot_product_attention``; kv_heads may divide heads (grouped-query
        attention).
    scale : float, optional
        The factor on q·k; ``None`` means 1/√d, as in SDPA.
    attn_mask : torch.Tensor, optional
        Broadcastable to (..., heads, L, S). Boolean: True where a query may attend, as in
        SDPA. Float: added to the logits; where it is -inf, or where a two-valued mask holds
        its negative value (0 and ``finfo.min``, -1e4, -100 ...), the key is masked.
    is_causal : bool
        Query i sees keys 0..i (SDPA's top-left alignment).
    chunk : int
        Keys per step: memory is O(batch · heads · L · chunk).
    """
    q, k = _checked(q, k, attn_mask, chunk)
    *batch, heads, length, d = q.shape
    kv_heads, keys = k.shape[-3], k.shape[-2]
    group = heads // kv_heads
    c = 1 / math.sqrt(d) if scale is None else float(scale)
    work = torch.float64 if q.dtype == torch.float64 else torch.float32
    # (B, kv_heads, group · L, d): the query heads that share a key head, as extra rows
    qg = q.reshape(-1, kv_heads, group * length, d).to(work)
    kg = k.reshape(-1, kv_heads, keys, d).to(work)
    masked_value = _mask_value(attn_mask)
    rows = torch.arange(length, device=q.device).repeat(group)  # query index of each row
    state = _Rows.empty(qg.shape[:-1], work, q.device)
    raw = torch.full((kv_heads, group), -math.inf, dtype=work, device=q.device)
    for j in range(0, keys, chunk):
        cols = slice(j, min(j + chunk, keys))
        qk = qg @ kg[..., cols, :].transpose(-2, -1)  # (B, kv_heads, group · L, c)
        raw = torch.maximum(raw, _per_head(qk.abs(), group))
        x = qk.mul_(c)
        visible = None
        if attn_mask is not None:
            m = torch.broadcast_to(attn_mask[..., cols], (*batch, heads, length, cols.stop - j))
            m = m.reshape(-1, kv_heads, group * length, cols.stop - j)
            if m.dtype == torch.bool:
                visible = m
            else:
                x = x + m.to(work)
                visible = m != masked_value
        if is_causal:
            causal = torch.arange(j, cols.stop, device=q.device)[None, :] <= rows[:, None]
            visible = causal if visible is None else visible & causal
        state.add(x, visible, first=j == 0)
    return state.per_head(raw.reshape(heads), group, heads)


class _Rows:
    """The online-softmax state of every query row: running max m, sum s = Σ e^(x-m),
    entropy term t = Σ e^(x-m)·(x-m), row min, unmasked count, and the first key's logit."""

    def __init__(
        self,
        m: torch.Tensor,
        s: torch.Tensor,
        t: torch.Tensor,
        low: torch.Tensor,
        n: torch.Tensor,
        first: torch.Tensor,
    ) -> None:
        self.m, self.s, self.t, self.low, self.n, self.first = m, s, t, low, n, first

    @classmethod
    def empty(cls, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> _Rows:
        def full(v: float) -> torch.Tensor:
            return torch.full(shape, v, dtype=dtype, device=device)

        return cls(
            full(-math.inf), full(0.0), full(0.0), full(math.inf), full(0.0), full(-math.inf)
        )

    def add(self, x: torch.Tensor, visible: torch.Tensor | None, *, first: bool) -> None:
        """Fold one chunk of logits (..., rows, c) into the state."""
        xm = x if visible is None else x.masked_fill(~visible, -math.inf)
        if first:
            self.first = xm[..., 0].clone()
        low = x if visible is None else x.masked_fill(~visible, math.inf)
        self.low = torch.minimum(self.low, low.amin(-1))
        self.n = self.n + (x.shape[-1] if visible is None else visible.sum(-1))
        m_new = torch.maximum(self.m, xm.amax(-1))
        ref = torch.where(torch.isinf(m_new), 0.0, m_new)  # rows with nothing visible yet
        # rescale the running sums to the new max; (m - ref) * s is 0 where s is 0
        shift = (self.m - ref).clamp_min(-_EXP_FLOOR)
        decay = shift.exp()
        self.t = decay * (self.t + torch.where(self.s > 0, shift * self.s, 0.0))
        self.s = decay * self.s
        xc = (xm - ref.unsqueeze(-1)).clamp_min_(-_EXP_FLOOR)
        e = xc.exp()
        if visible is not None:
            e = e.masked_fill_(~visible, 0.0)
        self.s = self.s + e.sum(-1)
        self.t = self.t + e.mul_(xc).sum(-1)
        self.m = m_new

    def per_head(self, raw: torch.Tensor, group: int, heads: int) -> HeadStats:
        """Reduce the rows to one value per query head."""
        live, some = self.n >= 2, self.n >= 1
        s = self.s.clamp_min(1e-300)
        lse = self.m + s.log()
        ent = torch.where(live, (s.log() - self.t / s) / self.n.clamp_min(2).log(), 0.0)
        p_first = torch.where(some, (self.first - lse).exp(), 0.0)

        def head(t: torch.Tensor, op: str) -> torch.Tensor:
            # (B, kv_heads, group · L) -> (heads,)
            t = t.reshape(t.shape[0], t.shape[1] * group, -1).double()
            if op == "max":
                return t.amax(dim=(0, 2))
            if op == "min":
                return t.amin(dim=(0, 2))
            return t.sum(dim=(0, 2))

        n_live, n_some = head(live, "sum"), head(some, "sum")
        m = torch.where(some, self.m, -math.inf)
        return HeadStats(
            max_logit=head(m, "max"),
            min_logit=head(torch.where(some, self.low, math.inf), "min"),
            max_abs_qk=raw.double(),
            entropy=_mean(head(ent, "sum"), n_live),
            lse=_mean(head(torch.where(some, lse, 0.0), "sum"), n_some),
            first_key_weight=_mean(head(p_first, "sum"), n_some),
            rows=n_some,
            entropy_rows=n_live,
            masked=head(~some, "sum"),
        )


def _mean(total: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """total / n, NaN where n is 0."""
    return torch.where(n > 0, total / n.clamp_min(1), math.nan)


def _per_head(t: torch.Tensor, group: int) -> torch.Tensor:
    """Max over batch, rows and keys of (B, kv_heads, group · L, c), per query head."""
    return t.reshape(t.shape[0], t.shape[1], group, -1).amax(dim=(0, 3))  # (kv_heads, group)


def _mask_value(mask: torch.Tensor | None) -> float:
    """The value of a float mask that masks: its negative value if it has two (0 and one
    negative), else -inf."""
    if mask is None or mask.dtype == torch.bool or not mask.numel():
        return -math.inf
    low = float(mask.amin())
    if low < 0 and not bool(torch.count_nonzero(mask.masked_fill(mask == low, 0.0))):
        return low
    return -math.inf


def _checked(
    q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, chunk: int
) -> tuple[torch.Tensor, torch.Tensor]:
    for name, t in (("q", q), ("k", k)):
        if not isinstance(t, torch.Tensor) or t.dim() < 3 or not t.is_floating_point():
            raise TypeError(
                f"{name} must be a floating-point tensor shaped (..., heads, length, head_dim), "
                f"got {type(t).__name__ if not isinstance(t, torch.Tensor) else f'{t.dtype} {tuple(t.shape)}'}"
            )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same head_dim, got {q.shape[-1]} and {k.shape[-1]}"
        )
    if q.shape[-3] % k.shape[-3]:
        raise ValueError(
            f"k's heads must divide q's heads (grouped-query attention), got {k.shape[-3]} and "
            f"{q.shape[-3]}"
        )
    if q.shape[:-3] != k.shape[:-3]:
        raise ValueError(
            f"q and k must have the same batch shape, got {tuple(q.shape[:-3])} and {tuple(k.shape[:-3])}"
        )
    if mask is not None:
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"attn_mask must be a tensor or None, got {type(mask).__name__}")
        target = (*q.shape[:-1], k.shape[-2])
        try:
            torch.broadcast_shapes(mask.shape, target)
        except RuntimeError:
            raise ValueError(
                f"attn_mask of shape {tuple(mask.shape)} does not broadcast to (..., heads, L, S) = {target}"
            ) from None
    _checks.positive_int(chunk, "chunk")
    return q.detach(), k.detach()
