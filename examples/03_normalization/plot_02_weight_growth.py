r"""
# Under weight growth: which strategies bound the logits?

During long or high-learning-rate training the query and key weights can grow, and the attention
logits grow with them. We multiply $W_q$ and $W_k$ by a factor $g$ from 1 to 100 and watch the
attention entropy of each score-scaling strategy. QK-norm (normalising $q$ and $k$ before their
product) and cosine attention keep the logits bounded; $1/\sqrt{d_k}$ alone does not.
"""

# %%
import math

import matplotlib.pyplot as plt
import numpy as np
import torch

import attnscale
from attnscale import plot_strategy_curves
from guide import style

style.use_style()

SEED = 0
D_MODEL = 256
NUM_HEADS = 4  # head dimension d_k = 64
SEQ_LEN = 64
BATCH = 4
GAINS = np.logspace(0, 2, 17)  # g from 1 to 100
THRESHOLD = 0.5  # "collapsed": mean normalised entropy below this
VARIANTS = {name: (name, None) for name in attnscale.SCALING_STRATEGIES}
VARIANTS["softcap_50"] = ("inverse_sqrt", 50.0)  # Gemma-2's cap on top of 1/sqrt(d_k)


# %%
# ## Entropy and largest logit against the weight scale $g$
#
# Multiplying both $W_q$ and $W_k$ by $g$ multiplies every raw logit $q\cdot k$ by $g^2$
# (biases aside). The left panel shows the mean attention entropy divided by $\ln n$, with the
# collapse threshold used below, the right one the largest logit magnitude. A wide, pale line
# is a strategy whose curve another one covers exactly: the learnable temperature starts at
# $1/\sqrt{d_k}$, and with gains of 1 QK-LayerNorm and QK-RMSNorm differ only by the mean they
# subtract.

# %%
torch.manual_seed(SEED)
x = torch.randn(BATCH, SEQ_LEN, D_MODEL)
n_g = len(GAINS)
gains = torch.tensor(GAINS, dtype=torch.float32).view(
    n_g, 1, 1, 1, 1
)  # (g, 1, 1, 1, 1)
entropy: dict[str, list[float]] = {}
max_logit: dict[str, list[float]] = {}
spread: dict[str, list[float]] = {}  # within-row logit std, mean over rows
with torch.no_grad():
    for label, (name, cap) in VARIANTS.items():
        torch.manual_seed(SEED)
        mha = attnscale.MultiHeadAttention(
            D_MODEL, NUM_HEADS, strategy=name, softcap=cap, bias=False
        )
        # Without biases, scaling W_q and W_k by g scales q and k by g exactly, so every
        # g runs in one batched call: the g values are stacked along the batch
        # dimension.
        q, k = mha.project_qk(x)  # (batch, heads, seq_len, d_k) each
        q_g = (gains * q).flatten(0, 1)  # (g * batch, heads, seq_len, d_k)
        k_g = (gains * k).flatten(0, 1)  # (g * batch, heads, seq_len, d_k)
        v = torch.zeros_like(k_g[..., :1])  # values do not affect the weights
        res = attnscale.scaled_dot_product_attention(
            q_g,
            k_g,
            v,
            strategy=mha.strategy,
            softcap=cap,
            need_weights=True,
            need_logits=True,
        )
        w = res.weights.view(n_g, BATCH, NUM_HEADS, SEQ_LEN, SEQ_LEN)  # (g, b, h, n, n)
        logits = res.logits.view(n_g, -1)  # (g, b * h * n * n)
        h = attnscale.softmax_entropy(
            res.logits, normalized=True
        )  # (g * batch, heads, n)
        entropy[label] = h.view(n_g, -1).mean(dim=1).tolist()
        max_logit[label] = logits.abs().amax(dim=1).tolist()
        row_std = res.logits.std(dim=-1, correction=0).view(n_g, -1)  # (g, rows)
        spread[label] = row_std.mean(dim=1).tolist()

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7, 4.2), layout="constrained")
plot_strategy_curves(
    GAINS,
    entropy,
    ax=ax1,
    xlabel="weight scale $g$",
    ylabel="entropy / ln n",
    hline=THRESHOLD,
    hline_label=f"collapse threshold {THRESHOLD:g}",
    **style.strategy_kwargs(),
    legend=False,
)
plot_strategy_curves(
    GAINS,
    max_logit,
    ax=ax2,
    xlabel="weight scale $g$",
    ylabel="max |logit|",
    logy=True,
    **style.strategy_kwargs(),
    legend=False,
)
# one legend for both panels, below them, clear of the curves
fig.legend(*ax1.get_legend_handles_labels(), loc="outside lower center", ncol=4)
fig.suptitle("Attention entropy and largest logit as $W_q$, $W_k$ grow, per strategy")

# %%
# ## Measured thresholds
#
# For each strategy: the weight scale at which the mean normalised entropy first falls below the
# threshold (interpolated on the log-$g$ grid), the entropy at $g = 10$ and $g = 100$, and the
# largest logit at $g = 100$.

