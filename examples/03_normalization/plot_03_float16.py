r"""
# Float16: when do the logits overflow or lose resolution?

Float16 stores numbers up to 65504 with about three significant digits. We compute attention in
float16 as $W_q$ and $W_k$ grow by a factor $g$, compare with a float64 reference, and find for each
strategy where the logits overflow and where the attention weights stop being accurate.
"""

# %%
import copy

import matplotlib.pyplot as plt
import numpy as np
import torch

import attnscale
from attnscale.plotting import plot_strategy_curves

SEED = 0
D_MODEL = 256
NUM_HEADS = 2  # head dimension d_k = 128
SEQ_LEN = 64
BATCH = 2
GAINS = np.logspace(0, 2, 21)  # weight scale g from 1 to 100
TOLERANCE = 0.01  # "resolution lost": some attention weight off by more than this
FP16_MAX = float(torch.finfo(torch.float16).max)
VARIANTS = {name: (name, None) for name in attnscale.SCALING_STRATEGIES}
VARIANTS["softcap_50"] = ("inverse_sqrt", 50.0)
NAIVE = "inverse_sqrt, scaled after QKᵀ"  # the bug class: scale applied to the fp16 product

# %%
# ## Attention-weight error in float16 against the weight scale
#
# Each curve is the largest absolute difference between float16 and float64 attention weights.
# The extra curve computes $q k^\top$ in float16 first and multiplies by $1/\sqrt{d_k}$ afterwards,
# the order that overflows in several real code bases; the library scales $q$ first. Points where
# the float16 result is not finite are drawn at 1.

# %%
print(f"float16 max = {FP16_MAX:.0f}, machine epsilon = {torch.finfo(torch.float16).eps:.2e}")
torch.manual_seed(SEED)
x64 = torch.randn(BATCH, SEQ_LEN, D_MODEL, dtype=torch.float64)
x16 = x64.half()
error: dict[str, list[float]] = {v: [] for v in [*VARIANTS, NAIVE]}
overflow: dict[str, float] = {}  # first g with a non-finite float16 logit
max_logit: dict[str, list[float]] = {v: [] for v in [*VARIANTS, NAIVE]}


def record(
    label: str,
    g: float,
    logits16: torch.Tensor,
    w16: torch.Tensor,
    w64: torch.Tensor,
    logits64: torch.Tensor,
) -> None:
    finite = bool(torch.isfinite(logits16).all() and torch.isfinite(w16).all())
    if not finite:
        overflow.setdefault(label, g)
    error[label].append(float((w16.double() - w64).abs().max()) if finite else 1.0)
    max_logit[label].append(float(logits64.abs().max()))


with torch.no_grad():
    for label, (name, cap) in VARIANTS.items():
        torch.manual_seed(SEED)
        ref = attnscale.MultiHeadAttention(D_MODEL, NUM_HEADS, strategy=name, softcap=cap).double()
        half = copy.deepcopy(ref).half()
        w_q, w_k = ref.q_proj.weight.clone(), ref.k_proj.weight.clone()
        for g in GAINS:
            for m in (ref, half):
                m.q_proj.weight.copy_(g * w_q)
                m.k_proj.weight.copy_(g * w_k)
            r64 = ref(x64, need_weights=True, need_logits=True)
            r16 = half(x16, need_weights=True, need_logits=True)
            record(label, g, r16.logits, r16.weights, r64.weights, r64.logits)
            if name == "inverse_sqrt" and cap is None:  # same weights, naive order
                q = half._split(half.q_proj(x16))  # (batch, heads, seq_len, d_k)
                k = half._split(half.k_proj(x16))  # (batch, heads, seq_len, d_k)
                logits16 = (q @ k.transpose(-2, -1)) * half.head_dim**-0.5  # (b, h, n, n)
                w16 = torch.softmax(logits16.float(), dim=-1)
                record(NAIVE, g, logits16, w16, r64.weights, r64.logits)

fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
plot_strategy_curves(
    GAINS,
    error,
    ax=ax,
    xlabel="weight scale $g$",
    ylabel="max |weight error| (fp16 vs fp64)",
    logy=True,
    hline=TOLERANCE,
)
ax.set_title("Float16 attention-weight error as W_q, W_k grow (1 = overflow)")

# %%
# ## Measured thresholds
#
# For each strategy: the first $g$ on the grid where some float16 weight is off by more than the
# tolerance, the largest float64 logit there, and the first $g$ where a float16 logit overflows.

# %%
print(f"tolerance on attention weights: {TOLERANCE}")
print(
    f"{'strategy':<32} {'g: error > tol':>14} {'max|l| there':>13} {'g: overflow':>12} "
    f"{'max|l| @ g=100':>15}"
)
for label in error:
    err = np.array(error[label])
    bad = np.nonzero(err > TOLERANCE)[0]
    g_err = f"{GAINS[bad[0]]:.2f}" if bad.size else "never"
    l_err = f"{max_logit[label][bad[0]]:.1f}" if bad.size else "-"
    g_ovf = f"{overflow[label]:.2f}" if label in overflow else "never"
    print(f"{label:<32} {g_err:>14} {l_err:>13} {g_ovf:>12} {max_logit[label][-1]:15.1f}")

# %%
# ## What the measurement says
#
# - **Resolution goes long before overflow.** Float16 keeps 11 significant bits, so a logit of
#   size $L$ carries an error of order $L \cdot 2^{-11}$, and the softmax turns an absolute logit
#   error $\delta$ into a relative weight error of about $\delta$. The printed largest logits where
#   the error first exceeds the tolerance are in the tens, far below 65504.
# - **Overflow** hits the unscaled logits first, and the naive order (scale after the product)
#   overflows at the same $g$ as no scaling at all, because the float16 product overflows before
#   the scale is applied. Scaling $q$ first (what the library does, and the fix in
#   transformers #28163) moves the overflow out by $d_k^{1/4}$ in $g$.
# - **QK-norm and cosine** keep the logits bounded, so their float16 error does not grow with $g$;
#   the soft-cap bounds the logits too, but its error still grows while its logits climb towards
#   the cap.
# - Which $g$ a real model reaches depends on training; the point is the order of events:
#   accuracy is lost at logits of tens, overflow needs tens of thousands.
#
# ## The math
#
# Float16 has a 10-bit mantissa: the spacing of representable numbers near $L$ is
# $2^{\lfloor \log_2 L \rfloor - 10}$, and the largest finite value is
# $(2 - 2^{-10}) \cdot 2^{15} = 65504$. With $W_q, W_k$ scaled by $g$, the raw product grows like
# $g^2$; pre-scaling by $1/\sqrt{d_k}$ divides the largest value by $\sqrt{d_k}$, which multiplies
# the overflow point in $g$ by $d_k^{1/4}$. See
# [scaled_dot_product_attention][attnscale.scaled_dot_product_attention].
#
# ## References
#
# - IEEE 754 binary16 format.
# - transformers #28163 and ultralytics #24990: NaN logits from float16 overflow of $QK^\top$.
# - Dehghani et al. 2023, arXiv:2302.05442 (logit growth in training).
