r"""
# Entropy and peakedness of attention against d_k

Random unit-variance queries and keys give unscaled scores whose spread grows like
$\sqrt{d_k}$, so their softmax collapses onto a few keys as $d_k$ grows; scaled scores keep the
same attention shape at every $d_k$. This example measures both, for three sequence lengths,
next to a large-$n$ theory curve.
"""

# %%
# ## Setup
#
# One attention row is one query $q$ against $n$ keys $k_1, \dots, k_n$, all with i.i.d.
# $\mathcal{N}(0, 1)$ components. We measure the mean normalised entropy $H / \log n$
# (1 is uniform attention, 0 is one-hot) and the mean largest weight $\max_i p_i$.

import math

import matplotlib.pyplot as plt
import torch

import attnscale
from guide.figures import ordered_colour
from guide.printing import fold
from guide.style import use_style

use_style()

SEED = 0
N_VALUES = (16, 128, 1024)  # keys per row (sequence length)
D_KS = [2**j for j in range(2, 13)]  # 4 ... 4096
ROWS = {16: 2000, 128: 500, 1024: 125}  # attention rows per (n, d_k)
CHECK_ROWS, CHECK_N, CHECK_DK = 1000, 128, 64  # brute-force check of the shortcut

# %%
# ## Sampling rows without forming $d_k$-dimensional keys
#
# The scores of one row share their query, so they are *not* independent draws of
# [sample_scores][attnscale.sample_scores]. But given $q$, each score $s_j = q \cdot k_j$ is a
# sum of independent Gaussians, $s_j \mid q \sim \mathcal{N}(0, \lVert q \rVert^2)$, and the
# $s_j$ are independent of each other because the keys are. So a row is exactly
# $\lVert q \rVert\, z$ with $z \sim \mathcal{N}(0, I_n)$: we draw $q$ in full (for its norm)
# and $n$ standard normals, instead of $n \times d_k$ key components. The same $z$ is reused
# for every $d_k$, and the query for dimension $d_k$ is the first $d_k$ components of one long
# query, so the norms for all $d_k$ come from one cumulative sum. Each point is still an exact
# draw; neighbouring points share randomness, which makes the curves smooth.

gen = torch.Generator().manual_seed(SEED)
z = {n: torch.randn(ROWS[n], n, generator=gen) for n in N_VALUES}  # (rows, n) per n
q_long = torch.randn(max(ROWS.values()), max(D_KS), generator=gen)  # (rows, max d_k)
sq_norms = q_long.square().cumsum(
    dim=-1
)  # (rows, max d_k): |q[:d]|^2 for d = 1 ... max d_k
q_norm = {d_k: sq_norms[:, d_k - 1].sqrt() for d_k in D_KS}  # (rows,) per d_k

scale = torch.tensor([1 / math.sqrt(d_k) for d_k in D_KS])[
    :, None, None
]  # (d_ks, 1, 1)
results = {}
for n in N_VALUES:
    norms = torch.stack([q_norm[d_k][: ROWS[n]] for d_k in D_KS])  # (d_ks, rows)
    raw = (
        norms[:, :, None] * z[n]
    )  # (d_ks, rows, n), scores q . k_j for every d_k at once
    for name, logits in (("unscaled", raw), ("scaled", raw * scale)):
        stats = attnscale.softmax_stats(logits)
        h = stats.normalized_entropy.mean(dim=-1)  # (d_ks,)
        p = stats.max_probability.mean(dim=-1)  # (d_ks,)
        for i, d_k in enumerate(D_KS):
            results[n, d_k, name] = (h[i].item(), p[i].item())

# %%
# Check the shortcut against brute force: full keys, full dot products, at one $(n, d_k)$.

q = torch.randn(CHECK_ROWS, 1, CHECK_DK, generator=gen)  # (rows, 1, d_k)
keys = torch.randn(CHECK_ROWS, CHECK_N, CHECK_DK, generator=gen)  # (rows, n, d_k)
brute = (q * keys).sum(dim=-1)  # (rows, n)
h_brute = attnscale.softmax_entropy(brute, normalized=True)  # (rows,)
h_short = attnscale.softmax_entropy(
    q_norm[CHECK_DK][: ROWS[CHECK_N], None] * z[CHECK_N], normalized=True
)
stderr = math.sqrt(h_brute.var() / h_brute.numel() + h_short.var() / h_short.numel())
gap = (h_brute.mean() - h_short.mean()).item()
print(
    fold(
        f"n = {CHECK_N}, d_k = {CHECK_DK}, unscaled: mean H/log n brute force "
        f"{h_brute.mean():.4f}, shortcut {h_short.mean():.4f}; difference = "
        f"{gap / stderr:.2f} combined standard errors"
    )
)

# %%
# ## The figure
#
# Filled circles are unscaled scores $q \cdot k$; open squares are scaled scores
# $q \cdot k / \sqrt{d_k}$; thin dashed lines are the large-$n$ approximation explained below.


