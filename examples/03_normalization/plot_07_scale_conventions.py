r"""
# Scale conventions beyond one head size: GQA, MLA and μP

$1/\sqrt{d_k}$ names one number, the length of the vectors whose dot product is the logit. Three
designs in wide use make that number less obvious: grouped-query attention shares keys between
heads, DeepSeek's multi-head latent attention (MLA) computes the same logits over two
different lengths, and μP divides by $d_k$ instead of $\sqrt{d_k}$. This page measures which
length each scale must use, and what the choice does as models grow.
"""

# %%
# ## Setup

import math

import matplotlib.pyplot as plt
import torch

import attnscale
from guide import figures, style

style.use_style()

SEED = 0
gen = torch.Generator().manual_seed(SEED)

# %%
# ## Grouped-query attention: the scale of one head
#
# In grouped-query attention (GQA) several query heads read the same key head. Each logit is
# still one query against one key over $d_{head}$ components, so the variance of the logits,
# and the scale, do not depend on how many heads share a key. Measured for unit-variance
# components at $d_{head} = 128$ with 1, 4 and 8 query heads per key head:

D_HEAD, KV_HEADS, LENGTH = 128, 2, 256
k = torch.randn(1, KV_HEADS, LENGTH, D_HEAD, generator=gen)
for group in (1, 4, 8):
    q = torch.randn(1, KV_HEADS * group, LENGTH, D_HEAD, generator=gen)
    logits = q @ k.repeat_interleave(group, dim=1).transpose(-2, -1) / math.sqrt(D_HEAD)
    print(f"{group} query heads per key head: logit variance {logits.var():.3f}")

# %%
# ## MLA: one logit, two lengths
#
# MLA stores a compressed latent $c$ (512 numbers per token in DeepSeek-V2 and V3; DeepSeek-AI
# 2024, arXiv:2405.04434 and arXiv:2412.19437) and expands it into each head's key,
# $k^{C} = W^{UK} c$, of 128 components; a further 64 components carry the rotary position,
# $q^{R} \cdot k^{R}$. The logit is a dot product over $128 + 64 = 192$ components. At
# inference the expansion is *absorbed* into the query,
# $q^{C} \cdot W^{UK} c = (W^{UK\top} q^{C}) \cdot c$, and the same logit is computed as a dot
# product over $512 + 64 = 576$ components. The scale belongs to the 192, not to the 576:
# DeepSeek's code uses $1/\sqrt{192}$ (times YaRN's $m^2$ for extended contexts, with
# $m = 0.1 \ln r + 1$ for an extension by $r$), and a public port that used $1/\sqrt{576}$ shrank
# every logit by $\sqrt{3}$. Built here from random tensors, with $W^{UK}$ scaled so that
# queries, keys and their components have unit variance:

HEADS, NOPE, ROPE, LATENT = 4, 128, 64, 512
q_c = torch.randn(1, HEADS, LENGTH, NOPE, generator=gen, dtype=torch.float64)
q_r = torch.randn(1, HEADS, LENGTH, ROPE, generator=gen, dtype=torch.float64)
latent = torch.randn(
    1, 1, LENGTH, LATENT, generator=gen, dtype=torch.float64
)  # shared by heads
k_r = torch.randn(
    1, 1, LENGTH, ROPE, generator=gen, dtype=torch.float64
)  # shared by heads
w_uk = torch.randn(HEADS, NOPE, LATENT, generator=gen, dtype=torch.float64) / math.sqrt(
    LATENT
)

k_c = latent @ w_uk.transpose(-2, -1)  # (1, heads, L, 128): the expanded keys
expanded = q_c @ k_c.transpose(-2, -1) + q_r @ k_r.transpose(
    -2, -1
)  # over 192 components
q_absorbed = q_c @ w_uk  # (1, heads, L, 512)
absorbed = q_absorbed @ latent.transpose(-2, -1) + q_r @ k_r.transpose(
    -2, -1
)  # over 576
print(
    f"expanded vs absorbed logits: largest difference "
    f"{(expanded - absorbed).abs().max():.1e}"
)
print(
    f"variance of the raw logits: {expanded.var():.1f} (192 components of unit "
    f"variance)"
)
for name, dims in (
    ("1/sqrt(192), the components of q.k", 192),
    ("1/sqrt(576), the port", 576),
):
    print(f"scaled by {name:<36} logit std {(expanded / math.sqrt(dims)).std():.3f}")
factor = 40  # the context extension of DeepSeek-V3's published configuration
m = 0.1 * math.log(factor) + 1
print(
    f"YaRN at r = {factor}: m = {m:.3f}, DeepSeek's scale m^2 / sqrt(192) = "
    f"{m**2 / math.sqrt(192):.4f}"
)

# %%
# ## μP: $1/d_k$, and what it is for
#
# μP (Yang et al. 2022) divides by $d_k$. At initialisation, with independent unit-variance
# components, that makes the logit spread $1/\sqrt{d_k}$: attention starts almost uniform, and
# more so in wider models. The argument for it is about *trained* heads. Training aligns a
# query with the keys it should attend to; write $\rho$ for the correlation between the
# components of a query and of its matching key. The matching logit then has mean
# $\rho\, d_k$ before scaling (a sum of $d_k$ terms of mean $\rho$), and every other key's logit
# has mean 0 and spread $\sqrt{d_k}$. Divided by $\sqrt{d_k}$, the matching key's advantage
# grows as $\rho \sqrt{d_k}$, so the same learned alignment gives sharper attention in a wider
# model; divided by $d_k$, it stays $\rho$, and the attention pattern carries over from a
# narrow model to a wide one, which is what lets μP transfer a learning rate across widths.
#
# Measured: one query against 64 keys, one of which is correlated with it at $\rho$, for head
# sizes 32 to 4096; the metric is the mean weight on the matching key over 2000 rows. The
# sampling uses the exact distribution of the dot products given the query's squared norm
# (no $d_k$-dimensional vectors are formed): the other keys' products are
# $\mathcal{N}(0, \lVert q\rVert^2)$, the matching key's
# $\rho \lVert q\rVert^2 + \sqrt{1 - \rho^2}\,\mathcal{N}(0, \lVert q\rVert^2)$.

