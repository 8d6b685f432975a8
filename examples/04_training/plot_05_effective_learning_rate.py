r"""
# The scale is also a learning rate: Adam and fixed logit multipliers

The strategies $1/\sqrt{d_k}$, $1/d_k$, "no scale" and T5's folded init all compute
$\ell = \alpha\, q \cdot k$ with a fixed $\alpha$. It is tempting to say they differ only in the
logits they start from. Under Adam that is false, and this page measures why.

Adam moves each weight by about the learning rate $\eta$, whatever the size of its gradient: its
step is $\eta\, \hat m / (\sqrt{\hat v} + \epsilon)$, and on the first step
$\eta\, g / (|g| + \epsilon)$, which is $\eta \operatorname{sign}(g)$ up to Adam's $\epsilon$. A
change $\Delta W_q$ of size $\eta$ changes the logits by about $\alpha\, \Delta q \cdot k$, so
$\alpha$ multiplies how fast the logits move as well as where they start. Dropping
$1/\sqrt{d_k}$ therefore acts, for the logits, like a $\sqrt{d_k}$-times larger learning rate.
This is the argument of μP (Yang et al. 2022, Tensor Programs V), which sets the attention
multiplier and the learning rates together. It touches only the query and key weights: the value
and output weights see the same $\eta$ under every strategy.
"""

# %%
import math

import matplotlib.pyplot as plt
import torch

import attnscale
from attnscale._docs import style
from attnscale._docs.figures import one_legend
from attnscale._docs.tables import Table
from attnscale.plotting import plot_seed_bands

style.use_style()

SEEDS = [0, 1, 2]
D_K = 64  # sqrt(d_k) = 8
D_MODEL = 32
SEQ_LEN = 8
LR = 1e-3
STEPS = 30
FIXED = ["none", "inverse_sqrt", "inverse_d", "folded_init"]  # the fixed-scale strategies
LRS = [1e-3 * 10 ** (k / 2) for k in range(5)]  # 1e-3 to 1e-1, half a decade apart
SWEEP = {"num_samples": 256, "batch_size": 32, "epochs": 16}  # 128 Adam steps

# %%
# ## How far the logits move in the first steps
#
# Four settings per seed, each trained with plain `torch.optim.Adam` on the mean task of
# [make_task][attnscale.make_task]: $1/\sqrt{d_k}$ at $\eta$, no scale at the same $\eta$, no
# scale at $\eta/\sqrt{d_k}$, and no scale with $\eta/\sqrt{d_k}$ for $W_q$ and $W_k$ only (the
# value and output weights at $\eta$, as in the scaled model; μP's per-layer learning rates
# work this way). After every step we measure how far the logits of a fixed probe
# batch have moved from their initial values, $\lVert \ell_t - \ell_0 \rVert$, and record the
# training loss of the step. The table divides each setting's logit movement by that of
# $1/\sqrt{d_k}$ at $\eta$, and gives the relative gap between their training losses, step by
# step, averaged over steps and seeds.

# %%
SETTINGS = {  # label: (strategy, learning rate, learning rate of W_q and W_k)
    "inverse_sqrt": ("inverse_sqrt", LR, LR),
    "none": ("none", LR, LR),
    "none_slow": ("none", LR / math.sqrt(D_K), LR / math.sqrt(D_K)),
    "none_slow_qk": ("none", LR, LR / math.sqrt(D_K)),  # values and output at η
}
probe = torch.randn(64, SEQ_LEN, D_MODEL, generator=torch.Generator().manual_seed(1234))


def logit_path(
    strategy: str, lr: float, qk_lr: float, seed: int
) -> tuple[list[float], list[float]]:
    """||logits_t - logits_0|| on the probe batch after each of STEPS Adam steps, and each
    step's training loss."""
    gen = torch.Generator().manual_seed(seed)
    x, y = attnscale.make_task("mean", 32 * STEPS, SEQ_LEN, D_MODEL, generator=gen)
    model = attnscale.make_model("simple", d_model=D_MODEL, d_k=D_K, strategy=strategy, seed=seed)
    qk = [model.q_proj.weight, model.k_proj.weight]
    rest = [model.v_proj.weight, model.out_proj.weight]
    opt = torch.optim.Adam([{"params": qk, "lr": qk_lr}, {"params": rest, "lr": lr}])
    with torch.no_grad():
        start = model(probe, need_logits=True).logits
    path, losses = [], []
    for step in range(STEPS):
        batch = slice(32 * step, 32 * (step + 1))
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[batch]).output, y[batch])
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        with torch.no_grad():
            path.append(float((model(probe, need_logits=True).logits - start).norm()))
    return path, losses


