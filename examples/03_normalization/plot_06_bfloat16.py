r"""# Bfloat16: range without resolution

Bfloat16 (bf16), the format most models train in, has float32's range but only 8 significant
bits. Its logits do not overflow where float16's do, but they are rounded 8 times more coarsely.
We measure what that rounding does to the attention weights at the logit spreads met on this
site, and where it enters: in the queries and keys, in the logits, in the weights. A fused
kernel removes some of these roundings, eager code and a softmax in bf16 remove fewer; none
removes the rounding of its bf16 inputs.
"""

# %%
SEED = 0
ROWS, KEYS = 2000, 64  # softmax rows of KEYS logits each, one query per row
D_K = 128  # head dimension of the queries and keys
SIGMAS = [2.0**e for e in range(-1, 7)]  # within-row logit std, 1/2 to 64
# logit spreads met in the guide: 1/sqrt(d_k) keeps the std near 1; without it the std
# is sqrt(d_k) for unit-variance q and k
MARKS = {
    "scaled, any $d_k$": 1.0,
    "unscaled, $d_k = 64$": 8.0,
    "unscaled, $d_k = 1024$": 32.0,
}

import matplotlib.pyplot as plt
import torch
from torch.nn import functional as F

import attnscale
from guide import figures, style

style.use_style()

# %%
# ## The formats
#
# The spacing of representable numbers at a logit's size is its resolution
# ([logit_resolution][attnscale.logit_resolution]). Softmax ignores a common shift of a row, but
# rounding moves each logit by a different amount, and softmax turns an absolute logit error
# $\delta$ into a relative weight error of about $\delta$.

formats = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
print(f"{'format':<9} {'largest':>10} {'eps':>9}   spacing at logit 1, 10, 100")
for name, dtype in formats.items():
    info = torch.finfo(dtype)
    spacing = ", ".join(
        f"{attnscale.logit_resolution(x, dtype):.2g}" for x in (1.0, 10.0, 100.0)
    )
    print(f"{name:<9} {info.max:10.3g} {info.eps:9.2g}   {spacing}")
ratio = attnscale.logit_resolution(10.0, torch.bfloat16) / attnscale.logit_resolution(
    10.0, torch.float16
)
print(f"bfloat16 spacing / float16 spacing at the same logit: {ratio:g}")

# %%
# ## Where each implementation rounds
#
# Each row is one query against its own 64 keys, their $d_k = 128$ components Gaussian and
# scaled so that the logits $q \cdot k_j$ have standard deviation $\sigma$. The reference is the
# float64 softmax of the exact logits. Six ways of computing the weights are compared with it,
# in two groups.
#
# **Exact logits, one rounding at a time.** These start from the float64 logits, so that each
# rounding is seen on its own; they are listed in the order of how much they round:
#
# - **fused kernel**: FlashAttention and torch's SDPA kernels accumulate $S = QK^\top$ in
#   float32 and keep it there; the online softmax runs in float32, and only the unnormalised
#   weights $e^{S - m}$ are rounded to bf16, as the operand of the product with $V$ (the row
#   sum stays in float32).
# - **eager, fp16**: the product $QK^\top$ is a float16 tensor (its logits rounded), the softmax
#   runs in float32 and its weights are cast back to float16 before $PV$: the pattern of
#   `softmax(scores, dtype=torch.float32).to(query.dtype)` in hand-written attention, and of
#   [scaled_dot_product_attention][attnscale.scaled_dot_product_attention]'s explicit path.
# - **eager, bf16**: the same in bf16.
# - **bf16 at every step**: every step of the softmax (subtracting the maximum, the
#   exponentials, their sum, the division) rounded to bf16, as a softmax on bf16 tensors does.
#
# **Q and K in bf16: the realistic case.** A model that trains or runs in bf16 holds its
# queries and keys as bf16 tensors, so its logits are computed from rounded inputs before any
# kernel sees them. These two pipelines are the ones to read for bf16 training:
#
# - **Q, K in bf16, fused kernel**: $q$ and $k$ rounded to bf16, $S = QK^\top$ of the rounded
#   values accumulated in float32 (the products of two bf16 numbers are exact in float32), then
#   the fused kernel above.
# - **Q, K in bf16, eager bf16**: the same $S$ returned as a bf16 tensor, as a bf16 matrix
#   product returns it, then eager bf16's float32 softmax and its cast back to bf16.
#
# The error of a row is the attention mass that moves, $\sum_j |\hat p_j - p_j|$ (the largest
# change of an output $\sum_j p_j v_j$ with values in $[-1, 1]$). The metric is its **mean over
# rows**: the printed tables and the lines with markers in the left panel. The thin line of the
# same colour is the **median** row, and the band goes from it to the 90th percentile (the rows
# with the largest errors); the right panel counts the rows that move more than $10^{-3}$ of
# their mass. The thin black line is the first-order prediction for rounded exact logits:
# rounding moves logit $j$ by $\delta_j$, and the weight by $p_j (\delta_j - \sum_i p_i
# \delta_i)$.

