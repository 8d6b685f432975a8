r"""Per-head attention statistics over every query row, from q and k in key chunks.

The sampled statistics of [AttentionStats][attnscale.AttentionStats] describe a forward pass;
a training run needs numbers that cover every row, because a maximum over a sample is not the
maximum. These are computed from q and k directly, one chunk of keys at a time, with an
online softmax (the running maximum, sum and entropy term of every row are rescaled as a new
chunk raises the maximum), so memory is O(B·H·L) plus one chunk of logits, never the
$L \times S$ matrix, whatever path the model's attention takes.

Definitions:

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

__all__ = ["HeadStats", "head_stats", "head_stats_of_logits"]

_EXP_FLOOR = 80.0  # exp below e^-80 is lost against a row sum >= 1, and slow on CPU


@dataclasses.dataclass(frozen=True)
class HeadStats:
    """Per-head attention statistics over every query row of one or more calls.

    Every field is a float64 tensor of shape (heads,). The counts make statistics of several
    calls (or processes) combine exactly: see [merge][attnscale.HeadStats.merge].
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

    def to_dict(self) -> dict[str, list[float | None]]:
        """One list per statistic, one entry per head (non-finite values as None)."""
        values = {
            "max_logit": self.max_logit,
            "max_abs_logit": self.max_abs_logit,
            "entropy": self.entropy,
            "lse": self.lse,
            "first_key_weight": self.first_key_weight,
            "masked_rows": self.masked_rows,
            "max_abs_qk": self.max_abs_qk,
            "rows": self.rows,
        }
        return {
            name: [v if math.isfinite(v) else None for v in t.tolist()]
            for name, t in values.items()
        }

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
    masks = _Masks(attn_mask, is_causal, batch, heads, kv_heads, length, q.device, work)
    state = _Rows.empty(qg.shape[:-1], work, q.device)
    raw = torch.zeros(qg.shape[:-1], dtype=work, device=q.device)  # max |q·k| per row
    for j in range(0, keys, chunk):
        cols = slice(j, min(j + chunk, keys))
        qk = qg @ kg[..., cols, :].transpose(-2, -1)  # (B, kv_heads, group · L, c)
        high, low = qk.amax(-1), qk.amin(-1)  # every entry: the product is formed masked or not
        raw = torch.maximum(raw, torch.maximum(high, -low))
        bias, visible = masks.chunk(cols)
        if bias is None and c > 0:  # the row's extremes are those just taken
            state.add(qk.mul_(c), None, high * c, low * c, keys=cols.stop - j, first=j == 0)
        else:
            state.add(qk.mul_(c), bias, None, None, keys=visible, first=j == 0)
    return state.per_head(_per_head(raw, group, "max"), group)


@torch.no_grad()
def head_stats_of_logits(
    logits: torch.Tensor,
    *,
    masked: torch.Tensor | None = None,
    raw: torch.Tensor | None = None,
    chunk: int = 128,
) -> HeadStats:
    """The same statistics from softmax inputs that already exist, (..., heads, L, S).

    ``masked`` (boolean, broadcastable) marks masked entries; -inf entries are masked
    whatever it says, and NaN and +inf entries are left out (the sampled statistics count
    them). ``raw`` is the product before the scale, for ``max_abs_qk`` (NaN
    without it).
    """
    *batch, heads, length, keys = logits.shape
    work = torch.float64 if logits.dtype == torch.float64 else torch.float32
    x = logits.detach().reshape(-1, heads, length, keys)
    masks = _Masks(
        None if masked is None else ~masked, False, batch, heads, heads, length, x.device, work
    )
    state = _Rows.empty(x.shape[:-1], work, x.device)
    for j in range(0, keys, chunk):
        cols = slice(j, min(j + chunk, keys))
        xj = x[..., cols].to(work)
        bias, visible = masks.chunk(cols)
        bad = ~torch.isfinite(xj)
        if bool(bad.any()):  # -inf entries are masked; NaN and +inf are left out as well
            extra = torch.zeros_like(xj).masked_fill_(bad, -math.inf)
            bias = extra if bias is None else bias + extra
            visible = (bias > -math.inf).sum(-1)
            xj = xj.masked_fill(bad, 0.0)
        state.add(xj, bias, None, None, keys=visible, first=j == 0)
    if raw is None:
        size = torch.full((heads,), math.nan, dtype=torch.float64)
    else:
        size = raw.detach().abs().reshape(-1, heads, length * keys).amax(dim=(0, 2)).double()
    return state.per_head(size, 1)


