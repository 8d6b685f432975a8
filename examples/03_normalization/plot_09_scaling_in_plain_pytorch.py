r"""
# In plain PyTorch: four ways to scale the logits

The strategies this section compares, as one module to copy: no attnscale import, under 30
lines. Each turns a head's queries and keys into logits: the fixed $1/\sqrt{d_k}$, a learnable
multiplier per head that starts there, RMSNorm on $q$ and $k$ before $1/\sqrt{d_k}$ (OLMo 2,
Team OLMo et al. 2024, arXiv:2501.00656; Gemma 3, arXiv:2503.19786; and others), and Swin V2's
cosine attention with a learnable, clamped temperature (Liu et al. 2022, arXiv:2111.09883). The
last cell checks it against the library.
"""

import math

import torch
from torch import nn
from torch.nn import functional as F


class ScaledLogits(nn.Module):
    """Logits (batch, heads, q_len, k_len) from q, k (batch, heads, len, d_k)."""

    def __init__(self, kind: str, d_k: int, heads: int) -> None:
        super().__init__()
        self.kind, self.d_k = kind, d_k
        start = {"learnable": -0.5 * math.log(d_k), "cosine": math.log(10.0)}.get(
            kind, 0.0
        )
        self.log_scale = nn.Parameter(torch.full((heads, 1, 1), start))  # one per head
        self.q_gain, self.k_gain = (
            nn.Parameter(torch.ones(d_k)),
            nn.Parameter(torch.ones(d_k)),
        )

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        if self.kind == "rmsnorm":  # each vector to RMS 1, times a learned gain
            q = q * torch.rsqrt(q.pow(2).mean(-1, keepdim=True) + 1e-6) * self.q_gain
            k = k * torch.rsqrt(k.pow(2).mean(-1, keepdim=True) + 1e-6) * self.k_gain
        if self.kind == "cosine":  # unit vectors, scale exp(theta) clamped at 100
            scale = self.log_scale.clamp(max=math.log(100.0)).exp()
            return (
                scale
                * F.normalize(q, dim=-1)
                @ F.normalize(k, dim=-1).transpose(-2, -1)
            )
        scale = self.log_scale.exp() if self.kind == "learnable" else self.d_k**-0.5
        return scale * q @ k.transpose(-2, -1)


# %%
# ## Using it

gen = torch.Generator().manual_seed(0)
q, k = (
    4 * torch.randn(2, 4, 16, 64, generator=gen),
    torch.randn(2, 4, 16, 64, generator=gen),
)
for kind in ("inverse_sqrt", "learnable", "rmsnorm", "cosine"):
    logits = ScaledLogits(kind, d_k=64, heads=4)(q, k)
    print(
        f"{kind:<12} logit std {logits.std():6.2f}, largest |logit| "
        f"{logits.abs().max():6.2f}"
    )

# %%
# ## Checked against the library
#
# The library's strategies at their initial values, through
# [scaled_dot_product_attention][attnscale.scaled_dot_product_attention] with
# `need_logits=True`: the largest difference of the logits.

import attnscale

names = {"inverse_sqrt": "inverse_sqrt", "learnable": "learnable_temperature"}
names |= {"rmsnorm": "qk_rmsnorm", "cosine": "cosine"}
v = torch.randn(2, 4, 16, 8, generator=gen)
for kind, name in names.items():
    ours = ScaledLogits(kind, d_k=64, heads=4)(q, k)
    strategy = attnscale.make_strategy(name, 64, 4)
    theirs = attnscale.scaled_dot_product_attention(
        q, k, v, strategy=strategy, need_logits=True
    )
    print(
        f"{kind:<12} vs {name:<22} largest difference "
        f"{(ours - theirs.logits).abs().max():.1e}"
    )
