r"""Per-head attention statistics over every query row, from q and k in key chunks.

The sampled statistics of [AttentionStats][attnscale.AttentionStats] describe a forward pass;
a training run needs numbers that cover every row, because a maximum over a sample is not the
maximum. These are computed from q and k directly, in blocks of whole rows where a row of
every batch and head fits in one chunk of logits (a causal block stops at the last key its
rows see), and otherwise one chunk of keys at a time, with an online softmax (the running
maximum, sum and entropy term of every row are rescaled as a new chunk raises the maximum).
Either way memory is O(B·H·L) plus one chunk of logits, never the $L \times S$ matrix,
whatever path the model's attention takes. A block of whole rows takes a dozen passes and no
merging: fewer operations, which is most of the cost at the sizes of a forward pass. Where the
model computed the weights (hand-written attention), a block takes a few passes over its logits
and weights, and no exponential.

Definitions:

- ``max_logit``: the largest softmax input a query row can see, signed, per head, over the
  batch: Transformer Engine's ``return_max_logit`` (cuDNN's ``Max`` output is the per-row
  maximum it reduces) and the $S_{\max}$ of Kimi K2's QK-Clip. Scaled
  $c\,q\cdot k$, plus the additive mask or bias where one is given.
- ``entropy``: per row $H / \log n$ with $n$ the row's unmasked keys, averaged over the rows
  with at least two (Zhai et al. 2023). Computed from max-centred logits, so never negative.
- ``lse``: the row's log-sum-exp, averaged; ``first_key_weight``: the probability on key 0,
  averaged; ``masked_rows``: the fraction of rows with no unmasked key.
- ``sink_key``: the key most rows (with two or more unmasked keys) put their largest weight
  on, where attention sinks form (the first token, a delimiter); ``sink_weight``: the mean
  probability on it, 0 in rows that cannot see it; ``rest_entropy``: the normalised entropy
  of the rest of each row without that key, renormalised, averaged with the rest's mass as
  weight; ``positional_share``: the share of rows whose largest key (or second largest,
  where the largest is the sink key) lies at the most common offset from the query,
  ``positional_offset`` (see ``attnscale._monitor.structure``).
- ``max_abs_qk``: the largest $|q\cdot k|$ before the scale over the products formed:
  float16 overflows past 65504. With a mask tensor every entry counts (eager code forms
  the product whatever the mask); under ``is_causal`` alone the visible ones (causal kernels skip
  what a query cannot see, and so does this computation).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch

from .. import _checks
from . import structure
from .scratch import buffer

__all__ = ["HeadStats", "head_stats", "head_stats_of_logits"]

_EXP_FLOOR = 80.0  # exp below e^-80 is lost against a row sum >= 1, and slow on CPU
# logits per step by default, 4 MB in float32: a step costs a few dozen operations whatever its
# size, and inside a monitor its temporaries are reused (``scratch``), so fewer, larger steps
# are faster (a GPT-2-small layer, 786k logits, in one step: ~25% less time than in four)
_CHUNK_VALUES = 1 << 20


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
    rows: torch.Tensor  # query rows with at least one unmasked key (padding queries left out)
    entropy_rows: torch.Tensor  # ... with at least two: the entropy's weight
    masked: torch.Tensor  # query rows with none
    sink_key: torch.Tensor  # the key most rows put their largest weight on
    sink_weight: torch.Tensor  # the mean weight on it
    rest_entropy: torch.Tensor  # the entropy of the rest of each row, without the sink key
    rest_mass: torch.Tensor  # the rows' weight off the sink: the rest entropy's weight
    rest_rows: torch.Tensor  # rows with two or more keys besides the sink
    positional_share: torch.Tensor  # the share of rows that look at the most common offset
    positional_offset: torch.Tensor  # that offset, key - query position

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
            "sink_key": self.sink_key,
            "sink_weight": self.sink_weight,
            "rest_entropy": self.rest_entropy,
            "positional_share": self.positional_share,
            "positional_offset": self.positional_offset,
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
        """The statistics of both sets of rows: maxima of maxima, weighted means of means.

        A head's sink key and most common offset merge exactly where both sets agree on them
        (as the rows of one sink or positional head do); where they differ, the larger set's
        key (offset) is kept, with what that set alone measured of it."""

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
            **_merged_structure(self, other, mean),
        )


def _merged_structure(
    a: HeadStats, b: HeadStats, mean: Callable[..., torch.Tensor]
) -> dict[str, torch.Tensor]:
    """The sink and positional fields of two sets of rows (see ``HeadStats.merge``)."""
    ra, rb = a.entropy_rows, b.entropy_rows
    # where the two differ, the larger set's alone: the other's weight becomes 0
    same_key = a.sink_key == b.sink_key
    wa, wb = _keep(same_key, ra, rb)
    weight = mean(a.sink_weight, b.sink_weight, wa, wb) * (wa + wb) / (ra + rb).clamp_min(1)
    ma, mb = (
        torch.where((w > 0) & s.rest_entropy.isfinite(), s.rest_mass, 0.0)
        for w, s in ((wa, a), (wb, b))
    )
    mass, rest_rows = a.rest_mass + b.rest_mass, a.rest_rows + b.rest_rows
    rest = mean(a.rest_entropy, b.rest_entropy, ma, mb)
    floor = (ma + mb > 0) & (mass >= structure.REST_FLOOR * rest_rows)
    same_offset = a.positional_offset == b.positional_offset
    ca, cb = (s.positional_share.nan_to_num(0.0) * r for s, r in ((a, ra), (b, rb)))
    pa, pb = _keep(same_offset, ca, cb)
    return {
        "sink_key": torch.where(wa > 0, a.sink_key, b.sink_key),
        "sink_weight": weight,
        "rest_entropy": torch.where(floor, rest, math.nan),
        "rest_mass": mass,
        "rest_rows": rest_rows,
        "positional_share": _mean(pa + pb, ra + rb),
        "positional_offset": torch.where(pa > 0, a.positional_offset, b.positional_offset),
    }


def _keep(
    same: torch.Tensor, a: torch.Tensor, b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The weights ``a`` and ``b`` where ``same``; elsewhere the larger one's alone (a's on a
    tie), the other 0."""
    return torch.where(same | (a >= b), a, 0.0), torch.where(same | (b > a), b, 0.0)


