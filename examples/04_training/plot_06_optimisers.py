r"""
# Beyond Adam: Lion, Adafactor, Muon and QK-Clip

[The reparametrisation page](plot_05_reparametrisation.md) shows that a model without
$1/\sqrt{d_k}$ is the scaled model with $W_q, W_k$ $d_k^{1/4}$ times larger at initialisation and
different optimiser settings on those two matrices: a learning rate $d_k^{1/4}$ times larger
under Adam, $\sqrt{d_k}$ under SGD. Which settings, depends on how the optimiser's step reacts
to the size of the gradient and of the weights. This page derives them for Lion, Adafactor and
Muon, with and without QK-Clip, and checks each by training both models side by side.
"""

# %%
# ## How each step scales
#
# With $W' = c\,W$ ($c = d_k^{-1/4}$) the unscaled model computes the scaled one's logits, and
# its gradient is $g' = g / c$. It stays on $W' = c\,W$ when each step is $c$ times the scaled
# model's step.
#
# - **Lion** (Chen et al. 2023) steps by $\eta\,\mathrm{sign}(\cdot)$ of a momentum of $g$: the
#   sign ignores the gradient's size, so the step is $\eta$ in both models, and
#   $\eta' = c\,\eta$ with the decoupled decay $\lambda' = \lambda / c$, as for AdamW.
# - **Muon** (Jordan et al. 2024) steps by $\eta$ times an orthogonalised momentum (five
#   Newton-Schulz iterations on the momentum divided by its norm): also blind to the gradient's
#   size, so again $\eta' = c\,\eta$, $\lambda' = \lambda / c$. The decoupled decay is the form
#   Liu et al. 2025 train Muon with at scale, and the one `torch.optim.Muon` implements.
# - **Adafactor** (Shazeer & Stern 2018) in torch's form (`torch.optim.Adafactor`: factored
#   second moment, update clipping at $d = 1$, no first moment, and a *relative* step size)
#   steps by a normalised update times $\max(\epsilon_2, \mathrm{RMS}(W))$: the step follows the
#   size of the weights, which is already $c$ times smaller. **The same settings** keep the
#   models together, as long as $\mathrm{RMS}(W') > \epsilon_2 = 10^{-3}$. This result belongs
#   to that form. With the relative step switched off (an absolute step size, as some
#   implementations allow), the normalised update ignores the gradient's size as Adam's does,
#   and the derivation gives Adam's $\eta' = c\,\eta$ instead; that form is not run here.
# - **QK-Clip** (Kimi K2's MuonClip) rescales $W_q$ and $W_k$ after a step when a head's
#   largest logit passes $\tau$. It reads the logits, which the two models share, so it clips
#   both alike.
#
# ## Both models, trained side by side
#
# One attention head in float64 (float32 rounding separates the models by about $10^{-7}$ per
# step), fitting random attention patterns for 50 steps on the same batches. The gap is the
# largest difference of their logits after training, relative to the logits' size; the control
# runs the unscaled model with the scaled model's settings.

import math

import torch

from guide.tables import Table

SEED, D_MODEL, D_K, STEPS = 0, 32, 64, 50
C = D_K**-0.25
TAU = 2.0  # QK-Clip's threshold, low enough that it acts here (Kimi K2 uses 100)


