r"""
# Where missing scaling fails: a task that needs soft attention

Predicting, at every position, the mean of the sequence needs *uniform* attention. Without the
$1/\sqrt{d_k}$ scale a wide head starts with sharp attention. Does training make it soft? We
train both variants at three head sizes for long enough that each curve has converged or
plateaued, or is reported as still falling, and watch loss, entropy, logit spread and gradients,
with seeds as bands. Then we repeat on tasks where sharp attention is right.
"""

# %%
import math

import matplotlib.pyplot as plt
import torch

import attnscale
from attnscale._docs import style
from attnscale._docs.figures import one_legend
from attnscale._docs.tables import Table
from attnscale.plotting import plot_seed_bands, plot_training_metric

style.use_style()

SEEDS = [0, 1, 2]
D_KS = [64, 256, 512]
SEQ_LEN = 8
BATCH = 32
LR = 1e-3
NUM_THREADS = None  # torch's default; on a busy shared machine, 1 can be faster
DEVICE = "cpu"  # "cuda" runs the same experiment on a GPU
D_MODEL, NUM_SAMPLES = 64, 256
EPOCHS = 150  # 1200 Adam steps on the mean task
CONTRAST_EPOCHS = 25  # 200 steps on the two contrast tasks
D_V = D_MODEL  # the value path can represent the mean at every d_k; only the logits change
VARIANTS = ["inverse_sqrt", "none"]


