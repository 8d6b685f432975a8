"""Attention masks, shared by the dot-product and the additive attention: checking a mask
against the scores' shape, merging in the causal mask, and finding rows with no key left."""

from __future__ import annotations

import torch

__all__ = ["LOW_PRECISION", "check_mask", "dead_rows", "merge_causal"]

#: Dtypes whose softmax runs in float32 (the scores are upcast first).
LOW_PRECISION = (torch.float16, torch.bfloat16)


def check_mask(
    attn_mask: object,
    shape: tuple[int, ...],
    query: torch.Tensor,
    axes: str = "(batch, heads, q_len, k_len)",
) -> torch.Tensor | None:
    """Check a boolean or additive mask against the score shape ``shape``, named ``axes``."""
    if attn_mask is None:
        return None
    if not isinstance(attn_mask, torch.Tensor):
        raise TypeError(f"attn_mask must be a torch.Tensor or None, got {type(attn_mask).__name__}")
    if attn_mask.dtype != torch.bool and not attn_mask.is_floating_point():
        raise TypeError(f"attn_mask must be boolean or floating point, got {attn_mask.dtype}")
    m = tuple(attn_mask.shape)
    # At least (q_len, k_len): torch's fused kernels index the mask's last two dims, and a
    # 0-d or 1-d mask is more likely a mistake than a broadcast.
    fits = all(a in (1, b) for a, b in zip(m[::-1], shape[::-1], strict=False))
    if not (2 <= len(m) <= len(shape) and fits):
        dims = "2 or 3" if len(shape) == 3 else f"2 to {len(shape)}"
        raise ValueError(
            f"attn_mask must have {dims} dimensions and broadcast to "
            f"{axes} = {shape}, got shape {m}"
        )
    if attn_mask.device != query.device:
        raise ValueError(f"attn_mask is on {attn_mask.device}, but query is on {query.device}")
    return attn_mask if attn_mask.dtype == torch.bool else attn_mask.to(query.dtype)


def dead_rows(mask: torch.Tensor) -> torch.Tensor:
    """``(..., q_len, 1)``: True where a query row's keys are all masked (False or -inf)."""
    blocked = ~mask if mask.dtype == torch.bool else torch.isneginf(mask)
    return blocked.all(dim=-1, keepdim=True)


def merge_causal(
    mask: torch.Tensor | None, q_len: int, k_len: int, device: torch.device
) -> torch.Tensor:
    """The mask with the causal one added, top-left aligned as in torch SDPA: query i sees
    keys 0..i."""
    causal = torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril()  # (q_len, k_len)
    if mask is None:
        return causal
    if mask.dtype == torch.bool:
        return mask & causal
    return mask.masked_fill(~causal, float("-inf"))
