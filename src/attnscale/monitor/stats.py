"""Statistics of one attention call, computed from sampled logits."""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["logit_stats", "qk_norms", "tensor_std"]


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
    # every entry is exactly one of: valid, masked (by the mask tensor, or <= mask_value
    # without one; -inf always), a sink column, NaN or +inf
    masked = x <= mask_value if mask is None else (mask | (x == -math.inf)) & (x < math.inf)
    sinks = torch.zeros_like(x, dtype=torch.bool) if sink is None else sink.expand_as(x) & ~masked
    invalid = masked | sinks | ~(x < math.inf)
    count = (~invalid).sum(-1, dtype=torch.float32)  # (..., rows)
    out = _spread(x, invalid, count) | _probabilities(x, invalid, count, saturation)
    empty = count == 0  # (..., rows): no valid key at all
    # a row's output is bad when it has a non-finite value; without the model's own
    # output, the softmax of the logits stands in for it
    weights = torch.softmax(x, dim=-1) if outputs is None else outputs.detach()
    bad_out = ~torch.isfinite(weights).all(-1)  # (..., rows)
    scalars = torch.stack(  # one transfer for all scalars (one device sync on GPU)
        [
            torch.count_nonzero(masked).float(),
            empty.sum().float(),
            (empty & bad_out).sum().float(),
            (~empty & bad_out).sum().float(),
            _share(x, masked & torch.isfinite(x), empty).max() if x.numel() else x.new_zeros(()),
            _share(x, sinks, empty).sum() / (~empty).sum().clamp_min(1),
        ]
    ).tolist()
    n_masked, n_empty, n_empty_bad, n_live_bad = (int(v) for v in scalars[:4])
    first: tuple[int, ...] | None = None
    if n_empty:
        idx = [int(i) for i in empty.nonzero()[0]]
        if rows is not None:
            idx[-1] = int(rows[idx[-1]])
        first = tuple(idx)
    return {
        **out,
        "masked_fraction": n_masked / max(x.numel(), 1),
        "mask_leak": scalars[4],
        "sink_share": scalars[5] if sink is not None else None,
        "masked_rows": n_empty,
        "masked_rows_nonfinite": n_empty_bad,
        "first_masked_row": first,
        "nonfinite_logits": x.numel() - int(count.sum()) - n_masked - int(sinks.sum()),
        "nonfinite_outputs": n_live_bad,
        "sampled_rows": int(count.numel()),
        "keys": int(x.shape[-1]) if x.dim() else None,
    }


def _spread(x: torch.Tensor, invalid: torch.Tensor, count: torch.Tensor) -> dict[str, float]:
    """Mean, within-row standard deviation and largest size of the valid logits."""
    x0 = x.masked_fill(invalid, 0.0)
    row_mean = x0.sum(-1, keepdim=True) / count.unsqueeze(-1).clamp_min(1)  # (..., rows, 1)
    centred = (x0 - row_mean).masked_fill_(invalid, 0.0)
    tot, xsum, sq, max_abs = torch.stack(
        [
            count.sum(),
            x0.sum(),
            (centred * centred).sum(),
            x0.abs().max() if x.numel() else _zero(x),
        ]
    ).tolist()
    if tot == 0:
        return {"logit_mean": math.nan, "logit_std": math.nan, "max_abs_logit": math.nan}
    return {"logit_mean": xsum / tot, "logit_std": math.sqrt(sq / tot), "max_abs_logit": max_abs}


