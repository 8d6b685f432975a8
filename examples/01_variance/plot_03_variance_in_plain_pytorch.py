r"""
# In plain PyTorch: the variance of q·k

What this section measures, in code to copy into your own project: no attnscale import, under
30 lines. It draws queries and keys with independent standard normal components, forms
$q \cdot k$, and compares the variance with and without the $1/\sqrt{d_k}$ factor. The last
cell checks it against the library.
"""

import torch


def qk_scores(
    d_k: int, n: int = 20_000, *, scaled: bool, seed: int = 0
) -> torch.Tensor:
    """n samples of q·k for q, k with independent N(0, 1) components; / sqrt(d_k) if
    scaled."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(n, d_k, generator=gen)
    k = torch.randn(n, d_k, generator=gen)
    scores = (q * k).sum(dim=-1)  # (n,): one dot product per pair
    return scores / d_k**0.5 if scaled else scores


# %%
# ## Using it

for d_k in (16, 64, 256, 1024):
    raw, scaled = qk_scores(d_k, scaled=False), qk_scores(d_k, scaled=True)
    print(
        f"d_k = {d_k:4d}: var(q.k) = {raw.var():7.1f}, var(q.k / sqrt(d_k)) = "
        f"{scaled.var():.3f}"
    )

# %%
# ## Checked against the library
#
# The closed form of [dot_product_moments][attnscale.dot_product_moments] gives
# $\mathrm{Var}[q \cdot k] = d_k$ for these components. A sample variance of $n$ draws has a
# relative standard error of about $\sqrt{(2 + 6/d_k)/n}$ here (the excess kurtosis of $q \cdot k$
# is $6/d_k$); the last column is the gap in units of that error.

import attnscale

N = 20_000
for d_k in (16, 64, 256, 1024):
    theory = attnscale.dot_product_moments(d_k).variance
    measured = qk_scores(d_k, N, scaled=False).var().item()
    error = theory * ((2 + 6 / d_k) / N) ** 0.5
    print(
        f"d_k = {d_k:4d}: theory {theory:6.0f}, measured {measured:8.2f}, "
        f"gap {(measured - theory) / error:+.1f} standard errors"
    )
