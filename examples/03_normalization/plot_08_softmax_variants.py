r"""
# Softmax variants: what changes for the scale

Several designs replace or wrap the softmax: a $+1$ in its denominator, a sigmoid per key, a
gate on the output, a soft-cap on the logits, and norms on $q$ and $k$ placed before or after
the rotary embedding. Each changes what a large logit does. This page measures, for each, the
quantity that decides whether $1/\sqrt{d_k}$ still matters: how much attention a row can give,
how much gradient passes, and how large a logit can get.
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
KEYS, ROWS = 256, 2000
SIGMAS = [
    2.0**e for e in range(-2, 6)
]  # within-row logit std: 1 is what 1/sqrt(d_k) gives
z = torch.randn(ROWS, KEYS, generator=gen, dtype=torch.float64)

# %%
# ## Softmax with $+1$: a row may give less than all
#
# $p_j = e^{x_j} / (1 + \sum_i e^{x_i})$ (Miller 2023, *Attention Is Off By One*; the same as a
# sink column fixed at 0)
# lets a row's weights sum to less than 1. With logits of spread $\sigma$ around a mean $\mu$,
# the mass given is $\sum_i e^{x_i} / (1 + \sum_i e^{x_i})$, and the $+1$ only matters once the
# whole row sits about $\log n$ below zero: a head opts out by lowering every logit, a shift the
# ordinary softmax ignores. The spread (what $1/\sqrt{d_k}$ sets) moves that point by
# $\sigma^2/2$ only. Measured at $n = 256$ keys:

MEANS = [-12.0, -8.0, -6.0, -4.0, 0.0]
print(
    f"{'mean logit':>10} "
    + "".join(f"{'sigma ' + format(s, 'g'):>11}" for s in (0.5, 1, 2))
)
mass_given = {}
for mu in MEANS:
    row = []
    for sigma in (0.5, 1.0, 2.0):
        total = torch.exp(mu + sigma * z).sum(dim=-1)  # (rows,)
        row.append((total / (1 + total)).mean().item())
    mass_given[mu] = row
    print(f"{mu:>10g} " + "".join(f"{v:>11.3f}" for v in row))
print(f"log n = {math.log(KEYS):.2f}")

# %%
# ## Sigmoid attention: no competition, the same saturation
#
# Sigmoid attention (Ramapuram et al. 2024) gives each key $p_j = \mathrm{sigmoid}(x_j + b)$ with
# $b = -\log n$, with no normalisation across keys. The gradient a logit receives is scaled by
# $\mathrm{sigmoid}'(x_j + b)$, which vanishes once $|x_j + b|$ is large, as the softmax's
# Jacobian does once rows are one-hot. Measured against the logit spread, beside the softmax:
# the mean derivative per key, and the total weight a row gives (1 for the softmax).

sig_grad, sig_mass, soft_grad = [], [], []
bias = -math.log(KEYS)
for sigma in SIGMAS:
    x = sigma * z
    s = torch.sigmoid(x + bias)  # (rows, keys)
    sig_grad.append((s * (1 - s)).mean().item())
    sig_mass.append(s.sum(dim=-1).mean().item())
    # the softmax's: the diagonal of its Jacobian, p_j (1 - p_j), per key
    p = torch.softmax(x, dim=-1)
    soft_grad.append((p * (1 - p)).mean().item())

print(
    f"{'sigma':>6} {'sigmoid: mean derivative':>25} {'sigmoid: total weight':>22} "
    f"{'softmax: mean p(1-p)':>21}"
)
for k, sigma in enumerate(SIGMAS):
    print(
        f"{sigma:>6g} {sig_grad[k]:>25.2e} {sig_mass[k]:>22.2f} {soft_grad[k]:>21.2e}"
    )

fig, (ax_g, ax_m) = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained")
sigmoid_colour = figures.ordered_colour(1, 3)  # softmax in black, as the reference
ax_g.plot(
    SIGMAS,
    sig_grad,
    color=sigmoid_colour,
    marker="o",
    label="sigmoid attention, $b = -\\log n$",
)
ax_g.plot(SIGMAS, soft_grad, color="black", marker="s", label="softmax")
ax_m.plot(
    SIGMAS,
    sig_mass,
    color=sigmoid_colour,
    marker="o",
    label="sigmoid attention, $b = -\\log n$",
)
ax_m.axhline(1, color="0.45", linestyle=":", linewidth=1, label="softmax: always 1")
for ax in (ax_g, ax_m):
    figures.vmarks(ax, {"$\\sigma$ = 1: scaled logits": 1.0})
    ax.set_xscale("log", base=2)
    ax.set_xlabel("within-row logit std $\\sigma$")
ax_g.set_yscale("log")
ax_g.set_ylabel("mean derivative per key")
ax_g.set_title("Gradient through the weights")
ax_m.set_yscale("log")
ax_m.set_ylabel("total weight of a row")
ax_m.set_title("What a row gives")
fig.suptitle(f"Sigmoid attention against the softmax ({KEYS} keys)")
figures.one_legend(fig, ncols=3)

# %%
# ## QK-norm before or after the rotary embedding
#
# RoPE rotates pairs of components, which keeps a vector's length. So RMSNorm (with its gain
# at 1) gives the same logits whether it runs before or after RoPE. A learned gain that differs
# within a rotated pair does not commute with the rotation, and the two orders then give
# different logits, while both keep the bound $|\ell| \le \sqrt{d_k}\,\max|\gamma_q|\max|\gamma_k|$
# on every logit. OLMo 2 (Team OLMo et al. 2024), Gemma 3 and Qwen 3 normalise before RoPE.
# Measured at $d_k = 64$:


def rope(x: torch.Tensor, base: float = 10_000.0) -> torch.Tensor:
    """Rotary embedding of (..., positions, d): pairs (i, i + d/2) rotated by position *
    theta_i."""
    positions, d = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, d // 2, dtype=x.dtype) / (d // 2))  # (d/2,)
    angle = torch.arange(positions, dtype=x.dtype)[:, None] * theta  # (positions, d/2)
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat(
        [a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], -1
    )


def rms(x: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * gain


D, POSITIONS = 64, 128
q = 3 * torch.randn(4, POSITIONS, D, generator=gen, dtype=torch.float64)
k = 3 * torch.randn(4, POSITIONS, D, generator=gen, dtype=torch.float64)
gains = {
    "gain 1": (torch.ones(D, dtype=torch.float64),) * 2,
    "learned gain": tuple(
        1 + 0.3 * torch.randn(D, generator=gen, dtype=torch.float64) for _ in range(2)
    ),
}
order_gap = {}
for name, (gq, gk) in gains.items():
    before = rope(rms(q, gq)) @ rope(rms(k, gk)).transpose(-2, -1) / math.sqrt(D)
    after = rms(rope(q), gq) @ rms(rope(k), gk).transpose(-2, -1) / math.sqrt(D)
    bound = math.sqrt(D) * gq.abs().max().item() * gk.abs().max().item()
    order_gap[name] = (before - after).abs().max().item()
    print(
        f"{name}: largest |logit difference| between the orders "
        f"{order_gap[name]:.1e};\n"
        f"  largest |logit| norm first {before.abs().max():.2f}, RoPE first "
        f"{after.abs().max():.2f}, bound {bound:.2f}"
    )

# %%
# ## Soft-capping, and gates
#
# A soft-cap $c \tanh(\ell / c)$ (Gemma 2: $c = 50$) also bounds every logit, but by flattening
# it: past the cap, the logit stops following $q \cdot k$ and its gradient falls as
# $1 - \tanh^2(\ell/c)$ (printed below), while QK-norm bounds the logit through the lengths of
# $q$ and $k$ and leaves the dot product's gradient alone. Rybakov et al. 2024 cap the logits
# this way, together with layer normalisation after the QKV projection, to train at higher
# learning rates without divergence. The [soft-cap page](../05_debugging/plot_02_soft_cap.md)
# shows what happens when one code path drops the cap: the logits it bounded come back.
#
# Gated attention (Qiu et al. 2025) multiplies each head's output by a sigmoid gate computed
# from the current token. It leaves the logits as they are, so nothing this page measures moves
# with it: the spread within a row is still the scale's to set. What it changes is what a head
# needs its logits for. Without a gate, a head that has nothing to add must still spend its
# weight somewhere, typically on a sink key, with a logit far above the rest of its row; with
# one, it can close the gate instead. Qiu et al. report that the gate removes the attention
# sink, lowers the largest activations and trains stably at higher learning rates. A large
# logit alone is not a failure either: the softmax ignores a shift common to the row, and what
# the weights depend on is the spread within it. No gated model is trained here, so this page
# measures none of those effects.

CAP = 50.0
for raw in (10.0, 50.0, 100.0, 200.0):
    capped = attnscale.soft_cap(torch.tensor(raw, dtype=torch.float64), CAP).item()
    print(
        f"logit {raw:>5g}: capped {capped:6.2f}, gradient through the cap "
        f"{1 - math.tanh(raw / CAP) ** 2:.3f}"
    )

# %%
# ## What the measurement says
#
# - **Softmax with $+1$** changes nothing while the row's logits sit near zero; it lets a head
#   give nothing once all of them drop about $\log n$ below it (the table above). The scale
#   still sets the spread within the row, as for the softmax.
# - **Sigmoid attention needs the scale as much as the softmax does.** Without competition
#   between keys, the total weight a row gives grows with the logit spread, from about one key's
#   worth at $\sigma = 1$ to dozens, so the output's size follows the logits'. The derivative
#   that carries the gradient peaks at a spread of a few units and falls beyond it, as the
#   softmax's does (printed below).
# - **QK-norm's order around RoPE** does not matter with unit gains and matters with learned
#   ones, while the bound on the logits holds in both orders.
# - **Soft-capping and gates** act after the logits are formed: the cap bounds them, the gate
#   rescales each head's output. Neither sets the logits' spread, which is still the scale's job;
#   a gate may remove a reason for large logits (a sink), which this page does not measure.

k1 = SIGMAS.index(1.0)
peak = max(range(len(SIGMAS)), key=lambda i: sig_grad[i])
print(
    f"sigmoid attention: total weight {sig_mass[k1]:.2f} at sigma 1, "
    f"{sig_mass[-1]:.1f} at "
    f"sigma {SIGMAS[-1]:g};\n  mean derivative peaks at sigma {SIGMAS[peak]:g} and "
    f"falls "
    f"{sig_grad[peak] / sig_grad[-1]:.1f}-fold by sigma {SIGMAS[-1]:g}"
)
print(
    f"softmax: mean p(1-p) falls {soft_grad[k1] / soft_grad[-1]:.1f}-fold from sigma 1"
)

# %%
# ## References
#
# - Miller 2023, *Attention Is Off By One* (blog post,
#   evanmiller.org/attention-is-off-by-one.html): softmax with $+1$.
# - Ramapuram et al. 2024, *Theory, Analysis, and Best Practices for Sigmoid Self-Attention*,
#   arXiv:2409.04431.
# - Qiu et al. 2025, *Gated Attention for Large Language Models*, arXiv:2505.06708.
# - Su et al. 2021, *RoFormer: Enhanced Transformer with Rotary Position Embedding*,
#   arXiv:2104.09864.
# - Gemma Team 2024, *Gemma 2*, arXiv:2408.00118 (logit soft-capping at 50).
# - Rybakov et al. 2024, *Methods of improving LLM training stability*, arXiv:2410.16682
#   (logit capping and layer normalisation after the QKV projection).
# - Team OLMo et al. 2024, *2 OLMo 2 Furious*, arXiv:2501.00656; Gemma Team 2025, *Gemma 3
#   Technical Report*, arXiv:2503.19786; Qwen Team 2025, *Qwen3 Technical Report*,
#   arXiv:2505.09388 (QK-norm before RoPE).
