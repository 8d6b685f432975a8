r"""
# The variance of q·k grows with d_k

We redo the source article's first experiment, carefully: draw random queries and keys, form
their dot products, and watch the spread grow with the key dimension $d_k$ — then check the
growth against the closed form $\mathrm{Var}[q \cdot k] = d_k$ and look at the tails: the
article's "[-100, 100]" and "[-3, 3]" ranges hold for nearly every score, but they are not bounds.
"""

# %%
# ## Setup
#
# Components of $q$ and $k$ are i.i.d. standard normal, as in the article. `N_SAMPLES` is the
# article's sample count for the histograms; the variance sweep uses more samples, drawn with
# the exact $O(1)$ shortcut (see the section "A faster sampler, exactly").

import math

import matplotlib.pyplot as plt
import numpy as np
import torch

import attnscale as asc
from guide import figures
from guide.style import colours, use_style

use_style()
COLOURS = colours(["none", "inverse_sqrt"])  # raw and scaled, as every page draws them

SEED = 0
N_SAMPLES = 10_000
HIST_DKS = [16, 64, 256, 1024]
SWEEP_DKS = [2**p for p in range(0, 13)]
SWEEP_SAMPLES = 200_000

gen = torch.Generator().manual_seed(SEED)

# %%
# ## Unscaled scores spread out; scaled ones do not
#
# For each $d_k$ we draw `N_SAMPLES` pairs $(q, k)$ and form the full dot product, just as the
# article's loop does (but vectorised). The left panel shows raw scores, the right panel the
# same scores divided by $\sqrt{d_k}$.


def plot_score_histograms(samples, *, ax, reference_pdf=False, xlabel="score"):
    """Overlay density histograms of scores, one per key dimension d_k."""
    for k, (d_k, values) in enumerate(sorted(samples.items())):
        ax.hist(
            values.double().numpy(),
            bins=80,
            density=True,
            histtype="step",
            linewidth=1.4,
            color=figures.ordered_colour(k, len(samples)),  # d_k's order
            label=f"$d_k = {d_k}$",
        )
    if reference_pdf:  # the law scaled scores approach
        lo, hi = ax.get_xlim()
        x = np.linspace(lo, hi, 400)
        normal = np.exp(-(x**2) / 2) / np.sqrt(2 * np.pi)
        ax.plot(x, normal, "k--", linewidth=1, label="$\\mathcal{N}(0, 1)$")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("density")
    ax.legend()


raw = {
    d: asc.sample_scores(d, N_SAMPLES, method="dot", generator=gen) for d in HIST_DKS
}
scaled = {d: s / math.sqrt(d) for d, s in raw.items()}

fig, (ax_raw, ax_scaled) = plt.subplots(1, 2, figsize=(7, 3.4), layout="constrained")
plot_score_histograms(raw, ax=ax_raw, xlabel="raw score $q\\cdot k$")
plot_score_histograms(
    scaled,
    ax=ax_scaled,
    reference_pdf=True,
    xlabel="scaled score $q\\cdot k/\\sqrt{d_k}$",
)
ax_raw.set_title("Raw scores widen with $d_k$")
ax_scaled.set_title("Scaled scores keep one width")
fig.suptitle("Histograms of attention scores for four key dimensions")

# %%
# The raw histogram for the largest $d_k$ is so wide that, on the same axis, the smallest one is
# a narrow peak around zero.
# After scaling, all four have unit variance and follow the standard normal density in the
# bulk. Their tails are not normal at small $d_k$: a sum of $d_k$ products of two normals has
# excess kurtosis $6/d_k$ (each product has fourth moment 9 against 3 for a normal), which the
# table below measures next to the share of scores beyond $\pm 3$.
#
# ## The tails, honestly
#
# The article says that at $d_k = 1024$ the raw scores lie in about $[-100, 100]$ and the scaled
# ones in about $[-3, 3]$. As a description of where the scores lie, that holds: the share inside
# is close to what a normal law puts there (the fact-check's verdict on this claim). But the
# ranges are not bounds: a few scores lie outside, and the extremes grow with the number of
# draws. Here is the full range and the share of scaled scores inside $\pm 3$, next to the
# share a standard normal puts there:

print(
    f"{'d_k':>5} {'raw min':>8} {'raw max':>8} {'raw std':>8} {'scaled min':>10} "
    f"{'scaled max':>10} {'within ±3':>10} {'excess kurtosis':>15} {'6/d_k':>6}"
)
for d in HIST_DKS:
    r, s = raw[d], scaled[d]
    inside = (s.abs() <= 3).double().mean().item()
    z = (s.double() - s.double().mean()) / s.double().std()
    kurtosis = z.pow(4).mean().item() - 3
    print(
        f"{d:5d} {r.min().item():8.1f} {r.max().item():8.1f} {r.std().item():8.2f} "
        f"{s.min().item():10.2f} {s.max().item():10.2f} {inside:10.2%} "
        f"{kurtosis:15.3f} "
        f"{6 / d:6.3f}"
    )
print(f"a standard normal puts {math.erf(3 / math.sqrt(2)):.2%} of its mass within ±3")
print(
    f"standard error of an excess kurtosis from {N_SAMPLES:,} draws: about "
    f"{math.sqrt(24 / N_SAMPLES):.3f}"
)

# %%
# With ten thousand draws, a fraction of a percent of the scaled scores land beyond $\pm 3$:
# tens of scores at each $d_k$. Compare the raw extremes at $d_k = 1024$ with the article's
# $\pm 100$. The standard deviation is what scaling fixes, not the range:
# the raw one grows like $\sqrt{d_k}$, the scaled one stays near 1.
#
# ## Why the variance is exactly $d_k$
#
# Write $s = q \cdot k = \sum_{i=1}^{d_k} q_i k_i$ with all $q_i, k_i$ independent, mean 0 and
# variance 1.
#
# **Mean.** By linearity and independence,
# $\mathbb{E}[s] = \sum_i \mathbb{E}[q_i]\,\mathbb{E}[k_i] = 0$.
#
# **Variance.** Since the mean is zero, $\mathrm{Var}[s] = \mathbb{E}[s^2]$ and
#
# $$
# \mathbb{E}[s^2] = \sum_{i=1}^{d_k} \sum_{j=1}^{d_k} \mathbb{E}[q_i k_i q_j k_j].
# $$
#
# For $i \neq j$ the four factors are independent, so the term is
# $\mathbb{E}[q_i]\,\mathbb{E}[k_i]\,\mathbb{E}[q_j]\,\mathbb{E}[k_j] = 0$: all $d_k^2 - d_k$
# cross terms vanish. For $i = j$ the term is
# $\mathbb{E}[q_i^2]\,\mathbb{E}[k_i^2] = 1 \cdot 1 = 1$, because
# $\mathbb{E}[x^2] = \mathrm{Var}(x) + \mathbb{E}[x]^2 = 1$. The $d_k$ diagonal terms give
#
# $$
# \mathrm{Var}[q \cdot k] = d_k .
# $$
#
# **The scale.** Multiplying by $\alpha$ multiplies the variance by $\alpha^2$, so
# $\alpha^2 d_k = 1$ gives $\alpha = 1/\sqrt{d_k}$: the factor in
# $\mathrm{softmax}(QK^\top/\sqrt{d_k})V$. [dot_product_moments][attnscale.dot_product_moments]
# and [unit_variance_scale][attnscale.unit_variance_scale] compute these closed forms, also
# for other means, variances and correlations.
#
# ## Measured variance against the closed form
#
# Now a sweep over $d_k = 1, 2, 4, \dots, 4096$. The band is a 95% interval for each sample
# variance, from the sample's own fourth moment
# ([variance_estimate][attnscale.variance_estimate]); the dashed line is the closed form. At
# this sample size the band is too narrow to see on log axes that run from 1 to 4096: its
# largest half-width, relative to the variance, is printed below the figure.