class _Masks:
    """The mask of each key chunk as an additive bias (0 or -inf, or the float mask's values)
    at the mask's own shape, which broadcasts against the (B, kv_heads, group · L, c)
    logits: a full-size boolean mask is slow to apply on a CPU, a broadcast add is not."""

    def __init__(
        self,
        mask: torch.Tensor | None,
        is_causal: bool,
        batch: list[int],
        heads: int,
        kv_heads: int,
        length: int,
        device: torch.device,
        dtype: torch.dtype,
    ) -> None:
        self.is_causal, self.dtype, self.kv_heads = is_causal, dtype, kv_heads
        self.group, self.length = heads // kv_heads, length
        self.rows = torch.arange(length, device=device).repeat(self.group)  # query of each row
        self.mask = None
        if mask is not None:
            m = mask.reshape((1,) * (len(batch) + 3 - mask.dim()) + tuple(mask.shape))
            m_batch = m.shape[: len(batch)]
            if any(n != 1 for n in m_batch):  # batch axes flattened as q's are
                m = m.broadcast_to((*batch, *m.shape[len(batch) :]))
            self.mask = m.reshape(-1, *m.shape[len(batch) :])  # (B or 1, heads or 1, L or 1, S)
        self.masked_value = _mask_value(mask)

    def chunk(self, cols: slice) -> tuple[torch.Tensor | None, torch.Tensor | int]:
        """The bias of keys ``cols``, and the visible keys per row (a count, or a tensor)."""
        width = cols.stop - cols.start
        bias = None
        if self.mask is not None:
            m = self.mask[..., cols]
            if m.dtype == torch.bool:
                bias = torch.zeros(m.shape, dtype=self.dtype, device=m.device).masked_fill_(
                    ~m, -math.inf
                )
            else:
                bias = m.to(self.dtype).masked_fill(m == self.masked_value, -math.inf)
            bias = self._rows(bias)
        if self.is_causal:
            cols_idx = torch.arange(cols.start, cols.stop, device=self.rows.device)
            causal = torch.zeros(len(self.rows), width, dtype=self.dtype, device=self.rows.device)
            causal.masked_fill_(cols_idx[None, :] > self.rows[:, None], -math.inf)
            bias = causal if bias is None else bias + causal
        if bias is None:
            return None, width
        return bias, (bias > -math.inf).sum(-1)

    def _rows(self, bias: torch.Tensor) -> torch.Tensor:
        """(B', heads or 1, L or 1, c) -> (B', kv_heads or 1, group · L or 1, c)."""
        b, h, rows, c = bias.shape
        if h == 1:
            return bias if rows == 1 else bias.repeat(1, 1, self.group, 1)
        return bias.broadcast_to(b, h, self.length, c).reshape(b, self.kv_heads, -1, c)


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
    def empty(cls, shape: torch.Size, dtype: torch.dtype, device: torch.device) -> _Rows:
        def full(v: float) -> torch.Tensor:
            return torch.full(shape, v, dtype=dtype, device=device)

        inf = math.inf
        return cls(full(-inf), full(0.0), full(0.0), full(inf), full(0.0), full(-inf))

    def add(
        self,
        x: torch.Tensor,
        bias: torch.Tensor | None,
        high: torch.Tensor | None,
        low: torch.Tensor | None,
        *,
        keys: torch.Tensor | int,
        first: bool,
    ) -> None:
        """Fold one chunk of logits (..., rows, c) into the state: ``bias`` (0 or -inf where
        masked, or a float mask's values) is added, ``high`` and ``low`` are the chunk's row
        extremes where already known, ``keys`` the visible keys per row."""
        xm = x if bias is None else x + bias  # masked: -inf
        if first:
            self.first = xm[..., 0].clone()
        high = xm.amax(-1) if high is None else high
        if low is None and bias is None:
            low = x.amin(-1)
        elif low is None:  # min over the visible entries: -max(-(x + bias)), masked at -inf
            assert bias is not None
            low = (torch.where(bias == -math.inf, -math.inf, -bias) - x).amax(-1).neg_()
        self.low = torch.minimum(self.low, low)
        self.n = self.n + keys
        m_new = torch.maximum(self.m, high)
        ref = torch.where(torch.isinf(m_new), 0.0, m_new)  # rows with nothing visible yet
        # rescale the running sums to the new max; (m - ref) * s is 0 where s is 0
        shift = (self.m - ref).clamp_min(-_EXP_FLOOR)
        decay = shift.exp()
        self.t = decay * (self.t + torch.where(self.s > 0, shift * self.s, 0.0))
        self.s = decay * self.s
        # masked entries (-inf) and those far below the max are raised to e^-80: lost against
        # a row sum >= 1, and exp is much slower on CPU where its result underflows
        xc = (xm - ref.unsqueeze(-1)).clamp_min_(-_EXP_FLOOR)
        e = xc.exp()
        self.s = self.s + e.sum(-1)
        self.t = self.t + torch.linalg.vecdot(e, xc)
        self.m = m_new

    def per_head(self, raw: torch.Tensor, group: int) -> HeadStats:
        """Reduce the rows to one value per query head (``raw``: max |q·k| per head)."""
        live, some = self.n >= 2, self.n >= 1
        s = self.s.clamp_min(1e-300)
        lse = self.m + s.log()
        ent = torch.where(live, (s.log() - self.t / s) / self.n.clamp_min(2).log(), 0.0)
        p_first = torch.where(some, (self.first - lse).exp(), 0.0)
        n_live, n_some = _per_head(live, group, "sum"), _per_head(some, group, "sum")
        return HeadStats(
            max_logit=_per_head(torch.where(some, self.m, -math.inf), group, "max"),
            min_logit=_per_head(torch.where(some, self.low, math.inf), group, "min"),
            max_abs_qk=raw,
            entropy=_mean(_per_head(ent, group, "sum"), n_live),
            lse=_mean(_per_head(torch.where(some, lse, 0.0), group, "sum"), n_some),
            first_key_weight=_mean(_per_head(p_first, group, "sum"), n_some),
            rows=n_some,
            entropy_rows=n_live,
            masked=_per_head(~some, group, "sum"),
        )


def _mean(total: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """total / n, NaN where n is 0."""
    return torch.where(n > 0, total / n.clamp_min(1), math.nan)


def _per_head(t: torch.Tensor, group: int, op: str) -> torch.Tensor:
    """(B, kv_heads, group · L) -> (heads,) in float64, by max, min or sum over batch and rows."""
    t = t.reshape(t.shape[0], t.shape[1] * group, -1).double()
    if op == "max":
        return t.amax(dim=(0, 2))
    if op == "min":
        return t.amin(dim=(0, 2))
    return t.sum(dim=(0, 2))


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
            torch.broadcast_shapes(mask.shape, target)  # type: ignore[no-untyped-call]
        except RuntimeError:
            raise ValueError(
                f"attn_mask of shape {tuple(mask.shape)} does not broadcast to (..., heads, L, S) = {target}"
            ) from None
    _checks.positive_int(chunk, "chunk")
    return q.detach(), k.detach()