def status(epoch_loss: torch.Tensor) -> str:
    """Where the seeds' mean loss curve stands when training stops.

    "converged" if it ended below 1/1000 of its first epoch; otherwise "still falling" if it fell
    by more than 10% over the last quarter of the epochs, else "plateaued". A curve that is still
    falling may not be called stuck: only a longer run would say where it ends.
    """
    curve = epoch_loss.mean(0)  # (epochs,)
    if curve[-1] < 1e-3 * curve[0]:
        return "converged"
    quarter = max(1, curve.numel() // 4)
    return "still falling" if curve[-quarter - 1] > 1.1 * curve[-1] else "plateaued"


def settled(curve: torch.Tensor) -> str:
    """Whether a mean curve, (epochs,), changed by less than 5% over its last quarter."""
    quarter = max(1, curve.numel() // 4)
    moved = abs(float(curve[-1] / curve[-quarter - 1]) - 1)
    return "settled" if moved < 0.05 else "still moving"


def run(task: str, d_k: int, epochs: int = EPOCHS) -> attnscale.TrainingResult:
    return attnscale.train(
        task,
        strategies=VARIANTS,
        seeds=SEEDS,
        d_model=D_MODEL,
        d_k=d_k,
        d_v=D_V,
        seq_len=SEQ_LEN,
        num_samples=NUM_SAMPLES,
        batch_size=BATCH,
        lrs=LR,
        epochs=epochs,
        device=DEVICE,
        num_threads=NUM_THREADS,
    )


# %%
# ## Training the mean task at three head sizes
#
# [train][attnscale.train] runs both variants and all seeds of one $d_k$ in a single batched
# pass, for the number of Adam steps each line prints. Predicting zero everywhere scores $1/L = 0.125$, the variance
# of the mean of 8 unit-variance vectors; uniform attention followed by the identity map
# scores 0. Each line says where the seeds' mean loss curve stands at the end (the rule is in
# `status` above), how far the unscaled model's attention entropy moved towards the uniform
# $\ln 8$, and whether that entropy had settled (changed by less than 5% over the last quarter
# of the run). An unscaled curve whose loss is still falling while its entropy has settled near
# $\ln 8$ has escaped its sharp start; how low its loss ends, this budget does not say.

# %%
mean_runs = {d_k: run("mean", d_k) for d_k in D_KS}
for d_k, res in mean_runs.items():
    final = res.by_variant("final_train_loss")
    test = res.by_variant("test_loss")
    where = {k: status(v) for k, v in res.by_variant("loss", per_epoch=True).items()}
    ent = res.by_variant("entropy", per_epoch=True)["none"].mean(0)  # (epochs,)
    print(
        f"d_k={d_k}, {res.loss.shape[1]} steps, final train loss:\n"
        f"  scaled   {final['inverse_sqrt'].mean():.2e} ({where['inverse_sqrt']})\n"
        f"  unscaled {final['none'].mean():.2e} ({where['none']}; seeds "
        f"{final['none'].min():.2e} to {final['none'].max():.2e}), test loss "
        f"{test['none'].mean():.3g}\n"
        f"  unscaled entropy {ent[0]:.2f} -> {ent[-1]:.2f} nats "
        f"({ent[-1] / math.log(SEQ_LEN):.0%} of ln 8, {settled(ent)})"
    )
print(f"predicting zero scores {1 / SEQ_LEN:.3f}")

# %%
# ## Loss, entropy and logit spread over training
#
# One row per head size; the mean over seeds is a line, the band spans the seeds. The entropy
# is in nats (uniform attention over 8 keys has $\ln 8 \approx 2.08$); the logit standard
# deviation is taken over all logits of each mini-batch.

# %%
fig, axes = plt.subplots(
    len(D_KS), 3, figsize=(7, 2.2 * len(D_KS)), layout="constrained", sharex=True
)
for row, (d_k, res) in zip(axes, mean_runs.items(), strict=True):
    plot_training_metric(
        res,
        "loss",
        ax=row[0],
        ylabel=f"loss, $d_k = {d_k}$",
        logy=True,
        hline=1 / SEQ_LEN,
        hline_label="predict 0",
        **style.strategy_kwargs(),
    )
    plot_training_metric(
        res,
        "entropy",
        ax=row[1],
        ylabel="entropy (nats)",
        hline=math.log(SEQ_LEN),
        hline_label="$\\ln L$: uniform attention",
        **style.strategy_kwargs(),
    )
    plot_training_metric(
        res, "logit_std", ax=row[2], ylabel="logit std", logy=True, **style.strategy_kwargs()
    )
axes[0, 0].set_title("training loss")
axes[0, 1].set_title("attention entropy")
axes[0, 2].set_title("logit spread")
fig.suptitle("Mean task: scaled vs unscaled at three head sizes (seed bands)")
one_legend(fig)
plt.show()

# %%
# ## The widest unscaled head starts sharp: where do its gradients go?
#
# The article's explanation is that unscaled logits push the softmax into a flat region where
# gradients vanish. Whether that is true depends on where the gradient is measured. The
# gradient of the query weights $W_q$ carries the logit multiplier as a factor, so without
# $1/\sqrt{d_k}$ it is $\sqrt{d_k}$ times larger before the softmax plays any part. The gradient
# at the softmax input, $\partial L/\partial \ell$, has no such factor; a saturated row passes
# back almost none. The table lists, at the largest head size, the attention entropy and logit
# spread at the first step and at the end, and both gradients: for the logits, each query row's
# gradient norm, with the median over rows (a few unsaturated rows would dominate a norm over
# the whole batch).

# %%
d_k = D_KS[-1]
res = mean_runs[d_k]
rows = []
for name in VARIANTS:
    idx = res.select(strategy=name)
    rows.append(
        [
            name,
            f"{res.entropy[idx, 0].mean():.3f} → {res.entropy[idx, -1].mean():.3f}",
            f"{res.logit_std[idx, 0].mean():.2f} → {res.logit_std[idx, -1].mean():.2f}",
            f"{res.grad_norm_q[idx, 0].mean():.2e}",
            f"{res.grad_norm_q[idx].median():.2e}",
            f"{res.logit_grad_row_median[idx, 0].mean():.2e}",
            f"{res.logit_grad_row_median[idx].median():.2e}",
        ]
    )
Table(
    [
        f"d_k = {d_k}",
        "entropy first → last (nats)",
        "logit std first → last",
        "W_q grad norm, step 1",
        "W_q grad norm, median",
        "∂L/∂logits per row (median), step 1",
        "∂L/∂logits per row (median), median over steps",
    ],
    rows,
)

# %%
grad_q = res.by_variant("grad_norm_q", per_epoch=True)
grad_rows = res.by_variant("logit_grad_row_median", per_epoch=True)
sqrt_dk = d_k**0.5
print(
    f"d_k = {d_k}, unscaled / scaled, medians over all steps:\n"
    f"  W_q gradient {grad_q['none'].median() / grad_q['inverse_sqrt'].median():.1f}x "
    f"(√d_k = {sqrt_dk:.1f})\n"
    f"  per-row gradient at the logits "
    f"{grad_rows['none'].median() / grad_rows['inverse_sqrt'].median():.2g}x"
)

# %%
fig, axes = plt.subplots(1, 2, figsize=(7, 3.0), layout="constrained", sharex=True)
plot_seed_bands(
    grad_q, ax=axes[0], ylabel="gradient norm of $W_q$", logy=True, **style.strategy_kwargs()
)
plot_seed_bands(
    grad_rows,
    ax=axes[1],
    ylabel="∂L/∂logits per row (median)",
    logy=True,
    **style.strategy_kwargs(),
)
axes[0].set_title("at the weights")
axes[1].set_title("at the softmax input")
fig.suptitle(f"Mean task, $d_k = {d_k}$: the two gradients, seed bands")
one_legend(fig)
plt.show()

# %%
# At initialisation the query and key projections (PyTorch's default ``nn.Linear`` init) give
# components of variance about $1/3$, so unscaled logits have a standard deviation near
# $\sqrt{d_k}/3$ and the softmax is already sharp at step 1 (the first value in the entropy
# column). The two gradients then tell opposite stories (printed ratios). The weight gradient is
# larger without the scale: the unscaled logits lack the factor $1/\sqrt{d_k}$, so the gradient
# of $W_q$ is larger by about $\sqrt{d_k}$, which is most of the printed ratio. Measured there,
# nothing vanishes. At the softmax input the ratio is below 1: the unscaled model's typical row
# receives less gradient than the scaled model's because its rows are saturated, which is the
# article's story after all. How far training then moved the unscaled entropy is in the first
# printed lines.

# %%
# ## Contrast: tasks where sharp attention is right
#
# Two tasks want one-hot attention. In reconstruction (the article's task; here the value path
# is as wide as the model, so the loss can reach zero) each position should attend to itself.
# In the retrieval task of [make_task][attnscale.make_task] each token carries a value, a key
# id and a query id, and the target at each position is the value of the token whose key id
# equals its query id: the one-hot target is chosen by content.

# %%
contrast = {task: run(task, D_KS[-1], CONTRAST_EPOCHS) for task in ("reconstruction", "retrieval")}
contrast = {"mean": mean_runs[D_KS[-1]], **contrast}
rows = []
for task, res in contrast.items():
    final = res.by_variant("final_train_loss")
    epoch_loss = res.by_variant("loss", per_epoch=True)
    for name in VARIANTS:
        idx = res.select(strategy=name)
        half = epoch_loss[name][:, res.config.epochs // 2 - 1] / epoch_loss[name][:, -1]
        rows.append(
            [
                task,
                name,
                str(res.loss.shape[1]),
                f"{final[name].mean():.2e}",
                f"{final[name].min():.2e} to {final[name].max():.2e}",
                f"{half.mean():.2f}",
                status(epoch_loss[name]),
                f"{res.max_probability[idx, -1].mean():.3f}",
            ]
        )
Table(
    [
        f"task (d_k = {D_KS[-1]})",
        "variant",
        "Adam steps",
        "final train loss",
        "seed range",
        "loss fall over the second half (x)",
        "at the end",
        "final max attention prob",
    ],
    rows,
)

# %%
fig, axes = plt.subplots(1, 2, figsize=(7, 2.8), layout="constrained")
for ax, task in zip(axes, ("reconstruction", "retrieval"), strict=True):
    res = contrast[task]
    plot_training_metric(
        res, "loss", ax=ax, ylabel="training loss (MSE)", logy=True, **style.strategy_kwargs()
    )
    ax.set_title(task)
fig.suptitle(f"Tasks that want one-hot attention, $d_k = {D_KS[-1]}$ (seed bands)")
one_legend(fig)
plt.show()

# %%
# Read the table with its "Adam steps" and "at the end" columns. The two sharp tasks ran a
# shorter budget than the mean task; where a curve there is still falling it is not stuck, and
# this page cannot say whether the unscaled model would catch up. For the mean task the first
# printed lines say, per head size, whether each curve converged, plateaued or was still falling
# at the end, and how far the unscaled entropy moved towards $\ln 8$. Where the unscaled
# loss plateaued, compare its test loss with the $1/L$ of predicting zero: a test loss near it
# means the model memorised the 256 training sequences instead of learning the mean.
#
# The missing scale sets how sharp attention starts and, under Adam, how fast the logits move
# (see [the scale is also a learning rate](plot_05_effective_learning_rate.md)). Whether a model
# recovers from a sharp start depends on the head size and on the budget, so the page reports
# each case rather than one verdict. The next example runs every strategy on both kinds of task.
#
# ## References
#
# - Vaswani et al. 2017, arXiv:1706.03762, §3.2.1: the variance argument for $1/\sqrt{d_k}$.
# - Zhai et al. 2023, arXiv:2303.06296: attention entropy collapse and unstable training.
