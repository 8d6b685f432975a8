r"""# Step 5: float16 overflow of QKᵀ

Float16 stops at 65504. An unscaled $q\cdot k$ of large activations passes it before the scale
is applied, the score becomes `inf` and the softmax `NaN`. The monitor flags the risk before it
happens and the overflow when it does.
"""

# %%
SEED = 0
BATCH, HEADS, SEQ, D_HEAD = 1, 4, 32, 64
GROWTH = (2.0, 24.0, 48.0)  # activation sizes, as if q and k grew during training

import math

import matplotlib.pyplot as plt
import torch

from attnscale import AttentionMonitor, plot_monitor_summary
from guide.style import use_style

use_style()

torch.manual_seed(SEED)
base_q = torch.randn(BATCH, HEADS, SEQ, D_HEAD)
base_k = torch.randn(BATCH, HEADS, SEQ, D_HEAD)


def attention_fp16(q: torch.Tensor, k: torch.Tensor, upcast: bool) -> torch.Tensor:
    c = 1 / math.sqrt(q.shape[-1])
    if upcast:  # the fix: form the scores in float32
        q, k = q.float(), k.float()
    # the bug (upcast=False): the raw product is formed in float16 before the scale
    scores = (q @ k.transpose(-2, -1)) * c  # (b, heads, n, n)
    return torch.softmax(scores, dim=-1)


reports = {}
for growth in GROWTH:
    q, k = (growth * base_q).half(), (growth * base_k).half()
    with AttentionMonitor() as monitor:
        weights = attention_fp16(q, k, upcast=False)
    reports[f"x{growth:g}"] = monitor.report()
    print(f"growth x{growth:g}: NaN weights = {int(weights.isnan().sum())}")

# %%
# ## Largest raw product against the float16 limit

fig, ax = plt.subplots(figsize=(6.4, 2.4), layout="constrained")
plot_monitor_summary(
    reports,
    metric="max_abs_qk",
    ax=ax,
    xlabel="max |q·k|",
    log=True,
    marks={
        f"float16 maximum {torch.finfo(torch.float16).max:.0f}": torch.finfo(
            torch.float16
        ).max
    },
)
ax.set_title("Largest unscaled q·k in float16 (overflow drawn at the edge as inf)")

# %%
# ## The reports
#
# Small activations: no fp16 finding. Larger: `fp16-overflow-risk` as a warning. Largest: the
# product overflowed, an error, and `non-finite` as well. Note that logits this large are also
# reported as `large-logits`: with the scale $1/\sqrt{64}$, a raw product of 65504 is a logit
# of 8188, so float16 overflow of $QK^\top$ only happens once attention is already saturated;
# the overflow turns a saturated softmax into NaN.

for name, report in reports.items():
    print(f"--- growth {name}")
    print(report)

# %%
# ## The fix
#
# Compute the scores in float32 (upcast), or multiply q by the scale before the product, or use
# `torch.nn.functional.scaled_dot_product_attention`. Here: the upcast. The NaN is gone; the
# large logits remain, and the report says so.

q, k = (GROWTH[-1] * base_q).half(), (GROWTH[-1] * base_k).half()
with AttentionMonitor() as monitor:
    weights = attention_fp16(q, k, upcast=True)
fixed = monitor.report()
print(f"NaN weights after the fix: {int(weights.isnan().sum())}")
print(fixed)

# %%
# ## References
#
# - [transformers#28163](https://github.com/huggingface/transformers/pull/28163): Phi-2's
#   logits came out NaN in float16 from attention overflow; the thread proposes upcasting q and k.
# - [ultralytics#24990](https://github.com/ultralytics/ultralytics/pull/24990): the query is now
#   multiplied by the scale before $QK^\top$, to keep the product within float16's range.
#
# The monitor's headroom threshold (`fp16_headroom`, see [THRESHOLDS][attnscale.THRESHOLDS])
# sets how early it warns.
