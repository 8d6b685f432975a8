r"""
# In plain PyTorch: entropy, peak weight and the softmax Jacobian

What this section measures, in code to copy: no attnscale import, under 30 lines. For each row
of logits it returns the entropy as a fraction of its largest value $\log n$, the largest
weight, and the norms of the softmax Jacobian $J = \mathrm{diag}(p) - p\,p^\top$, the factor
every gradient passes through on its way back to $q$ and $k$. Rows of Gaussian logits of
standard deviation $\sigma$ stand for unscaled $q \cdot k$ at $d_k = \sigma^2$. The last cell
checks it against the library.
"""

import math

import torch


def softmax_health(logits: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per row of logits (..., n): entropy / log n, largest weight, Jacobian norms."""
    p = logits.softmax(dim=-1)
    entropy = -(p * logits.log_softmax(dim=-1)).sum(dim=-1)
    jacobian = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (..., n, n)
    return {
        "entropy / log n": entropy / math.log(logits.shape[-1]),
        "largest weight": p.amax(dim=-1),
        "Jacobian, Frobenius norm": torch.linalg.matrix_norm(jacobian),
        "Jacobian, spectral norm": torch.linalg.matrix_norm(jacobian, ord=2),
    }


# %%
# ## Using it

z = torch.randn(
    1000, 64, generator=torch.Generator().manual_seed(0)
)  # 1000 rows, 64 keys
for sigma in (1, 4, 16, 32):
    health = softmax_health(sigma * z)
    print(f"sigma {sigma}:")
    for name, values in health.items():
        print(f"  {name:<25} {values.mean():.3f}")

# %%
# ## Checked against the library
#
# The same four numbers from [softmax_entropy][attnscale.softmax_entropy],
# [max_probability][attnscale.max_probability] and
# [softmax_jacobian_norm][attnscale.softmax_jacobian_norm], and the Jacobian itself from
# [softmax_jacobian][attnscale.softmax_jacobian]: the largest difference over every row.

import attnscale

logits = 16 * z
ours = softmax_health(logits)
library = {
    "entropy / log n": attnscale.softmax_entropy(logits, normalized=True),
    "largest weight": attnscale.max_probability(logits),
    "Jacobian, Frobenius norm": attnscale.softmax_jacobian_norm(
        logits, norm="frobenius"
    ),
    "Jacobian, spectral norm": attnscale.softmax_jacobian_norm(logits, norm="spectral"),
}
for name, values in library.items():
    print(f"{name:<26} largest difference {(ours[name] - values).abs().max():.1e}")
p = logits.softmax(dim=-1)
jacobian = torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)
print(
    f"{'Jacobian':<26} largest difference "
    f"{(jacobian - attnscale.softmax_jacobian(logits)).abs().max():.1e}"
)