gen = torch.Generator().manual_seed(SEED)
q_unit = torch.randn(ROWS, D_K, generator=gen, dtype=torch.float64)  # (rows, d_k)
k_unit = torch.randn(ROWS, KEYS, D_K, generator=gen)  # (rows, keys, d_k), float32
# the logits at sigma = 1, exact: q.k has variance d_k for unit-variance q and k
z = torch.einsum("rd,rkd->rk", q_unit, k_unit.double()) / D_K**0.5  # (rows, keys)
k_bf16 = k_unit.bfloat16().float()  # the keys as a bf16 tensor holds them
MOVED = 1e-3  # a row "moves" when more than this much of its mass changes


def fused_kernel(x: torch.Tensor) -> torch.Tensor:
    """S in float32; e^(S - m) rounded to bf16 for P·V, the row sum kept in float32."""
    s = x.float()
    e = (s - s.amax(dim=-1, keepdim=True)).exp()  # (rows, keys), float32
    return e.bfloat16().double() / e.sum(dim=-1, keepdim=True).double()


def eager(dtype: torch.dtype):
    """Logits rounded to ``dtype``, a float32 softmax, weights cast back to
    ``dtype``."""
    return lambda x: torch.softmax(x.to(dtype).float(), dim=-1).to(dtype)


def bf16_softmax(x: torch.Tensor) -> torch.Tensor:
    """A softmax whose every step is rounded to bf16."""
    x = x.bfloat16()
    e = (x - x.amax(dim=-1, keepdim=True)).exp()  # (rows, keys), bf16
    return e / e.sum(dim=-1, keepdim=True)  # (rows, keys), bf16


def bf16_logits(sigma: float) -> torch.Tensor:
    """S = QK^T accumulated in float32 from q and k rounded to bf16, logit std sigma."""
    q = (
        (sigma / D_K**0.5 * q_unit).bfloat16().float()
    )  # the scale on q: q.k has std sigma
    return torch.einsum("rd,rkd->rk", q, k_bf16)  # (rows, keys), float32


# name: (the weights from logits, whether the logits come from bf16 q and k)
pipelines = {
    "fused kernel (S in fp32, P to bf16)": (fused_kernel, False),
    "eager, fp16 (S to fp16)": (eager(torch.float16), False),
    "eager, bf16 (S to bf16)": (eager(torch.bfloat16), False),
    "bf16 at every step": (bf16_softmax, False),
    "Q, K in bf16, fused kernel": (fused_kernel, True),
    "Q, K in bf16, eager bf16": (eager(torch.bfloat16), True),
}
QUANTILES = torch.tensor([0.5, 0.9], dtype=torch.float64)
mean = {name: [] for name in pipelines}
band = {name: [] for name in pipelines}  # (median, p90) per sigma
moved = {name: [] for name in pipelines}  # fraction of rows moving more than MOVED
sum_error = {name: [] for name in pipelines}
first_order = []  # the first-order prediction for bf16 logits, mean over rows
for sigma in SIGMAS:
    logits = sigma * z  # (rows, keys), exact
    exact = torch.softmax(logits, dim=-1)  # float64
    rounded_inputs = bf16_logits(sigma)
    for name, (weights, bf16_inputs) in pipelines.items():
        w = weights(rounded_inputs if bf16_inputs else logits).double()  # (rows, keys)
        err = (w - exact).abs().sum(dim=-1)  # (rows,)
        mean[name].append(err.mean().item())
        band[name].append(err.quantile(QUANTILES).tolist())
        moved[name].append((err > MOVED).double().mean().item())
        sum_error[name].append((w.sum(dim=-1) - 1).abs().mean().item())
    delta = (
        logits.bfloat16().double() - logits
    )  # (rows, keys) rounding error of each logit
    shift = (exact * delta).sum(dim=-1, keepdim=True)  # (rows, 1)
    first_order.append((exact * (delta - shift)).abs().sum(dim=-1).mean().item())

