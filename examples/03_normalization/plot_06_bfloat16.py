r"""# Bfloat16: range without resolution

Bfloat16 (bf16), the format most models train in, has float32's range but only 8 significant
bits. Its logits do not overflow where float16's do, but they are rounded 8 times more coarsely.
We measure what that rounding does to the attention weights at the logit spreads met on this
site, and what computing the softmax in float32 buys.
"""

# %%
SEED = 0
ROWS, KEYS = 2000, 64  # softmax rows of KEYS logits each
SIGMAS = [2.0**e for e in range(0, 7)]  # within-row logit std, 1 to 64
# logit spreads met in the guide: 1/sqrt(d_k) keeps the std near 1; without it the std is
# sqrt(d_k) for unit-variance q and k
MARKS = {"scaled, any $d_k$": 1.0, "unscaled, $d_k = 64$": 8.0, "unscaled, $d_k = 1024$": 32.0}

import matplotlib.pyplot as plt
import torch

import attnscale
from attnscale._docs import style

style.use_style()

# %%
# ## The formats
#
# The spacing of representable numbers at a logit's size is its resolution
# ([logit_resolution][attnscale.logit_resolution]). Softmax ignores a common shift of a row, but
# rounding moves each logit by a different amount, and softmax turns an absolute logit error
# $\delta$ into a relative weight error of about $\delta$.

formats = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
print(f"{'format':<9} {'largest':>10} {'eps':>9}   spacing at logit 1, 10, 100")
for name, dtype in formats.items():
    info = torch.finfo(dtype)
    spacing = ", ".join(f"{attnscale.logit_resolution(x, dtype):.2g}" for x in (1.0, 10.0, 100.0))
    print(f"{name:<9} {info.max:10.3g} {info.eps:9.2g}   {spacing}")
ratio = attnscale.logit_resolution(10.0, torch.bfloat16) / attnscale.logit_resolution(
    10.0, torch.float16
)
print(f"bfloat16 spacing / float16 spacing at the same logit: {ratio:g}")

# %%
# ## Rounded logits, and the softmax in float32 or in bf16
#
# Each row holds Gaussian logits of standard deviation $\sigma$, exact in float64. Three ways of
# computing the weights are compared with the float64 softmax:
#
# - **bf16 logits, fp32 softmax**: the logits are rounded to bf16, the softmax runs in
#   float32. This is what fused attention kernels do, and what
#   [scaled_dot_product_attention][attnscale.scaled_dot_product_attention] does for bf16 inputs.
# - **fp16 logits, fp32 softmax**: the same with float16 logits, for comparison.
# - **bf16 logits, bf16 softmax**: every step of the softmax (subtracting the maximum, the
#   exponentials, their sum, the division) rounded to bf16, as a hand-written softmax on bf16
#   tensors does.
#
# The error of a row is the attention mass that moves, $\sum_j |\hat p_j - p_j|$ (the largest
# change of an output $\sum_j p_j v_j$ with values in $[-1, 1]$), as a median over rows. The dashed
# line is the first-order prediction for rounded logits: rounding moves logit $j$ by
# $\delta_j$, and the weight by $p_j (\delta_j - \sum_i p_i \delta_i)$.

gen = torch.Generator().manual_seed(SEED)
z = torch.randn(ROWS, KEYS, generator=gen, dtype=torch.float64)  # (rows, keys)


def bf16_softmax(x: torch.Tensor) -> torch.Tensor:
    """A softmax whose every step is rounded to bf16."""
    x = x.bfloat16()
    e = (x - x.amax(dim=-1, keepdim=True)).exp()  # (rows, keys), bf16
    return e / e.sum(dim=-1, keepdim=True)  # (rows, keys), bf16


pipelines = {
    "bf16 logits, fp32 softmax": lambda x: torch.softmax(x.bfloat16().float(), dim=-1),
    "fp16 logits, fp32 softmax": lambda x: torch.softmax(x.half().float(), dim=-1),
    "bf16 logits, bf16 softmax": bf16_softmax,
}
error = {name: [] for name in pipelines}
sum_error = {name: [] for name in pipelines}
first_order = []  # the first-order prediction for bf16 logits
for sigma in SIGMAS:
    logits = sigma * z  # (rows, keys)
    exact = torch.softmax(logits, dim=-1)  # float64
    for name, weights in pipelines.items():
        w = weights(logits).double()  # (rows, keys)
        error[name].append((w - exact).abs().sum(dim=-1).median().item())
        sum_error[name].append((w.sum(dim=-1) - 1).abs().median().item())
    delta = logits.bfloat16().double() - logits  # (rows, keys) rounding error of each logit
    shift = (exact * delta).sum(dim=-1, keepdim=True)  # (rows, 1)
    first_order.append((exact * (delta - shift)).abs().sum(dim=-1).median().item())

