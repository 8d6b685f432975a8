r"""
# The temperature view: 1/√d_k is a choice of temperature

Dividing logits by a temperature $T$ moves the softmax between the argmax ($T \to 0$) and the
uniform distribution ($T \to \infty$). Scaled dot-product attention is the softmax of the raw
scores at $T = \sqrt{d_k}$; this example shows what that choice does to one row of scores.
"""

# %%
# ## Setup
#
# One query and $n$ keys with i.i.d. $\mathcal{N}(0, 1)$ components in $d_k$ dimensions give
# one row of raw scores $s_j = q \cdot k_j$. We look at $\mathrm{softmax}(s / T)$ for many $T$.

import math

import matplotlib.pyplot as plt
import torch

import attnscale
from attnscale import plot_probability_rows
from guide.figures import GREYS, vmarks
from guide.style import use_style

use_style()

SEED = 0
N = 16  # keys in the row
D_K = 64
ROWS = 2000  # rows for the average curve
TEMPERATURES = [10 ** (j / 20) for j in range(-40, 81)]  # 0.01 ... 10 000
SHOW_T = (0.5, 1.0, math.sqrt(D_K), 100.0)

gen = torch.Generator().manual_seed(SEED)
q = torch.randn(D_K, generator=gen)  # (d_k,)
keys = torch.randn(N, D_K, generator=gen)  # (n, d_k)
scores = keys @ q  # (n,), raw scores q . k_j
print(f"raw scores: std {scores.std():.2f} (sqrt(d_k) = {math.sqrt(D_K):.0f}),")
print(f"            range [{scores.min():.1f}, {scores.max():.1f}]")

# %%
# ## One row at four temperatures

rows = {f"T = {t:g}": attnscale.tempered_softmax(scores, t) for t in SHOW_T}
fig, ax = plt.subplots(figsize=(7, 3.2), layout="constrained")
plot_probability_rows(rows, ax=ax, xlabel="key $j$")
ax.set_title(
    f"$\\mathrm{{softmax}}(s / T)$ of one row of raw scores, $n = {N}$, $d_k = {D_K}$"
)
for t in SHOW_T:
    h = attnscale.softmax_entropy(scores, temperature=t).item()
    p_max = attnscale.max_probability(scores, temperature=t).item()
    print(f"T = {t:5g}: max p = {p_max:.3f}   entropy = {h:.3f} nats")

# %%
# At $T = 1$ (no scaling) the raw scores, whose spread is about $\sqrt{d_k}$, give a nearly
# one-hot row. At $T = \sqrt{d_k}$, the standard scale, several keys share the weight.
#
# ## The two limits
#
# [tempered_softmax][attnscale.tempered_softmax] shifts the logits by their maximum before
# dividing, so even tiny $T$ gives a clean argmax rather than overflow.

cold = attnscale.tempered_softmax(scores, 1e-6)
hot = attnscale.tempered_softmax(scores, 1e6)
one_hot = torch.nn.functional.one_hot(scores.argmax(), N).to(cold.dtype)
print(f"T = 1e-6: max |p - one_hot(argmax)| = {(cold - one_hot).abs().max():.1e}")
print(f"T = 1e+6: max |p - 1/n|             = {(hot - 1 / N).abs().max():.1e}")

# %%
# ## Scaled attention is temperature $\sqrt{d_k}$
#
# The softmax of the scaled scores and the softmax of the raw scores at $T = \sqrt{d_k}$ are
# the same thing; here they agree to the last bit (the printed difference is exactly zero).

scaled = torch.softmax(scores / math.sqrt(D_K), dim=-1)
tempered = attnscale.tempered_softmax(scores, math.sqrt(D_K))
gap = (scaled - tempered).abs().max().item()
print(f"max |softmax(s / sqrt(d_k)) - tempered_softmax(s, sqrt(d_k))| = {gap:.1e}")

# %%
# ## Entropy as a function of temperature
#
# The entropy of this row, and the mean over many independent rows, for every $T$ on a log
# grid. Dashed lines mark $T = 1$ (unscaled attention) and $T = \sqrt{d_k}$ (scaled).


