r"""
# Real scaling bugs, caught

The other pages of this section plant bugs in code written for them. This one turns to bugs
that people actually shipped: each case below follows the code path of one public issue or
pull request, in `transformers`, `llama.cpp`, MaxText, x-transformers and other projects,
and reproduces it in a small module written for this guide (same projections and head
split, the scale applied at the same place, through `F.scaled_dot_product_attention` or by
hand, with seeded random weights), once as reported and once as fixed. Next to them are
*traps*: deliberate designs that look like scaling bugs (the scale split as $d^{-1/4}$ on q
and on k, the scale folded into T5's initialisation, Megatron's query-key layer scaling)
and must not be flagged.

The rule, declared before the results: a bug is **caught** when the monitor reports a
scaling finding (`scale-mismatch`, `fp16-overflow-risk` or `non-finite`) at warning or above
on the reported code, and nothing at warning or above on the fix. A trap is **passed** when
neither version gets any warning.
"""

# %%
import collections

from attnscale._docs.real_bugs import CASES, SCALING_CODES, outcome
from attnscale._docs.tables import Table

results = {case.name: outcome(case) for case in CASES}

# %%
# ## The bugs
#
# Each row links to the thread; the two "findings" columns list what the monitor reported at
# warning or above on the code as reported and as fixed. Where the intended scale is a
# choice the monitor cannot know (a config value, a published model's own scale), the case
# declares it with `AttentionMonitor(expected_scale=...)`, as a user would, and the
# "declared scale" column shows it.

# %%
bugs = [c for c in CASES if c.kind == "bug"]
Table(
    ["bug (and its thread)", "declared scale", "reported: findings", "fixed: findings", "caught"],
    [
        [
            c.title,
            "-" if c.expected_scale is None else f"{c.expected_scale:.4g}",
            ", ".join(sorted(results[c.name][0])) or "none",
            ", ".join(sorted(results[c.name][1])) or "none",
            "yes" if results[c.name][0] & SCALING_CODES and not results[c.name][1] else "NO",
        ]
        for c in bugs
    ],
    links={"bug (and its thread)": [c.thread for c in bugs]},
)

# %%
# ## The traps

# %%
traps = [c for c in CASES if c.kind == "trap"]
Table(
    ["trap (and its thread)", "declared scale", "findings (either version)", "passed"],
    [
        [
            c.title,
            "-" if c.expected_scale is None else f"{c.expected_scale:.4g}",
            ", ".join(sorted(results[c.name][0] | results[c.name][1])) or "none",
            "yes" if not results[c.name][0] | results[c.name][1] else "NO",
        ]
        for c in traps
    ],
    links={"trap (and its thread)": [c.thread for c in traps]},
)

# %%
# ## Recall and false positives

# %%
caught = [c for c in bugs if results[c.name][0] & SCALING_CODES and not results[c.name][1]]
fixes_flagged = [c for c in bugs if results[c.name][1]]
traps_flagged = [c for c in traps if results[c.name][0] | results[c.name][1]]
projects = collections.Counter(c.project for c in CASES)
print(f"bugs caught: {len(caught)} of {len(bugs)}")
print(f"fixed versions flagged: {len(fixes_flagged)} of {len(bugs)}")
print(f"traps flagged: {len(traps_flagged)} of {len(traps)}")
print(f"cases declaring their scale: {sum(c.expected_scale is not None for c in CASES)}")
print(f"projects: {len(projects)}")

# %%
# ## On a trained model
#
# The cases above run on freshly initialised weights, whose attention is nearly uniform.
# Trained heads are sharp on purpose (a head that attends to the previous token, one that
# copies), and a monitor calibrated on random weights could mistake them for collapse. So the
# same checks run on a trained model: `transformers`' GPT-2 at a small size (2 layers, 4
# heads of 32), trained on the bytes of CPython's `pydoc_data.topics` for 4,000 AdamW steps.
# That takes minutes, more than a build can spend, so it was run once and stored with its
# provenance:

# %%
import numpy as np

from attnscale._docs import calibration, stored

trained = stored.load("trained_lm")
print(trained.summary())
loss = trained.parts["seed0"]["loss"]
quarters = [float(np.mean(q)) for q in np.array_split(loss, 4)]
print("training loss, mean of each quarter of the run:", ", ".join(f"{q:.3f}" for q in quarters))
print(f"held-out loss: {float(trained.parts['seed0']['held_out']):.3f} nats per byte")

# %%
# The monitor watches the trained model on eight batches of held-out text. Then each bug in
# turn is planted in every attention module (the scale the module applies is replaced) and
# the monitor watches one batch: the target is no warning on the healthy model and a scaling
# finding for each planted bug.

# %%
runs = calibration.run(8)
print(runs.healthy)
print(
    f"\nmean normalised entropy: trained {runs.trained_entropy:.3f}, "
    f"the same model untrained {runs.initial_entropy:.3f}"
)
print(f"warnings on the healthy trained model: {len(runs.healthy_warnings)}")
Table(
    ["bug planted in the trained model", "findings at warning or above", "caught"],
    [
        [bug, ", ".join(sorted(codes)) or "none", "yes" if codes & SCALING_CODES else "NO"]
        for bug, codes in runs.planted.items()
    ],
)

# %%
# The large-logit rule was set on this model: its first layer reaches the within-row logit
# spread printed above while almost no row saturates, so the spread alone warns only far
# above it (`large_logit_std` in
# [THRESHOLDS][attnscale.THRESHOLDS]), and saturated rows, the symptom itself, are what warn
# first.
#
# While this page is built, the first steps of the training run are repeated and must match
# the stored run, or the build fails:

# %%
checks = stored.verify(trained, stored.rerun("trained_lm"))
stored.checks_table(checks)

# %%
# ## What the cases teach
#
# - **Most bugs need no declaration.** A missing scale, a scale applied twice, a scale
#   inverted, a square root left out, or a scale computed from the model width instead of
#   the head's are read from the code, whatever the size of the logits.
# - **Some need one.** When the intended scale is itself a choice (GPT-2's
#   `scale_attn_by_inverse_layer_idx`, Gemma-2-27B's `query_pre_attn_scalar`),
#   no statistic can tell the bug from the design: the same code with another config is
#   correct. PLaMo2's port to llama.cpp normalised q and k per head and then applied no
#   scale, which is exactly Gemma 3n's deliberate design; the monitor reads q and k as
#   normalised and checks the logit bound instead, so only the declared reference scale
#   catches that port. Declaring the scale is what turns the check on, and it is what a
#   project's own test should do.
# - **Look-alikes stay quiet for a reason the monitor measures.** A scale split between q and
#   k multiplies to the same $1/\sqrt{d_k}$; a scale folded into the initialisation shows as
#   queries $\sqrt{d_k}$ times smaller than the keys; q and k normalised per head (Gemma 3n)
#   show as row norms that do not vary, and then the logit bound, not $1/\sqrt{d_k}$, is
#   what must be right: x-transformers' flash path shrank it until no key could dominate.
#
# The test suite (`tests/test_real_bugs.py`) runs the same cases and fails when a bug is
# missed, a fix or a trap is flagged, or a finding names the wrong cause.
