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
# same learning rate. That learning rate is not neutral: under Adam a fixed logit multiplier also
# sets how fast the logits move, so one shared learning rate is a different effective learning
# rate for each fixed scale ([the scale is also a learning rate](plot_05_effective_learning_rate.md)).

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
# ## Ranking by time to a loss threshold
#
# Final losses near $10^{-7}$ say little: both tasks are solved long before. We rank instead by
# the number of epochs each seed needs to bring its epoch loss below 1% of the task's starting
# loss (the mean first-epoch loss over all runs), with the range over seeds. Two strategies whose
# seed ranges overlap are tied; a strategy that never gets there within the budget ranks after
# those that do.


# %%
def epochs_to(epoch_loss: torch.Tensor, threshold: float) -> torch.Tensor:
    """Per seed: first epoch (from 1) whose loss is below threshold; inf if none."""
    below = epoch_loss < threshold  # (seeds, epochs)
    first = below.float().argmax(1).float() + 1
    return torch.where(below.any(1), first, torch.tensor(float("inf")))


rows, ranked = [], {}
for task, res in results.items():
    curves = res.by_variant("loss", per_epoch=True)
    threshold = 0.01 * float(torch.stack([c[:, 0] for c in curves.values()]).mean())
    spans = {s: epochs_to(curves[s], threshold) for s in STRATEGIES}
    order = sorted(STRATEGIES, key=lambda s: (float(spans[s].median()), float(spans[s].max())))
    ranked[task] = order
    for s in order:
        lo, hi = float(spans[s].min()), float(spans[s].max())
        tied = [
            o
            for o in STRATEGIES
            if o != s and lo <= float(spans[o].max()) and float(spans[o].min()) <= hi
        ]
        rows.append(
            [
                task,
                style.text_labels([s])[s],
                "not reached" if lo == float("inf") else f"{spans[s].median():.0f}",
                "-" if lo == float("inf") else f"{lo:.0f} to {hi:g}",
                ", ".join(style.text_labels(tied).values()) or "-",
            ]
        )
    print(f"{task}: threshold {threshold:.2e}; order: {', '.join(order)}")
Table(["task", "strategy", "epochs to 1% (median)", "seed range", "tied with"], rows)

# %%
# What the ranking says about $1/\sqrt{d_k}$, computed rather than asserted:

# %%
NORMALISING = ["qk_layernorm", "qk_rmsnorm", "cosine"]
FIXED = ["none", "inverse_sqrt", "inverse_d", "folded_init"]  # no learnable scale or norm
for task, order in ranked.items():
    pos = order.index("inverse_sqrt")
    ahead = order[:pos]
    best_fixed = min(FIXED, key=order.index)
    print(
        f"{task}: 1/√d_k ranks {pos + 1} of {len(order)}; ahead of it: {', '.join(ahead) or 'no other strategy'}; "
        f"best fixed scale: {best_fixed}"
    )
beaten = all(
    any(ranked[t].index(n) < ranked[t].index("inverse_sqrt") for n in NORMALISING) for t in TASKS
)
print(f"a normalising strategy ranks ahead of 1/√d_k on both tasks: {beaten}")

# %%
# ## Reading the grid
#
# - **The winner depends on the task.** Read the printed orders: on the mean task the smaller
#   multipliers start with flatter attention, which is what the task needs; on reconstruction
#   strategies that can make attention sharp quickly do well. Ties (overlapping seed ranges) are
#   listed as ties, not ranked.
# - **Where $1/\sqrt{d_k}$ stands.** The printed lines give its rank on each task, which
#   strategies are ahead of it, and whether a normalising strategy is ahead of it on both. It is
#   a safe default among the *fixed* scales only if the "best fixed scale" lines say so.
# - **Caveats.** One learning rate, one width, short training, three seeds. Under Adam the fixed
#   multipliers are also effective learning rates (no scale runs its logits $\sqrt{d_k}$ times
#   faster than $1/\sqrt{d_k}$; T5's folded init, with run-time multiplier 1, runs at the unscaled
#   speed too), so a shared learning rate favours some strategies over others. The
#   [effective-learning-rate page](plot_05_effective_learning_rate.md) sweeps the learning rate
#   of the fixed scales.
#
# ## References
#
# - Vaswani et al. 2017, arXiv:1706.03762 ($1/\sqrt{d_k}$); μP, Yang et al. 2022,
#   arXiv:2203.03466 ($1/d$).
# - Henry et al. 2020, arXiv:2010.04245 (QKNorm); Dehghani et al. 2023, arXiv:2302.05442
#   (QK-LayerNorm in ViT-22B); Swin Transformer V2 (scaled cosine attention).
# - Raffel et al. 2020, arXiv:1910.10683 (T5: the scale folded into the initialisation).
