r"""
# Every strategy at initialisation, as d_k grows

Queries and keys come from unit-variance inputs through freshly initialised projections. For each
score-scaling strategy we measure the spread of the attention logits and how peaked the attention
is as the head dimension $d_k$ grows from 16 to 4096.
"""

# %%

import matplotlib.pyplot as plt
import torch

import attnscale
from attnscale import plot_strategy_curves
from guide import style

style.use_style()

SEED = 0
D_MODEL = (
    64  # input width; default-init projections give Var(q_i) of about 1/3 for any width
)
SEQ_LEN = 64  # tokens per sequence (keys per attention row)
BATCH = 2
D_KS = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
# Each strategy of the library, plus Gemma-2's tanh soft-cap (cap 50) on top of
# 1/sqrt(d_k).
VARIANTS = {name: (name, None) for name in attnscale.SCALING_STRATEGIES}
VARIANTS["softcap_50"] = ("inverse_sqrt", 50.0)


# %%
# ## Logit spread and attention entropy against $d_k$
#
# The left panel shows the standard deviation of the logits, the right one the mean attention
# entropy divided by its maximum $\ln n$ (1 means uniform attention over the $n$ keys, 0 one-hot).
# Some strategies give the same or nearly the same logits at initialisation, so their curves
# lie on top of each other and the figure shows fewer lines than the legend has entries: the
# groups are printed below the figure.

# %%
torch.manual_seed(SEED)
x = torch.randn(BATCH, SEQ_LEN, D_MODEL)  # unit-variance inputs
logit_std: dict[str, list[float]] = {v: [] for v in VARIANTS}
entropy: dict[str, list[float]] = {v: [] for v in VARIANTS}
with torch.no_grad():
    for d_k in D_KS:
        for label, (name, cap) in VARIANTS.items():
            torch.manual_seed(SEED)
            mha = attnscale.MultiHeadAttention(
                D_MODEL, 1, head_dim=d_k, strategy=name, softcap=cap
            )
            # Only the logits matter here, so skip the value and output projections.
            q = mha.q_proj(x).unsqueeze(1)  # (batch, 1 head, seq_len, d_k)
            k = mha.k_proj(x).unsqueeze(1)  # (batch, 1 head, seq_len, d_k)
            v = torch.zeros(BATCH, 1, SEQ_LEN, 1)  # (batch, 1 head, seq_len, 1)
            res = attnscale.scaled_dot_product_attention(
                q,
                k,
                v,
                strategy=mha.strategy,
                softcap=cap,
                need_weights=True,
                need_logits=True,
            )
            # within-row std, as defined on the metrics reference page
            logit_std[label].append(
                float(res.logits.var(-1, correction=0).mean().sqrt())
            )
            entropy[label].append(
                attnscale.softmax_entropy(res.logits, normalized=True).mean().item()
            )

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7, 4.2), layout="constrained")
plot_strategy_curves(
    D_KS,
    logit_std,
    ax=ax1,
    xlabel="$d_k$ (head dimension)",
    ylabel="logit std",
    logy=True,
    **style.strategy_kwargs(),
    legend=False,
)
plot_strategy_curves(
    D_KS,
    entropy,
    ax=ax2,
    xlabel="$d_k$ (head dimension)",
    ylabel="entropy / ln n",
    **style.strategy_kwargs(),
    legend=False,
)
# one legend for both panels, below them, clear of the curves
fig.legend(*ax1.get_legend_handles_labels(), loc="outside lower center", ncol=4)
fig.suptitle("Logit spread and attention entropy at initialisation, per strategy")

# Curves that coincide at this figure's scale: within 10% of each other at every d_k, in
# both panels (the largest gap in each group is printed).
TOUCH = 0.1
names = style.text_labels(VARIANTS)


def gap(a: str, b: str) -> float:
    """Largest relative difference of two strategies' curves, over both panels."""
    return max(
        abs(x - y) / abs(y)
        for series in (logit_std, entropy)
        for x, y in zip(series[a], series[b], strict=True)
    )


