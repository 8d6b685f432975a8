r"""
# Every strategy on two opposite tasks, each at its own learning rate

A task that needs uniform attention (the mean of the sequence) and a task that needs one-hot
attention (reconstruction of each token) pull the attention temperature in opposite
directions. We train every score-scaling strategy of the library on both, over several seeds and
five learning rates, and compare them twice: each at its own best learning rate, and all at one
shared learning rate.
"""

# %%
import textwrap

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
D_K = 64  # four times d_model: the heads are wide for the model
D_V = D_MODEL  # the value path can represent both targets exactly
SEQ_LEN = 8
NUM_SAMPLES = 256
BATCH = 32
LRS = [1e-3 * 10 ** (k / 2) for k in range(5)]  # 1e-3 to 1e-1, half a decade apart
SHARED_LR = LRS[2]  # the one learning rate of the contrast view
EPOCHS = 20
NUM_THREADS = None  # torch's default; on a busy shared machine, 1 can be faster
STRATEGIES = list(attnscale.SCALING_STRATEGIES)
NAMES = style.text_labels(STRATEGIES)


def wrap(line: str) -> str:
    """A long printed line folded to the width of the page's output blocks."""
    return textwrap.fill(line, 90, subsequent_indent="    ", break_on_hyphens=False)


# %%
# ## Training every strategy at every learning rate
#
# One call of [train][attnscale.train] per task trains every strategy, learning rate and seed
# together. All strategies of one seed start from the same projection weights (only
# [FoldedInit][attnscale.FoldedInit] redraws $W_q$ and $W_k$) and see the same batches. One
# shared learning rate would not be neutral: under Adam a fixed logit multiplier also sets how
# fast the logits move, so one learning rate is a different effective learning rate for each
# fixed scale ([the scale is also a learning rate](plot_05_effective_learning_rate.md)). So each
# strategy gets the learning rate of the sweep with its lowest mean final training loss.

# %%
results = {
    task: attnscale.train(
        task,
        strategies=STRATEGIES,
        seeds=SEEDS,
        lrs=LRS,
        d_model=D_MODEL,
        d_k=D_K,
        d_v=D_V,
        seq_len=SEQ_LEN,
        num_samples=NUM_SAMPLES,
        batch_size=BATCH,
        epochs=EPOCHS,
        num_threads=NUM_THREADS,
    )
    for task in TASKS
}


def final_loss(task: str, strategy: str, lr: float) -> torch.Tensor:
    """Final training loss of each seed, (seeds,)."""
    res = results[task]
    return res.final_train_loss[res.select(strategy=strategy, lr=lr)]


best_lr = {
    t: {
        s: min(LRS, key=lambda lr, t=t, s=s: float(final_loss(t, s, lr).mean())) for s in STRATEGIES
    }
    for t in TASKS
}
for task in TASKS:
    edge = [NAMES[s] for s in STRATEGIES if best_lr[task][s] in (LRS[0], LRS[-1])]
    rates = ", ".join(f"{NAMES[s]} {best_lr[task][s]:.1e}" for s in STRATEGIES)
    print(wrap(f"{task}: best η: {rates}"))
    print(f"  at an end of the sweep: {', '.join(edge) or 'none'}")

# %%
# ## The grid
#
# Colour is $\log_{10}$ of the mean final training loss over seeds; each cell reads
# mean ± standard deviation. The first two columns have each strategy at its own best learning
# rate, the last two all strategies at the shared one. Framed cells are the best of their column
# and every strategy tied with it: its range over seeds overlaps the best one's.