# %%
print(f"collapse threshold: entropy / ln n < {THRESHOLD}")
# two tables of four columns: one table of seven is wider than the page's output box
print(
    f"{'strategy':<22} {'g at collapse':>14} {'spread @ g=1':>13} "
    f"{'spread @ collapse':>18}"
)
log_g = np.log(GAINS)
i10 = int(np.argmin(np.abs(GAINS - 10)))
at_collapse = {}
for label in VARIANTS:
    h = np.array(entropy[label])
    below = np.nonzero(h < THRESHOLD)[0]
    where = spread_text = "never"
    if below.size and below[0] == 0:
        where = spread_text = "< 1"
    elif below.size:
        j = below[
            0
        ]  # interpolate log g (and log spread) linearly in entropy, points j-1 and j
        t = (h[j - 1] - THRESHOLD) / (h[j - 1] - h[j])
        where = f"{math.exp(log_g[j - 1] + t * (log_g[j] - log_g[j - 1])):.1f}"
        log_s = np.log(spread[label])
        at_collapse[label] = math.exp(log_s[j - 1] + t * (log_s[j] - log_s[j - 1]))
        spread_text = f"{at_collapse[label]:.2f}"
    print(f"{label:<22} {where:>14} {spread[label][0]:13.3f} {spread_text:>18}")

# %%
print(f"{'strategy':<22} {'H @ g=10':>9} {'H @ g=100':>10} {'max|l| @100':>12}")
for label in VARIANTS:
    h = np.array(entropy[label])
    print(f"{label:<22} {h[i10]:9.3f} {h[-1]:10.3f} {max_logit[label][-1]:12.1f}")
values = list(at_collapse.values())
print(
    f"within-row logit spread at collapse, over the {len(values)} strategies that "
    f"collapse: "
    f"{min(values):.2f} to {max(values):.2f}"
)

# %%
# ## What the measurement says
#
# - **QK-norm (QK-LayerNorm, QK-RMSNorm) and cosine attention** are flat: normalising $q$ and
#   $k$ removes the scale of the *projection weights* from the logits (up to the norms'
#   $\epsilon$), so their entropy and largest logit do not move with $g$. The logits are still
#   bounded only in terms of parameters that training can change: $|\ell| \le \sqrt{d_k}$ times
#   the learned gains (plus biases) for QK-norm, and $|\ell| \le s$ for cosine, whose learnable
#   scale $s$ Swin V2 clamps at 100. Here the gains and $s$ stay at their initial values; in
#   training they move (the high-learning-rate page shows QK-LayerNorm's largest logit passing
#   the bound of its initial gains).
# - **No scaling, $1/\sqrt{d_k}$, the learnable temperature and T5's folded init** collapse: their
#   logits grow like $g^2$ and the attention becomes one-hot. A constant factor cannot bound a
#   product that grows without limit; the learnable temperature's multiplier ($1/T$) would have
#   to shrink as fast as the weights grow.
# - **The $g$ at collapse compares strategies that start from different spreads** (with
#   `nn.Linear`'s default initialisation, $1/\sqrt{d_k}$ starts near 1/3 and $1/d_k$ another
#   $\sqrt{d_k}$ below: the "spread @ g=1" column). In units of spread, the strategies that
#   collapse do so at similar within-row spreads (the last printed line gives the range):
#   dividing by more only moves where on the $g$ axis that spread is reached. $1/d_k$ postpones
#   the collapse; it does not prevent it.
# - **The soft-cap** bounds the logits (the printed maximum is at most 50: the largest logits
#   approach the cap), but a bound of 50 is far beyond what a softmax needs to become
#   one-hot: a gap of 10 between two logits already gives a ratio of $e^{10}$. The entropy
#   dips first, then partly recovers at the largest $g$, where most logits saturate at
#   $\pm c$ and attention spreads evenly over the keys with saturated positive logits. A cap
#   bounds the logits, not the entropy.
#
# ## The math: why QK-norm is immune to weight growth
#
# With $W_q \to g W_q$, $W_k \to g W_k$ and no biases, $q \to g q$ and $k \to g k$, so
# $\alpha\, q\cdot k \to g^2 \alpha\, q\cdot k$ for every fixed $\alpha$. LayerNorm, RMSNorm and
# the L2 normalisation are invariant to positive rescaling of their input, so
# $\mathrm{LN}(g q) = \mathrm{LN}(q)$ up to $\epsilon$. Soft-capping maps the logits into
# $(-c, c)$, so the weights obey $p_{\max}/p_{\min} < e^{2c}$ — for $c = 50$ that allows
# near-one-hot rows. Zhai et al. (2023) show the entropy lower bound falls exponentially with the
# spectral norm of the logit matrix, which is what growth in $g$ does. See
# [MultiHeadAttention][attnscale.MultiHeadAttention] and [soft_cap][attnscale.soft_cap].
#
# ## References
#
# - Dehghani et al. 2023, ViT-22B, arXiv:2302.05442 (attention logit growth, QK LayerNorm).
# - Wortsman et al. 2023, arXiv:2309.14322 (logit growth in small models at high learning rate).
# - Zhai et al. 2023, σReparam, arXiv:2303.06296 (entropy collapse).
# - Henry et al. 2020, QKNorm, arXiv:2010.04245; Liu et al. 2022, Swin V2, arXiv:2111.09883.
# - Gemma Team 2024, Gemma 2, arXiv:2408.00118 (logit soft-capping).