groups: list[list[str]] = []
for label in VARIANTS:
    home = next((g for g in groups if all(gap(label, m) <= TOUCH for m in g)), None)
    if home is None:
        groups.append([label])
    else:
        home.append(label)
print(
    f"{len(VARIANTS)} legend entries, {len(groups)} visibly distinct curves; on top of "
    f"each other:"
)
for group in (g for g in groups if len(g) > 1):
    largest = max(gap(a, b) for a in group for b in group if a != b)
    print(f"  {', '.join(names[m] for m in group)} (largest gap {largest:.1%})")

# %%
# ## The numbers
#
# The table gives the logit standard deviation at the smallest and largest $d_k$ and their
# ratio: a ratio near 1 means the strategy keeps the distribution stable as heads get wider.

# %%
print(
    f"{'strategy':<22} {'std @16':>9} {'std @4096':>10} {'ratio':>8} "
    f"{'H/ln n @16':>11} {'H/ln n @4096':>13}"
)
for label in VARIANTS:
    s, h = logit_std[label], entropy[label]
    print(
        f"{label:<22} {s[0]:9.3f} {s[-1]:10.3f} {s[-1] / s[0]:8.2f} {h[0]:11.3f} "
        f"{h[-1]:13.3f}"
    )

# %%
# ## What the measurement says
#
# - **No scaling** lets the logit spread grow like $\sqrt{d_k}$ (the printed ratio is somewhat
#   below $\sqrt{4096/16} = 16$, the factor for growth exactly like $\sqrt{d_k}$), and the
#   attention sharpens toward one-hot.
# - **$1/\sqrt{d_k}$**, the learnable temperature (which starts there) and the soft-cap (inactive
#   at these small logits) keep the spread constant, but not at 1: with PyTorch's default
#   `nn.Linear` init, $\mathrm{Var}(q_i) = \mathrm{Var}(k_i) = 1/3$, so the logit standard
#   deviation sits near $1/3$ and attention starts close to uniform.
# - **QK-LayerNorm and QK-RMSNorm** normalise $q$ and $k$ to unit variance per component before
#   scaling, so the spread is near 1 at every $d_k$, whatever the projection init.
# - **T5's folded init** also gives a spread near 1, from its initial weights alone.
# - **$1/d_k$ (μP)** and **cosine attention** shrink the logits as $d_k$ grows: $1/d_k$ because
#   independent $q, k$ give $q\cdot k \sim \sqrt{d_k}$, cosine because the cosine of two random
#   directions has standard deviation $1/\sqrt{d_k}$ and the learnable scale starts at 10. At
#   large $d_k$ both start from nearly uniform attention; the learnable scale of cosine
#   attention (and, for μP, the correlation that training builds between $q$ and $k$) must
#   supply the sharpness.
#
# ## The math
#
# For independent components with $\mathrm{Var}(q_i) = \sigma_q^2$ and $\mathrm{Var}(k_i) =
# \sigma_k^2$, $\mathrm{Var}(\alpha\, q\cdot k) = \alpha^2 d_k \sigma_q^2 \sigma_k^2$: constant in
# $d_k$ exactly when $\alpha \propto 1/\sqrt{d_k}$. For cosine attention,
# $\cos(q, k) \approx q\cdot k / (d_k \sigma_q \sigma_k)$, so its standard deviation is
# $1/\sqrt{d_k}$ and the logits $s\cos(q, k)$ have standard deviation $s/\sqrt{d_k}$.
# See [scaled_dot_product_attention][attnscale.scaled_dot_product_attention] and
# [MultiHeadAttention][attnscale.MultiHeadAttention].
#
# ## References
#
# - Vaswani et al. 2017, arXiv:1706.03762, §3.2.1 (the $1/\sqrt{d_k}$ argument).
# - Yang et al. 2022, Tensor Programs V, arXiv:2203.03466 ($1/d_k$).
# - Liu et al. 2022, Swin Transformer V2, arXiv:2111.09883 (scaled cosine attention).
# - Dehghani et al. 2023, arXiv:2302.05442 (QK LayerNorm).
# - Raffel et al. 2020, arXiv:1910.10683 (T5).