@torch.no_grad()
def head_stats(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    scale: float | None = None,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    chunk: int | None = None,
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
        Query i sees keys 0..i (SDPA's top-left alignment). Keys a query cannot see are
        skipped, as causal kernels skip them, so ``max_abs_qk`` covers the visible
        products only.
    chunk : int, optional
        Memory is O(batch · heads · L · chunk): each step takes that many logits at most, as
        whole rows where a row of every batch and head fits, else as ``chunk`` keys of every
        row. By default one step holds at most 2²⁰ values (4 MB in float32).
    """
    return rows_of_qk(
        q, k, scale=scale, attn_mask=attn_mask, is_causal=is_causal, chunk=chunk
    ).per_head()


@torch.no_grad()
def rows_of_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    scale: float | None = None,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    chunk: int | None = None,
) -> RowStats:
    """[head_stats][]'s statistics per query row, before their reduction per head."""
    q, k = _checked(q, k, attn_mask, chunk)
    *batch, heads, length, d = q.shape
    kv_heads, keys = k.shape[-3], k.shape[-2]
    group = heads // kv_heads
    c = 1 / math.sqrt(d) if scale is None else float(scale)
    work = torch.float64 if q.dtype == torch.float64 else torch.float32
    # (B, kv_heads, L · group, d): the query heads that share a key head, as extra rows, the
    # rows of one query position together (so a causal chunk skips a block of rows)
    qg = (
        q.reshape(-1, kv_heads, group, length, d)
        .transpose(2, 3)
        .reshape(-1, kv_heads, length * group, d)
        .to(work)
    )
    kt = k.reshape(-1, kv_heads, keys, d).to(work).transpose(-2, -1)
    if chunk is None:
        chunk = _default_chunk(keys, qg.shape[0] * kv_heads * length * group)
    masks = _Masks(attn_mask, is_causal, batch, heads, kv_heads, length, q.device, work)
    skip = is_causal and attn_mask is None  # the causal kernels' shortcut, taken here too
    found = _qk_whole_rows(qg, kt, c, masks, skip, chunk)
    state, raw = found if found is not None else _qk_by_key_chunks(qg, kt, c, masks, skip, chunk)
    if skip:  # the visible products only: the row's extreme logits, unscaled
        size = torch.maximum(state.m.abs(), state.low.abs()) / abs(c) if c else math.nan
        raw = torch.where(state.n >= 1, size, 0.0)
    state.drop(masks.padding())
    at_key = _sink_logits_of_qk(qg, kt, c, masks)
    raw = _per_head(raw[None], group, "max")[0]
    return RowStats(state, raw, state.sink(group, at_key, keys), group, keys)


def _qk_whole_rows(
    qg: torch.Tensor, kt: torch.Tensor, c: float, masks: _Masks, skip: bool, chunk: int
) -> tuple[_Rows, torch.Tensor] | None:
    """The rows' statistics and max |q·k| per row, from blocks of whole rows of about
    ``chunk`` keys' worth of logits each (a causal block stops at the last key its rows see);
    None where a row of every batch and head does not fit, or a logit is not finite."""
    b, kv, rows, _ = qg.shape
    keys = kt.shape[-1]
    step = (b * kv * rows * chunk) // max(1, b * kv * keys)
    if step < 1:
        return None
    parts = []
    for r0 in range(0, rows, step):
        r1 = min(r0 + step, rows)
        width = min(keys, int(masks.rows[r1 - 1]) + 1) if skip else keys
        shape = (b, kv, r1 - r0, width)
        out = buffer("qk", shape, qg.dtype, qg.device)
        x = torch.matmul(qg[..., r0:r1, :], kt[..., :width], out=out)
        raw = torch.zeros(()) if skip else torch.maximum(x.amax(-1), -x.amin(-1))
        bias, visible = masks.block(r0, r1, width)
        folded = _fold(x.mul_(c), bias, x.dtype, own=True)
        if folded is None:
            return None
        n = torch.as_tensor(visible, dtype=x.dtype, device=x.device).broadcast_to(folded[0].shape)
        parts.append((*folded, n, raw.broadcast_to(folded[0].shape)))
    m, s, t, low, first, top, second, n, raw = (torch.cat(f, -1) for f in zip(*parts, strict=True))
    return _Rows(m, s, t, low, n, first, top, second), raw


def _qk_by_key_chunks(
    qg: torch.Tensor, kt: torch.Tensor, c: float, masks: _Masks, skip: bool, chunk: int
) -> tuple[_Rows, torch.Tensor]:
    """The rows' statistics and max |q·k| per row, from chunks of keys, with an online
    softmax: memory O(B·H·L·chunk) however many keys there are."""
    keys = kt.shape[-1]
    state = _Rows.empty(qg.shape[:-1], qg.dtype, qg.device)
    raw = torch.zeros(qg.shape[:-1], dtype=qg.dtype, device=qg.device)  # max |q·k| per row
    group = masks.group
    for j in range(0, keys, chunk):
        cols = slice(j, min(j + chunk, keys))
        # a causal query i sees no key after i: rows before j * group see nothing here
        r0 = j * group if skip else 0
        if r0 >= qg.shape[-2]:
            break
        x = qg[..., r0:, :] @ kt[..., cols]  # (B, kv_heads, rows, c)
        bias, visible = masks.chunk(cols, r0)
        low = None
        if not skip:  # every product formed counts, masked or not
            hi, lo = x.amax(-1), x.amin(-1)
            raw[..., r0:] = torch.maximum(raw[..., r0:], torch.maximum(hi, -lo))
            if bias is None:  # the row's minimum is among those just taken, scaled
                low = torch.minimum(hi * c, lo * c)
        state.add(x.mul_(c), bias, low, keys=visible, rows=slice(r0, None), start=j)
    return state, raw


def _fold(
    x: torch.Tensor, bias: torch.Tensor | None, work: torch.dtype, own: bool
) -> tuple[torch.Tensor, ...] | None:
    """One block of whole rows of logits (..., rows, keys): each row's max, sum
    s = Σ e^(x-max), entropy term t = Σ e^(x-max)·(x-max), min and first logit, and the
    indices of its largest and second largest keys (the ``_Rows`` fields), with ``bias``
    (-inf where masked) added; ``x`` is used up if ``own``. None where a row holds NaN, +inf
    or an unmasked -inf, which the key-chunk paths leave out. Every pass reads the block from
    memory, so there are as few as can be."""
    low = None
    a, b = (buffer(use, x.shape, work, x.device) for use in ("rows", "index"))
    if bias is not None:
        # masked: not the row's minimum
        low, _ = _smallest_visible(x, bias.masked_fill(bias == -math.inf, math.inf), a)
        x = x.add_(bias) if own else torch.add(x, bias, out=a)
    elif not own:
        x = a.copy_(x)
    high, top, second = structure.top_two(x, b)
    low = x.amin(-1) if low is None else low
    if bool((high.isnan() | (high == math.inf) | low.isnan() | (low == -math.inf)).any()):
        return None
    first = x[..., 0].clone()
    ref = torch.where(torch.isinf(high), 0.0, high)  # rows with no key: any reference
    # masked entries and those far below the max at e^-80, as on the key-chunk paths
    xc = x.sub_(ref.unsqueeze(-1)).clamp_min_(-_EXP_FLOOR)
    # the softmax into a buffer (torch.softmax has no out=; exp alone is slower on a CPU)
    p = torch.ops.aten._softmax.out(xc, -1, False, out=b)
    s = p.amax(-1).reciprocal()  # the largest entry is e^0 / s
    return high, s, s * p.mul_(xc).sum(-1), low, first, top, second


@torch.no_grad()
def head_stats_of_logits(
    logits: torch.Tensor,
    *,
    masked: torch.Tensor | None = None,
    raw: torch.Tensor | None = None,
    probs: torch.Tensor | None = None,
    chunk: int | None = None,
    first_row: int = 0,
) -> HeadStats:
    """The same statistics from softmax inputs that already exist, (..., heads, L, S).

    ``masked`` (boolean, broadcastable) marks masked entries; -inf entries are masked
    whatever it says, and NaN and +inf entries are left out (the sampled statistics count
    them). ``raw`` is the product before the scale, for ``max_abs_qk`` (NaN
    without it). ``probs``, the softmax of ``logits`` over the last axis as the model
    computed it (float32 or float64), saves the exponentials: the statistics then take a
    few passes that read it (see ``_from_probabilities``). ``first_row`` is the query
    position of the first row, where the logits are a block of rows cut from a longer call:
    the positional offsets count from it.
    """
    return rows_of_logits(
        logits, masked=masked, raw=raw, probs=probs, chunk=chunk, first_row=first_row
    ).per_head()


@torch.no_grad()
def rows_of_logits(
    logits: torch.Tensor,
    *,
    masked: torch.Tensor | None = None,
    raw: torch.Tensor | None = None,
    probs: torch.Tensor | None = None,
    chunk: int | None = None,
    first_row: int = 0,
) -> RowStats:
    """[head_stats_of_logits][]'s statistics per query row, before their reduction per head."""
    *batch, heads, length, keys = logits.shape
    first_row = _checks.integer(first_row, "first_row", low=0, high=2**62)
    work = torch.float64 if logits.dtype == torch.float64 else torch.float32
    x = logits.detach().reshape(-1, heads, length, keys)
    if chunk is None:
        chunk = _default_chunk(keys, x.shape[0] * heads * length)
    collapsed = None if masked is None else _collapsed(masked)
    keep = None if collapsed is None else ~collapsed
    masks = _Masks(keep, False, batch, heads, heads, length, x.device, work)
    state = None
    if probs is not None and probs.shape == logits.shape:
        if collapsed is not None and collapsed.dim() > x.dim():  # batch axes flattened as x's
            collapsed = _collapsed(collapsed.broadcast_to(logits.shape).reshape(x.shape))
        state = _from_probabilities(x, probs.detach().reshape(x.shape), collapsed, work, chunk)
    if state is None:
        state = _whole_rows(x, masks, work, chunk)
        if state is None:  # non-finite logits that no mask explains: the general path
            state = _by_key_chunks(x, masks, work, chunk)
    state.drop(masks.padding())
    if raw is None:
        size = torch.full((heads,), math.nan, dtype=torch.float64)
    else:
        # the product's own shape: sink columns may follow it in the logits
        r = raw.detach().reshape(-1, heads, raw.shape[-2] * raw.shape[-1])  # no |raw| copy
        size = torch.maximum(r.amax(dim=(0, 2)), -r.amin(dim=(0, 2))).double()
    at_key = _sink_logits_of(x, None if masked is None else masked.detach(), logits.shape, work)
    return RowStats(state, size, state.sink(1, at_key, keys), 1, keys, first_row)


@dataclasses.dataclass(frozen=True)
class RowStats:
    """One call's statistics per query row, with each head's sink key read: what needs the
    model's tensors. Their reduction per head ([per_head][]) can wait, and run once for
    several calls ([per_head_of][])."""

    rows: _Rows
    raw: torch.Tensor  # (heads,): max |q·k|
    sink: _Sink
    group: int  # query heads per key head
    keys: int
    first_row: int = 0

    def per_head(self) -> HeadStats:
        return self.rows.per_head(self.raw, self.group, self.sink, self.keys, self.first_row)

    def alike(self) -> tuple[object, ...]:
        """Calls with the same value here reduce together: rows of one batch and length."""
        b, _, rows = self.rows.m.shape
        return (
            b,
            rows,
            self.rows.m.dtype,
            self.rows.m.device,
            self.group,
            self.keys,
            self.first_row,
        )


def per_head_of(calls: list[RowStats]) -> list[HeadStats]:
    """Each call's [per_head][RowStats.per_head], with one set of reductions for the calls
    that are alike (a model's layers): their heads joined after one another. A reduction
    costs a few dozen small operations whatever its size."""
    groups: dict[tuple[object, ...], list[int]] = {}
    for i, call in enumerate(calls):
        groups.setdefault(call.alike(), []).append(i)
    out: list[HeadStats | None] = [None] * len(calls)
    for members in groups.values():
        parts = [calls[i] for i in members]
        first = parts[0]
        joined = RowStats(
            _Rows.joined([p.rows for p in parts]),
            torch.cat([p.raw for p in parts]),
            (
                torch.cat([p.sink[0] for p in parts]),
                torch.cat([p.sink[1] for p in parts], 1),
                torch.cat([p.sink[2] for p in parts], 1),
            ),
            first.group,
            first.keys,
            first.first_row,
        ).per_head()
        sizes = [p.raw.numel() for p in parts]
        split = zip(
            *(getattr(joined, f.name).split(sizes) for f in dataclasses.fields(HeadStats)),
            strict=True,
        )
        for i, fields in zip(members, split, strict=True):
            out[i] = HeadStats(*fields)
    return out  # type: ignore[return-value]


def _from_probabilities(
    x: torch.Tensor, p: torch.Tensor, masked: torch.Tensor | None, work: torch.dtype, chunk: int
) -> _Rows | None:
    """The rows' statistics from the logits and the softmax the model computed from them,
    without an exponential, in blocks of whole rows of about ``chunk`` keys' worth of values
    (as ``_whole_rows``). At the row's largest logit m the probability is e^(m - lse), so
    the sum s = Σ e^(x-m) is 1 / max p, and the entropy term is t = s · Σ p (x - m), a sum
    of terms <= 0 (no cancellation); masked entries hold no probability worth counting.
    None, for the general path, where the probabilities are not float32 or float64 or the
    shortcut does not hold: a masked entry above the row's visible ones, or a NaN, +inf or
    unmasked -inf logit."""
    if p.dtype not in (torch.float32, torch.float64) or not x.numel():
        return None
    length, keys = x.shape[-2:]
    inf = n = None  # +inf where masked, and the visible keys per row, at the mask's own size
    if masked is not None:
        shaped = masked.reshape((1,) * (x.dim() - masked.dim()) + tuple(masked.shape))
        inf = torch.zeros(shaped.shape, dtype=work, device=x.device).masked_fill_(shaped, math.inf)
        n = keys - shaped.sum(-1, dtype=work)
    parts = [
        _probability_block(x[:, :, rows], p[:, :, rows], _of_rows(inf, rows), work)
        for rows in _row_blocks(length, keys, chunk)
    ]
    m, pmax, t, low, first, top, second, ok = (
        parts[0] if len(parts) == 1 else (torch.cat(f, -1) for f in zip(*parts, strict=True))
    )
    if n is not None and not bool((n >= 1).all()):  # rows that see no key: not checked
        ok = ok | (n < 1)
    if not bool(ok.all()):
        return None
    s = pmax.reciprocal()
    count = torch.full_like(m, keys) if n is None else n.broadcast_to(m.shape)
    return _Rows(m, s, s * t, low, count, first, top, second)


def _probability_block(
    x: torch.Tensor, p: torch.Tensor, inf: torch.Tensor | None, work: torch.dtype
) -> tuple[torch.Tensor, ...]:
    """``_from_probabilities``'s statistics of one block of whole rows, and whether the
    shortcut holds in each row; ``inf``: +inf where masked (None: nothing is), broadcastable
    to the block."""
    xw = x.to(work)  # the model's own tensor where it already is: never written
    a, b = (buffer(use, xw.shape, work, x.device) for use in ("rows", "index"))
    if inf is None:
        low, lost = xw.amin(-1), False
        m, top, second = structure.top_two(a.copy_(xw), b)
    else:
        low, lost = _smallest_visible(xw, inf, a)
        # m: the largest visible entry (masked ones at -inf here)
        m, top, second = structure.top_two(torch.sub(xw, inf, out=a), b)
    pmax = p.amax(-1).to(work)
    # the largest probability lies at the largest visible logit: no masked entry above it
    ok = (p.gather(-1, top.unsqueeze(-1)).squeeze(-1).to(work) == pmax) & (pmax > 0)
    centred = torch.sub(xw, m.unsqueeze(-1), out=a)
    if lost:
        # a masked -inf times its probability 0 is NaN; below e^-80 a term is lost against
        # the top one's 1 anyway. Masked finite entries (finfo.min) have probability 0.
        centred = centred.clamp_min_(-_EXP_FLOOR)
    t = centred.mul_(p).sum(-1)  # in place: vecdot allocates its product
    ok &= torch.isfinite(low + t)
    return m, pmax, t, low, xw[..., 0].clone(), top.reshape(m.shape), second, ok


def _row_blocks(length: int, keys: int, chunk: int) -> list[slice]:
    """Blocks of whole rows, each about ``chunk`` keys' worth of values (at least one row)."""
    step = max(1, (length * chunk) // max(1, keys))
    return [slice(r0, min(r0 + step, length)) for r0 in range(0, length, step)]


def _of_rows(mask: torch.Tensor | None, rows: slice) -> torch.Tensor | None:
    """The rows ``rows`` of a mask or bias (..., rows or 1, keys); one row serves them all."""
    return mask if mask is None or mask.shape[-2] == 1 else mask[..., rows, :]


def _smallest_visible(
    x: torch.Tensor, above: torch.Tensor, scratch: torch.Tensor
) -> tuple[torch.Tensor, bool]:
    """Each row's smallest entry of ``x`` outside the masked ones, where ``above`` is +inf
    (and 0, or a bias, elsewhere), and whether a masked entry of ``x`` is -inf; ``scratch``,
    ``x``'s shape, holds the sum."""
    low = torch.add(x, above, out=scratch).amin(-1)
    if bool(low.isnan().any()):  # masked -inf logits met +inf: not the minimum either
        return scratch.nan_to_num_(math.inf, math.inf, -math.inf).amin(-1), True
    return low, False


def _whole_rows(x: torch.Tensor, masks: _Masks, work: torch.dtype, chunk: int) -> _Rows | None:
    """The rows' statistics from blocks of whole rows (about ``chunk`` keys' worth of values
    each), in a dozen passes per block and no merging; None where ``_fold`` finds a
    non-finite logit that no mask explains."""
    length, keys = x.shape[-2:]
    bias, visible = masks.chunk(slice(0, keys), 0)  # -inf where masked, at the mask's shape
    parts = []
    for rows in _row_blocks(length, keys, chunk):
        folded = _fold(x[:, :, rows], _of_rows(bias, rows), work, own=False)
        if folded is None:
            return None
        parts.append(folded)
    m, s, t, low, first, top, second = (torch.cat(f, -1) for f in zip(*parts, strict=True))
    n = torch.as_tensor(visible, dtype=work, device=x.device).broadcast_to(m.shape).clone()
    return _Rows(m, s, t, low, n, first, top, second)


def _by_key_chunks(x: torch.Tensor, masks: _Masks, work: torch.dtype, chunk: int) -> _Rows:
    """The rows' statistics from chunks of keys, with an online softmax."""
    keys = x.shape[-1]
    state = _Rows.empty(x.shape[:-1], work, x.device)
    for j in range(0, keys, chunk):
        cols = slice(j, min(j + chunk, keys))
        xj = x[..., cols].to(work, copy=True)  # the state's own copy: changed in place
        bias, visible = masks.chunk(cols, 0)
        # -inf entries are masked; NaN and +inf are left out as well (the row extremes tell
        # whether there are any without a pass that makes a tensor of the chunk's size)
        if not bool(torch.isfinite(torch.stack([xj.amax(-1), xj.amin(-1)])).all()):
            bad = ~torch.isfinite(xj)
            extra = torch.zeros_like(xj).masked_fill_(bad, -math.inf)
            bias = extra if bias is None else bias + extra
            visible = (bias > -math.inf).sum(-1)
            xj.masked_fill_(bad, 0.0)
        state.add(xj, bias, None, keys=visible, rows=slice(None), start=j)
    return state


class _Masks:
    """The mask of each key chunk as an additive bias (0 or -inf, or the float mask's values)
    at the mask's own shape, which broadcasts against the (B, kv_heads, L · group, c)
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
        # the query position of each row
        self.rows = torch.arange(length, device=device).repeat_interleave(self.group)
        self.mask = None
        if mask is not None:
            m = mask.reshape((1,) * (len(batch) + 3 - mask.dim()) + tuple(mask.shape))
            m_batch = m.shape[: len(batch)]
            if any(n != 1 for n in m_batch):  # batch axes flattened as q's are
                m = m.broadcast_to((*batch, *m.shape[len(batch) :]))
            self.mask = m.reshape(-1, *m.shape[len(batch) :])  # (B or 1, heads or 1, L or 1, S)
        self.masked_value = _mask_value(mask)

    def chunk(self, cols: slice, r0: int) -> tuple[torch.Tensor | None, torch.Tensor | int]:
        """The bias of keys ``cols`` for the rows from ``r0``, and the visible keys per row
        (a count, or a tensor)."""
        width = cols.stop - cols.start
        bias = None
        if self.mask is not None:
            bias = self._rows(self._additive(self.mask[..., cols]))
            if bias.shape[-2] > 1:
                bias = bias[..., r0:, :]
        if self.is_causal:
            query = self.rows[r0:, None]
            cols_idx = torch.arange(cols.start, cols.stop, device=query.device)
            if bias is None:
                # rows at or past the chunk's last key see all of it: the bias covers the
                # rows before them, and the visible count needs no pass over the chunk
                partial = query[query[:, 0] < cols.stop - 1]
                causal = torch.zeros(len(partial), width, dtype=self.dtype, device=query.device)
                causal.masked_fill_(cols_idx[None, :] > partial, -math.inf)
                visible = (query[:, 0] - cols.start + 1).clamp(0, width)
                return (causal if len(partial) else None), visible
            causal = torch.zeros(len(query), width, dtype=self.dtype, device=query.device)
            bias = bias + causal.masked_fill_(cols_idx[None, :] > query, -math.inf)
        if bias is None:
            return None, width
        return bias, (bias > -math.inf).sum(-1)

    def at(self, keys: torch.Tensor) -> torch.Tensor | None:
        """The bias of one key per query head (``keys``, (kv_heads, group)) in every row:
        (B or 1, kv_heads, L · group), -inf where masked; None where nothing is masked."""
        bias = None
        if self.mask is not None:
            m = self.mask  # (B', heads or 1, L or 1, S)
            m = m.expand(m.shape[0], keys.numel(), *m.shape[2:])
            at = keys.reshape(1, -1, 1, 1).expand(*m.shape[:3], 1)
            bias = self._rows(self._additive(m.gather(-1, at))).squeeze(-1)
        if self.is_causal:  # the key of each row's head, against the row's query position
            key = keys.view(self.kv_heads, 1, self.group).expand(-1, self.length, -1)
            key = key.reshape(self.kv_heads, -1)
            causal = torch.zeros(key.shape, dtype=self.dtype, device=key.device)
            causal.masked_fill_(key > self.rows, -math.inf)
            bias = causal if bias is None else bias + causal
        return bias

    def block(self, r0: int, r1: int, width: int) -> tuple[torch.Tensor | None, torch.Tensor | int]:
        """The bias of rows ``r0:r1`` (in L · group order) and keys ``0:width``, every row
        included, and the visible keys per row."""
        bias = None
        if self.mask is not None:
            m = self.mask[..., :width]
            start = 0  # the row of the bias below that is row 0 of L · group
            if m.shape[-2] > 1:  # only the mask rows of the queries these rows belong to
                m = m[..., r0 // self.group : (r1 - 1) // self.group + 1, :]
                start = r0 // self.group * self.group
            bias = self._rows(self._additive(m))
            if bias.shape[-2] > 1:
                bias = bias[..., r0 - start : r1 - start, :]
        if self.is_causal:
            query = self.rows[r0:r1, None]
            cols = torch.arange(width, device=query.device)
            causal = torch.zeros(r1 - r0, width, dtype=self.dtype, device=query.device)
            causal.masked_fill_(cols[None, :] > query, -math.inf)
            bias = causal if bias is None else bias + causal
        if bias is None:
            return None, width
        return bias, (bias > -math.inf).sum(-1)

    def padding(self) -> torch.Tensor | None:
        """(B or 1, kv_heads or 1, L · group): the rows of padding queries, those whose own
        key the mask masks in every row (``structure.padding_queries``); None if none."""
        if self.mask is None:
            return None
        m = self.mask
        own = ~m if m.dtype == torch.bool else self._additive(m) == -math.inf
        pad = structure.padding_queries(own, self.length)
        if pad is None or not bool(pad.any()):
            return None
        return self._rows(pad.to(self.dtype).unsqueeze(-1)).squeeze(-1) > 0

    def _additive(self, m: torch.Tensor) -> torch.Tensor:
        """A slice of the mask as a bias: -inf where masked, else 0 (boolean) or its value."""
        if m.dtype == torch.bool:
            return torch.zeros(m.shape, dtype=self.dtype, device=m.device).masked_fill_(
                ~m, -math.inf
            )
        return m.to(self.dtype).masked_fill(m == self.masked_value, -math.inf)

    def _rows(self, bias: torch.Tensor) -> torch.Tensor:
        """(B', heads or 1, rows or 1, c) -> (B', kv_heads or 1, rows · group or 1, c); a
        bias with one row for every query and distinct heads gets L · group rows."""
        b, h, rows, c = bias.shape
        if h == 1:
            return bias if rows == 1 else bias.repeat_interleave(self.group, dim=2)
        bias = bias.reshape(b, self.kv_heads, self.group, rows, c).transpose(2, 3)
        return bias.broadcast_to(
            b, self.kv_heads, rows if rows > 1 else self.length, self.group, c
        ).reshape(b, self.kv_heads, -1, c)


class _Rows:
    """The online-softmax state of every query row: running max m, sum s = Σ e^(x-m),
    entropy term t = Σ e^(x-m)·(x-m), row min, unmasked count, the first key's logit, and the
    indices of the largest and second largest keys (with the second's logit ``m2``, kept
    while chunks of keys are folded in)."""

    def __init__(
        self,
        m: torch.Tensor,
        s: torch.Tensor,
        t: torch.Tensor,
        low: torch.Tensor,
        n: torch.Tensor,
        first: torch.Tensor,
        top: torch.Tensor,
        second: torch.Tensor,
        m2: torch.Tensor | None = None,
    ) -> None:
        self.m, self.s, self.t, self.low, self.n, self.first = m, s, t, low, n, first
        self.top, self.second, self.m2 = top, second, m2

    @classmethod
    def empty(cls, shape: torch.Size, dtype: torch.dtype, device: torch.device) -> _Rows:
        inf = math.inf
        start = torch.tensor([-inf, 0.0, 0.0, inf, 0.0, -inf, -inf], dtype=dtype, device=device)
        m, s, t, low, n, first, m2 = start.reshape(7, *[1] * len(shape)).repeat(1, *shape)
        index = torch.zeros(shape, dtype=torch.long, device=device)
        return cls(m, s, t, low, n, first, index, index.clone(), m2)

    def add(
        self,
        x: torch.Tensor,
        bias: torch.Tensor | None,
        low: torch.Tensor | None,
        *,
        keys: torch.Tensor | int,
        rows: slice,
        start: int,
    ) -> None:
        """Fold one chunk of logits (..., rows, c) of the rows ``rows``, keys from ``start``
        on, into the state.

        ``x`` is used up: every full-size pass runs in place on it (a new tensor of that size
        costs more than the pass). ``bias`` (0 or -inf where masked, or a float mask's
        values) is added, ``low`` is the chunk's row minimum where already known, ``keys``
        the visible keys per row.
        """
        if bias is not None:
            # a bias with fewer rows than x covers its first rows; the others see every key
            part = bias.shape[-2] if bias.dim() >= 2 and bias.shape[-2] > 1 else x.shape[-2]
            head = x[..., :part, :]
            if low is None:  # the smallest visible entry: masked ones read as +inf
                low = (head + torch.where(bias == -math.inf, math.inf, bias)).amin(-1)
                if part < x.shape[-2]:
                    low = torch.cat([low, x[..., part:, :].amin(-1)], -1)
            head.add_(bias)  # masked: -inf
        if start == 0:
            self.first[..., rows] = x[..., 0]
        high = self._top_two(x, rows, start)
        if low is None:
            low = x.amin(-1)
        self.low[..., rows] = torch.minimum(self.low[..., rows], low)
        self.n[..., rows] += keys
        m, s, t = self.m[..., rows], self.s[..., rows], self.t[..., rows]
        m_new = torch.maximum(m, high)
        ref = torch.where(torch.isinf(m_new), 0.0, m_new)  # rows with nothing visible yet
        # rescale the running sums to the new max; (m - ref) * s is 0 where s is 0
        shift = (m - ref).clamp_min(-_EXP_FLOOR)
        decay = shift.exp()
        t_new = decay * (t + torch.where(s > 0, shift * s, 0.0))
        s_new = decay * s
        # masked entries (-inf) and those far below the max are raised to e^-80: lost against
        # a row sum >= 1, and exp is much slower on CPU where its result underflows
        xc = x.sub_(ref.unsqueeze(-1)).clamp_min_(-_EXP_FLOOR)
        e = xc.exp()
        self.s[..., rows] = s_new + e.sum(-1)
        self.t[..., rows] = t_new + e.mul_(xc).sum(-1)
        self.m[..., rows] = m_new

    def drop(self, rows: torch.Tensor | None) -> None:
        """Leave the rows ``rows`` (boolean, broadcast to the state's) out of every statistic,
        as rows that do not exist: a count of -1 keys, neither a row nor a masked one."""
        if rows is not None:
            self.n = torch.where(rows, -1.0, self.n)

    def _top_two(self, x: torch.Tensor, rows: slice, start: int) -> torch.Tensor:
        """Fold the chunk's largest and second largest keys into the rows' (the earlier key on
        a tie), before ``m`` is updated; return the chunk's row maxima."""
        high, top, second = structure.top_two(x)
        top, second = top + start, second + start
        runner = x.gather(-1, (second - start).unsqueeze(-1)).squeeze(-1)
        runner = runner.masked_fill(second == top, -math.inf)  # no other visible key
        m, m2 = self.m[..., rows], self.m2[..., rows]  # type: ignore[index]
        i1, i2 = self.top[..., rows], self.second[..., rows]
        ahead = high > m  # the chunk's largest is the row's new largest
        # the new second: the larger of the row's old second and the chunk's largest, or,
        # where the chunk's largest is ahead, of the row's old largest and the chunk's second
        old, old_i = torch.where(ahead, m, m2), torch.where(ahead, i1, i2)
        new, new_i = torch.where(ahead, runner, high), torch.where(ahead, second, top)
        self.m2[..., rows] = torch.where(new > old, new, old)  # type: ignore[index]
        self.second[..., rows] = torch.where(new > old, new_i, old_i)
        self.top[..., rows] = torch.where(ahead, top, i1)
        return high

    def sink(self, group: int, at_key: _AtKey, keys: int) -> _Sink:
        """Each head's sink key (of ``keys``: the key most rows put their largest weight on),
        and every row's logit there and whether the row sees it, as (B, kv_heads, L · group)
        tensors: ``at_key`` reads them from the model's tensors, which must still exist."""
        sink = structure.sink_keys(
            self._by_head(self.top, group), self._by_head(self.n >= 2, group), keys
        )
        logit, seen = at_key(sink)
        return sink, logit.expand(self.m.shape), seen.expand(self.m.shape)

    @classmethod
    def joined(cls, parts: list[_Rows]) -> _Rows:
        """The rows of several calls of one batch and length as one state, their kv heads
        after one another."""
        fields = ("m", "s", "t", "low", "n", "first", "top", "second")
        return cls(*(torch.cat([getattr(r, f) for r in parts], 1) for f in fields))

    def _by_head(self, t: torch.Tensor, group: int) -> torch.Tensor:
        """(B, kv, L·group) -> (B, heads, L)."""
        b, kv, rows = self.m.shape
        t = t.expand(b, kv, rows).reshape(b, kv, rows // group, group)
        return t.transpose(2, 3).reshape(b, kv * group, rows // group)

    def per_head(
        self, raw: torch.Tensor, group: int, sink: _Sink, keys: int, first_row: int = 0
    ) -> HeadStats:
        """Reduce the rows to one value per query head (``raw``: max |q·k| per head;
        ``sink``: see [sink][]; ``keys``: the keys per row)."""
        live, some = self.n >= 2, self.n >= 1
        log_s = self.s.log()  # rows that see a key have s >= 1
        lse = self.m + log_s
        ent = torch.where(live, (log_s - self.t / self.s) / self.n.clamp_min(2).log(), 0.0)
        p_first = torch.where(some, (self.first - lse).exp(), 0.0)
        inf = math.inf
        # one reduction per kind, over the statistics stacked on a leading axis
        ent_sum, lse_sum, first_sum, n_live, n_some, n_masked = _per_head(
            torch.stack([ent, torch.where(some, lse, 0.0), p_first, live, some, self.n == 0]),
            group,
            "sum",
        )
        high, neg_low = _per_head(
            torch.stack([torch.where(some, self.m, -inf), torch.where(some, -self.low, -inf)]),
            group,
            "max",
        )
        return HeadStats(
            max_logit=high,
            min_logit=-neg_low,
            max_abs_qk=raw,
            entropy=_mean(ent_sum, n_live),
            lse=_mean(lse_sum, n_some),
            first_key_weight=_mean(first_sum, n_some),
            rows=n_some,
            entropy_rows=n_live,
            masked=n_masked,
            **self._structure(group, sink, keys, first_row),
        )

    def _structure(
        self, group: int, sink_at: _Sink, keys: int, first_row: int
    ) -> dict[str, torch.Tensor]:
        """Each head's sink weight and most common offset (see ``structure``), given its sink
        key and every row's logit there (``sink_at``); query i of the rows is at position
        first_row + i."""

        def by_head(t: torch.Tensor) -> torch.Tensor:
            return self._by_head(t, group)

        sink, logit, seen = sink_at
        live, top, second = by_head(self.n >= 2), by_head(self.top), by_head(self.second)
        log_s = self.s.log()
        p0 = torch.where(seen, (logit - self.m - log_s).exp(), 0.0)
        entropy = torch.where(self.n >= 1, log_s - self.t / self.s, 0.0)
        pos = torch.arange(live.shape[-1], device=live.device) + first_row
        found = structure.head_structure(
            **{k: by_head(v) for k, v in (("entropy", entropy), ("n", self.n), ("p0", p0))},
            seen=by_head(seen),
            top=top,
            second=second,
            sink=sink,
            pos=pos,
            keys=keys,
        )
        named = dict(zip(structure.FIELDS, found, strict=True))
        rest = structure.rest_entropy(named["rest_sum"], named["rest_mass"], named["rest_rows"])
        kept = ("sink_key", "sink_weight", "rest_mass", "rest_rows", "positional_share")
        return {
            **{k: named[k] for k in kept},
            "rest_entropy": rest,
            "positional_offset": named["positional_offset"],
        }


#: For one key per query head (heads,), every row's logit there and whether the row sees it.
_AtKey = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
#: Each head's sink key (heads,), every row's logit there and whether the row sees it.
_Sink = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def _sink_logits_of_qk(qg: torch.Tensor, kt: torch.Tensor, c: float, masks: _Masks) -> _AtKey:
    """``at_key`` for logits c·q·k + mask, from q (B, kv_heads, L · group, d) and kᵀ
    (B, kv_heads, d, S): one product per row."""

    def at_key(sink: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, kv, rows, d = qg.shape
        keys = sink.view(kv, masks.group)  # the sink key of each query head, by key head
        k = kt.gather(-1, keys.view(1, kv, 1, -1).expand(b, kv, d, -1))  # (B, kv, d, group)
        q = qg.reshape(b, kv, rows // masks.group, masks.group, d)
        logit = (q * k.transpose(-2, -1).unsqueeze(2)).sum(-1).reshape(b, kv, rows) * c
        bias = masks.at(keys)
        logit = logit if bias is None else logit + bias
        return logit, torch.isfinite(logit)

    return at_key


def _sink_logits_of(
    x: torch.Tensor, masked: torch.Tensor | None, shape: torch.Size, work: torch.dtype
) -> _AtKey:
    """``at_key`` for given logits ``x`` (B, heads, L, S), the logits of ``shape`` with their
    batch axes flattened, and the entries ``masked`` (broadcastable to ``shape``)."""

    def at_key(sink: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        at = sink.view(1, -1, 1, 1).expand(*x.shape[:-1], 1)
        logit = x.gather(-1, at).squeeze(-1).to(work)
        seen = torch.isfinite(logit)
        if masked is not None:
            full = masked.broadcast_to(shape)
            full = full.reshape(x.shape) if full.dim() != 4 else full
            seen &= ~full.gather(-1, at).squeeze(-1)
        return logit, seen

    return at_key


def _mean(total: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """total / n, NaN where n is 0."""
    return torch.where(n > 0, total / n.clamp_min(1), math.nan)


def _per_head(t: torch.Tensor, group: int, op: str) -> torch.Tensor:
    """(n, B, kv_heads, L · group) -> (n, heads) in float64, by max or sum over batch and rows."""
    n, b, kv, _ = t.shape
    t = t.reshape(n, b, kv, -1, group).transpose(3, 4).reshape(n, b, kv * group, -1).double()
    return t.amax(dim=(1, 3)) if op == "max" else t.sum(dim=(1, 3))


def _default_chunk(keys: int, rows: int) -> int:
    """Keys per chunk: at most ``_CHUNK_VALUES`` logits, in chunks of nearly equal size."""
    widest = max(1, _CHUNK_VALUES // max(1, rows))
    return math.ceil(keys / math.ceil(keys / widest)) if keys else 1


def _collapsed(t: torch.Tensor) -> torch.Tensor:
    """``t`` with its broadcast axes (stride 0, as ``expand`` makes them) cut to size 1, and
    its batch and head axes too where every slice is the same (a mask read from the logits
    themselves, the same in every head): a mask is applied at its own size."""
    for dim, (size, stride) in enumerate(zip(t.shape, t.stride(), strict=True)):
        if stride == 0 and size > 1:
            t = t.narrow(dim, 0, 1)
    for dim in range(t.dim() - 2):
        # a maximum over bytes: many times faster than all() on a CPU
        if t.shape[dim] > 1 and not bool((t != t.narrow(dim, 0, 1)).view(torch.uint8).amax()):
            t = t.narrow(dim, 0, 1)
    return t


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
    q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, chunk: int | None
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
    if chunk is not None:
        _checks.positive_int(chunk, "chunk")
    return q.detach(), k.detach()