runs = {
    label: [logit_path(strategy, lr, qk_lr, s) for s in SEEDS]
    for label, (strategy, lr, qk_lr) in SETTINGS.items()
}
paths = {label: torch.tensor([p for p, _ in r]) for label, r in runs.items()}  # (seeds, steps)
losses = {
    label: torch.tensor([loss for _, loss in r]) for label, r in runs.items()
}  # (seeds, steps)
names = style.text_labels(SETTINGS)
rows, loss_gap = [], {}
for label in list(SETTINGS)[1:]:
    ratio = paths[label] / paths["inverse_sqrt"]  # (seeds, steps)
    gap = (losses[label] - losses["inverse_sqrt"]).abs() / losses["inverse_sqrt"]
    loss_gap[label] = float(gap.mean())
    rows.append(
        [
            names[label],
            f"{ratio[:, 0].mean():.2f}",
            f"{ratio[:, -1].mean():.2f} ({ratio[:, -1].min():.2f} to {ratio[:, -1].max():.2f})",
            f"{gap.mean():.1%}",
            f"{gap.max():.1%}",
        ]
    )
Table(
    [
        f"setting (√d_k = {math.sqrt(D_K):g})",
        "logit movement / 1/√d_k's, step 1",
        f"the same, step {STEPS} (seeds)",
        "loss gap to 1/√d_k, mean",
        "loss gap, largest",
    ],
    rows,
)

# %%
print(f"closest to 1/√d_k's training loss: {names[min(loss_gap, key=loss_gap.get)]}")

# %%
fig, axes = plt.subplots(1, 2, figsize=(7, 3.2), layout="constrained", sharex=True)
for ax, values, ylabel in (
    (axes[0], paths, "‖logits − initial logits‖"),
    (axes[1], losses, "training loss (MSE)"),
):
    plot_seed_bands(
        values,
        ax=ax,
        xlabel="Adam step",
        ylabel=ylabel,
        logy=True,
        **style.strategy_kwargs(),
    )
axes[0].set_title("how far the logits moved")
axes[1].set_title("loss")
fig.suptitle(f"Mean task, $d_k = {D_K}$, $\\eta = {LR:g}$: seeds as bands")
one_legend(fig)
plt.show()

# %%
# The printed ratios are the mechanism. At the same learning rate the unscaled logits move about
# $\sqrt{d_k}$ times as far as the scaled ones at the first step, and the ratio drifts lower over
# the following steps (the table's first-step and last-step columns). At $\eta/\sqrt{d_k}$ they
# move about as far as the scaled ones at first, and somewhat less by the last step, whether
# every weight or only $W_q$ and $W_k$ get the smaller rate. So "no scale" and $1/\sqrt{d_k}$
# compared at one learning rate are not two scales at one speed: the unscaled model's logits
# also run faster, by about $\sqrt{d_k}$ at the start.
#
# The loss is another matter, and the table measures it rather than assume it: matching the
# logits' speed does not match the training loss (see the "closest" line). Two things differ that
# the logit speed does not capture. The unscaled model starts from larger logits (the same
# weights, a multiplier of 1 against $1/\sqrt{d_k}$), so its attention starts sharper. And the
# value and output weights, which the multiplier does not touch, learn the mean in these first
# steps: slowing every weight to $\eta/\sqrt{d_k}$ slows them too, which is why that setting is
# compared with the one that slows only $W_q$ and $W_k$. The effective-learning-rate view is a
# statement about the logits, not about the whole model's loss.
#
# ## Loss against learning rate, for every fixed scale
#
# If the multiplier were only an initial condition, all four fixed-scale strategies would share
# one best learning rate. We sweep five learning rates, half a decade apart, on two tasks:
# the mean task, which needs uniform attention, and the article's reconstruction task, which
# rewards one-hot attention. [train][attnscale.train] runs all strategies, learning rates and
# seeds of a task in one batched pass.

# %%
sweeps = {
    task: attnscale.train(
        task,
        strategies=FIXED,
        lrs=LRS,
        seeds=SEEDS,
        d_model=D_MODEL,
        d_k=D_K,
        d_v=D_MODEL,
        seq_len=SEQ_LEN,
        test_samples=64,
        num_threads=1,
        **SWEEP,
    )
    for task in ("mean", "reconstruction")
}
print(
    "sweep time: "
    + ", ".join(
        f"{task} {res.seconds:.1f} s ({res.num_models} models)" for task, res in sweeps.items()
    )
)


