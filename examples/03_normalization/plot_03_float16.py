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
from guide import figures, style

style.use_style()

SEED = 0
D_MODEL = 256
NUM_HEADS = 2  # head dimension d_k = 128
SEQ_LEN = 64
BATCH = 1
GAINS = np.logspace(0, 2, 17)  # weight scale g from 1 to 100
TOLERANCE = 0.01  # "resolution lost": some attention weight off by more than this
FP16_MAX = float(torch.finfo(torch.float16).max)
VARIANTS = {name: (name, None) for name in attnscale.SCALING_STRATEGIES}
VARIANTS["softcap_50"] = ("inverse_sqrt", 50.0)
NAIVE = (
    "inverse_sqrt after fp16 QKᵀ"  # the bug class: scale applied to the fp16 product
)

# %%
# ## Where float16 loses accuracy, and where it overflows
#
# For each strategy, $W_q$ and $W_k$ are multiplied by $g$ (from 1 to 100), the attention is
# computed in float16 and compared with float64. Two thresholds per strategy: the first $g$ at
# which some attention weight is off by more than the tolerance, and the first $g$ at which a
# float16 logit or weight is not finite. The extra row computes $q k^\top$ in float16 first
# and multiplies by $1/\sqrt{d_k}$ afterwards, the order that overflows in several real code
# bases; the library scales $q$ first.

# %%
print(
    f"float16 max = {FP16_MAX:.0f}, machine epsilon = "
    f"{torch.finfo(torch.float16).eps:.2e}"
)
torch.manual_seed(SEED)
x64 = torch.randn(BATCH, SEQ_LEN, D_MODEL, dtype=torch.float64)
x16 = x64.half()
n_g = len(GAINS)
gains = torch.tensor(GAINS, dtype=torch.float64).view(n_g, 1, 1)  # (g, 1, 1)
error: dict[str, list[float]] = {}
overflow: dict[str, float] = {}  # first g with a non-finite float16 logit or weight
max_logit: dict[str, list[float]] = {}


