r"""# Steps 1-3: a missing, wrong or doubled scale

A healthy `nn.TransformerEncoder` first, for contrast, then hand-written attention with three
planted scale bugs: no scale, $\sqrt{d_\text{model}}$ instead of $\sqrt{d_\text{head}}$, and
double scaling. The monitor measures the effective scale and names the likely cause.
"""

# %%
SEED = 0
BATCH, SEQ, D_MODEL, HEADS = 4, 64, 256, 4

import math

import matplotlib.pyplot as plt
import torch
from torch import nn

import attnscale
from attnscale import AttentionMonitor, plotting

torch.manual_seed(SEED)
x = torch.randn(BATCH, SEQ, D_MODEL)

# %%
# ## Contrast: a healthy encoder
#
# Wrap the forward pass in the monitor. With the model passed in, each record is named by its
# module path. PyTorch's own attention scales by $1/\sqrt{d_\text{head}}$, so the
# `scale/ref` column reads 1 and the report has no findings.

encoder = nn.TransformerEncoder(
    nn.TransformerEncoderLayer(D_MODEL, HEADS, batch_first=True), 2, enable_nested_tensor=False
).eval()
with torch.no_grad(), AttentionMonitor(encoder) as monitor:
    encoder(x)
print(monitor.report())


# %%
# ## A hand-written attention layer with a switch for each bug
#
# `scale_mode` selects the planted bug. This is the shape of code found in many tutorials.


class HandAttention(nn.Module):
    def __init__(self, scale_mode: str) -> None:
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(D_MODEL, D_MODEL) for _ in range(3))
        self.scale_mode = scale_mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        dh = d // HEADS
        q = self.q(x).view(b, n, HEADS, dh).transpose(1, 2)  # (b, heads, n, dh)
        k = self.k(x).view(b, n, HEADS, dh).transpose(1, 2)  # (b, heads, n, dh)
        v = self.v(x).view(b, n, HEADS, dh).transpose(1, 2)  # (b, heads, n, dh)
        if self.scale_mode == "double":
            q = q * dh**-0.5  # bug: q is pre-scaled ...
        scores = q @ k.transpose(-2, -1)  # (b, heads, n, n)
        if self.scale_mode in ("correct", "double"):
            scores = scores / math.sqrt(dh)  # ... and the scores are divided again
        elif self.scale_mode == "d_model":
            scores = scores / math.sqrt(d)  # bug: the model width, not the head width
        # scale_mode == "none": bug, no scale at all
        weights = torch.softmax(scores, dim=-1)
        return (weights @ v).transpose(1, 2).reshape(b, n, d)  # (b, n, d)


reports = {}
for mode in ("correct", "none", "d_model", "double"):
    torch.manual_seed(SEED)
    model = HandAttention(mode)
    with AttentionMonitor(model) as monitor:
        model(x)
    reports[mode] = monitor.report()

# %%
# ## What the monitor measured
#
# The figure shows, per variant, the within-row standard deviation of the logits that enter the
# softmax. The correct layer sits in the middle; no scale widens the logits by about
# $\sqrt{d_\text{head}}$, the other two bugs compress them toward uniform attention.

fig, ax = plt.subplots(figsize=(6.4, 3.2), layout="constrained")
plotting.plot_monitor_summary(
    reports, metric="logit_std", ax=ax, xlabel="within-row logit std", log=True
)
ax.set_title("Logit spread per planted scale bug (hand-written attention)")

# %%
# ## Step 1: no scale
#
# The report gives the measured factor (`scale/ref`, the effective scale times
# $\sqrt{d_\text{head}}$) and names the cause.

print(reports["none"])

# %%
# ## Step 2: $\sqrt{d_\text{model}}$ instead of $\sqrt{d_\text{head}}$
#
# With `HEADS` heads the factor is $1/\sqrt{\text{heads}}$.

print(reports["d_model"])

# %%
# ## Step 3: double scaling
#
# The monitor relates the `q` that enters the product to the output of its `nn.Linear`, so a
# pre-multiplied `q` counts toward the effective scale.

print(reports["double"])

# %%
# ## The fix
#
# Scale exactly once, by $1/\sqrt{d_\text{head}}$ (or call
# `torch.nn.functional.scaled_dot_product_attention`, whose default is that scale). The fixed
# layer's report:

print(reports["correct"])
print(f"findings after the fix: {len(reports['correct'].findings)}")

# %%
# ## Why the severity depends on the logits, not on the code
#
# T5 has no division at run time: its initialisation gives $W_q$ a standard deviation
# $(d_\text{model} d_\text{head})^{-1/2}$, which folds the scale into the weights. The monitor
# still measures a factor of about $\sqrt{d_\text{head}}$, but the logits are in a healthy
# range, so it reports `info`, not a warning:

torch.manual_seed(SEED)
t5_like = HandAttention("none")
dh = D_MODEL // HEADS
nn.init.normal_(t5_like.q.weight, std=(D_MODEL * dh) ** -0.5)
nn.init.normal_(t5_like.k.weight, std=D_MODEL**-0.5)
nn.init.zeros_(t5_like.q.bias)
nn.init.zeros_(t5_like.k.bias)
with AttentionMonitor(t5_like) as monitor:
    t5_like(x)
t5_report = monitor.report()
print([(f.code, f.severity) for f in t5_report.findings])
print(f"T5-style within-row logit std: {t5_report.records[0].last.logit_std:.3f}")

# %%
# ## The math
#
# For logits $c\,q\cdot k$ with $q, k \in \mathbb{R}^{d_h}$ of i.i.d. entries,
# $\operatorname{Var}(c\,q\cdot k) = c^2 d_h \sigma_q^2 \sigma_k^2$. The reference scale
# $c = 1/\sqrt{d_h}$ removes the $d_h$; no scale leaves a factor $\sqrt{d_h}$ in the standard
# deviation, $1/\sqrt{d_\text{model}}$ a factor $1/\sqrt{\text{heads}}$, double scaling a factor
# $1/\sqrt{d_h}$. For hand-written code the monitor finds $c$ as the least-squares factor
# between the softmax input $s$ and the product $P = QK^\top$ of the same shape,
# $c = \langle s, P\rangle / \langle P, P\rangle$ over finite, unmasked entries, and $d_h$ as
# the inner dimension of $P$.
#
# ## References
#
# - Vaswani et al. 2017, arXiv:1706.03762, §3.2.1.
# - T5 (Raffel et al. 2020, arXiv:1910.10683) folds the scale into the initialisation.
# - API: [AttentionMonitor][attnscale.AttentionMonitor],
#   [plot_monitor_summary][attnscale.plot_monitor_summary].

assert attnscale.AttentionMonitor is AttentionMonitor
