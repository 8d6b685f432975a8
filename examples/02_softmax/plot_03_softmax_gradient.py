r"""
# The gradient through softmax: rise, peak, collapse

How much gradient passes back through a softmax depends on how spread its logits are, but not
monotonically: the Jacobian norm first grows with the logit scale $\sigma$, peaks, and only
then collapses as rows saturate. This example measures the whole curve, the bimodal split
hidden behind its mean, and where scaled and unscaled attention sit on it.
"""

# %%
# ## Setup
#
# Rows of $n = 64$ logits, i.i.d. $\mathcal{N}(0, \sigma^2)$, for $\sigma$ from $1/4$ to
# $128$. For each row we compute the Frobenius norm of the softmax Jacobian
# $J = \mathrm{diag}(p) - p p^\top$ and whether it is saturated ($\max_i p_i > 0.99$; the
# fraction of such rows is what [saturated_fraction][attnscale.saturated_fraction] returns).

import math

import matplotlib.pyplot as plt
import numpy as np
import torch

import attnscale
from guide import experiments
from guide.figures import GREYS, ordered_colour, vmarks
from guide.style import use_style

use_style()

SEED = 0
N = 64  # logits per row
ROWS = 2000  # rows per sigma
SIGMAS = list(experiments.SIGMAS)  # 1/4 ... 128, a quarter octave apart
TABLE_SIGMAS = (1, 2, 4, 8, 16, 32)
HIST_SIGMAS = (1, 4, 16, 64)
THRESHOLDS = (0.9, 0.99)
D_MODEL, D_K = 128, 64  # for the marks: where real attention logits sit

# %%
# ## Measure
#
# The same standard-normal rows $z$ are scaled by every $\sigma$ (logits $\sigma z$), so the
# curves are smooth. [softmax_jacobian_norm][attnscale.softmax_jacobian_norm] uses a closed
# form, $\lVert J \rVert_F^2 = \sum_i p_i^2 - 2\sum_i p_i^3 + (\sum_i p_i^2)^2$, evaluated so that
# it stays accurate for nearly one-hot rows.

z = experiments.softmax_rows(SEED, ROWS, N)  # (rows, n), standard normal
all_sigmas = sorted(set(SIGMAS) | set(TABLE_SIGMAS) | set(HIST_SIGMAS))
logits = (
    torch.tensor(all_sigmas)[:, None, None] * z
)  # (sigmas, rows, n), all in one batch
all_norms = attnscale.softmax_jacobian_norm(logits)  # (sigmas, rows)
p_max = attnscale.max_probability(logits)  # (sigmas, rows)
norms = dict(zip(all_sigmas, all_norms, strict=True))
saturated = {
    t: dict(zip(all_sigmas, (p_max > t).double().mean(dim=-1).tolist(), strict=True))
    for t in THRESHOLDS
}

print(" sigma | mean |J|_F  median |J|_F | saturated (max p > 0.99)")
for sigma in TABLE_SIGMAS:
    f = norms[sigma]
    print(
        f"{sigma:6g} | {f.mean():10.3f} {f.median():13.4f} | "
        f"{saturated[0.99][sigma]:8.1%}"
    )
# The fact-check's claim 2.2 calls the same function on the same rows.
peak, peak_value = experiments.jacobian_norm_peak(z)
print(
    f"the mean norm peaks at sigma = {peak:.2f} (grid step 2^(1/4)), value "
    f"{peak_value:.3f}"
)

# %%
# Where do real attention logits sit? Scaled scores of unit-variance $q, k$ have $\sigma = 1$;
# unscaled ones have $\sigma = \sqrt{d_k}$. With PyTorch's default `nn.Linear` initialisation
# the projections are not unit-variance (see
# [init_projection_variance][attnscale.init_projection_variance]), which lowers $\sigma$.

var_default = attnscale.init_projection_variance("default", D_MODEL, D_K)
sigma_default = attnscale.scaled_dot_product_moments(
    D_K, var_q=var_default, var_k=var_default
).std
marks = {
    "scaled, default init": sigma_default,
    "scaled, unit variance": 1.0,
    f"unscaled, $d_k = {D_K}$": math.sqrt(D_K),
    "unscaled, $d_k = 1024$": math.sqrt(1024),
}
for label, value in marks.items():
    print(f"{label:24s} sigma = {value:.3f}")

