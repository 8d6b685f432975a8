r"""# The checklist

The steps of this section as a short list to print and keep next to the model code, each
linked to the page that demonstrates it.
"""

# %%
# ## Run the monitor
#
# ```python
# from attnscale import AttentionMonitor
# with AttentionMonitor(model) as monitor:
#     loss = model(batch).loss; loss.backward()   # or a few training steps
# print(monitor.report())
# ```
#
# ## Check, in order
#
# 1. **Scale present?** `scale/ref` near 8 for head_dim 64 means no scale
#    ([step 1](plot_01_scale_bugs.md)).
# 2. **Right dimension?** $1/\sqrt{\text{heads}}$ means $\sqrt{d_\text{model}}$ was used
#    ([step 2](plot_01_scale_bugs.md)).
# 3. **Scaled once?** $1/\sqrt{d_\text{head}}$ means double scaling
#    ([step 3](plot_01_scale_bugs.md)).
# 4. **Every code path the same?** Compare reports (and outputs) of eager and fused paths; a
#    dropped soft-cap shows as a wider logit range ([step 4](plot_02_soft_cap.md)). Where each
#    library keeps its scale and cap: [the scale in real code](plot_07_knobs_in_real_code.md).
# 5. **Half precision safe?** `fp16-overflow-risk` or `non-finite`: scale q first or upcast
#    ([step 5](plot_03_fp16_overflow.md)).
# 6. **Stable over training?** Plot entropy and max |logit| against step; falling entropy with
#    growing logits is collapse ([step 6](plot_04_entropy_collapse.md)). One monitor can watch
#    the whole run: `AttentionMonitor(model, every=50, optimizer=opt, history=500, log=...)`
#    logs the statistics every 50 optimizer steps to any logger, with every query row's
#    per-head max logit under `all_rows=True` ([AttentionMonitor][attnscale.AttentionMonitor]).
#
# 7. **Anything measured at all?** `no-attention` is a warning: the report cannot vouch for
#    attention it never saw: a custom kernel, FlexAttention under `torch.compile`
#    ([the scale in real code](plot_07_knobs_in_real_code.md)), or the wrong model passed to
#    the monitor. `compiled` is a warning too: a `torch.compile`d module ran and nothing was
#    measured inside it; run the uncompiled module for the monitored steps. The
#    [real-architectures page](plot_06_real_architectures.md) shows what a full report looks
#    like on each `transformers` family the test suite builds.
#
# A `scale-mismatch` is a warning even when the logits are small. It becomes an error when the
# scale is too large and the within-row logit std already exceeds `max_logit_std` (printed
# below), as for the missing scale of [step 1](plot_01_scale_bugs.md). It is `info` only for a
# scale the monitor can tell is deliberate: T5's scale folded into the initialisation, or a scale
# you declare with `AttentionMonitor(model, expected_scale=...)`. `masked-rows` at `info` (query
# rows with no key, such as padding) needs no action; as an error, those rows produce NaN.

import attnscale
from guide.printing import fold

print(fold(f"thresholds used by the monitor: {attnscale.THRESHOLDS}"))
