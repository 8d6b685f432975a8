"""Statistics of one attention call, computed from sampled logits."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import structure

__all__ = [
    "RowSums",
    "grouped_logit_stats",
    "grouped_qk_spreads",
    "logit_stats",
    "qk_spreads",
    "row_sums",
]


def logit_stats(logits: torch.Tensor, **kwargs: Any) -> dict[str, Any]:
    """Statistics of one call's attention logits, of shape (..., rows, k_len); the keywords
    are [grouped_logit_stats][attnscale._monitor.stats.grouped_logit_stats]'s."""
    return grouped_logit_stats(logits, **kwargs)[0]


@torch.no_grad()
def grouped_logit_stats(
    logits: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    sink: torch.Tensor | None = None,
    mask_value: float,
    saturation: float,
    outputs: torch.Tensor | None = None,
    rows: torch.Tensor | None = None,
    queries: int | None = None,
    calls: int = 1,
) -> list[dict[str, Any]]:
    """Statistics of the attention logits of ``calls`` calls of one shape, joined along the
    heads axis (shape (..., calls x heads, rows, k_len)), one dict per call.

    One call's operations, run once for all (a call costs a few hundred small operations
    whatever its size); each call's reductions run over its block of heads.

    Parameters
    ----------
    logits : torch.Tensor
        The softmax input of the sampled rows; ``-inf`` entries count as masked.
    mask : torch.Tensor, optional
        Boolean, shaped like ``logits``: the entries a mask tensor masked, whatever value it
        gave them. Without it, entries at or below ``mask_value`` count as masked.
    sink : torch.Tensor, optional
        Boolean over the last axis: columns joined to the keys as attention sinks. They are
        left out of the key set; ``sink_share`` is the probability they take.
    mask_value, saturation : float
        The monitor's thresholds of the same names.
    outputs : torch.Tensor, optional
        What the model computed for these rows, shape (..., rows, m): the
        attention weights, or the attention output where the weights never
        exist (SDPA). Rows with a non-finite value in it are counted; without
        it, the softmax of ``logits`` stands in.
    rows, queries : torch.Tensor, int, optional
        Each sampled row's query index (where a fully masked row is), and the query count:
        the entropy and saturation leave padding queries out (``_real_rows``).
    calls : int
        How many calls the heads axis (third-to-last) joins, in equal blocks.
    """
    if calls > 1 and (logits.dim() < 3 or logits.shape[-3] % calls):
        raise ValueError(f"calls={calls} must divide the heads axis of {tuple(logits.shape)}")
    x = logits.detach().float()
    finite, masked, sinks, invalid, xm = _classify(x, mask, sink, mask_value)
    count = x.shape[-1] - invalid.view(torch.uint8).sum(-1, dtype=torch.float32)  # (..., rows)
    top = xm.amax(-1, keepdim=True)  # (..., rows, 1); -inf in rows with no valid key
    # centred on the row maximum: the valid logits minus it (<= 0, the largest 0), others -inf
    centred = xm.sub_(shift := top.masked_fill(top == -math.inf, 0.0))
    spread = _spread(centred, top, invalid, count, calls)
    real = _real_rows(count, masked, queries, rows)
    probabilities = _probabilities(centred, top - shift, real, saturation, invalid, rows, calls)
    empty, bad_out = _bad_rows(x, finite, masked, count, outputs)
    bound = mask_value if mask is None else None  # no masked entry lies above it
    per_call = _mask_counts(x, finite, masked, sinks, count, top, empty, bad_out, bound, calls)
    masking = (x, count, empty, rows, sink is not None)
    return [
        {**spread[c], **probabilities[c], **_masking(counts, *masking, c, calls)}
        for c, counts in enumerate(per_call)
    ]


