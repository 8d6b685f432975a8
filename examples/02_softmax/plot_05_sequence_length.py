r"""
# Sequence length: the same logits, flatter attention

The entropy of an attention row depends on how many keys it spreads over. At a fixed logit
spread, a longer row has more entropy, and even its entropy as a fraction of the largest
possible, $H / \log n$, drifts towards 1 while the weight of the best key falls: attention fades
as the context grows. Three fixes in use multiply the logits by a factor that grows with $n$:
log-$n$ scaling (Chiang & Cholak 2022), Scalable-Softmax (SSMax, Nakanishi 2025) and YaRN's
attention temperature for extended contexts (Peng et al. 2023). This page measures what each
does to the entropy and to the largest weight as $n$ grows from 16 to 65536.
"""

# %%
# ## Setup
#
# Each row holds $n$ logits $\sigma z_j$ with $z_j \sim \mathcal{N}(0, 1)$ and $\sigma = 1$: the
# spread $1/\sqrt{d_k}$ gives unit-variance queries and keys. Each fix multiplies the row by a
# factor $c(n)$, set to 1 at a training length $n_0 = 512$:
#
# - **fixed scale**: $c = 1$ at every length (plain $1/\sqrt{d_k}$).
# - **log-$n$ scaling, SSMax**: $c = \log n / \log n_0$. SSMax writes the logits as
#   $s \log n \cdot z$ with a learned $s$ per head; $s = 1/\log n_0$ makes it this curve.
# - **YaRN**: no change up to $n_0$; beyond, an extension by $r = n / n_0$ multiplies $q$ and $k$
#   each by $0.1 \ln r + 1$, so $c = (0.1 \ln r + 1)^2$.
#
# The metric is the mean **normalised entropy** $H / \log n$ over rows, the statistic the
# monitor reports; the largest weight $\max_j p_j$ is drawn beside it. The thin black line is
# the large-$n$ prediction for the fixed scale,
# $H \approx \log n - \sigma^2/2$ ([gaussian_logit_entropy][attnscale.gaussian_logit_entropy]).

import math

import matplotlib.pyplot as plt
import torch

import attnscale
from attnscale._docs import figures, style
from attnscale._docs.tables import Table

style.use_style()

SEED = 0
SIGMA = 1.0
N0 = 512  # the training length each fix is calibrated to
LENGTHS = [2**e for e in range(4, 17)]  # 16 ... 65536 keys
ROWS = 200


def fixed(n: int) -> float:
    return 1.0


def log_n(n: int) -> float:
    return math.log(n) / math.log(N0)


def yarn(n: int) -> float:
    return (0.1 * math.log(n / N0) + 1) ** 2 if n > N0 else 1.0


FIXES = {"fixed scale": fixed, "log-n scaling, SSMax": log_n, "YaRN": yarn}

gen = torch.Generator().manual_seed(SEED)
entropy = {name: [] for name in FIXES}
largest = {name: [] for name in FIXES}
for n in LENGTHS:
    z = torch.randn(ROWS, n, generator=gen, dtype=torch.float64)  # (rows, keys)
    for name, factor in FIXES.items():
        logits = factor(n) * SIGMA * z
        entropy[name].append(attnscale.softmax_entropy(logits, normalized=True).mean().item())
        largest[name].append(attnscale.max_probability(logits).mean().item())
theory = [attnscale.gaussian_logit_entropy(n, SIGMA) / math.log(n) for n in LENGTHS]

fig, (ax_h, ax_p) = plt.subplots(1, 2, figsize=(10, 4.4), layout="constrained")
# YaRN equals the fixed scale up to n0: dash-dotted, so the curve under it stays visible
looks = {"fixed scale": ("-", "o"), "log-n scaling, SSMax": ("-", "s"), "YaRN": ("-.", "^")}
for k, name in enumerate(FIXES):
    linestyle, marker = looks[name]
    look = {"color": figures.ordered_colour(k, len(FIXES)), "linestyle": linestyle}
    ax_h.plot(LENGTHS, entropy[name], marker=marker, label=name, **look)
    ax_p.plot(LENGTHS, largest[name], marker=marker, label=name, **look)