# %%
# ## The figure: rise, peak, collapse


def plot_jacobian_norm_vs_sigma(sigmas, norms, *, marks, ax):
    """Mean, median and 10-90% band of per-row Jacobian norms against the logit
    scale."""
    v = norms.double().numpy()  # (sigmas, rows)
    lo, med, hi = np.quantile(v, [0.1, 0.5, 0.9], axis=1)
    # statistics of one quantity: greys, never a strategy's colour
    ax.fill_between(
        sigmas, lo, hi, color=GREYS[2], alpha=0.35, linewidth=0, label="10-90% of rows"
    )
    ax.plot(sigmas, v.mean(axis=1), "-", color=GREYS[0], linewidth=1.8, label="mean")
    ax.plot(sigmas, med, "--", color=GREYS[1], linewidth=1.6, label="median")
    vmarks(ax, marks)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("$\\sigma$, standard deviation of the logits")
    ax.set_ylabel("$\\|J\\|_F$, softmax Jacobian norm")
    ax.legend()


def plot_saturation_vs_sigma(sigmas, fractions, *, ax):
    """Fraction of saturated softmax rows against the logit scale, one curve per
    threshold."""
    for k, (label, f) in enumerate(fractions.items()):
        colour = ordered_colour(k, len(fractions))  # thresholds in order
        ax.plot(sigmas, f, "o-", color=colour, markersize=3, label=label)
    ax.set_xscale("log", base=2)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("$\\sigma$, standard deviation of the logits")
    ax.set_ylabel("fraction of saturated rows")
    ax.legend()


fig, (ax_j, ax_s) = plt.subplots(1, 2, figsize=(7, 4.2), layout="constrained")
plot_jacobian_norm_vs_sigma(
    SIGMAS, torch.stack([norms[s] for s in SIGMAS]), marks=marks, ax=ax_j
)
ax_j.set_title(f"Jacobian norm, $n = {N}$")
plot_saturation_vs_sigma(
    SIGMAS,
    {f"max p > {t}": [saturated[t][s] for s in SIGMAS] for t in THRESHOLDS},
    ax=ax_s,
)
ax_s.set_title("Saturated rows")
# the left panel's legend (curves and marked scales) below the figure, clear of the band
fig.legend(
    *ax_j.get_legend_handles_labels(), loc="outside lower center", ncols=4, fontsize=8
)
ax_j.get_legend().remove()
fig.suptitle("Softmax Jacobian norm and saturation against the logit scale $\\sigma$")

# %%
# The mean norm (solid) rises with $\sigma$, peaks at the printed $\sigma$ and then falls.
# The median (dashed) falls much faster than the mean, and the shaded 10-90% band widens
# until it spans almost the whole range: past the peak, rows stop being alike.
#
# ## The mean hides a split
#
# Per-row norms on a log scale. Rows below $10^{-10}$ are piled into the first bin.