print("median attention mass moved per row, at each sigma:")
print(f"{'sigma':<26}" + "".join(f"{sigma:>9g}" for sigma in SIGMAS))
for name, values in [*error.items(), ("first order, bf16 logits", first_order)]:
    print(f"{name:<26}" + "".join(f"{v:9.1e}" for v in values))

fig, ax = plt.subplots(figsize=(7, 4.4), layout="constrained")
colours = {"bf16 logits, fp32 softmax": "C0", "fp16 logits, fp32 softmax": "C2"}
colours["bf16 logits, bf16 softmax"] = "C3"
for name, values in error.items():
    ax.plot(SIGMAS, values, marker="o", color=colours[name], label=name)
ax.plot(SIGMAS, first_order, color="0.35", linestyle="--", label="first order, bf16 logits")
for (label, sigma), shade in zip(MARKS.items(), ("0.55", "0.7", "0.85"), strict=True):
    ax.axvline(sigma, color=shade, linestyle=":", linewidth=1.5, label=f"$\\sigma$: {label}")
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("within-row logit std $\\sigma$")
ax.set_ylabel(r"mass moved $\sum_j |\hat p_j - p_j|$")
ax.set_title(f"Attention mass moved by low-precision logits ({KEYS} keys, median of rows)")
fig.legend(loc="outside lower center", ncols=2, fontsize=8)

# %%
# ## What the measurement says
#
# - **Rounded logits are the main error, and the first-order formula explains it** (the dashed
#   line lies on the bf16 curve except at the largest $\sigma$, where the two differ by a
#   factor of a few at an error too small to matter): each weight moves by $p_j$ times its
#   logit's rounding error relative to the row's mean rounding error.
# - **bf16 against float16:** the ratio printed below is the factor 8 of their spacings.
# - **The error rises with $\sigma$ while the rows are soft** (larger logits, larger rounding),
#   peaks at the $\sigma$ printed below, and falls once rows are one-hot: a saturated row has no
#   mass left to move. Unscaled logits at moderate $d_k$ sit near that peak; at large $d_k$ they
#   trade the rounding error for saturation, the problem of the softmax section. Scaled logits
#   ($\sigma \approx 1$) stay on the low side of it.
# - **A softmax rounded to bf16 at every step** adds an error of its own on top of the rounded
#   logits (printed below for $\sigma = 1$), and its weights no longer sum to 1. Fused kernels
#   (FlashAttention, torch's SDPA) accumulate the softmax in float32 and round only the output,
#   and [scaled_dot_product_attention][attnscale.scaled_dot_product_attention] computes it in
#   float32 for bf16 inputs.

bf, fp, naive = pipelines
print(f"bf16 / float16 mass moved at sigma 1: {error[bf][0] / error[fp][0]:.1f}")
peak = max(range(len(SIGMAS)), key=lambda i: error[bf][i])
print(f"bf16 logits: the error peaks at sigma = {SIGMAS[peak]:g} ({error[bf][peak]:.1e})")
print(f"bf16 softmax / fp32 softmax, mass moved at sigma 1: {error[naive][0] / error[bf][0]:.1f}")
for name in pipelines:
    print(f"{name:<32} median |sum of weights - 1| at sigma 1: {sum_error[name][0]:.1e}")

# %%
# ## No overflow, but no resolution either
#
# The float16-overflow page multiplies $W_q$ and $W_k$ by $g$ until the raw $q \cdot k$ passes
# 65504. The same product in bf16 stays finite, since bf16's range is float32's, but at its
# largest value it is rounded to the spacing printed below: no NaN, and no accuracy either. By
# then the softmax is saturated anyway; bf16 hides the symptom that float16 makes loud.

torch.manual_seed(SEED)
q, k = 48 * torch.randn(1, 4, 32, 64), 48 * torch.randn(1, 4, 32, 64)  # (b, heads, n, d_k)
raw = q @ k.transpose(-2, -1)  # (b, heads, n, n), float32
largest = raw.abs().max().item()
for name in ("float16", "bfloat16"):
    dtype = formats[name]
    product = (q.to(dtype) @ k.to(dtype).transpose(-2, -1)).float()
    top = torch.finfo(dtype).max
    if largest > top:  # past the format's range there is no spacing: the product overflows
        there = f"above the largest finite {name}, {top:g}: overflow"
    else:
        there = f"spacing there = {attnscale.logit_resolution(largest, dtype):g}"
    print(
        f"{name:<9} largest |q.k| {largest:.0f}: finite = {bool(product.isfinite().all())}, {there}"
    )

# %%
# ## References
#
# - Kalamkar et al. 2019, *A Study of BFLOAT16 for Deep Learning Training*, arXiv:1905.12322.
# - Dao et al. 2022, *FlashAttention*, arXiv:2205.14135 (the tiled, online softmax of fused
#   kernels).
# - Micikevicius et al. 2018, *Mixed Precision Training*, arXiv:1710.03740.