def loss_grid(res: attnscale.TrainingResult, strategy: str) -> torch.Tensor:
    """Final training loss, shape (seeds, learning rates)."""
    return torch.stack(
        [res.final_train_loss[res.select(strategy=strategy, lr=lr)] for lr in LRS], dim=1
    )


fig, axes = plt.subplots(1, 2, figsize=(7, 3.2), layout="constrained", sharex=True)
for ax, (task, res) in zip(axes, sweeps.items(), strict=True):
    plot_seed_bands(
        {name: loss_grid(res, name) for name in FIXED},
        x=LRS,
        ax=ax,
        xlabel="learning rate η",
        ylabel="final training loss",
        logx=True,
        logy=True,
        markers=True,
        **style.strategy_kwargs(),
    )
    ax.set_title(task)
fig.suptitle(f"Loss after {res.steps_per_epoch * SWEEP['epochs']} Adam steps, $d_k = {D_K}$")
one_legend(fig)
plt.show()

# %%
# ## Best learning rate and where each strategy breaks down
#
# For each strategy: the learning rate with the lowest mean final loss, and the largest learning
# rate at which every seed still ends at least ten times below the loss of its smallest learning
# rate (a run that blew up or froze does not). The last two columns divide each strategy's
# value by that of no scale; compare them with $\sqrt{d_k} = 8$ and with the grid's step of
# $\sqrt{10} \approx 3.2$.

# %%
rows = []
mean_loss = {
    task: {name: loss_grid(res, name).mean(0) for name in FIXED} for task, res in sweeps.items()
}
best_lr = {
    task: {n: LRS[int(g.argmin())] for n, g in grids.items()} for task, grids in mean_loss.items()
}
for task, res in sweeps.items():
    best, edge = best_lr[task], {}
    for name in FIXED:
        grid = loss_grid(res, name)
        ok = (grid < grid[:, :1] / 10).all(0)
        edge[name] = max((lr for lr, good in zip(LRS, ok.tolist(), strict=True) if good), default=0)
    for name in FIXED:
        shift = best[name] / best["none"]
        edge_shift = edge[name] / edge["none"] if edge["none"] else float("nan")
        rows.append(
            [
                task,
                style.text_labels([name])[name],
                f"{best[name]:.1e}",
                f"{edge[name]:.1e}",
                f"{shift:.2g}",
                f"{edge_shift:.2g}",
            ]
        )
Table(
    [
        "task",
        "strategy",
        "best η",
        "largest good η",
        "best η / best η of no scale",
        "largest good η / that of no scale",
    ],
    rows,
)

# %%
# Above no scale's best learning rate, how close does T5's folded init stay to no scale?

# %%
for task, grids in mean_loss.items():
    big = [lr for lr in LRS if lr > best_lr[task]["none"]]
    folded_like_none = [
        float(grids["folded_init"][LRS.index(lr)] / grids["none"][LRS.index(lr)]) for lr in big
    ]
    print(
        f"{task}: above no scale's best η, folded init's loss / no scale's loss = "
        + ", ".join(f"{r:.2g}" for r in folded_like_none)
    )

# %%
# How to read it:
#
# - **The logit speed is not the whole story.** The first section's ratio starts at a value set
#   by $\alpha$ alone. The best learning rate of the whole model is not: the value and output weights, which
#   none of the scales acts on, limit it too. So the shift of the best learning rate between no
#   scale and $1/\sqrt{d_k}$ (table) need not reach $\sqrt{d_k}$, and at this size it does not
#   have to be the same on both tasks.
# - **The failures follow the multiplier.** Compare the "largest good η" column: where it is
#   larger for $1/\sqrt{d_k}$ and $1/d_k$ than for no scale, the smaller multiplier is what lets
#   them take the larger steps.
# - **T5's folded init has the unscaled speed.** Its multiplier at run time is 1, like no scale;
#   only its initial query weights are smaller, and Adam's step sizes do not depend on the
#   initialisation. The printed ratios of its loss to no scale's above no scale's best learning
#   rate show how closely it follows no scale there.
# - **Consequence for this section.** A comparison of strategies at one shared learning rate
#   mixes the scale with the learning rate. The
#   [strategy grid](plot_03_all_strategies.md) therefore compares every strategy at its own best
#   learning rate, with the shared rate beside it.
#
# ## References
#
# - Yang et al. 2022, *Tensor Programs V: Tuning Large Neural Networks via Zero-Shot
#   Hyperparameter Transfer*, arXiv:2203.03466.
# - Kingma and Ba 2015, *Adam: A Method for Stochastic Optimization*, arXiv:1412.6980.
# - Raffel et al. 2020, T5, arXiv:1910.10683 (the folded initialisation).