fused, eager_fp16, eager_bf16, naive, fused_in, eager_in = pipelines
exact_logits = [fused, eager_fp16, eager_bf16, naive]
short = dict(
    zip(exact_logits, ["fused", "eager fp16", "eager bf16", "bf16 always"], strict=True)
)
for label, column in (
    ("mean over rows", lambda n, k: mean[n][k]),
    ("90th percentile", lambda n, k: band[n][k][1]),
):
    print(f"exact logits, attention mass moved per row, {label}:")
    header = "".join(f"{short[name]:>12}" for name in exact_logits)
    print(
        f"{'sigma':>6}" + header + ("  first order" if label.startswith("mean") else "")
    )
    for k, sigma in enumerate(SIGMAS):
        cells = "".join(f"{column(name, k):>12.1e}" for name in exact_logits)
        extra = f"{first_order[k]:>13.1e}" if label.startswith("mean") else ""
        print(f"{sigma:>6g}" + cells + extra)

# %%
print(f"Q and K in bf16 (d_k = {D_K}), attention mass moved per row, mean over rows:")
print(f"{'sigma':>6}{'fused':>12}{'eager bf16':>12}{'eager / fused':>15}")
for k, sigma in enumerate(SIGMAS):
    ratio = mean[eager_in][k] / mean[fused_in][k]
    print(
        f"{sigma:>6g}{mean[fused_in][k]:>12.1e}{mean[eager_in][k]:>12.1e}{ratio:>15.1f}"
    )

fig, (ax, ax_moved) = plt.subplots(1, 2, figsize=(10, 4.9), layout="constrained")
colours = {
    name: figures.ordered_colour(k, len(pipelines)) for k, name in enumerate(pipelines)
}
for name, (_, bf16_inputs) in pipelines.items():
    # the realistic pipelines (bf16 q and k) drawn thicker, with square markers
    line = {
        "marker": "s" if bf16_inputs else "o",
        "linewidth": 2.4 if bf16_inputs else 1.5,
    }
    low, high = [b[0] for b in band[name]], [b[1] for b in band[name]]
    ax.fill_between(SIGMAS, low, high, color=colours[name], alpha=0.12, linewidth=0)
    ax.plot(SIGMAS, low, color=colours[name], linewidth=0.8)
    ax.plot(SIGMAS, mean[name], color=colours[name], label=name, **line)
    ax_moved.plot(SIGMAS, moved[name], color=colours[name], label=name, **line)
ax.plot(
    SIGMAS, first_order, color="black", linewidth=1, label="first order, bf16 logits"
)
for panel in (ax, ax_moved):
    figures.vmarks(
        panel, {f"$\\sigma$: {label}": sigma for label, sigma in MARKS.items()}
    )
    panel.set_xscale("log", base=2)
    panel.set_xlabel("within-row logit std $\\sigma$")
ax.set_yscale("log")
ax.set_ylabel(r"mass moved $\sum_j |\hat p_j - p_j|$")
ax.set_title(
    "Mass moved per row: mean (markers),\nmedian (thin line) to 90th percentile (band)"
)
ax_moved.set_ylim(0, 1.02)
ax_moved.set_ylabel(f"fraction of rows moving > {MOVED:g}")
ax_moved.set_title("Rows that move")
fig.suptitle(f"Low-precision attention weights against float64 ({KEYS} keys per row)")
figures.one_legend(fig, ncols=3)

