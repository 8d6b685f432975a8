r"""# Step 6: entropy collapse during high-learning-rate training

Attention logits can grow during training until rows are one-hot. Here a small attention model
is trained twice, at a common Adam learning rate and at one a hundred times higher (the two
values in `LEARNING_RATES`), with the monitor on for every step; the plot shows entropy and the
largest logit against step.
"""

# %%
SEED = 0  # the run the figure and the reports show
SEEDS = range(5)  # the runs the held-out comparison uses
BATCH, SEQ, D_MODEL, HEADS, STEPS = 16, 16, 64, 2, 40
LEARNING_RATES = (1e-3, 1e-1)

import matplotlib.pyplot as plt
import torch
from torch import nn
from torch.nn import functional as F

from attnscale import AttentionMonitor, plot_monitor_series
from guide.figures import one_legend
from guide.style import use_style

use_style()


class TinyModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True)
        self.out = nn.Linear(D_MODEL, D_MODEL)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.attn(x, x, x, need_weights=False)[0])


def batch(g: torch.Generator, size: int = BATCH) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(size, SEQ, D_MODEL, generator=g)
    # the previous token; the model has no positional information, so attention cannot
    # find it, and the loss cannot go far below the target's variance, 1
    return x, x.roll(1, dims=1)


def train(lr: float, seed: int = SEED) -> tuple[AttentionMonitor, list[float], float]:
    """The monitor, the loss per step, and the loss on 1,024 held-out sequences."""
    torch.manual_seed(seed)
    model = TinyModel()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    losses = []
    with AttentionMonitor(model) as monitor:
        for _ in range(STEPS):
            x, target = batch(g)
            loss = F.mse_loss(model(x), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    with torch.no_grad():
        x, target = batch(torch.Generator().manual_seed(10_000 + seed), size=1024)
        held_out = float(F.mse_loss(model(x), target))
    return monitor, losses, held_out


runs = {lr: train(lr) for lr in LEARNING_RATES}

# %%
# ## Entropy and the largest logit against step

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7, 3), layout="constrained")
for i, (lr, (monitor, _, _)) in enumerate(runs.items()):
    report = monitor.report()
    run = {
        "color": f"C{i}",
        "label": f"lr {lr:g}",
        "legend": False,
    }  # one colour per rate
    plot_monitor_series(
        report, metric="normalized_entropy", ax=ax1, ylabel=r"entropy / $\ln n$", **run
    )
    plot_monitor_series(
        report, metric="max_abs_logit", ax=ax2, ylabel="max |logit|", **run
    )
ax2.set_yscale("log")
one_legend(fig)
fig.suptitle("Attention entropy and largest logit during training, two learning rates")

# %%
# ## The reports

for lr, (monitor, losses, _) in runs.items():
    print(f"--- lr {lr:g}: last mini-batch loss {losses[-1]:.4f}")
    print(monitor.report())

# %%
# ## Did the collapse buy anything?
#
# The metric: the loss on 1,024 held-out sequences after the 40 steps, for five seeds at each
# rate, compared seed by seed (high rate minus low rate; negative would mean the high rate and
# its collapsed attention did better).

# %%
held = {lr: [train(lr, seed)[2] for seed in SEEDS] for lr in LEARNING_RATES}
low_rate, high_rate = LEARNING_RATES
diffs = [h - lo for h, lo in zip(held[high_rate], held[low_rate], strict=True)]
for lr in LEARNING_RATES:
    print(
        f"lr {lr:g}: held-out loss per seed " + ", ".join(f"{v:.4f}" for v in held[lr])
    )
mean = sum(diffs) / len(diffs)
print(
    f"high minus low: mean {mean:+.4f}, seeds from {min(diffs):+.4f} to "
    f"{max(diffs):+.4f}"
)
print(
    "the high rate is worse on every seed"
    if min(diffs) > 0
    else "the high rate is better on every seed"
    if max(diffs) < 0
    else "mixed across seeds"
)

# %%
# ## What to do
#
# In the figure the low-rate run stays close to uniform attention while the high-rate run's
# entropy falls and its largest logit grows step after step. The printed reports say the same:
# no findings at the low rate, `large-logits` and `entropy-collapse` at the high rate, each at
# the step where it was worst. This model has no positional information, so it cannot locate
# the previous token at either rate; whether the collapse bought anything is the held-out
# comparison's last printed line. Where it says the high rate is worse on every seed, the
# one-hot rows are a symptom of the step size, not of a task that wants sharp attention.
#
# When a report shows these findings during training, lower the learning rate, add
# QK-LayerNorm (Dehghani et al. 2023, arXiv:2302.05442; Wortsman et al. 2023,
# arXiv:2309.14322) or σReparam (Zhai et al. 2023, arXiv:2303.06296). A task that really
# wants one-hot attention may legitimately reach low entropy, so judge the finding together
# with the loss. See [plot_monitor_series][attnscale.plot_monitor_series].
