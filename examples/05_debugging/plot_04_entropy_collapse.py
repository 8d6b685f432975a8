r"""# Step 6: entropy collapse during high-learning-rate training

Attention logits can grow during training until rows are one-hot. Here a small attention model
is trained twice, at a common Adam learning rate and at one a hundred times higher (the two
values in `LEARNING_RATES`), with the monitor on for every step; the plot shows entropy and the
largest logit against step.
"""

# %%
SEED = 0
BATCH, SEQ, D_MODEL, HEADS, STEPS = 16, 16, 64, 2, 40
LEARNING_RATES = (1e-3, 1e-1)

import matplotlib.pyplot as plt
import torch
from torch import nn
from torch.nn import functional as F

from attnscale import AttentionMonitor, plotting
from attnscale._docs.figures import one_legend
from attnscale._docs.style import use_style

use_style()


class TinyModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True)
        self.out = nn.Linear(D_MODEL, D_MODEL)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.attn(x, x, x, need_weights=False)[0])


def train(lr: float) -> tuple[AttentionMonitor, list[float]]:
    torch.manual_seed(SEED)
    model = TinyModel()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(SEED)
    losses = []
    with AttentionMonitor(model) as monitor:
        for _ in range(STEPS):
            x = torch.randn(BATCH, SEQ, D_MODEL, generator=g)
            # the previous token; the model has no positional information, so attention
            # cannot find it, and the loss cannot go far below the target's variance, 1
            target = x.roll(1, dims=1)
            loss = F.mse_loss(model(x), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    return monitor, losses


runs = {lr: train(lr) for lr in LEARNING_RATES}

# %%
# ## Entropy and the largest logit against step

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7, 3), layout="constrained")
for i, (lr, (monitor, _)) in enumerate(runs.items()):
    report = monitor.report()
    run = {"color": f"C{i}", "label": f"lr {lr:g}", "legend": False}  # one colour per rate
    plotting.plot_monitor_series(
        report, metric="normalized_entropy", ax=ax1, ylabel=r"entropy / $\ln n$", **run
    )
    plotting.plot_monitor_series(
        report, metric="max_abs_logit", ax=ax2, ylabel="max |logit|", **run
    )
ax2.set_yscale("log")
one_legend(fig)
fig.suptitle("Attention entropy and largest logit during training, two learning rates")

# %%
# ## The reports

for lr, (monitor, losses) in runs.items():
    print(f"--- lr {lr:g}: final loss {losses[-1]:.4f}")
    print(monitor.report())
low, high = (runs[lr][1][-1] for lr in LEARNING_RATES)
print(f"final loss, high rate minus low rate: {high - low:+.4f}")

# %%
# ## What to do
#
# In the figure the low-rate run stays close to uniform attention while the high-rate run's
# entropy falls and its largest logit grows step after step. The printed reports say the same:
# no findings at the low rate, `large-logits` and `entropy-collapse` at the high rate, each at
# the step where it was worst. The collapse bought nothing: this model has no positional
# information, so it cannot locate the previous token at either rate, and the printed
# difference of final losses shows the high-rate run is not better for it. Here the one-hot
# rows are a symptom of the step size, not of a task that wants sharp attention.
#
# When a report shows these findings during training, lower the learning rate, add
# QK-LayerNorm (Dehghani et al. 2023, arXiv:2302.05442; Wortsman et al. 2023,
# arXiv:2309.14322) or σReparam (Zhai et al. 2023, arXiv:2303.06296). A task that really
# wants one-hot attention may legitimately reach low entropy, so judge the finding together
# with the loss. See [plot_monitor_series][attnscale.plot_monitor_series].