def per_head(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Project x with one stacked weight per g and split heads."""
    y = x @ w.unsqueeze(1).transpose(-2, -1)  # (g, batch, seq_len, heads * d_k)
    y = y.view(n_g, BATCH, SEQ_LEN, NUM_HEADS, -1)  # (g, batch, seq_len, heads, d_k)
    return y.transpose(2, 3).flatten(0, 1)  # (g * batch, heads, seq_len, d_k)


def record(
    label: str, logits16: torch.Tensor, w16: torch.Tensor, ref: torch.Tensor
) -> None:
    logits16 = logits16.view(n_g, -1)  # (g, everything else)
    err = (w16.double() - ref.weights).abs().view(n_g, -1).amax(dim=1)  # (g,)
    finite = torch.isfinite(logits16).all(dim=1) & torch.isfinite(err)  # (g,)
    error[label] = torch.where(finite, err, 1.0).tolist()
    if not finite.all():
        overflow[label] = float(GAINS[int(torch.nonzero(~finite)[0])])
    max_logit[label] = ref.logits.abs().view(n_g, -1).amax(dim=1).tolist()


with torch.no_grad():
    for label, (name, cap) in VARIANTS.items():
        torch.manual_seed(SEED)
        mha = attnscale.MultiHeadAttention(
            D_MODEL, NUM_HEADS, strategy=name, softcap=cap, bias=False
        ).double()
        # One stacked copy of W_q and W_k per g, rounded to float16 like a float16
        # model's.
        w_q, w_k = gains * mha.q_proj.weight, gains * mha.k_proj.weight  # (g, out, in)
        q64, k64 = per_head(w_q, x64), per_head(w_k, x64)
        q16, k16 = per_head(w_q.half(), x16), per_head(w_k.half(), x16)
        v64, v16 = torch.zeros_like(k64[..., :1]), torch.zeros_like(k16[..., :1])
        strategy16 = copy.deepcopy(mha.strategy).half()
        kwargs = {"softcap": cap, "need_weights": True, "need_logits": True}
        ref = attnscale.scaled_dot_product_attention(
            q64, k64, v64, strategy=mha.strategy, **kwargs
        )
        r16 = attnscale.scaled_dot_product_attention(
            q16, k16, v16, strategy=strategy16, **kwargs
        )
        record(label, r16.logits, r16.weights, ref)
        if (
            label == "inverse_sqrt"
        ):  # same weights, the naive order: fp16 product, then scale
            logits16 = (
                q16 @ k16.transpose(-2, -1)
            ) * mha.head_dim**-0.5  # (g*b, h, n, n)
            record(NAIVE, logits16, torch.softmax(logits16.float(), dim=-1), ref)

names = style.labels(error) | {NAIVE: r"$1/\sqrt{d_k}$ after the fp16 $QK^\top$"}
first_bad = {
    label: np.nonzero(np.array(error[label]) > TOLERANCE)[0] for label in error
}
thresholds = {
    names.get(label, label): {
        f"a weight off by more than {TOLERANCE}": (
            float(GAINS[first_bad[label][0]]) if first_bad[label].size else None
        ),
        "a logit or weight not finite": overflow.get(label),
    }
    for label in error
}
fig, ax = plt.subplots(figsize=(7, 4.2), layout="constrained")
figures.plot_threshold_dots(
    thresholds,
    xlim=(float(GAINS[0]), float(GAINS[-1])),
    ax=ax,
    xlabel="weight scale $g$",
)
ax.set_title("First weight scale $g$ at which float16 attention goes wrong")
ax.set_ylabel("scaling strategy")
fig.legend(loc="outside lower center", ncols=2, fontsize=8)

# %%
# ## Measured thresholds
#
# For each strategy: the first $g$ on the grid where some float16 weight is off by more than the
# tolerance, the largest absolute value of a float64 logit there, and the first $g$ where a
# float16 logit or weight is not finite (the overflow column).

# %%
print(f"tolerance on attention weights: {TOLERANCE}")
print(
    f"{'strategy':<28} {'g: error > tol':>14} {'max|l| there':>13} {'g: overflow':>12} "
    f"{'max|l| @ g=100':>15}"
)
lost_at = []  # the largest logit where each strategy first passes the tolerance
for label in error:
    err = np.array(error[label])
    bad = np.nonzero(err > TOLERANCE)[0]
    if bad.size:
        lost_at.append(max_logit[label][bad[0]])
    g_err = f"{GAINS[bad[0]]:.2f}" if bad.size else "never"
    l_err = f"{max_logit[label][bad[0]]:.1f}" if bad.size else "-"
    g_ovf = f"{overflow[label]:.2f}" if label in overflow else "never"
    print(
        f"{label:<28} {g_err:>14} {l_err:>13} {g_ovf:>12} {max_logit[label][-1]:15.1f}"
    )
print(
    f"resolution lost at largest logits {min(lost_at):.0f} to {max(lost_at):.0f}, "
    f"{FP16_MAX / max(lost_at):.0f} to {FP16_MAX / min(lost_at):.0f} times below the "
    f"float16 maximum"
)

# %%
# ## What the measurement says
#
# - **Resolution goes long before overflow.** Float16 keeps 11 significant bits, so a logit of
#   size $L$ carries an error of order $L \cdot 2^{-11}$, and the softmax turns an absolute logit
#   error $\delta$ into a relative weight error of about $\delta$. The last printed line gives
#   the range of the largest logits at which the error first exceeds the tolerance, and how far
#   below the float16 maximum they are.
# - **Overflow** hits the unscaled logits first, and the naive order (scale after the product)
#   overflows at the same $g$ as no scaling at all, because the float16 product overflows before
#   the scale is applied. Scaling $q$ first (what the library does, and the fix in
#   ultralytics #24990) moves the overflow out by $d_k^{1/4}$ in $g$, beyond the range
#   measured here; transformers #28163 instead upcasts $q$ and $k$ to float32 before the
#   product.
# - **QK-norm and cosine** keep the logits bounded, so their float16 error does not grow with $g$;
#   the soft-cap never overflows, and whether its capped logits lose resolution depends on how
#   close to the cap they get (see its printed row).
# - Which $g$ a real model reaches depends on training; the point is the order of events:
#   accuracy is lost at the printed logits, far below the float16 maximum that overflow needs.
# - **All of this is about code that stores the logits in float16**: eager attention written as
#   `softmax(q @ k.T * scale)` in half precision, as measured here. Fused attention kernels
#   (FlashAttention, the flash and memory-efficient backends of PyTorch's SDPA) accumulate
#   $QK^\top$ in float32 and round only the probabilities to half precision before multiplying by
#   $V$, so inside them neither the logits' resolution nor their overflow is limited by float16.
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
