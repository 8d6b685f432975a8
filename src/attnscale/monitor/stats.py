"""Statistics of one attention call, computed from sampled logits."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

__all__ = ["logit_stats", "qk_spreads"]


@torch.no_grad()
def logit_stats(
    logits: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    sink: torch.Tensor | None = None,
    mask_value: float,
    saturation: float,
    outputs: torch.Tensor | None = None,
    rows: torch.Tensor | None = None,
) -> dict[str, Any]:
    """Statistics of attention logits of shape (..., rows, k_len).

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
    rows : torch.Tensor, optional
        The original query index of each sampled row, to report where a fully
        masked row is.
    """
    x = logits.detach().float()
    finite, masked, sinks, invalid = _classify(x, mask, sink, mask_value)
    xm = x.masked_fill(invalid, -math.inf)
    top = xm.amax(-1, keepdim=True)  # (..., rows, 1); -inf in rows with no valid key
    # centred on the row maximum: the valid logits minus it (<= 0), the others -inf
    centred = xm.sub_(top.masked_fill(top == -math.inf, 0.0))
    c0 = centred.masked_fill(invalid, 0.0)
    # From max-centred logits xc <= 0 exp cannot overflow and the top entry's term is exactly
    # 1, so the row sum S >= 1, the largest probability is 1/S, and the entropy
    # log S - sum(e·xc)/S is a sum of two terms >= 0 (computed as lse - sum(p x) on
    # uncentred logits, the two cancel in float32 for one-hot rows and went negative).
    # Centred logits below -_EXP_FLOOR are raised to it: their terms, under e^-80 against the
    # top entry's 1, are lost in float32 either way, and exp is about 30 times slower on CPU
    # where its result underflows (a masked entry at -inf included).
    xc = centred.clamp_min_(-_EXP_FLOOR)
    e = xc.exp()  # invalid entries: e^-80, nothing in a sum that is at least 1
    # the masked entries' largest logit, against which the valid keys' (the sink columns'
    # too) tells whether the probability they still take is negligible
    leak = masked if finite is None else masked & finite
    xf = x if finite is None else x.masked_fill(~finite, -math.inf)  # NaN and +inf out
    others = top if sinks is None else xf.masked_fill(leak, -math.inf).amax(-1, True)
    rows_of = {
        "count": x.shape[-1] - invalid.sum(-1),
        "sum": c0.sum(-1),
        "norm": torch.linalg.vector_norm(c0, dim=-1),
        "lowest": c0.amin(-1),
        "top": top.squeeze(-1),
        "total": e.sum(-1),
        "first": e[..., 0].clone(),  # e is overwritten next
        "ex": e.mul_(xc).sum(-1),
        "leak_gap": torch.where(leak, xf, -math.inf).amax(-1) - others.squeeze(-1),
    }
    if outputs is not None:  # a row's output is bad when it has a non-finite value
        rows_of["bad"] = ~torch.isfinite(outputs.detach().float().sum(-1))
    if finite is not None or sinks is not None:
        rows_of["masked"] = masked.sum(-1)
    if sinks is not None:
        rows_of["sinks"] = sinks.sum(-1)
    # every per-row quantity in one transfer (one device sync on GPU); the rest is arithmetic
    # on one value per row, in float64, where numpy costs far less per operation than torch
    table = torch.stack([t.float() for t in rows_of.values()]).cpu().numpy().astype(np.float64)
    r = dict(zip(rows_of, table, strict=True))
    count = r["count"]
    empty = count == 0  # (..., rows): no valid key at all
    out = _spread(r) | _probabilities(r, saturation)
    if "bad" in r:
        bad_out = r["bad"] > 0
    elif finite is None and not empty.any():
        bad_out = np.zeros_like(empty)
    else:  # the softmax of the logits stands in for the model's output, finite if they are
        bad_out = ~torch.isfinite(torch.softmax(x, dim=-1)).all(-1).cpu().numpy()
    n_masked = int(r["masked"].sum()) if "masked" in r else x.numel() - int(count.sum())
    n_sinks = int(r["sinks"].sum()) if "sinks" in r else 0
    leak_share = 0.0
    # the usual case, a mask far below the row (-1e9, finfo.min): a share under e^-40 per
    # entry, found with one max per row instead of two logsumexps
    if n_masked and not (np.nan_to_num(r["leak_gap"], nan=-math.inf) < -40).all():
        leak_share = float(_share(xf, leak, empty).max())
    sink_share = None
    if sinks is not None:
        sink_share = float(_share(xf, sinks, empty).sum()) / max(int((~empty).sum()), 1)
    first: tuple[int, ...] | None = None
    if empty.any():
        idx = [int(i) for i in np.argwhere(empty)[0]]
        if rows is not None:
            idx[-1] = int(rows[idx[-1]])
        first = tuple(idx)
    return {
        **out,
        "masked_fraction": n_masked / max(x.numel(), 1),
        "mask_leak": leak_share,
        "sink_share": sink_share if sink is not None else None,
        "masked_rows": int(empty.sum()),
        "masked_rows_nonfinite": int((empty & bad_out).sum()),
        "first_masked_row": first,
        "nonfinite_logits": x.numel() - int(count.sum()) - n_masked - n_sinks,
        "nonfinite_outputs": int((~empty & bad_out).sum()),
        "sampled_rows": int(count.size),
        "keys": int(x.shape[-1]) if x.dim() else None,
    }


def _classify(
    x: torch.Tensor, mask: torch.Tensor | None, sink: torch.Tensor | None, mask_value: float
) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Which entries are finite (None: all, or -inf, which is masked), masked, sink columns,
    and invalid (any of these, NaN or +inf). Every entry is exactly one of: valid, masked (by
    the mask tensor, or <= mask_value without one; -inf always), a sink column, NaN or +inf."""
    low, high = torch.aminmax(x) if x.numel() else (_zero(x), _zero(x))
    # one pass for the usual case: the extremes are finite (or the minimum -inf) unless an
    # entry is NaN (both NaN) or +inf
    finite = None if bool(torch.isfinite(high) & ~torch.isnan(low)) else torch.isfinite(x)
    if mask is None:
        masked = x <= mask_value
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
    return finite, masked, sinks, invalid


