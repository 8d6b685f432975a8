r"""
# Shift versus scale: what actually sharpens a softmax

Adding a constant to every logit leaves the softmax unchanged; multiplying the logits sharpens
it. This example runs the source article's three "cases", finds them identical, and then shows
the demonstration it should have used.
"""

# %%
# ## Setup
#
# The article's three logit vectors have the same gaps between entries ($0.5$ and $1$) and
# differ only by an added constant. The scale factors below multiply one of them instead.

import matplotlib.pyplot as plt
import torch

import attnscale
from attnscale import plot_probability_rows
from guide.style import use_style

use_style()

CASES = {
    "case 1: [1, 0.5, -0.5]": [1.0, 0.5, -0.5],
    "case 2: [10, 9.5, 8.5]": [10.0, 9.5, 8.5],
    "case 3: [100, 99.5, 98.5]": [100.0, 99.5, 98.5],
}
FACTORS = [1, 2, 3, 10, 100]
BASE = [1.0, 0.5, -0.5]

# %%
# ## The article's three cases
#
# The article claims that case 2 is much sharper than case 1 and that case 3 is nearly
# one-hot. Run them.

shifted = {}
for label, values in CASES.items():
    z = torch.tensor(values, dtype=torch.float64)
    p = attnscale.tempered_softmax(z)
    h = attnscale.softmax_entropy(z).item()
    shifted[label] = p
    print(
        f"{label:28s} softmax = {[round(x, 4) for x in p.tolist()]}  entropy = {h:.4f} "
        f"nats"
    )

spread = max(
    (p - shifted["case 1: [1, 0.5, -0.5]"]).abs().max().item() for p in shifted.values()
)
print(f"largest difference between the three outputs: {spread:.1e}")
print(
    f"maximum possible entropy for n = 3, log 3 = "
    f"{torch.log(torch.tensor(3.0)).item():.4f}"
)

# %%
# The three outputs agree to the last bit (the printed largest difference), and so do their
# entropies. **The article's claim is wrong**: case 2 and case 3 are not sharper than case 1.
# Its quoted outputs for case 1 and case 2 are not what the softmax returns.
#
# ## Scaling, not shifting, sharpens the softmax
#
# Multiply the logits of case 1 by a factor $\beta$ instead. This is what a growing $d_k$
# does to unscaled scores: it stretches the gaps between them.

scaled = {}
for beta in FACTORS:
    z = beta * torch.tensor(BASE, dtype=torch.float64)
    p = attnscale.tempered_softmax(z)
    h = attnscale.softmax_entropy(z).item()
    scaled[f"×{beta}"] = p
    probs = ", ".join(f"{x:.3g}" for x in p.tolist())
    print(f"β = {beta:3d}: softmax = [{probs}]  entropy = {h:.4f} nats")

fig, (ax_shift, ax_scale) = plt.subplots(
    1, 2, figsize=(7, 3.2), layout="constrained", sharey=True
)
plot_probability_rows(shifted, ax=ax_shift)
ax_shift.set_title("Adding a constant: identical outputs")
plot_probability_rows(scaled, ax=ax_scale)
ax_scale.set_title("Multiplying by β: sharper and sharper")
ax_scale.set_ylabel("")
fig.suptitle(
    "Softmax of the article's three shifted cases (left) and of [1, 0.5, -0.5] × β"
)

# %%
# The entropy falls as $\beta$ grows, from the printed value at $\beta = 1$ to almost 0 at
# $\beta = 100$, where it prints as 0 to four decimals. The output there is nearly one-hot:
# the largest weight prints as 1, and the other two are tiny but not zero.
#
# ## Why: softmax ignores a shift
#
# For any constant $c$,
#
# $$
# \mathrm{softmax}(z + c)_i = \frac{e^{z_i + c}}{\sum_j e^{z_j + c}}
#   = \frac{e^{c}\, e^{z_i}}{e^{c} \sum_j e^{z_j}} = \mathrm{softmax}(z)_i .
# $$
#
# Only the differences $z_i - z_j$ matter. Every numerically stable softmax uses this: it
# subtracts the row maximum before exponentiating, which is why case 3 does not overflow.
# Multiplying by $\beta$ multiplies every difference, so
# $p_i / p_j = e^{\beta (z_i - z_j)}$ grows without bound and the softmax tends to the argmax.
# The entropy $H(\beta) = -\sum_i p_i \log p_i$ falls monotonically, since
# $dH/d\beta = -\beta\,\mathrm{Var}_{p}(z) \le 0$.
#
# This is why the dot-product variance matters: the standard deviation of unscaled
# scores grows like $\sqrt{d_k}$, which multiplies every gap, and dividing by $\sqrt{d_k}$ undoes
# it. Large *values* alone would do nothing.
#
# The helpers used here are [tempered_softmax][attnscale.tempered_softmax] and
# [softmax_entropy][attnscale.softmax_entropy]; $\beta$ is an inverse temperature, the topic of
# the temperature example in this section.
#
# ## References
#
# - Vaswani et al. 2017, *Attention Is All You Need*, arXiv:1706.03762, §3.2.1.