# %%
# ## What the measurement says
#
# - **A fused kernel removes the extra rounding of $S$, not the rounding of its inputs.** From
#   exact logits its only rounding is of the unnormalised weights, a relative error of bf16's
#   half-spacing on each, and it shrinks as rows saturate (printed below: it never rises). In
#   bf16 training the logits are not exact: each product $q_i k_i$ of bf16 inputs is off by
#   about bf16's relative half-spacing, and their sum moves every logit by an amount of the
#   same order as rounding $S$ itself, in proportion to $\sigma$ as that rounding is. So the
#   error of the fused kernel with bf16 Q and K grows with $\sigma$ (the factor is printed
#   below) and does not fall back as the rows saturate.
# - **Eager code is worse than a fused kernel by a small factor, not by orders of magnitude.**
#   With the same bf16 Q and K, eager bf16 adds only the rounding of $S$ to an error already
#   of that size: the ratios printed below stay small at every marked $\sigma$. The much larger
#   ratios of the exact-logit fused kernel, which grow with $\sigma$, measure the error of
#   rounding $S$ alone against a kernel with no input rounding, which bf16 training does not
#   have; the line under their table says by how much they overstate the realistic advantage.
# - **Rounded logits are the main error of eager code from exact logits, and the first-order
#   formula explains it** (the thin black line lies on the eager bf16 curve once logit rounding
#   outweighs the rounding of the weights): each weight moves by $p_j$ times its logit's
#   rounding error relative to the row's mean rounding error. The bf16 / float16 ratio printed
#   below is close to the factor 8 of their spacings.
# - **Saturation does not remove the error of rounded logits; it concentrates it.** The median
#   row moves less and less as $\sigma$ grows, because most rows become one-hot, but the mean
#   does not fall with it: the rows whose top two logits are close still swap mass, and they
#   carry the 90th percentile. Read the median alone and bf16 seems to heal at large $\sigma$;
#   the lines printed below compare the median and the mean at the largest $\sigma$ with their
#   own peaks.
# - **A softmax rounded to bf16 at every step** adds an error of its own (printed below for
#   $\sigma = 1$), and its weights no longer sum to 1.

i1 = SIGMAS.index(1.0)
rises = any(b > 1.05 * a for a, b in zip(mean[fused], mean[fused][1:], strict=False))
print(
    "fused kernel, exact logits: the mean mass moved "
    f"{'rises' if rises else 'never rises'} with sigma\n"
    f"  ({mean[fused][0]:.1e} at sigma {SIGMAS[0]:g}, {mean[fused][-1]:.1e} at "
    f"{SIGMAS[-1]:g})"
)
peak = max(mean[fused_in])
growth = peak / mean[fused_in][0]
print(
    f"fused kernel, Q and K in bf16: the mean mass moved grows {growth:.1f}-fold with "
    f"sigma"
)
print(
    f"  ({mean[fused_in][0]:.1e} at sigma {SIGMAS[0]:g}, peak {peak:.1e} at "
    f"{SIGMAS[mean[fused_in].index(peak)]:g}, {mean[fused_in][-1]:.1e} at "
    f"{SIGMAS[-1]:g})"
)
marked = [SIGMAS.index(sigma) for sigma in MARKS.values()]
advantage = {
    "exact": [mean[eager_bf16][k] / mean[fused][k] for k in marked],
    "bf16 inputs": [mean[eager_in][k] / mean[fused_in][k] for k in marked],
}
print()
print("eager bf16 / fused kernel, mean mass moved per row:")
print(f"{'sigma':>6}{'exact logits':>15}{'Q, K in bf16':>15}")
for k, exact_ratio, realistic in zip(marked, *advantage.values(), strict=True):
    print(f"{SIGMAS[k]:>6g}{exact_ratio:>15.1f}{realistic:>15.1f}")
overstated = advantage["exact"][-1] / advantage["bf16 inputs"][-1]
print(
    f"at sigma {SIGMAS[marked[-1]]:g}, the exact-logit ratio is {overstated:.0f} times "
    "the bf16-input ratio"
)

# %%
print(
    "first order / eager bf16, mean mass moved, at each sigma:\n  "
    + ", ".join(
        f"{s:g}: {f / m:.2f}"
        for s, f, m in zip(SIGMAS, first_order, mean[eager_bf16], strict=True)
    )
)
print(
    f"eager bf16 / eager fp16, mean mass moved at sigma 1: "
    f"{mean[eager_bf16][i1] / mean[eager_fp16][i1]:.1f}"
)
medians = [b[0] for b in band[eager_bf16]]
for label, values in (("median", medians), ("mean", mean[eager_bf16])):
    print(
        f"eager bf16, {label:<6}: at sigma {SIGMAS[-1]:g} it is "
        f"{values[-1] / max(values):.2g} times its peak (sigma "
        f"{SIGMAS[values.index(max(values))]:g})"
    )