def plot_scaled_vs_unscaled(
    d_ks, unscaled, scaled, *, label, ylabel, colour, ax, theory=None, theory_d_ks=None
):
    """One row statistic against d_k: unscaled (filled) and scaled (open) in one colour,
    with the closed forms dashed."""
    ax.plot(
        d_ks,
        unscaled,
        "o-",
        color=colour,
        markersize=4,
        linewidth=1.4,
        label=f"{label}, unscaled",
    )
    ax.plot(
        d_ks,
        scaled,
        "s:",
        color=colour,
        markersize=4,
        markerfacecolor="white",
        linewidth=1.4,
        label=f"{label}, scaled $1/\\sqrt{{d_k}}$",
    )
    for curve in theory or ():
        ax.plot(theory_d_ks, curve, "--", color=colour, linewidth=0.9, alpha=0.7)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("$d_k$ (key dimension)")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize="x-small")


fine_d_ks = [
    2 ** (j / 16) for j in range(32, 193)
]  # 4 ... 4096, for smooth theory curves


def usable_theory(n: int, sigma: float) -> float:
    """The approximation where one of its branches applies, NaN (no curve) in
    between."""
    sigma_c = math.sqrt(2 * math.log(n))
    if sigma**2 <= math.log(n) or sigma >= 2 * sigma_c:
        return attnscale.gaussian_logit_entropy(n, sigma) / math.log(n)
    return math.nan


theory = {}
for n in N_VALUES:
    theory[n, "unscaled"] = [usable_theory(n, math.sqrt(d_k)) for d_k in fine_d_ks]
    theory[n, "scaled"] = [
        attnscale.gaussian_logit_entropy(n, 1.0) / math.log(n)
    ] * len(fine_d_ks)

fig, (ax_h, ax_p) = plt.subplots(1, 2, figsize=(7, 4.2), layout="constrained")
for k, n in enumerate(N_VALUES):
    colour = ordered_colour(k, len(N_VALUES))
    unscaled = [results[n, d, "unscaled"] for d in D_KS]
    scaled = [results[n, d, "scaled"] for d in D_KS]
    plot_scaled_vs_unscaled(
        D_KS,
        [h for h, _ in unscaled],
        [h for h, _ in scaled],
        theory=(theory[n, "unscaled"], theory[n, "scaled"]),
        theory_d_ks=fine_d_ks,
        label=f"n = {n}",
        ylabel="mean $H / \\log n$",
        colour=colour,
        ax=ax_h,
    )
    plot_scaled_vs_unscaled(
        D_KS,
        [p for _, p in unscaled],
        [p for _, p in scaled],
        label=f"n = {n}",
        ylabel="mean $\\max_i p_i$",
        colour=colour,
        ax=ax_p,
    )
ax_h.set_title("Normalised entropy")
ax_p.set_title("Largest attention weight")
# one legend for both panels (colour: n; filled and solid: unscaled; open and dotted:
# scaled), with one entry for the theory curves, drawn dashed in each n's colour
handles, _ = ax_p.get_legend_handles_labels()
(theory_key,) = ax_h.plot(
    [], [], "--", color="0.4", linewidth=0.9, label="theory (dashed)"
)
for ax in (ax_h, ax_p):
    ax.get_legend().remove()
fig.legend(
    handles=[*handles, theory_key],
    loc="outside lower center",
    ncols=4,
    fontsize="small",
)
fig.suptitle(
    "Attention entropy and peakedness against $d_k$, unscaled vs scaled scores"
)

# %%
# The printed table has the same numbers.

print("   n   d_k | H/log n unscaled  scaled  theory(unsc.) | max p unscaled  scaled")
for n in N_VALUES:
    for d_k in D_KS:
        hu, pu = results[n, d_k, "unscaled"]
        hs, ps = results[n, d_k, "scaled"]
        th = usable_theory(n, math.sqrt(d_k))
        print(
            f"{n:4d} {d_k:5d} | {hu:16.3f} {hs:7.3f} {th:13.3f} | {pu:14.3f} {ps:7.3f}"
        )
for n in N_VALUES:
    print(
        fold(
            f"n = {n:4d}: scaled theory H/log n = {theory[n, 'scaled'][0]:.3f};"
            f" transition of the theory at d_k = 2 log n = {2 * math.log(n):.1f}"
        )
    )