def _masking(
    counts: list[float],
    x: torch.Tensor,
    count: torch.Tensor,
    empty: torch.Tensor,
    rows: torch.Tensor | None,
    has_sink: bool,
    c: int,
    calls: int,
) -> dict[str, Any]:
    """Call ``c``'s counts of masked, empty and non-finite entries and rows (``_mask_counts``),
    as statistics."""
    numel, n_rows = x.numel() // calls, count.numel() // calls
    n_masked, n_empty, n_empty_bad, n_live_bad, n_valid = (int(v) for v in counts[:5])
    return {
        "masked_fraction": n_masked / max(numel, 1),
        "mask_leak": counts[5],
        "sink_share": counts[6] if has_sink else None,
        "masked_rows": n_empty,
        "masked_rows_nonfinite": n_empty_bad,
        "first_masked_row": _first_empty(_block(empty, c, calls), rows) if n_empty else None,
        "nonfinite_logits": numel - n_valid - n_masked - int(counts[7]),
        "nonfinite_outputs": n_live_bad,
        "sampled_rows": n_rows,
        "keys": int(x.shape[-1]) if x.dim() else None,
    }


def _per_call(t: torch.Tensor, calls: int, axis: int, reduce: str = "sum") -> torch.Tensor:
    """(calls,): ``t`` reduced (``sum`` or ``amax``) over each call's entries,
    where ``axis`` (negative) is the heads axis that joins the calls in equal blocks. Without
    a heads axis, one call: everything."""
    op: Callable[..., torch.Tensor] = getattr(torch, reduce)
    if t.dim() < -axis:
        return op(t).reshape(1)
    others = tuple(i for i in range(t.dim()) if i != t.dim() + axis)
    per_head = op(t, dim=others) if others else t
    return op(per_head.reshape(calls, -1), dim=-1)


def _block(t: torch.Tensor, c: int, calls: int) -> torch.Tensor:
    """Call ``c``'s block of a per-row tensor (..., calls x heads, rows)."""
    if calls == 1:
        return t
    heads = t.shape[-2] // calls
    return t[..., c * heads : (c + 1) * heads, :]


def _real_rows(
    count: torch.Tensor, masked: torch.Tensor, queries: int | None, rows: torch.Tensor | None
) -> torch.Tensor:
    """The valid keys per row, 0 in the rows of padding queries (``structure``): a padding
    token still attends over the real keys, and its rows would skew the per-head entropy and
    saturation. Only in self-attention, where ``queries``, the query count, is the key count."""
    if queries is None or count.dim() == 0 or (rows is not None and len(rows) != count.shape[-1]):
        return count  # no rows of queries to tell
    pad = structure.padding_queries(masked, queries, rows)
    return count if pad is None else count.masked_fill(pad, 0)