HEAD_SIZES = [
    2**e for e in range(5, 13)
]  # 32 ... 4096 (the table prints every other one)
RHOS = [0.05, 0.2, 0.5]
KEYS, ROWS = 64, 2000


def matching_weight(d_k: int, rho: float, scale: float) -> float:
    """Mean softmax weight on the key correlated with the query at rho."""
    norm2 = (
        torch.distributions.Chi2(float(d_k)).sample((ROWS, 1)).double()
    )  # |q|^2 per row
    noise = torch.randn(ROWS, KEYS, generator=gen, dtype=torch.float64) * norm2.sqrt()
    dots = noise.clone()
    dots[:, 0] = (
        rho * norm2[:, 0] + math.sqrt(1 - rho**2) * noise[:, 0]
    )  # key 0 matches
    return torch.softmax(scale * dots, dim=-1)[:, 0].mean().item()


print("logit std at initialisation (independent unit-variance components):")
for d in HEAD_SIZES[::2]:
    spreads = [
        attnscale.scaled_dot_product_moments(d, scale=scale).variance ** 0.5
        for scale in (d**-0.5, 1 / d)
    ]
    print(f"  d_k = {d:4d}: 1/sqrt(d_k) {spreads[0]:.3f}, 1/d_k {spreads[1]:.3f}")

torch.manual_seed(SEED)  # the chi-square draws
weights = {
    (rule, rho): [
        matching_weight(d, rho, d**-0.5 if rule == "1/sqrt(d_k)" else 1 / d)
        for d in HEAD_SIZES
    ]
    for rule in ("1/sqrt(d_k)", "1/d_k")
    for rho in RHOS
}
shown = range(0, len(HEAD_SIZES), 2)
print("mean weight on the matching key, at head size d_k =")
print(f"{'rule':<12} {'rho':>5} " + "".join(f"{HEAD_SIZES[i]:>8}" for i in shown))
for (rule, rho), values in weights.items():
    print(f"{rule:<12} {rho:>5g} " + "".join(f"{values[i]:>8.3f}" for i in shown))

fig, ax = plt.subplots(figsize=(7.5, 4.6), layout="constrained")
RULES = {"1/sqrt(d_k)": ("$1/\\sqrt{d_k}$", "-", "o"), "1/d_k": ("$1/d_k$", "--", "s")}
for k_rho, rho in enumerate(RHOS):
    for rule, (name, linestyle, marker) in RULES.items():
        ax.plot(
            HEAD_SIZES,
            weights[(rule, rho)],
            color=figures.ordered_colour(k_rho, len(RHOS)),
            linestyle=linestyle,
            marker=marker,
            label=f"{name}, $\\rho$ = {rho:g}",
        )
ax.axhline(
    1 / KEYS, color="0.45", linestyle=":", linewidth=1, label=f"uniform, 1/{KEYS}"
)
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("head size $d_k$")
ax.set_ylabel("mean weight on the matching key")
ax.set_title(
    f"One matching key among {KEYS}: what the same alignment does as heads grow"
)
figures.one_legend(fig, ncols=3)

# %%
# ## What the measurement says
#
# - **GQA** uses the head size like any other attention: the variance printed above does not
#   move with the number of heads sharing a key.
# - **MLA's** absorbed form computes exactly the expanded form's logits (the difference is
#   rounding), whose spread is set by the 192 components of the dot product; dividing by
#   $\sqrt{576}$ shrinks every logit by $\sqrt{3}$. A monitor that reads the absorbed product's
#   length will see a scale that looks $\sqrt{3}$ too large; declare it (the monitor's
#   `expected_scale`).
# - **μP's $1/d_k$** is a different bet, not a mistake. At initialisation its logit spread is
#   $1/\sqrt{d_k}$ (printed above), so attention starts closer to uniform the wider the head.
#   With a fixed alignment, the weight on the matching key rises towards 1 with the head size
#   under $1/\sqrt{d_k}$ and stays flat under $1/d_k$ (the ratios printed below): under $1/d_k$,
#   a head's pattern depends on what it learned, not on how wide the model is. The weights are
#   small under $1/d_k$ at these $\rho$; a μP model learns larger alignments, at every width
#   alike.

for rho in RHOS:
    for rule in ("1/sqrt(d_k)", "1/d_k"):
        values = weights[(rule, rho)]
        print(
            f"rho {rho:g}, {rule:<11}: {values[0]:.3f} at d_k = {HEAD_SIZES[0]}, "
            f"{values[-1]:.3f} at {HEAD_SIZES[-1]} ({values[-1] / values[0]:.2f} times)"
        )

# %%
# ## References
#
# - Ainslie et al. 2023, *GQA: Training Generalized Multi-Query Transformer Models from
#   Multi-Head Checkpoints*, arXiv:2305.13245.
# - DeepSeek-AI 2024, *DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts
#   Language Model*, arXiv:2405.04434 (multi-head latent attention).
# - DeepSeek-AI 2024, *DeepSeek-V3 Technical Report*, arXiv:2412.19437 (the same MLA
#   dimensions; the YaRN extension factor used above is its published configuration's).
# - Peng et al. 2023, *YaRN*, arXiv:2309.00071.
# - Yang et al. 2022, *Tensor Programs V*, arXiv:2203.03466 (μP, the $1/d$ attention scale).