# %%
# The dashed curves and the measurements differ for two reasons. The theory takes $\sigma$ to be
# exactly $\sqrt{d_k}$ (unscaled) or 1 (scaled), while a measured row has
# $\sigma = \lVert q \rVert$ or $\lVert q \rVert / \sqrt{d_k}$, which varies from row to row by
# a relative amount of about $1/\sqrt{2 d_k}$: this matters at small $d_k$ only. And both branches of the theory (see
# the math below) are limits for $n \to \infty$, which rows of finite length approach slowly (the
# largest of $n$ standard normals reaches $\sqrt{2 \log n}$ only up to a correction that shrinks
# like $\log \log n / \sqrt{\log n}$). So the gap is largest for the shortest rows and, for
# unscaled scores, next to the transition, on either side of the break in the dashed curve: where
# $\sigma^2$ is close to $\log n$, or $\sigma$ just past $2\sigma_c$; it closes as $d_k$ grows.
# For scaled scores, whose $\sigma$ stays near 1, the finite-$n$ part stays at every $d_k$.
# Printed: for each $n$, the largest gap between the measured mean $H / \log n$ and the theory,
# measured minus theory, and the $d_k$ where it is.

# %%
print("largest gap, measured minus theory (mean H/log n):")
for name in ("unscaled", "scaled"):
    for n in N_VALUES:
        gaps = {
            d_k: results[n, d_k, name][0]
            - (
                usable_theory(n, math.sqrt(d_k))
                if name == "unscaled"
                else theory[n, name][0]
            )
            for d_k in D_KS
        }
        d_k = max(
            (d for d in D_KS if not math.isnan(gaps[d])), key=lambda d: abs(gaps[d])
        )
        print(f"  {name}, n = {n}: {gaps[d_k]:+.3f} at d_k = {d_k}")

# %%
# ## What the measurements say
#
# - **Unscaled scores collapse.** Already at small $d_k$ the normalised entropy drops well
#   below 1, and as $d_k$ grows the largest weight approaches 1 for every $n$ (the table): the
#   query attends to one key, whatever the keys contain. The longer the row, the later the
#   collapse, but only logarithmically in $n$.
# - **Scaled scores do not depend on $d_k$.** The scaled curves are flat (up to sampling noise
#   and the spread of $\lVert q \rVert / \sqrt{d_k}$ at small $d_k$). Their level depends on $n$
#   only: the attention is spread, not uniform.
# - The brute-force check printed above differs from the shortcut by the printed number of
#   standard errors: a value of order 1 is what sampling noise alone produces.
#
# ## The math
#
# Conditionally on $q$, a row of logits is $n$ i.i.d. $\mathcal{N}(0, \sigma^2)$ values with
# $\sigma = \lVert q \rVert \approx \sqrt{d_k}$ (unscaled) or
# $\sigma = \lVert q \rVert / \sqrt{d_k} \approx 1$ (scaled). The softmax of i.i.d. Gaussian
# logits is Derrida's random energy model, and for large $n$
# ([gaussian_logit_entropy][attnscale.gaussian_logit_entropy]):
#
# $$
# \mathbb{E}[H] \approx \log n - \frac{\sigma^2}{2}
# \quad\text{for } \sigma < \sigma_c = \sqrt{2 \log n},
# \qquad
# \mathbb{E}[H] \approx \psi(1) - \psi\!\left(1 - \frac{\sigma_c}{\sigma}\right)
# \quad\text{for } \sigma > \sigma_c .
# $$
#
# The first branch comes from $\sum_j e^{z_j} \approx n\, e^{\sigma^2/2}$ (log-normal mean)
# and says the scaled row loses about half a nat of entropy, for any $n$ and $d_k$. The second,
# the "frozen" phase, says a handful of keys hold almost all the weight and the entropy decays
# like $1/\sigma \propto 1/\sqrt{d_k}$. For unscaled scores the transition sits at
# $d_k \approx 2 \log n$, printed above: a small number for any realistic $n$.
#
# **Where the theory breaks.** Both branches are limits for $n \to \infty$. At finite $n$
# the first branch is good only while $\sigma^2$ is well below $\log n$, and near $\sigma_c$
# the first drops to 0 while the second diverges. So the dashed curves are drawn only where
# $\sigma^2 \le \log n$ or $\sigma \ge 2\sigma_c$, and the gap in each unscaled curve (and the
# `nan` in the table) is where no approximation here applies. Even inside its range, the first
# branch is visibly off for unscaled scores at $d_k = 4$, $n = 128$ (compare the printed
# table): $\sigma^2 = 4$ is close to $\log 128$. In the frozen phase the dashed curves fall
# like $1/\sqrt{d_k}$ at large $d_k$, as the measurements do. For $n = 16$ and $n = 128$ they
# sit above the measurements throughout that phase, by a margin that shrinks as $d_k$ grows.
# For $n = 1024$ the margin closes, and at the largest $d_k$ the dashed curve lies slightly
# below the measurements. For the largest weight there is no equally simple closed form, so
# that panel shows measurements only.
#
# ## References
#
# - Vaswani et al. 2017, *Attention Is All You Need*, arXiv:1706.03762, §3.2.1 and footnote 4.
# - Zhai et al. 2023, *Stabilizing Transformer Training by Preventing Attention Entropy
#   Collapse*, arXiv:2303.06296.
# - B. Derrida 1981, *Random-energy model: an exactly solvable model of disordered systems*,
#   Phys. Rev. B 24, 2613.