def _bad_rows(
    x: torch.Tensor,
    finite: torch.Tensor | None,
    masked: torch.Tensor,
    count: torch.Tensor,
    outputs: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: no valid key at all (every key masked), and a non-finite output."""
    empty = count == 0  # (..., rows)
    if finite is not None:  # a row of NaN has no valid key either, but no mask made it so
        empty &= ~(~finite & ~masked).any(-1)
    # a row's output is bad when it has a non-finite value; without the model's own
    # output, the softmax of the logits stands in for it, which is finite if they are
    if outputs is not None:
        bad_out = ~torch.isfinite(outputs.detach().float().sum(-1))  # (..., rows)
    elif finite is None and not bool(empty.any()):
        bad_out = torch.zeros_like(empty)
    else:
        bad_out = ~torch.isfinite(torch.softmax(x, dim=-1)).all(-1)
    return empty, bad_out


def _mask_counts(
    x: torch.Tensor,
    finite: torch.Tensor | None,
    masked: torch.Tensor,
    sinks: torch.Tensor | None,
    count: torch.Tensor,
    top: torch.Tensor,
    empty: torch.Tensor,
    bad_out: torch.Tensor,
    bound: float | None,
    calls: int,
) -> list[list[float]]:
    """Per call: masked entries, empty rows (those with a bad output), other bad rows, valid
    entries, the largest share masked keys still take, the sinks' mean share and the sink
    entries, in one transfer (one device sync on GPU). ``bound``, where known, is at or above
    every masked entry."""
    # the probability the masked entries still take: their max against the valid keys'
    # (the sink columns' too), and the full softmax only where that is not negligible
    leak = masked if finite is None else masked & finite
    xf = x if finite is None else x.masked_fill(~finite, -math.inf)  # NaN and +inf out
    others = top if sinks is None else xf.masked_fill(leak, -math.inf).amax(-1, True)
    n_valid = _per_call(count, calls, -2)
    if finite is None and sinks is None:  # every invalid entry is a masked one
        n_masked = x.numel() // calls - n_valid
    else:
        n_masked = _per_call(masked, calls, -3).float()
    zeros = _zero(x).expand(calls)
    return torch.stack(
        [
            n_masked,
            _per_call(empty, calls, -2).float(),
            _per_call(empty & bad_out, calls, -2).float(),
            _per_call(~empty & bad_out, calls, -2).float(),
            n_valid,
            _per_call(_share(xf, leak, others, empty, bound), calls, -2, "amax")
            if bool((n_masked > 0).any())
            else zeros,
            zeros
            if sinks is None
            else _per_call(_share(xf, sinks, None, empty), calls, -2)
            / _per_call(~empty, calls, -2).clamp_min(1),
            zeros if sinks is None else _per_call(sinks, calls, -3).float(),
        ]
    ).T.tolist()


def _first_empty(empty: torch.Tensor, rows: torch.Tensor | None) -> tuple[int, ...]:
    """The index of the first row with no valid key, its row as the original query index."""
    idx = [int(i) for i in empty.nonzero()[0]]
    if rows is not None:
        idx[-1] = int(rows[idx[-1]])
    return tuple(idx)


def _classify(
    x: torch.Tensor, mask: torch.Tensor | None, sink: torch.Tensor | None, mask_value: float
) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor]:
    """Which entries are finite (None: all, or -inf, which is masked), masked, sink columns,
    and invalid (any of these, NaN or +inf); and ``x`` with its invalid entries at -inf, a
    new tensor. Every entry is exactly one of: valid, masked (by the mask tensor, or
    <= mask_value without one; -inf always), a sink column, NaN or +inf. A 0-d False mask:
    no entry masked but the -inf ones (SDPA's own masks)."""
    low, high = torch.aminmax(x) if x.numel() else (_zero(x), _zero(x))
    # one pass for the usual case: the extremes are finite (or the minimum -inf) unless an
    # entry is NaN (both NaN) or +inf
    finite = None if bool(torch.isfinite(high) & ~torch.isnan(low)) else torch.isfinite(x)
    if mask is None:
        masked = x <= mask_value
        if finite is None and sink is None:  # one vectorised pass: a where over bools is slow
            xm = torch.nn.functional.threshold(x, mask_value, -math.inf)
            return None, masked, None, masked, xm
    elif finite is None and mask.dim() == 0 and not bool(mask) and bool(low == -math.inf):
        masked = x == -math.inf
        if sink is None:  # every invalid entry is already -inf: a copy, not a pass per mask
            return None, masked, None, masked, x.clone()
    elif finite is None:
        masked = mask.expand_as(x)
        # -inf entries are masked whatever the mask says; a copy: reductions over a
        # broadcast view are slow
        masked = masked | (x == -math.inf) if bool(low == -math.inf) else masked.contiguous()
    else:
        masked = (mask | (x == -math.inf)) & (x < math.inf)
    invalid = masked if finite is None else masked | ~finite
    sinks = None
    if sink is not None:
        sinks = sink.expand_as(x) & ~masked
        invalid = invalid | sinks
    # where: faster than masked_fill on a CPU
    return finite, masked, sinks, invalid, torch.where(invalid, -math.inf, x)


def _spread(
    centred: torch.Tensor,
    top: torch.Tensor,
    invalid: torch.Tensor,
    count: torch.Tensor,
    calls: int,
) -> list[dict[str, float]]:
    """Mean, within-row standard deviation and largest size of the valid logits, from the
    logits centred on their row maxima ``top`` (sums of values near 0: no cancellation)."""
    c0 = torch.nan_to_num(centred, neginf=0.0)  # invalid entries, and only they, are -inf
    live = count > 0
    row_sum = c0.sum(-1)  # (..., rows)
    row_sq = torch.linalg.vector_norm(c0, dim=-1).double().square()
    low = torch.where(live, c0.amin(-1) + top.squeeze(-1), 0.0)  # the smallest valid logit
    high = torch.where(live, top.squeeze(-1), 0.0)
    # rows without a valid logit add 0 to each (their low and high are 0)
    per_call = torch.stack(
        [
            _per_call(count.double(), calls, -2),
            _per_call(row_sum.double() + count.double() * high.double(), calls, -2),
            _per_call(row_sq - row_sum.double().square() / count.double().clamp_min(1), calls, -2),
            _per_call(torch.maximum(-low, high).double(), calls, -2, "amax"),
        ]
    ).T.tolist()
    out = []
    for tot, xsum, sq, max_abs in per_call:
        if tot == 0:
            out.append({"logit_mean": math.nan, "logit_std": math.nan, "max_abs_logit": math.nan})
        else:
            out.append(
                {
                    "logit_mean": xsum / tot,
                    "logit_std": math.sqrt(max(sq, 0.0) / tot),
                    "max_abs_logit": max_abs,
                }
            )
    return out


_EXP_FLOOR = 80.0


def _zero(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros((), dtype=x.dtype, device=x.device)


def _probabilities(
    centred: torch.Tensor,
    high: torch.Tensor,
    count: torch.Tensor,
    saturation: float,
    invalid: torch.Tensor,
    rows: torch.Tensor | None,
    calls: int,
) -> list[dict[str, Any]]:
    """Per call: entropy, largest probability and saturation of the softmax over the valid
    keys, and per head the mean normalized entropy, the weight on key 0 and the head's
    structure (its sink key and positional pattern, see ``structure``).

    ``centred`` holds the valid logits minus their row maximum and -inf elsewhere (``invalid``);
    it is overwritten. ``high`` (..., rows, 1): its row maxima. ``rows``: the query position
    of each row.
    """
    # before the clamp below: masked entries still -inf
    tops = structure.top_two(centred, high=high)[1:]
    # from max-centred logits xc <= 0: exp cannot overflow and the top entry's term is exactly
    # 1, so the row sum S >= 1, the largest probability is 1/S, and the entropy
    # log S - sum(p·xc) is a sum of two terms >= 0 (computed as lse - sum(p x) on
    # uncentred logits, the two cancel in float32 for one-hot rows and went negative)
    # Centred logits below -_EXP_FLOOR are raised to it: their terms, under e^-80 against the
    # top entry's 1, are lost in float32 either way, and exp is about 30 times slower on CPU
    # where its result underflows (a masked entry at -inf included). The softmax kernel's
    # exponential is faster than exp's on a CPU.
    xc = centred.clamp_min_(-_EXP_FLOOR)
    p = torch.softmax(xc, -1)
    top_p = p.amax(-1)  # (..., rows): 1/S; rows with no valid key are dropped below
    first = p[..., 0].clone()  # (..., rows): the weight on key 0, where attention sinks form
    live = count >= 2  # (..., rows); one valid key is one-hot by construction, not saturation
    sink, p0, seen = _sink_weight(p, invalid, tops, live)  # before p is overwritten
    ent = top_p.reciprocal().log() - p.mul_(xc).sum(-1)  # (..., rows)
    zero = _zero(xc)
    frac = torch.where(live, ent / torch.log(count.clamp_min(2)), zero)
    pmax = torch.where(live, top_p, zero)
    saturated = ((pmax > saturation) & live).to(xc.dtype)
    heads, min_head = _head_means(
        frac, torch.where(live, first, zero), saturated, live, xc.dim(), calls
    )
    found = _structure(xc, (ent, count, p0, seen), tops, sink, rows)  # (5, heads)
    per_call = torch.stack(
        [
            _per_call(live.to(xc.dtype), calls, -2),
            _per_call(torch.where(live, ent, zero), calls, -2),
            _per_call(frac, calls, -2),
            min_head.to(xc.dtype),
            _per_call(pmax, calls, -2),
            _per_call(saturated, calls, -2),
        ]
    )  # (6, calls)
    return _probability_stats(per_call, torch.cat([heads, found]), calls)


def _probability_stats(
    per_call: torch.Tensor, per_head: torch.Tensor, calls: int
) -> list[dict[str, Any]]:
    """``_probabilities``'s statistics per call, from its sums (6, calls) and the per-head
    means and structure (8, calls x heads), in one transfer."""
    flat = torch.cat([per_call.double().reshape(-1), per_head.reshape(-1)]).tolist()
    sums, heads = flat[: 6 * calls], flat[6 * calls :]
    num_heads = len(heads) // (8 * calls)
    nan = math.nan
    out = []
    for c in range(calls):
        n_rows, ent_sum, frac_sum, min_head_f, pmax_sum, sat = sums[c::calls]
        head_entropy, head_first, head_saturated, *shape = (
            tuple(heads[(r * calls + c) * num_heads : (r * calls + c + 1) * num_heads])
            for r in range(8)
        )
        out.append(
            {
                **{f"head_{k}": v for k, v in zip(_STRUCTURE, shape, strict=True)},
                "entropy": ent_sum / n_rows if n_rows else nan,
                "normalized_entropy": frac_sum / n_rows if n_rows else nan,
                "min_head_normalized_entropy": min_head_f if n_rows else nan,
                "head_normalized_entropy": head_entropy,
                "head_first_key_weight": head_first,
                "head_saturated_fraction": head_saturated,
                "max_probability": pmax_sum / n_rows if n_rows else nan,
                "saturated_fraction": sat / n_rows if n_rows else 0.0,
            }
        )
    return out


def _head_means(
    frac: torch.Tensor,
    first: torch.Tensor,
    saturated: torch.Tensor,
    live: torch.Tensor,
    dim: int,
    calls: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per head (heads are the third-to-last axis), over the rows with two or more keys: the
    mean normalized entropy, the mean weight on key 0 and the share of saturated rows, shaped
    (3, heads) with NaN for a head without such rows; and per call its lowest head's mean
    entropy (calls,)."""
    axes = tuple(i for i in range(frac.dim()) if i != frac.dim() - 2) if dim >= 3 else None
    heads_live = live.sum(dim=axes).reshape(-1)
    per_head = frac.sum(dim=axes).reshape(-1) / heads_live.clamp_min(1)
    first_per_head = first.sum(dim=axes).reshape(-1) / heads_live.clamp_min(1)
    saturated_per_head = saturated.sum(dim=axes).reshape(-1) / heads_live.clamp_min(1)
    min_head = torch.where(heads_live > 0, per_head, math.inf).reshape(calls, -1).amin(-1)
    means = torch.stack([per_head, first_per_head, saturated_per_head])
    return means.where(heads_live > 0, math.nan), min_head


def _by_head(t: torch.Tensor, dim: int) -> torch.Tensor:
    """A per-row tensor of logits with ``dim`` axes, (..., heads, rows), as (N, heads, rows);
    without a heads axis (fewer than three), one head."""
    return t.reshape(math.prod(t.shape[:-2]), *t.shape[-2:]) if dim >= 3 else t.reshape(1, 1, -1)


def _sink_weight(
    p: torch.Tensor,
    invalid: torch.Tensor,
    tops: tuple[torch.Tensor, torch.Tensor],
    live: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each head's sink key (the key most of its rows put their largest weight on), and per
    row the weight ``p`` puts on it and whether it is a valid key of the row."""
    sink = structure.sink_keys(_by_head(tops[0], p.dim()), _by_head(live, p.dim()), p.shape[-1])
    shape = [-1, 1, 1] if p.dim() >= 3 else [1] * p.dim()
    at = sink.reshape(shape).expand(*p.shape[:-1], 1)
    seen = ~invalid.expand_as(p).gather(-1, at).squeeze(-1)
    return sink, torch.where(seen, p.gather(-1, at).squeeze(-1), 0.0), seen


_STRUCTURE = ("sink_key", "sink_weight", "positional_share", "positional_offset", "rest_entropy")


def _structure(
    xc: torch.Tensor,
    per_row: tuple[torch.Tensor, ...],
    tops: tuple[torch.Tensor, torch.Tensor],
    sink: torch.Tensor,
    rows: torch.Tensor | None,
) -> torch.Tensor:
    """The per-head structure (``_STRUCTURE``), shaped (5, heads), from the rows' entropy,
    valid keys, weight on the sink key and whether they see it (``per_row``), the indices of
    their two largest keys, the heads' sink keys and the rows' query positions."""
    length = xc.shape[-2] if xc.dim() >= 2 else 1
    pos = rows if rows is not None and rows.numel() == length else torch.arange(length)
    ent, n, p0, seen = (_by_head(t, xc.dim()) for t in per_row)
    top, second = (_by_head(t, xc.dim()) for t in tops)
    found = structure.head_structure(
        entropy=ent,
        n=n,
        p0=p0,
        seen=seen,
        top=top,
        second=second,
        sink=sink,
        pos=pos,
        keys=xc.shape[-1],
    )
    named = dict(zip(structure.FIELDS, found, strict=True))
    rest = structure.rest_entropy(named["rest_sum"], named["rest_mass"], named["rest_rows"])
    return torch.stack([*(named[k] for k in _STRUCTURE[:-1]), rest])


def _share(
    xf: torch.Tensor,
    which: torch.Tensor,
    others: torch.Tensor | None,
    empty: torch.Tensor,
    bound: float | None = None,
) -> torch.Tensor:
    """Per row, the probability that the entries ``which`` take in the softmax over every
    finite logit (``xf``: the logits, the others at -inf); 0 in rows with no valid key.
    ``others``: the row maxima of the finite entries outside ``which``, where known;
    ``bound``: a value no entry of ``which`` exceeds, where known."""
    zero = _zero(xf)
    if others is None:
        others = xf.masked_fill(which, -math.inf).amax(-1, keepdim=True)
    # the usual case, a mask far below the row (-1e9, finfo.min): a share under e^-40 per
    # entry, found from the bound, or with one max per row, instead of two logsumexps (rows
    # with no valid key have no share)
    if bound is not None and bool(((bound - others.squeeze(-1) < -40) | empty).all()):
        return zero.expand(empty.shape)
    only = torch.where(which, xf, -math.inf)
    gap = only.amax(-1) - others.squeeze(-1)
    if bool((gap.nan_to_num(-math.inf) < -40).all()):
        return zero.expand(empty.shape)
    share = (torch.logsumexp(only, dim=-1) - torch.logsumexp(xf, dim=-1)).exp()
    return torch.where(empty, zero, share.nan_to_num(0.0))


@dataclasses.dataclass(frozen=True)
class RowSums:
    """Per row of a tensor's last axis that holds no NaN or infinity, its norm and its sum
    (float32, in the rows' shape; the moments over rows are taken in float64,
    ``_row_moments``); and how many non-finite entries the tensor held."""

    norms: torch.Tensor
    total: torch.Tensor
    bad: int
    width: int


@torch.no_grad()
def row_sums(t: torch.Tensor | None) -> RowSums | None:
    """The per-row sums of ``t`` (None where it is missing, a scalar or empty): two passes,
    after which ``t`` itself is no longer needed."""
    if t is None or t.dim() == 0 or t.numel() == 0:
        return None
    f = t.detach().float()  # not reshaped: a transposed q would be copied
    norms, total = torch.linalg.vector_norm(f, dim=-1), f.sum(-1)
    if bool(torch.isfinite(norms + total).all()):  # the usual case, in as few operations
        return RowSums(norms, total, 0, t.shape[-1])
    ok = torch.isfinite(norms.double().square() + total.double())  # as _row_moments sums them
    return RowSums(norms[ok], total[ok], int((~torch.isfinite(f)).sum()), t.shape[-1])


def qk_spreads(
    q: torch.Tensor | None, k: torch.Tensor | None, scale: float | None, *, rows: bool
) -> dict[str, Any]:
    """The spread of q and k of one call; see [grouped_qk_spreads][] (``q`` and ``k`` as
    tensors)."""
    return grouped_qk_spreads([(row_sums(q), row_sums(k), scale, rows)])[0]


@torch.no_grad()
def grouped_qk_spreads(
    calls: Sequence[tuple[RowSums | None, RowSums | None, float | None, bool]],
) -> list[dict[str, Any]]:
    """Per call, given the [row_sums][] of its q and k, its scale and ``rows``: the spread of
    q and k, the standard deviation of their entries, how much their row norms vary, and the
    bound those norms put on the logits.

    With ``rows``, ``q`` and ``k`` hold one query (key) per row of their last axis, the axis
    q·k sums over; otherwise only the standard deviations are known. ``qk_norm_cv`` is the
    larger of the two coefficients of variation of the row norms (0 when q and k are
    normalised per head); ``logit_bound`` is scale x max |q| x max |k|, which no logit can
    exceed. Rows holding a non-finite entry are left out; ``nonfinite_inputs`` counts the
    NaN and infinite entries of q and k. The moments of all calls' rows are taken together,
    those of equally many rows in one stack.
    """
    sums = [s for q, k, _, _ in calls for s in (q, k) if s is not None]
    moments = dict(zip(map(id, sums), _row_moments(sums), strict=True))
    out = []
    for q, k, scale, rows in calls:
        spread: dict[str, Any] = {
            "q_std": None,
            "k_std": None,
            "qk_norm_cv": None,
            "logit_bound": None,
            "nonfinite_inputs": 0,
        }
        norm_cv, norm_max = [], []
        for name, t in (("q_std", q), ("k_std", k)):
            if t is None:
                continue
            n_sum, n_sq, mean, std, high = moments[id(t)]
            spread["nonfinite_inputs"] += t.bad
            n_rows = t.norms.numel()
            n = n_rows * t.width
            if n >= 2:
                mean_x = n_sum / n
                spread[name] = math.sqrt(max((n_sq - n * mean_x * mean_x) / (n - 1), 0.0))
            if n_rows >= 2 and mean > 0:
                norm_cv.append(std / mean)
                norm_max.append(high)
        if rows and scale is not None and len(norm_cv) == 2:
            spread["qk_norm_cv"] = max(norm_cv)
            spread["logit_bound"] = abs(scale) * norm_max[0] * norm_max[1]
        out.append(spread)
    return out


def _row_moments(sums: Sequence[RowSums]) -> list[list[float]]:
    """Per [RowSums][]: the sum of the entries and of their squares, and the mean, standard
    deviation and largest of the row norms (0 for fewer than two rows), in one transfer."""
    if not sums:
        return []
    by_rows: dict[tuple[int, ...], list[int]] = {}
    for i, s in enumerate(sums):
        by_rows.setdefault(tuple(s.norms.shape), []).append(i)
    parts, order = [], []
    for shape, members in by_rows.items():
        n, calls = math.prod(shape), len(members)
        # (calls, rows), in float64: no cancellation in the sums over rows
        norms = torch.stack([sums[i].norms for i in members]).reshape(calls, n).double()
        total = torch.stack([sums[i].total for i in members]).reshape(calls, n).double()
        sq = norms.square()
        zero = torch.zeros(calls, dtype=sq.dtype, device=sq.device)
        many = n >= 2
        parts.append(
            torch.stack(
                [
                    total.sum(-1),
                    sq.sum(-1),
                    *((norms.mean(-1), norms.std(-1), norms.amax(-1)) if many else (zero,) * 3),
                ],
                dim=-1,
            )
        )
        order += members
    flat = torch.cat(parts).tolist()
    out: list[list[float]] = [[] for _ in sums]
    for i, values in zip(order, flat, strict=True):
        out[i] = values
    return out
