"""Statistics of one attention call, computed from sampled logits."""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["logit_stats", "tensor_std"]


@torch.no_grad()
def logit_stats(
    logits: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
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
    # without one; -inf always), NaN or +inf
    masked = x <= mask_value if mask is None else (mask | (x == -math.inf)) & (x < math.inf)
    invalid = masked | ~(x < math.inf)  # masked, NaN or +inf
    count = (~invalid).sum(-1, dtype=torch.float32)  # (..., rows)
    x0 = x.masked_fill(invalid, 0.0)
    row_mean = x0.sum(-1, keepdim=True) / count.unsqueeze(-1).clamp_min(1)  # (..., rows, 1)
    centred = (x0 - row_mean).masked_fill_(invalid, 0.0)
    # softmax over the valid keys; entropy as lse - sum(p x) on max-centred logits, which
    # needs no 0 * log 0 and cannot go negative (lse >= 0 and every centred logit is <= 0;
    # uncentred, the two terms cancel in float32 for one-hot rows)
    top = x.masked_fill(invalid, -math.inf).amax(-1, keepdim=True)
    xc = (x0 - top.masked_fill(~torch.isfinite(top), 0.0)).masked_fill_(invalid, 0.0)
    lse = torch.logsumexp(xc.masked_fill(invalid, -math.inf), dim=-1, keepdim=True)
    p = (xc - lse).exp_().masked_fill_(invalid, 0.0)  # (..., rows, k_len); NaN in empty rows
    ent = lse.squeeze(-1) - (p * xc).sum(-1)  # (..., rows)
    # rows with one valid key are one-hot by construction: not evidence of saturation
    live = count >= 2  # (..., rows)
    zero = torch.zeros((), dtype=x.dtype, device=x.device)
    frac = torch.where(live, ent / torch.log(count.clamp_min(2)), zero)
    pmax = torch.where(live, p.max(-1).values, zero)  # (..., rows)
    n_live = live.sum()
    if x.dim() >= 3:
        # mean normalized entropy per head: heads are the third-to-last axis
        axes = tuple(i for i in range(frac.dim()) if i != frac.dim() - 2)
        heads_live = live.sum(dim=axes)
        per_head = frac.sum(dim=axes) / heads_live.clamp_min(1)
        min_head = torch.where(heads_live > 0, per_head, math.inf).min()
    else:
        min_head = frac.sum() / n_live.clamp_min(1)
    empty = count == 0  # (..., rows): no valid key at all
    # the probability that masked keys with a finite value still get, in rows with a valid key
    leaky = masked & torch.isfinite(x)
    leak = zero
    if bool(leaky.any()):
        xf = x.masked_fill(~torch.isfinite(x), -math.inf)
        lse_all = torch.logsumexp(xf, dim=-1)
        lse_masked = torch.logsumexp(xf.masked_fill(~leaky, -math.inf), dim=-1)
        leak = torch.where(empty, zero, (lse_masked - lse_all).exp().nan_to_num(0.0)).max()
    # a row's output is bad when it has a non-finite value; without the model's own
    # output, the softmax of the logits stands in for it
    out = torch.softmax(x, dim=-1) if outputs is None else outputs.detach()
    bad_out = ~torch.isfinite(out).all(-1)  # (..., rows)
    # one transfer for all scalars (one device sync on GPU)
    scalars = torch.stack(
        [
            count.sum(),
            x0.sum(),
            (centred * centred).sum(),
            x0.abs().max() if x.numel() else zero,
            torch.where(live, ent, zero).sum(),
            frac.sum(),
            min_head.to(x.dtype),
            pmax.sum(),
            ((pmax > saturation) & live).sum().to(x.dtype),
            torch.count_nonzero(masked).to(x.dtype),
            n_live.to(x.dtype),
            empty.sum().to(x.dtype),
            (empty & bad_out).sum().to(x.dtype),
            (~empty & bad_out).sum().to(x.dtype),
            leak,
        ]
    ).tolist()
    (tot, xsum, sq, max_abs, ent_sum, frac_sum, min_head_f, pmax_sum, sat, masked, n_rows) = (
        scalars[:11]
    )
    n_empty, n_empty_bad, n_live_bad = (int(v) for v in scalars[11:14])
    nonfinite = x.numel() - int(tot) - int(masked)
    if tot > 0:
        logit_mean, logit_std = xsum / tot, math.sqrt(sq / tot)
    else:
        logit_mean = logit_std = max_abs = math.nan
    nan = math.nan
    first: tuple[int, ...] | None = None
    if n_empty:
        idx = [int(i) for i in empty.nonzero()[0]]
        if rows is not None:
            idx[-1] = int(rows[idx[-1]])
        first = tuple(idx)
    return {
        "logit_mean": logit_mean,
        "logit_std": logit_std,
        "max_abs_logit": max_abs,
        "entropy": ent_sum / n_rows if n_rows else nan,
        "normalized_entropy": frac_sum / n_rows if n_rows else nan,
        "min_head_normalized_entropy": min_head_f if n_rows else nan,
        "max_probability": pmax_sum / n_rows if n_rows else nan,
        "saturated_fraction": sat / n_rows if n_rows else 0.0,
        "masked_fraction": masked / max(x.numel(), 1),
        "mask_leak": scalars[14],
        "masked_rows": n_empty,
        "masked_rows_nonfinite": n_empty_bad,
        "first_masked_row": first,
        "nonfinite_logits": nonfinite,
        "nonfinite_outputs": n_live_bad,
        "sampled_rows": int(count.numel()),
    }


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