class Lion(torch.optim.Optimizer):
    """Lion (Chen et al. 2023): the sign of an interpolated momentum, decoupled
    decay."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(
            params, {"lr": lr, "betas": betas, "weight_decay": weight_decay}
        )

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            (b1, b2), lr, wd = group["betas"], group["lr"], group["weight_decay"]
            for p in group["params"]:
                m = self.state[p].setdefault("m", torch.zeros_like(p))
                p.mul_(1 - lr * wd).add_(
                    torch.sign(b1 * m + (1 - b1) * p.grad), alpha=-lr
                )
                m.mul_(b2).add_(p.grad, alpha=1 - b2)


clipped: list[float] = []  # the max logits QK-Clip acted on, over every run


def qk_clip(wq: torch.Tensor, wk: torch.Tensor, max_logit: float) -> None:
    """QK-Clip for one head: scale W_q and W_k by sqrt(tau / S_max) when S_max passes
    tau."""
    if max_logit > TAU:
        clipped.append(max_logit)
        factor = math.sqrt(TAU / max_logit)
        wq.mul_(factor)
        wk.mul_(factor)


def train_pair(make_opt, qk: dict, clip: bool = False) -> float:
    """Largest logit gap, relative to the logits' size, between the scaled model and the
    unscaled one with W_q, W_k times c and the settings ``qk`` on those two matrices."""
    torch.manual_seed(SEED)
    w = torch.randn(2, D_K, D_MODEL, dtype=torch.float64) / math.sqrt(
        D_MODEL
    )  # W_q, W_k
    models = []
    for scale, weights, settings in ((D_K**-0.5, w, {}), (1.0, C * w, qk)):
        wq, wk = (t.clone().requires_grad_() for t in weights)
        models.append((scale, wq, wk, make_opt([{"params": [wq, wk], **settings}])))
    for _ in range(STEPS):
        x = torch.randn(16, 8, D_MODEL, dtype=torch.float64)  # (batch, tokens, d_model)
        target = torch.randn(16, 8, 8, dtype=torch.float64).softmax(-1)
        logits = []
        for scale, wq, wk, opt in models:
            s = (
                scale * (x @ wq.T) @ (x @ wk.T).transpose(-2, -1)
            )  # (batch, tokens, tokens)
            opt.zero_grad()
            (s.softmax(-1) - target).square().mean().backward()
            opt.step()
            if clip:
                with torch.no_grad():
                    qk_clip(
                        wq,
                        wk,
                        (scale * (x @ wq.T) @ (x @ wk.T).transpose(-2, -1)).max(),
                    )
            logits.append(s.detach())
    return ((logits[0] - logits[1]).abs().max() / logits[0].abs().max()).item()


LR, WD = 1e-2, 0.1
# name: (optimiser class, its settings, factors on them for W_q, W_k, QK-Clip)
OPTIMISERS = {
    "SGD": (torch.optim.SGD, {"lr": LR, "momentum": 0.9}, {"lr": C**2}, False),
    "AdamW": (
        torch.optim.AdamW,
        {"lr": LR, "eps": 1e-8, "weight_decay": WD},
        {"lr": C, "eps": 1 / C, "weight_decay": 1 / C},
        False,
    ),
    "Lion": (
        Lion,
        {"lr": LR / 10, "weight_decay": WD},
        {"lr": C, "weight_decay": 1 / C},
        False,
    ),
    "Adafactor": (torch.optim.Adafactor, {"lr": LR, "weight_decay": WD}, {}, False),
    "Muon": (
        torch.optim.Muon,
        {"lr": LR, "weight_decay": WD},
        {"lr": C, "weight_decay": 1 / C},
        False,
    ),
    "Muon + QK-Clip": (
        torch.optim.Muon,
        {"lr": LR, "weight_decay": WD},
        {"lr": C, "weight_decay": 1 / C},
        True,
    ),
}
gaps, controls, rows = {}, {}, []
for name, (optimiser, base, factors, clip) in OPTIMISERS.items():

    def make_opt(groups, optimiser=optimiser, base=base):
        return optimiser(groups, **base)

    settings = {key: base[key] * factor for key, factor in factors.items()}
    gaps[name] = train_pair(make_opt, settings, clip)
    controls[name] = train_pair(make_opt, {}, clip) if factors else math.nan
    changed = (
        ", ".join(f"{key} x {factor:.3g}" for key, factor in factors.items()) or "none"
    )
    control = "(the same)" if not factors else f"{controls[name]:.1e}"
    rows.append([name, changed, f"{gaps[name]:.1e}", control])
Table(
    ["optimiser", "settings changed on W_q, W_k", "gap", "gap with unchanged settings"],
    rows,
)

# %%
# ## What the measurement says
#
# - **Every optimiser keeps the two models together** with the settings derived above, and
#   drifts apart without them (the last column), except Adafactor, which needs no change: its
#   step follows the weights' size. The gaps are float64 rounding, except Muon's: torch runs its
#   Newton-Schulz iterations in bfloat16, whose rounding differs between the two models'
#   momenta, so they part at bfloat16's resolution, far less than without the change.
# - **Sign and orthogonalising optimisers (Lion, Muon) behave like Adam here**: dropping the
#   scale is a learning rate $d_k^{1/4}$ times larger on $W_q$ and $W_k$. With Adafactor the
#   missing scale is only an initialisation $d_k^{1/4}$ times larger; under SGD the learning rate
#   is $\sqrt{d_k}$ times larger.
# - **QK-Clip is indifferent to the parametrisation**: it bounds what the two models share, the
#   logits. It is a guard against logit growth whatever the scale, not a substitute for it.

print(f"QK-Clip acted {len(clipped)} times (both models, both runs),")
print(f"  at max logits up to {max(clipped):.2f} against tau = {TAU:g}")
exact = {k: v for k, v in gaps.items() if not k.startswith("Muon")}
print(f"largest gap with the derived settings, Muon aside: {max(exact.values()):.1e}")
muon = {k: v for k, v in gaps.items() if k.startswith("Muon")}
print(
    f"Muon (bfloat16 Newton-Schulz): gap {max(muon.values()):.1e}, "
    f"{min(controls[k] for k in muon) / max(muon.values()):.0f} times below its control"
)
print(
    "smallest gap with unchanged settings (optimisers that need a change): "
    f"{min(v for v in controls.values() if not math.isnan(v)):.1e}"
)

# %%
# ## Where the identity stops
#
# The identity holds for the optimiser step alone, applied to $W_q$ and $W_k$ on their own.
# Here is how the common parts of a real training setup bear on it; none of them is in the
# runs above:
#
# - **Gradient clipping by global norm** computes one norm over every parameter. The unscaled
#   model's $W_q$, $W_k$ gradients are $1/c$ times larger, so its global norm differs, clipping
#   fires at other steps and rescales every group's gradient ($W_v$, $W_o$ and the rest too) by
#   another factor. Clipping couples all parameters; no setting on $W_q$, $W_k$ undoes that
#   ([measured on the reparametrisation page](plot_05_reparametrisation.md)).
# - **Mixed precision** rounds the two models differently: their weights and gradients sit at
#   other points of the float grid. Measured on the [reparametrisation
#   page](plot_05_reparametrisation.md), in bfloat16 autocast the two stay as close to each
#   other as either stays to its own float64 run: rounding blurs the identity, it does not
#   break it. Muon's bfloat16 Newton-Schulz iterations above are the small case. Float16 training adds what that measurement does not
#   cover: a dynamic loss scaler, which skips a step when any gradient overflows (like
#   clipping, a condition on all the weights together), and the unscaled product
#   $q \cdot k$, $\sqrt{d_k}$ times larger before any scale, closer to float16's overflow.
# - **μP's zero initialisation** of the query projection (Yang et al. 2022) maps to zero under
#   $W' = c\,W$, so it keeps the identity (measured on the same page) and leaves no
#   initialisation difference in $W_q$: the whole effect of the missing scale there moves
#   into the learning rate. μP's width-dependent learning rates then need
#   an extra factor $c = d_k^{-1/4}$ that changes with the head width, which is what μP is meant to
#   make unnecessary; its $1/d_k$ scale is a different parametrisation again.
# - **Per-group settings need separate parameters.** The derived settings are a learning rate
#   (and $\epsilon$, decay) for $W_q$, $W_k$ only. A fused QKV projection keeps $W_q$, $W_k$ and
#   $W_v$ in one weight matrix, so the group needs that parameter split (or a per-row factor on
#   its update); Muon and Adafactor's factored statistics act on the fused matrix as a whole,
#   where no per-row factor reproduces the split model.
#
# ## References
#
# - Chen et al. 2023, *Symbolic Discovery of Optimization Algorithms* (Lion), arXiv:2302.06675.
# - Shazeer & Stern 2018, *Adafactor: Adaptive Learning Rates with Sublinear Memory Cost*,
#   arXiv:1804.04235.
# - Jordan et al. 2024, *Muon: An optimizer for hidden layers in neural networks* (blog post,
#   kellerjordan.github.io).
# - Liu et al. 2025, *Muon is Scalable for LLM Training*, arXiv:2502.16982 (Muon with decoupled
#   weight decay at scale).
# - Kimi Team 2025, *Kimi K2: Open Agentic Intelligence*, arXiv:2507.20534 (MuonClip, QK-Clip).
