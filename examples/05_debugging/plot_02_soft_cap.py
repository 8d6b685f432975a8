r"""# Step 4: a soft-cap dropped by one code path

Gemma 2 and Grok bound their attention logits with a soft-cap, $\kappa\tanh(s/\kappa)$.
Several inference backends silently dropped it. Here one model has two code paths, an eager one
that applies the cap and a "fast" one that forgets it; the monitor shows the logit range change.
"""

# %%
SEED = 0
BATCH, SEQ, D_HEAD, HEADS, CAP = 2, 64, 64, 4, 5.0

import math

import matplotlib.pyplot as plt
import torch
from torch import nn
from torch.nn import functional as F

from attnscale import AttentionMonitor, plot_monitor_summary
from guide.style import use_style

use_style()

torch.manual_seed(SEED)


class CappedAttention(nn.Module):
    def __init__(self, fast: bool) -> None:
        super().__init__()
        self.fast = fast

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> torch.Tensor:
        if self.fast:  # bug: the fused path has no soft-cap
            return F.scaled_dot_product_attention(q, k, v)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (b, heads, n, n)
        scores = CAP * torch.tanh(scores / CAP)
        return torch.softmax(scores, dim=-1) @ v  # (b, heads, n, d_head)


# q and k with large norms, as after long training: raw logits spread well past the cap
q, k, v = (3 * torch.randn(BATCH, HEADS, SEQ, D_HEAD) for _ in range(3))
reports = {}
for name, fast in (("eager (capped)", False), ("fast (cap dropped)", True)):
    model = CappedAttention(fast)
    with AttentionMonitor(model) as monitor:
        out = model(q, k, v)
    reports[name] = monitor.report()

# %%
# ## The logit range of each path
#
# The capped path's largest logit is bounded by the cap; the fast path's is not.

fig, ax = plt.subplots(figsize=(6.4, 2.4), layout="constrained")
plot_monitor_summary(reports, metric="max_abs_logit", ax=ax, xlabel="max |logit|")
ax.axvline(CAP, color="0.3", linestyle="--", linewidth=1)
ax.set_title("Largest attention logit per code path (dashed: the cap)")
for name, report in reports.items():
    print(
        f"{name}: max |logit| = {report.records[0].last.max_abs_logit:.2f}, "
        f"within-row std = {report.records[0].last.logit_std:.2f}"
    )

# %%
# ## The reports
#
# Both paths are captured: the eager one through its softmax, the fast one through
# `F.scaled_dot_product_attention`. The fast path's report warns about large logits.

for name, report in reports.items():
    print(f"--- {name}")
    print(report)

# %%
# ## The fix
#
# Apply the cap on every path, or refuse the fast path when a cap is configured. Comparing the
# two outputs on the same input is a quick test that catches the bug:

with torch.no_grad():
    eager, fast = CappedAttention(False)(q, k, v), CappedAttention(True)(q, k, v)
print(f"max |eager - fast| = {(eager - fast).abs().max():.3f}")

# %%
# ## The math and references
#
# $\kappa\tanh(s/\kappa)$ is close to $s$ for $|s| \ll \kappa$ and bounded by $\kappa$, so it
# changes only the extreme logits. Gemma 2 uses $\kappa = 50$, Grok-1 $\kappa = 30$; this page
# uses a small cap so that it matters at a small size. The dropped soft-cap is a real bug class
# (Gemma 2 in vLLM, sglang and lm-eval-harness; the reports are linked from [where the scale
# lives in real code](plot_07_knobs_in_real_code.md), which also runs a soft-cap through
# FlexAttention). See [AttentionMonitor][attnscale.AttentionMonitor].