def _zero(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros((), dtype=x.dtype, device=x.device)


def _probabilities(
    x: torch.Tensor, invalid: torch.Tensor, count: torch.Tensor, saturation: float
) -> dict[str, float]:
    """Entropy, largest probability and saturation of the softmax over the valid keys."""
    # entropy as lse - sum(p x) on max-centred logits, which needs no 0 * log 0 and cannot
    # go negative (lse >= 0 and every centred logit is <= 0; uncentred, the two terms cancel
    # in float32 for one-hot rows)
    top = x.masked_fill(invalid, -math.inf).amax(-1, keepdim=True)
    xc = (x - top.masked_fill(~torch.isfinite(top), 0.0)).masked_fill_(invalid, 0.0)
    lse = torch.logsumexp(xc.masked_fill(invalid, -math.inf), dim=-1, keepdim=True)
    p = (xc - lse).exp_().masked_fill_(invalid, 0.0)  # (..., rows, k_len); NaN in empty rows
    ent = lse.squeeze(-1) - (p * xc).sum(-1)  # (..., rows)
    # rows with one valid key are one-hot by construction: not evidence of saturation
    live = count >= 2  # (..., rows)
    zero = _zero(x)
    frac = torch.where(live, ent / torch.log(count.clamp_min(2)), zero)
    pmax = torch.where(live, p.max(-1).values, zero)  # (..., rows)
    if x.dim() >= 3:
        # mean normalized entropy per head: heads are the third-to-last axis
        axes = tuple(i for i in range(frac.dim()) if i != frac.dim() - 2)
        heads_live = live.sum(dim=axes)
        per_head = frac.sum(dim=axes) / heads_live.clamp_min(1)
        min_head = torch.where(heads_live > 0, per_head, math.inf).min()
    else:
        min_head = frac.sum() / live.sum().clamp_min(1)
    n_rows, ent_sum, frac_sum, min_head_f, pmax_sum, sat = torch.stack(
        [
            live.sum().to(x.dtype),
            torch.where(live, ent, zero).sum(),
            frac.sum(),
            min_head.to(x.dtype),
            pmax.sum(),
            ((pmax > saturation) & live).sum().to(x.dtype),
        ]
    ).tolist()
    nan = math.nan
    return {
        "entropy": ent_sum / n_rows if n_rows else nan,
        "normalized_entropy": frac_sum / n_rows if n_rows else nan,
        "min_head_normalized_entropy": min_head_f if n_rows else nan,
        "max_probability": pmax_sum / n_rows if n_rows else nan,
        "saturated_fraction": sat / n_rows if n_rows else 0.0,
    }


def _share(x: torch.Tensor, which: torch.Tensor, empty: torch.Tensor) -> torch.Tensor:
    """Per row, the probability that the entries ``which`` take in the softmax over every
    finite logit; 0 in rows with no valid key."""
    zero = _zero(x)
    if not bool(which.any()):
        return zero.expand(empty.shape)
    xf = x.masked_fill(~torch.isfinite(x), -math.inf)
    # the usual case, a mask far below the row (-1e9, finfo.min): a share under e^-40 per
    # entry, found with one max per row instead of two logsumexps
    gap = xf.masked_fill(~which, -math.inf).amax(-1) - xf.masked_fill(which, -math.inf).amax(-1)
    if bool((gap.nan_to_num(-math.inf) < -40).all()):
        return zero.expand(empty.shape)
    share = (
        torch.logsumexp(xf.masked_fill(~which, -math.inf), dim=-1) - torch.logsumexp(xf, dim=-1)
    ).exp()
    return torch.where(empty, zero, share.nan_to_num(0.0))


def tensor_std(t: torch.Tensor | None, max_elements: int = 1 << 16) -> float | None:
    """Standard deviation of a tensor's finite entries, from at most ``max_elements`` of them.

    None for fewer than two finite entries. A strided subset keeps it cheap on
    large activations; the estimate only has to tell factors of about 2 apart.
    """
    if t is None:
        return None
    f = t.detach().reshape(-1)
    f = f[:: max(1, f.numel() // max_elements)].float()
    finite = torch.isfinite(f)
    if not bool(finite.all()):
        f = f[finite]
    return float(f.std()) if f.numel() >= 2 else None


@torch.no_grad()
def qk_norms(
    q_rows: torch.Tensor | None, k_rows: torch.Tensor | None, scale: float | None
) -> dict[str, Any]:
    """How much the row norms of q and k vary, and the bound they put on the logits.

    ``q_rows`` and ``k_rows`` hold one query (key) per row of their last axis, the axis q·k
    sums over. ``qk_norm_cv`` is the larger of the two coefficients of variation of the row
    norms (0 when q and k are normalised per head); ``logit_bound`` is
    scale x max |q| x max |k|, which no logit can exceed.
    """
    if q_rows is None or k_rows is None or scale is None:
        return {"qk_norm_cv": None, "logit_bound": None}
    norms = []
    for t in (q_rows, k_rows):
        n = t.detach().float().norm(dim=-1).reshape(-1)
        n = n[torch.isfinite(n)]
        if n.numel() < 2 or float(n.mean()) <= 0:
            return {"qk_norm_cv": None, "logit_bound": None}
        norms.append(n)
    cv = max(float(n.std() / n.mean()) for n in norms)
    return {"qk_norm_cv": cv, "logit_bound": abs(scale) * float(norms[0].max() * norms[1].max())}