def plot_variance_vs_dk(
    d_ks, measured, *, low, high, label, color, theory=None, ax=None
):
    """Log-log plot of measured variances against d_k, with their interval and
    theory."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
    if theory is not None:
        ax.plot(d_ks, theory, "--", color="0.4", linewidth=1, label="theory")
    ax.fill_between(d_ks, low, high, color=color, alpha=0.25, linewidth=0)
    ax.plot(d_ks, measured, "o", color=color, markersize=5, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("$d_k$ (key dimension)")
    ax.set_ylabel("variance of the score")
    ax.legend()
    return ax


est = [
    asc.variance_estimate(asc.sample_scores(d, SWEEP_SAMPLES, generator=gen))
    for d in SWEEP_DKS
]
theory = [asc.dot_product_moments(d).variance for d in SWEEP_DKS]

ax = plot_variance_vs_dk(
    SWEEP_DKS,
    [e.variance for e in est],
    low=[e.low for e in est],
    high=[e.high for e in est],
    theory=theory,
    label="raw score, measured",
    color=COLOURS["none"],
)
scaled_est = [
    asc.variance_estimate(
        asc.sample_scores(d, SWEEP_SAMPLES, scale=d**-0.5, generator=gen)
    )
    for d in SWEEP_DKS
]
plot_variance_vs_dk(
    SWEEP_DKS,
    [e.variance for e in scaled_est],
    low=[e.low for e in scaled_est],
    high=[e.high for e in scaled_est],
    label="scaled score, measured",
    color=COLOURS["inverse_sqrt"],
    ax=ax,
)
ax.set_title("Score variance against $d_k$: raw grows linearly, scaled stays at 1")

inside = sum(e.low <= t <= e.high for e, t in zip(est, theory, strict=True))
print(
    f"closed form inside the 95% interval for {inside} of {len(SWEEP_DKS)} key "
    f"dimensions"
)
half = max((e.high - e.low) / 2 / e.variance for e in [*est, *scaled_est])
print(f"largest half-width of a 95% interval: {half:.1%} of the variance")
print(
    f"scaled variance ranges from {min(e.variance for e in scaled_est):.4f} "
    f"to {max(e.variance for e in scaled_est):.4f}"
)

# %%
# ## A faster sampler, exactly
#
# The sweep above did not form any dot products. For zero-mean i.i.d. Gaussian components, the
# law of $q \cdot k$ is rotation invariant in $k$: given $q$, the score is $\lVert q \rVert$
# times a standard normal. So
#
# $$
# q \cdot k \overset{d}{=} \lVert q \rVert\, z, \qquad \lVert q \rVert \sim \chi(d_k),\;
# z \sim \mathcal{N}(0, 1)\ \text{independent},
# $$
#
# which costs two random draws per sample instead of $2 d_k$.
# [sample_scores][attnscale.sample_scores] uses it whenever it is exact (`method="auto"`).
# Below, both methods at $d_k = 1024$ are compared by their variance and their 1%, 50% and 99%
# quantiles.

dot = asc.sample_scores(1024, 50_000, method="dot", generator=gen)
chi = asc.sample_scores(1024, 50_000, method="chi", generator=gen)
levels = torch.tensor([0.01, 0.5, 0.99])
for name, s in [("dot product", dot), ("chi shortcut", chi)]:
    qs = ", ".join(f"{v:6.1f}" for v in s.quantile(levels).tolist())
    print(f"{name:>12}: variance {s.var().item():7.1f}, 1% / 50% / 99% quantiles {qs}")

# %%
# `nox -s bench` times the article's Python loop, the vectorised dot product and the shortcut
# side by side.
#
# ## References
#
# - Vaswani et al. (2017), *Attention Is All You Need*, arXiv:1706.03762, §3.2.1 and
#   footnote 4: the variance argument for $1/\sqrt{d_k}$.