def _spread(r: dict[str, np.ndarray]) -> dict[str, float]:
    """Mean, within-row standard deviation and largest size of the valid logits, from each
    row's sum, norm and smallest entry of its logits centred on the row maximum ``top``
    (sums of values near 0: no cancellation)."""
    count, row_sum = r["count"], r["sum"]
    live = count > 0
    tot = float(count.sum())
    if tot == 0:
        return {"logit_mean": math.nan, "logit_std": math.nan, "max_abs_logit": math.nan}
    high = np.where(live, r["top"], 0.0)
    low = np.where(live, r["lowest"] + high, 0.0)  # the smallest valid logit
    sq = float((np.square(r["norm"]) - np.square(row_sum) / np.maximum(count, 1)).sum())
    return {
        "logit_mean": float((row_sum + count * high).sum()) / tot,
        "logit_std": math.sqrt(max(sq, 0.0) / tot),
        "max_abs_logit": float(np.maximum(-low, high).max()),
    }


_EXP_FLOOR = 80.0


def _zero(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros((), dtype=x.dtype, device=x.device)


def _probabilities(r: dict[str, np.ndarray], saturation: float) -> dict[str, Any]:
    """Entropy, largest probability and saturation of the softmax over the valid keys, and per
    head the mean normalized entropy and weight on key 0, from each row's sum S of the
    exponentials of its centred logits xc, and the sum of e·xc."""
    count = r["count"]
    total = np.maximum(r["total"], 1.0)  # rows with no valid key are dropped below
    first = r["first"] / total  # the weight on key 0, where attention sinks form
    ent = np.log(total) - r["ex"] / total
    # rows with one valid key are one-hot by construction: not evidence of saturation
    live = count >= 2
    frac = np.where(live, ent / np.log(np.maximum(count, 2)), 0.0)
    pmax = np.where(live, 1 / total, 0.0)
    # per head (heads are the second-to-last axis of the rows), over the rows with two or
    # more keys: the mean normalized entropy and the mean weight on key 0
    live_h = _by_head(live)
    heads_live = live_h.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_head = np.where(heads_live > 0, _by_head(frac).sum(1) / heads_live, math.nan)
        first_h = _by_head(first) * live_h
        first_h = np.where(heads_live > 0, first_h.sum(1) / heads_live, math.nan)
    n_rows = int(live.sum())
    nan = math.nan
    return {
        "entropy": float(np.where(live, ent, 0.0).sum()) / n_rows if n_rows else nan,
        "normalized_entropy": float(frac.sum()) / n_rows if n_rows else nan,
        "min_head_normalized_entropy": float(np.nanmin(per_head)) if n_rows else nan,
        "head_normalized_entropy": tuple(float(v) for v in per_head),
        "head_first_key_weight": tuple(float(v) for v in first_h),
        "max_probability": float(pmax.sum()) / n_rows if n_rows else nan,
        "saturated_fraction": float(((pmax > saturation) & live).sum()) / n_rows if n_rows else 0.0,
    }


def _by_head(a: np.ndarray) -> np.ndarray:
    """Per-row values of shape (..., heads, rows) as (heads, the rest); one head without."""
    return np.moveaxis(a, -2, 0).reshape(a.shape[-2], -1) if a.ndim >= 2 else a.reshape(1, -1)


def _share(xf: torch.Tensor, which: torch.Tensor, empty: np.ndarray) -> torch.Tensor:
    """Per row, the probability that the entries ``which`` take in the softmax over every
    finite logit (``xf``: the logits, the others at -inf); 0 in rows with no valid key."""
    only = torch.where(which, xf, -math.inf)
    share = (torch.logsumexp(only, dim=-1) - torch.logsumexp(xf, dim=-1)).exp()
    no_key = torch.from_numpy(empty).to(share.device)
    return torch.where(no_key, _zero(xf), share.nan_to_num(0.0))


@torch.no_grad()
def qk_spreads(
    q: torch.Tensor | None, k: torch.Tensor | None, scale: float | None, *, rows: bool
) -> dict[str, Any]:
    """The spread of q and k: the standard deviation of their entries, how much their row
    norms vary, and the bound those norms put on the logits.

    With ``rows``, ``q`` and ``k`` hold one query (key) per row of their last axis, the axis
    q·k sums over; otherwise only the standard deviations are known. ``qk_norm_cv`` is the
    larger of the two coefficients of variation of the row norms (0 when q and k are
    normalised per head); ``logit_bound`` is scale x max |q| x max |k|, which no logit can
    exceed. Rows holding a non-finite entry are left out. Two passes per tensor, a sum and
    a sum of squares per row; the rest is arithmetic on one value per row.
    """
    out: dict[str, Any] = {"q_std": None, "k_std": None, "qk_norm_cv": None, "logit_bound": None}
    norm_cv, norm_max = [], []
    for name, t in (("q_std", q), ("k_std", k)):
        if t is None or t.dim() == 0 or t.numel() == 0:
            continue
        f = t.detach().float().reshape(-1, t.shape[-1])
        # per row, then in float64 (few values, no cancellation), on the host: one transfer
        sq, total = torch.stack([f.square().sum(-1), f.sum(-1)]).cpu().numpy().astype(np.float64)
        ok = np.isfinite(sq + total)
        sq, total = sq[ok], total[ok]
        n = sq.size * f.shape[-1]
        if n >= 2:
            mean = float(total.sum()) / n
            var = (float(sq.sum()) - n * mean * mean) / (n - 1)
            out[name] = math.sqrt(max(var, 0.0))
        norms = np.sqrt(sq)
        if norms.size >= 2 and norms.mean() > 0:
            norm_cv.append(float(norms.std(ddof=1) / norms.mean()))
            norm_max.append(float(norms.max()))
    if rows and scale is not None and len(norm_cv) == 2:
        out["qk_norm_cv"] = max(norm_cv)
        out["logit_bound"] = abs(scale) * norm_max[0] * norm_max[1]
    return out