k32 = SIGMAS.index(32.0)
print(
    f"eager bf16 at sigma 32: 90th percentile {band[eager_bf16][k32][1]:.1e},\n"
    f"  {moved[eager_bf16][k32]:.0%} of rows move more than {MOVED:g}"
)
print(
    f"bf16 at every step / eager bf16, mean mass moved at sigma 1: "
    f"{mean[naive][i1] / mean[eager_bf16][i1]:.1f}"
)
for name in exact_logits:
    print(
        f"{short[name]:<12} mean |sum of weights - 1| at sigma 1: "
        f"{sum_error[name][i1]:.1e}"
    )

# %%
# ## The simulated kernel, against torch's own
#
# torch's CPU build has a fused flash-attention kernel for bf16, so the model of the fused
# kernel above can be checked on the real one. With keys and values equal to the identity
# matrix and `scale=1.0`, the logits are the queries themselves and the output row is the
# weight row, so the kernel's output is its $P$. Its output is a bf16 tensor: one more rounding,
# of the normalised weights, which the simulation applies too in the last column. Queries
# rounded to bf16 are the inputs; the reference is the float64 softmax of those same values. So
# this checks the kernel's own roundings; the rounding of its inputs happens before the kernel,
# and the Q, K in bf16 pipelines above measure it.

identity = torch.eye(KEYS, dtype=torch.bfloat16)[None, None]  # (1, 1, keys, keys)
print(
    f"{'sigma':>6} {'kernel':>10} {'simulated':>10} {'simulated + output to bf16':>27}"
)
kernel_vs_model = []
for sigma in SIGMAS:
    q = (sigma * z).bfloat16()  # (rows, keys): the logits, as bf16 inputs give them
    exact = torch.softmax(q.double(), dim=-1)
    out = F.scaled_dot_product_attention(q[None, None], identity, identity, scale=1.0)[
        0, 0
    ]
    simulated = fused_kernel(q.double())
    errors = [
        (w.double() - exact).abs().sum(dim=-1).mean().item()
        for w in (out, simulated, simulated.bfloat16())
    ]
    kernel_vs_model.append(errors[0] / errors[2])
    print(f"{sigma:>6g} {errors[0]:>10.2e} {errors[1]:>10.2e} {errors[2]:>27.2e}")
print(
    "kernel / simulation with its output rounding: "
    f"{min(kernel_vs_model):.3f} to {max(kernel_vs_model):.3f}"
)

# %%
# ## No overflow, but no resolution either
#
# The float16-overflow page multiplies $W_q$ and $W_k$ by $g$ until the raw $q \cdot k$ passes
# 65504. The same product in bf16 stays finite, since bf16's range is float32's, but at its
# largest value it is rounded to the spacing printed below: no NaN, and no accuracy either. By
# then the softmax is saturated anyway; bf16 hides the symptom that float16 makes loud.

torch.manual_seed(SEED)
q, k = (
    48 * torch.randn(1, 4, 32, 64),
    48 * torch.randn(1, 4, 32, 64),
)  # (b, heads, n, d_k)
raw = q @ k.transpose(-2, -1)  # (b, heads, n, n), float32
largest = raw.abs().max().item()
for name in ("float16", "bfloat16"):
    dtype = formats[name]
    product = (q.to(dtype) @ k.to(dtype).transpose(-2, -1)).float()
    top = torch.finfo(dtype).max
    if (
        largest > top
    ):  # past the format's range there is no spacing: the product overflows
        there = f"above {top:g}: overflow"
    else:
        there = f"spacing there = {attnscale.logit_resolution(largest, dtype):g}"
    print(
        f"{name:<9} largest |q.k| {largest:.0f}: finite = "
        f"{bool(product.isfinite().all())}, {there}"
    )

# %%
# ## References
#
# - Kalamkar et al. 2019, *A Study of BFLOAT16 for Deep Learning Training*, arXiv:1905.12322.
# - Dao et al. 2022, *FlashAttention*, arXiv:2205.14135 (the tiled, online softmax of fused
#   kernels).
# - Micikevicius et al. 2018, *Mixed Precision Training*, arXiv:1710.03740.