ax_h.plot(
    LENGTHS, theory, color="black", linewidth=1, zorder=3, label="fixed scale, large-n prediction"
)
for ax in (ax_h, ax_p):
    figures.vmarks(ax, {f"training length $n_0$ = {N0}": N0})
    ax.set_xscale("log", base=2)
    ax.set_xlabel("keys per row $n$")
ax_h.set_ylim(0.7, 1)
ax_h.set_ylabel("normalised entropy $H / \\log n$")
ax_h.set_title("Entropy as a fraction of its largest value")
ax_p.set_yscale("log")
ax_p.set_ylabel("largest weight $\\max_j p_j$")
ax_p.set_title("Weight of the best key")
fig.suptitle(f"Rows of n Gaussian logits (sigma = {SIGMA:g}), {ROWS} rows per n")
figures.one_legend(fig, ncols=3)

# %%
# ## The numbers

short = {"fixed scale": "fixed", "log-n scaling, SSMax": "log-n", "YaRN": "YaRN"}
headers = ["n", "c(n), log-n", "c(n), YaRN"]
headers += [f"H / log n, {short[k]}" for k in FIXES] + [
    f"largest weight, {short[k]}" for k in FIXES
]
rows = [
    [n, f"{log_n(n):.2f}", f"{yarn(n):.2f}"]
    + [f"{entropy[k][i]:.3f}" for k in FIXES]
    + [f"{largest[k][i]:.1e}" for k in FIXES]
    for i, n in enumerate(LENGTHS)
]
Table(headers, rows)

# %%
# ## What the measurement says
#
# - **At a fixed scale, attention fades with length.** $H / \log n$ rises towards 1 and the
#   best key's weight falls (by the factor printed below): the logits do not grow, while the
#   number of keys competing for the mass does. The large-$n$ prediction tracks the measured
#   entropy. A threshold on $H / \log n$ therefore means different things at different
#   lengths; compare a head with itself at one length.
# - **Log-$n$ scaling and SSMax** raise the logits fast enough that the entropy moves away from
#   its ceiling as $n$ grows instead of towards it; the best key's weight still falls, by a far
#   smaller factor.
# - **YaRN** leaves every length up to $n_0$ alone. Beyond it, over this range, its factor grows
#   faster than $\log n / \log n_0$, and the best key keeps about the weight it had at $n_0$.
# - None of the three changes what $1/\sqrt{d_k}$ is for: they act on the length, not on the
#   head size, and multiply whatever spread $1/\sqrt{d_k}$ leaves.

first, last, at_n0 = 0, len(LENGTHS) - 1, LENGTHS.index(N0)
for name in FIXES:
    print(
        f"{name}: H/log n {entropy[name][first]:.3f} at n = {LENGTHS[first]}, "
        f"{entropy[name][last]:.3f} at n = {LENGTHS[last]};\n  the best key's weight falls "
        f"{largest[name][first] / largest[name][last]:.0f}-fold over the range"
    )
gap = max(abs(t - m) for t, m in zip(theory, entropy["fixed scale"], strict=True))
print(f"fixed scale: largest gap between prediction and measurement {gap:.3f}")
print(
    f"YaRN: the best key's weight at n = {LENGTHS[last]} is "
    f"{largest['YaRN'][last] / largest['YaRN'][at_n0]:.2f} times its weight at n0 = {N0}"
)
print(
    f"factor at n = {LENGTHS[last]}: log-n {log_n(LENGTHS[last]):.2f}, YaRN {yarn(LENGTHS[last]):.2f}"
)

# %%
# ## References
#
# - Chiang & Cholak 2022, *Overcoming a Theoretical Limitation of Self-Attention*,
#   arXiv:2202.12172 (scaling the logits by $\log n$).
# - Nakanishi 2025, *Scalable-Softmax Is Superior for Attention*, arXiv:2501.19399.
# - Peng et al. 2023, *YaRN: Efficient Context Window Extension of Large Language Models*,
#   arXiv:2309.00071.
