r"""
# Every strategy on two opposite tasks

A task that needs uniform attention (the mean of the sequence) and a task that needs one-hot
attention (reconstruction of each token) pull the attention temperature in opposite
directions. We train every score-scaling strategy of the library on both, over several seeds,
and compare the final losses in one grid.
"""

# %%
import matplotlib.pyplot as plt
import torch

import attnscale
from attnscale._docs import style
from attnscale._docs.figures import plot_loss_grid
from attnscale._docs.tables import Table

style.use_style()

SEEDS = [0, 1, 2]
TASKS = ["mean", "reconstruction"]  # uniform attention is right / one-hot attention is right
D_MODEL = 16
D_K = 256  # wide heads, where the choice of scale matters most
D_V = D_MODEL  # the value path can represent both targets exactly
SEQ_LEN = 8
NUM_SAMPLES = 256
BATCH = 32
LR = 1e-2  # small models, short training: a larger step than the article's 1e-3
EPOCHS = 20  # raise (e.g. to 100) for longer training; the cost grows linearly
NUM_THREADS = None  # torch's default; on a busy shared machine, 1 can be faster
STRATEGIES = list(attnscale.SCALING_STRATEGIES)

# %%
# ## Training all strategies on both tasks
#
# One call of [train][attnscale.train] per task trains every strategy and seed together. All
# strategies of one seed start from the same projection weights (only
# [FoldedInit][attnscale.FoldedInit] redraws $W_q$ and $W_k$), see the same batches, and use the
# same learning rate, which favours none of them in particular.

# %%
results = {
    task: attnscale.train(
        task,
        strategies=STRATEGIES,
        seeds=SEEDS,
        d_model=D_MODEL,
        d_k=D_K,
        d_v=D_V,
        seq_len=SEQ_LEN,
        num_samples=NUM_SAMPLES,
        batch_size=BATCH,
        lrs=LR,
        epochs=EPOCHS,
        num_threads=NUM_THREADS,
    )
    for task in TASKS
}
final = {task: res.by_variant("final_train_loss") for task, res in results.items()}
mean = torch.tensor([[float(final[t][s].mean()) for t in TASKS] for s in STRATEGIES])
std = torch.tensor([[float(final[t][s].std()) for t in TASKS] for s in STRATEGIES])

# %%
# ## The grid
#
# Colour is $\log_{10}$ of the mean final training loss over seeds; each cell reads
# mean ± standard deviation. The framed cell is the best strategy for that task.

# %%
fig, ax = plt.subplots(figsize=(6.4, 4.4), layout="constrained")
plot_loss_grid([style.STRATEGIES[s].label for s in STRATEGIES], TASKS, mean, std, ax=ax)
ax.set_title(f"Final loss of every strategy on two tasks (d_k = {D_K}, {len(SEEDS)} seeds)")
plt.show()

# %%
# ## Winners, and the cost of a fixed choice
#
# For each strategy we also print its *regret*: its loss divided by the best strategy's loss on
# the same task, and the worst of those ratios over the two tasks. A robust default is one whose
# worst-case regret is small, even if it wins nowhere.

# %%
best = mean.min(0).values  # (tasks,)
regret = mean / best  # (strategies, tasks)
worst = regret.max(1).values
for j, task in enumerate(TASKS):
    order = mean[:, j].argsort()
    print(
        f"{task:15s} best: {STRATEGIES[order[0]]} ({mean[order[0], j]:.2e}), "
        f"worst: {STRATEGIES[order[-1]]} ({mean[order[-1], j]:.2e}), "
        f"1/sqrt(d_k) ranks {int((order == STRATEGIES.index('inverse_sqrt')).nonzero()) + 1}"
        f" of {len(STRATEGIES)}"
    )
Table(
    ["strategy", *(f"regret on {t}" for t in TASKS), "worst regret"],
    [[s, *(f"{r:.3g}" for r in regret[i]), f"{worst[i]:.3g}"] for i, s in enumerate(STRATEGIES)],
)

# %%
robust = STRATEGIES[int(worst.argmin())]
print(
    f"smallest worst-case regret: {robust} ({worst.min():.3g}); "
    f"1/sqrt(d_k): {worst[STRATEGIES.index('inverse_sqrt')]:.3g}"
)
FIXED = ["none", "inverse_sqrt", "inverse_d", "folded_init"]  # no learnable scale or norm
fixed_worst = {name: float(worst[STRATEGIES.index(name)]) for name in FIXED}
print(
    "worst-case regret of the fixed scales: "
    + ", ".join(f"{k} {v:.3g}" for k, v in sorted(fixed_worst.items(), key=lambda kv: kv[1]))
)

# %%
# ## Reading the grid
#
# - **The winner depends on the task.** The printed winners differ between the two columns.
#   On the mean task a *smaller* multiplier helps: $1/d_k$ starts with the flattest attention,
#   which is what the task needs, and no scale at all is the worst. On reconstruction the
#   order flips: strategies that can make attention sharp quickly (a learnable or normalised
#   temperature) win, and $1/d_k$, whose logits start tiny, is among the slowest.
# - **1/√d_k is a safe default, not the optimum.** It wins neither task; its regret is the
#   factor by which it trails each winner. Among the fixed scales (no scale, $1/\sqrt{d_k}$,
#   $1/d_k$, T5's folded init) compare the printed worst-case regrets: a fixed scale tuned to
#   one kind of attention pays dearly on the other, and $1/\sqrt{d_k}$ sits between the
#   extremes. It is not the most robust strategy of the whole grid, though: the printed line
#   names the one with the smallest worst-case regret, and normalised or learnable
#   temperatures can adapt the sharpness to the task, which no fixed multiplier can.
# - **Caveats.** One learning rate, one width, short training, three seeds: a different budget
#   reorders close cells (read the ± values before ranking two strategies), and learnable
#   strategies would profit from their own learning rates. The fixed-scale strategies
#   differ only in the initial logit scale here; the learnable ones can move it. T5's folded
#   init starts with unit-variance logits like $1/\sqrt{d_k}$, yet compare its row with the
#   unscaled one: its scale lives in the small query weights, and Adam moves every weight by
#   steps of about the learning rate whatever its size, which (a likely cause) soon undoes the
#   small initialisation.
#
# ## References
#
# - Vaswani et al. 2017, arXiv:1706.03762 ($1/\sqrt{d_k}$); μP, Yang et al. 2022,
#   arXiv:2203.03466 ($1/d$).
# - Henry et al. 2020, arXiv:2010.04245 (QKNorm); Dehghani et al. 2023, arXiv:2302.05442
#   (QK-LayerNorm in ViT-22B); Swin Transformer V2 (scaled cosine attention).
# - Raffel et al. 2020, arXiv:1910.10683 (T5: the scale folded into the initialisation).