def plot_log_histograms(samples, *, floor, ax, xlabel):
    """Overlay histograms of log10 of values; values below ``floor`` pile up there."""
    arrays = {label: v.double().numpy().ravel() for label, v in samples.items()}
    top = max(float(np.max(a)) for a in arrays.values())
    edges = np.linspace(np.log10(floor), np.log10(max(top, floor * 10)) + 1e-9, 41)
    for k, (label, a) in enumerate(arrays.items()):
        ax.hist(
            np.log10(np.clip(a, floor, None)),
            bins=edges.tolist(),
            weights=np.full(a.size, 1.0 / a.size),  # a fraction of the rows
            histtype="step",
            linewidth=1.5,
            color=ordered_colour(k, len(arrays)),
            label=label,
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of rows per bin")
    ax.legend()


fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
plot_log_histograms(
    {f"σ = {s}": norms[s] for s in HIST_SIGMAS},
    floor=1e-10,
    ax=ax,
    xlabel="$\\log_{10} \\|J\\|_F$ per row",
)
ax.set_title("Distribution of per-row Jacobian norms: saturated and live rows")
for sigma in HIST_SIGMAS:
    f = norms[sigma]
    dead = (f < 1e-3).double().mean().item()
    live = (f > 0.1).double().mean().item()
    print(
        f"sigma = {sigma:3d}: rows with |J|_F < 1e-3: {dead:6.1%}, with |J|_F > 0.1: "
        f"{live:6.1%}"
    )

# %%
# At small $\sigma$ every row has about the same norm. At large $\sigma$ the rows split: one
# group keeps a norm close to the peak value (two or more logits nearly tied at the top, so the
# softmax is still deciding between them), while a growing group has norms many orders of
# magnitude smaller (one logit far ahead, a one-hot row that passes back almost nothing). The
# printed fractions show both groups. A mean over such rows describes neither group.
#
# ## Checking the norm against an actual backward pass
#
# The Jacobian norm measures what a random upstream gradient $g \sim \mathcal{N}(0, I)$ loses
# on its way back: $\mathbb{E}\lVert J^\top g \rVert^2 = \lVert J \rVert_F^2$. Check this with
# [logit_gradient][attnscale.logit_gradient], which computes
# $\partial L / \partial z = p \odot (g - \langle p, g \rangle)$ as backpropagation does.

upstream = torch.Generator().manual_seed(SEED + 1)
for sigma in TABLE_SIGMAS:
    g = torch.randn(ROWS, N, generator=upstream)  # (rows, n), upstream gradient
    grad = attnscale.logit_gradient(sigma * z, g)  # (rows, n)
    lhs = grad.square().sum(dim=-1).mean().item()
    rhs = norms[sigma].square().mean().item()
    print(f"sigma = {sigma:2d}: mean |J^T g|^2 = {lhs:.4f}   mean |J|_F^2 = {rhs:.4f}")

# %%
# ## The math
#
# With $J = \mathrm{diag}(p) - pp^\top$,
#
# $$
# \lVert J \rVert_F^2 = \sum_i p_i^2 (1 - p_i)^2 + \sum_{i \ne j} p_i^2 p_j^2 .
# $$
#
# - **Uniform row** ($\sigma \to 0$): $p_i = 1/n$ and $\lVert J \rVert_F = \sqrt{n-1}/n$, about
#   $1/\sqrt{n}$: small, because each weight is small and moves little.
# - **Two-way tie**: $p = (\tfrac12, \tfrac12, 0, \dots)$ gives
#   $\lVert J \rVert_F = \lVert J \rVert_2 = 1/2$, and no row has a larger spectral norm.
#   Moderate $\sigma$ makes rows close to this: a few logits near the top, the rest negligible.
# - **One-hot row**: $J = 0$. With $p_{\max} = 1 - \varepsilon$, $\lVert J \rVert_F$ is of
#   order $\varepsilon$, and $\varepsilon$ shrinks exponentially with the gap between the two
#   largest logits, that is with $\sigma$ times a gap that is fixed per row. So every row's
#   norm eventually collapses, but at a speed set by its own top-two gap; that spread of gaps
#   is the bimodal split above.
#
# So "large logits make the gradient vanish" is true only in the saturated regime, past the
# peak. Going from $\sigma = 1$ to the peak *raises* the mean gradient.
#
# ## What this says about $1/\sqrt{d_k}$
#
# Vaswani et al. (§3.2.1) argue that for large $d_k$ the dot products grow large and push
# the softmax "into regions where it has extremely small gradients". The measurements support
# a narrower reading. Unscaled logits at realistic $d_k$ (the marks at $\sqrt{64}$ and
# $\sqrt{1024}$) sit past the peak, where many rows are saturated and the median gradient is
# tiny. Scaled logits sit at $\sigma \approx 1$, left of the peak, where no row is saturated.
# The scale does **not** maximise the gradient: the peak is at larger $\sigma$. It keeps the
# logits in a regime where every row is alike and none has collapsed, whatever $d_k$ is, and
# leaves it to training to sharpen attention where the task needs it. With PyTorch's default
# initialisation, scaled logits start even further left (the "default init" mark).
#
# ## References
#
# - Vaswani et al. 2017, *Attention Is All You Need*, arXiv:1706.03762, §3.2.1 and footnote 4.
# - Zhai et al. 2023, *Stabilizing Transformer Training by Preventing Attention Entropy
#   Collapse*, arXiv:2303.06296.
# - Dehghani et al. 2023, *Scaling Vision Transformers to 22 Billion Parameters*,
#   arXiv:2302.05442 (attention logit growth).
