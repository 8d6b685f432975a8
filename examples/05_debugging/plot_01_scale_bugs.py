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
from attnscale import AttentionMonitor, plot_monitor_summary
from guide.style import colours, use_style

use_style()
STRATEGY_COLOURS = colours(["inverse_sqrt", "none", "inverse_d"])

torch.manual_seed(SEED)
x = torch.randn(BATCH, SEQ, D_MODEL)

# %%
# ## Contrast: a healthy encoder
#
# Wrap the forward pass in the monitor. With the model passed in, each record is named by its
# module path. PyTorch's own attention scales by $1/\sqrt{d_\text{head}}$, so the
# `scale/ref` column reads 1 and the report has no findings.

encoder = nn.TransformerEncoder(
    nn.TransformerEncoderLayer(D_MODEL, HEADS, batch_first=True),
    2,
    enable_nested_tensor=False,
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
# softmax. The correct layer sits in the middle, on the dashed line: with PyTorch's default
# `nn.Linear` init the queries and keys have variance $1/3$, so correctly scaled logits have a
# standard deviation near $1/3$, not 1 (a correct reading, not a bug). No scale widens the
# logits by about $\sqrt{d_\text{head}}$; the other two bugs compress them toward uniform
# attention.

var_q = attnscale.init_projection_variance("default", D_MODEL, D_MODEL)
moments = attnscale.scaled_dot_product_moments(
    D_MODEL // HEADS, var_q=var_q, var_k=var_q
)
expected = math.sqrt(moments.variance)
fig, ax = plt.subplots(figsize=(6.4, 3.2), layout="constrained")
LABELS = {
    "correct": r"correct, $1/\sqrt{d_\mathrm{head}}$",
    "none": "no scale",
    "d_model": r"$1/\sqrt{d_\mathrm{model}}$",
    "double": r"scaled twice, $1/d_\mathrm{head}$",
}
plot_monitor_summary(
    {LABELS[mode]: report for mode, report in reports.items()},
    metric="logit_std",
    ax=ax,
    xlabel="within-row logit std",
    log=True,
    marks={f"expected with nn.Linear's default init: {expected:.2f}": expected},
    # the strategies' colours where a bug is a strategy's scale (twice scaled is 1/d); a
    # colour no strategy has for the width
    colors={
        LABELS["correct"]: STRATEGY_COLOURS["inverse_sqrt"],
        LABELS["none"]: STRATEGY_COLOURS["none"],
        LABELS["d_model"]: "#8C564B",
        LABELS["double"]: STRATEGY_COLOURS["inverse_d"],
    },
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
# The monitor follows every scalar factor applied to q or k on the way to the product, so a
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
# ## Severity follows the code, and wide logits raise it
#
# Every bug above is reported on a freshly initialised model, before training has widened its
# logits: by the time they are large the run has gone wrong. So a scale that differs from
# $1/\sqrt{d_\text{head}}$ is a warning even while the logits are small, as for the
# $\sqrt{d_\text{model}}$ and double-scaling bugs. A scale that is too large becomes an error
# when the measured within-row logit std already exceeds the monitor's `max_logit_std`
# threshold: that is why the missing scale is an `[ERROR]` (its report prints the measured std).
# A scale that differs is only `info` when the monitor can tell it is deliberate. One such case
# is T5, which has no division at run time: its initialisation gives $W_q$ a standard deviation
# $(d_\text{model} d_\text{head})^{-1/2}$ against $d_\text{model}^{-1/2}$ for $W_k$, which
# folds the scale into the weights. The monitor reads a factor of $\sqrt{d_\text{head}}$, sees
# queries that much smaller than the keys, and reports the fold:

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
last = t5_report.records[0].last
print([(f.code, f.severity) for f in t5_report.findings])
print(f"T5-style: scale read x sqrt(d_head) = {last.scale_ratio:.3g}")
print(f"q std / k std = {last.q_std / last.k_std:.3g}, 1/sqrt(d_head) = {dh**-0.5:.3g}")

# %%
# The other case is a scale you declare. μP-style models multiply by $1/d_\text{head}$ on
# purpose; `expected_scale` takes one number, a mapping from call sites (or glob patterns) to
# numbers, or a function of the site and the head size. A matching scale is then `info`, and a
# scale that differs from the declared one is a warning:

torch.manual_seed(SEED)
mup = HandAttention("double")  # 1/sqrt(d_head) twice: 1/d_head, as muP intends
with AttentionMonitor(
    mup, expected_scale=lambda site, head_dim: 1 / head_dim
) as monitor:
    mup(x)
print([(f.code, f.severity) for f in monitor.report().findings])

# %%
# ## The math
#
# For logits $c\,q\cdot k$ with $q, k \in \mathbb{R}^{d_h}$ of i.i.d. entries,
# $\operatorname{Var}(c\,q\cdot k) = c^2 d_h \sigma_q^2 \sigma_k^2$. The reference scale
# $c = 1/\sqrt{d_h}$ removes the $d_h$; no scale leaves a factor $\sqrt{d_h}$ in the standard
# deviation, $1/\sqrt{d_\text{model}}$ a factor $1/\sqrt{\text{heads}}$, double scaling a factor
# $1/\sqrt{d_h}$. For hand-written code the monitor reads $c$ from the code: it follows the
# product $P = QK^\top$ through views, casts, masks and scalar multiplications to the softmax,
# and multiplies the scalar factors it meets, including those applied to $q$ or $k$ before
# the product; $d_h$ is the size the product sums over. Where the path goes through an
# operation it does not follow, it falls back to the least-squares factor between the
# softmax input $s$ and $P$, $c = \langle s, P\rangle / \langle P, P\rangle$ over finite,
# unmasked entries.
#
# ## References
#
# - Vaswani et al. 2017, arXiv:1706.03762, §3.2.1.
# - T5 (Raffel et al. 2020, arXiv:1910.10683) folds the scale into the initialisation.
# - API: [AttentionMonitor][attnscale.AttentionMonitor],
#   [plot_monitor_summary][attnscale.plot_monitor_summary].

assert attnscale.AttentionMonitor is AttentionMonitor