def plot_entropy_vs_temperature(temperatures, entropies, *, log_n, marks, ax):
    """Entropy of softmax(z / T) against the temperature T, on a log axis."""
    for k, (label, h) in enumerate(entropies.items()):
        # statistics of one quantity: greys, never a strategy's colour
        ax.plot(
            temperatures,
            h.double().numpy(),
            color=GREYS[k % 2],
            linewidth=1.8,
            label=label,
        )
    ax.axhline(
        log_n, color="0.3", linestyle=":", linewidth=1, label="$\\log n$ (uniform)"
    )
    vmarks(ax, marks)
    ax.set_xscale("log")
    ax.set_xlabel("temperature $T$")
    ax.set_ylabel("entropy $H$ (nats)")
    ax.legend()


many_q = torch.randn(ROWS, 1, D_K, generator=gen)  # (rows, 1, d_k)
many_k = torch.randn(ROWS, N, D_K, generator=gen)  # (rows, n, d_k)
many_scores = (many_q * many_k).sum(dim=-1)  # (rows, n)
temps = torch.tensor(TEMPERATURES)  # (temps,)
# softmax(s / T) for every T in one batch: divide, then take entropies along the last
# dim.
h_row = attnscale.softmax_entropy(scores / temps[:, None])  # (temps,)
h_mean = attnscale.softmax_entropy(many_scores / temps[:, None, None]).mean(
    dim=-1
)  # (temps,)
fig, ax = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
plot_entropy_vs_temperature(
    TEMPERATURES,
    {"the row above": h_row, f"mean over {ROWS} rows": h_mean},
    log_n=math.log(N),
    marks={"$T = 1$, unscaled": 1.0, r"$T = \sqrt{d_k}$, scaled": math.sqrt(D_K)},
    ax=ax,
)
ax.set_title(
    "Entropy of $\\mathrm{softmax}(s / T)$ against temperature, "
    f"$n = {N}$, $d_k = {D_K}$"
)
for t in (1.0, math.sqrt(D_K)):
    h = (
        attnscale.softmax_entropy(many_scores, temperature=t, normalized=True)
        .mean()
        .item()
    )
    print(f"T = {t:4g}: mean normalised entropy over the rows = {h:.3f}")

# %%
# The entropy rises monotonically from 0 (argmax) to $\log n$ (uniform). The useful range,
# where attention is neither one-hot nor uniform, spans roughly a decade or two of $T$, and
# where it sits depends on the spread of the raw scores. The standard choice places the
# logits in that range for any $d_k$; $T = 1$ sits at its cold end for this $d_k$.
#
# ## The math
#
# With $\beta = 1/T$ and $p = \mathrm{softmax}(\beta s)$, the entropy is
# $H(\beta) = \log \sum_j e^{\beta s_j} - \beta\,\mathbb{E}_p[s]$ and
#
# $$
# \frac{dH}{d\beta} = -\beta\,\mathrm{Var}_p(s) \le 0,
# \qquad
# \frac{dH}{dT} = \frac{\mathrm{Var}_p(s)}{T^3} \ge 0 ,
# $$
#
# so the entropy can only grow with temperature (the test suite checks this as a property of
# [softmax_entropy][attnscale.softmax_entropy]). Dividing by $T$ divides the standard deviation
# of the logits by $T$. The raw scores have standard deviation about $\sqrt{d_k}$, so
# $T = \sqrt{d_k}$ is the temperature that brings them to about 1 for every $d_k$: the left side
# of the Jacobian peak in the previous example. Other choices are other temperatures:
#
# - $T = d_k$, the choice of μP (arXiv:2203.03466), which expects $q$ and $k$ to become
#   correlated during training, so that scores grow like $d_k$ rather than $\sqrt{d_k}$;
# - a learnable temperature, or cosine attention with a learnable logit scale (Swin
#   Transformer V2, arXiv:2111.09883), where training picks $T$ (attnscale's
#   [LearnableTemperature][attnscale.LearnableTemperature] learns the multiplier $1/T$, starting
#   at $1/\sqrt{d_k}$);
# - QK-LayerNorm (arXiv:2302.05442) fixes the norm of $q$ and $k$ and leaves the effective
#   temperature to the learned gains.
#
# ## References
#
# - Vaswani et al. 2017, *Attention Is All You Need*, arXiv:1706.03762, §3.2.1.
# - Yang et al. 2022, *Tensor Programs V*, arXiv:2203.03466.
# - Dehghani et al. 2023, *Scaling Vision Transformers to 22 Billion Parameters*,
#   arXiv:2302.05442.
# - Liu et al. 2022, *Swin Transformer V2: Scaling Up Capacity and Resolution*,
#   arXiv:2111.09883.