# %%
def grid(lrs: dict[str, dict[str, float]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mean, std and tie frame of the final loss, (strategies, tasks), at the given rates."""
    runs = [[final_loss(t, s, lrs[t][s]) for t in TASKS] for s in STRATEGIES]
    mean = torch.tensor([[float(r.mean()) for r in row] for row in runs])
    std = torch.tensor([[float(r.std()) for r in row] for row in runs])
    low = torch.tensor([[float(r.min()) for r in row] for row in runs])
    high = torch.tensor([[float(r.max()) for r in row] for row in runs])
    best = mean.argmin(0)  # (tasks,)
    columns = torch.arange(len(TASKS))
    framed = (low <= high[best, columns]) & (high >= low[best, columns])  # ranges overlap
    return mean, std, framed


shared = {t: dict.fromkeys(STRATEGIES, SHARED_LR) for t in TASKS}
# (strategies, 4): both tasks at each strategy's best rate, then both at the shared rate
mean, std, framed = (
    torch.cat(pair, dim=1) for pair in zip(grid(best_lr), grid(shared), strict=True)
)
columns = [f"{t}\nbest η" for t in TASKS] + [f"{t}\nη = {SHARED_LR:g}" for t in TASKS]
fig, ax = plt.subplots(figsize=(7, 4.6), layout="constrained")
plot_loss_grid(list(style.labels(STRATEGIES).values()), columns, mean, std, ax=ax, framed=framed)
ax.set_title(f"Final loss of every strategy ($d_k = {D_K}$, {len(SEEDS)} seeds)")
plt.show()

# %%
# ## Ranking by time to a loss threshold
#
# The final losses spread over orders of magnitude, but they do not say how fast each run got
# there: a run may reach a low loss early, or only near the end of the budget (as no scale does on
# the mean task even at its best rate; see the table). We rank instead by the number of epochs
# each seed needs to bring its epoch loss below 1% of the task's starting loss (the mean
# first-epoch loss over all runs), with the range over seeds. Two strategies whose seed ranges
# overlap are tied; a strategy that never gets there within the budget ranks after those that do.
# The table ranks each strategy at its own best learning rate; the last column gives the same
# count at the shared learning rate.


# %%
def epochs_to(epoch_loss: torch.Tensor, threshold: float) -> torch.Tensor:
    """Per seed: first epoch (from 1) whose loss is below threshold; inf if none."""
    below = epoch_loss < threshold  # (seeds, epochs)
    first = below.float().argmax(1).float() + 1
    return torch.where(below.any(1), first, torch.tensor(float("inf")))


def spans(task: str, lrs: dict[str, float], threshold: float) -> dict[str, torch.Tensor]:
    """Epochs to the threshold per seed, by strategy, at the given learning rates."""
    res = results[task]
    per_epoch = res.metric("loss", per_epoch=True)  # (models, epochs)
    return {
        s: epochs_to(per_epoch[res.select(strategy=s, lr=lrs[s])], threshold) for s in STRATEGIES
    }


def ranking(span: dict[str, torch.Tensor]) -> tuple[list[str], dict[str, list[str]]]:
    """Strategies by median epochs (then worst seed), and each one's ties."""
    order = sorted(STRATEGIES, key=lambda s: (float(span[s].median()), float(span[s].max())))
    ties = {
        s: [
            o
            for o in order
            if o != s
            and float(span[s].min()) <= float(span[o].max())
            and float(span[o].min()) <= float(span[s].max())
        ]
        for s in order
    }
    return order, ties


def epochs_text(span: torch.Tensor) -> tuple[str, str]:
    """Median and seed range of the epochs to the threshold, as table cells."""
    if float(span.min()) == float("inf"):
        return "not reached", "-"
    high = "never" if float(span.max()) == float("inf") else f"{span.max():.0f}"
    return f"{span.median():.0f}", f"{span.min():.0f} to {high}"


rows, ranked = [], {}
for task, res in results.items():
    threshold = 0.01 * float(res.metric("loss", per_epoch=True)[:, 0].mean())
    own = spans(task, best_lr[task], threshold)
    at_shared = spans(task, shared[task], threshold)
    order, ties = ranking(own)
    ranked[task] = {"own": (order, ties), "shared": ranking(at_shared)}
    for s in order:
        median, span = epochs_text(own[s])
        rows.append(
            [
                task,
                NAMES[s],
                f"{best_lr[task][s]:.1e}",
                median,
                span,
                ", ".join(NAMES[o] for o in ties[s]) or "-",
                epochs_text(at_shared[s])[0],
            ]
        )
    print(f"{task}: threshold {threshold:.2e}")
Table(
    [
        "task",
        "strategy",
        "best η",
        "epochs to 1% (median)",
        "seed range",
        "tied with",
        f"epochs to 1% at η = {SHARED_LR:g}",
    ],
    rows,
)

# %%
# What the rankings say about $1/\sqrt{d_k}$, computed rather than asserted. A strategy is
# "ahead" of it only when it ranks before it and the two are not tied.

# %%
NORMALISING = ["qk_layernorm", "qk_rmsnorm", "cosine"]
FIXED = ["none", "inverse_sqrt", "inverse_d", "folded_init"]  # no learnable scale or norm
for view, view_text in (("own", "each at its best η"), ("shared", f"all at η = {SHARED_LR:g}")):
    ahead_on = {}
    for task in TASKS:
        order, ties = ranked[task][view]
        tied = ties["inverse_sqrt"]
        ahead = [s for s in order[: order.index("inverse_sqrt")] if s not in tied]
        ahead_on[task] = ahead
        fixed_ties = [NAMES[s] for s in tied if s in FIXED]
        best_fixed = str(not any(s in FIXED for s in ahead))
        if fixed_ties:
            best_fixed += f" (tied with {', '.join(fixed_ties)})"
        for line in (
            f"{task}, {view_text}:",
            f"  ahead of 1/√d_k: {', '.join(NAMES[s] for s in ahead) or 'none'}",
            f"  tied with it: {', '.join(NAMES[s] for s in tied) or 'none'}",
            f"  1/√d_k is the best fixed scale: {best_fixed}",
        ):
            print(wrap(line))
    beaten = all(any(n in ahead_on[t] for n in NORMALISING) for t in TASKS)
    print(f"{view_text}: a normalising strategy is ahead of 1/√d_k on both tasks: {beaten}\n")

# %%
# ## Reading the grid
#
# - **The learning rate is part of the comparison.** The printed best learning rates differ
#   between strategies and between tasks. The grid's last two columns and the table's last
#   column show what one shared learning rate does to the strategies it suits less; the first
#   two columns remove that advantage as far as a sweep half a decade apart can. A strategy whose best rate
#   is at an end of the sweep (printed above) might do better still outside it.
# - **The winner depends on the task.** The mean task rewards flat attention and
#   reconstruction sharp attention; read the printed orders. Ties (overlapping seed ranges) are
#   listed and framed as ties, not ranked.
# - **Where $1/\sqrt{d_k}$ stands.** The printed lines say, for each view and task, which
#   strategies are ahead of it, which are tied with it, and whether it is the best fixed scale
#   (no fixed scale ahead of it).
# - **Caveats.** One small width, one head size, 160 Adam steps, three seeds, and a learning-rate
#   grid half a decade apart: differences smaller than a grid step, or than the seed spread,
#   are not resolved here.
#
# ## References
#
# - Vaswani et al. 2017, arXiv:1706.03762 ($1/\sqrt{d_k}$); μP, Yang et al. 2022,
#   arXiv:2203.03466 ($1/d$).
# - Henry et al. 2020, arXiv:2010.04245 (QKNorm); Dehghani et al. 2023, arXiv:2302.05442
#   (QK-LayerNorm in ViT-22B); Swin Transformer V2 (scaled cosine attention).
# - Raffel et al. 2020, arXiv:1910.10683 (T5: the scale folded into the initialisation).
