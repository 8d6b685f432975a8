r"""
# Real scaling bugs, caught

The other pages of this section plant bugs in code written for them. This one turns to bugs
that people actually shipped: each case below follows the code path of one public issue or
pull request, in `transformers`, `llama.cpp`, MaxText, x-transformers and other projects,
and reproduces it in a small module written for this guide (same projections and head
split, the scale applied at the same place, through `F.scaled_dot_product_attention` or by
hand, with seeded random weights), once as reported and once as fixed. Next to them are
*traps*: code that someone reported in a public thread as a scaling bug and that is correct
(q scaled alone before the product, the scale split as $d^{-1/4}$ on q and on k, the scale
folded into T5's initialisation, `head_dim ** -0.5` read as a multiplication, muP's $1/d$,
Gemma's own `query_pre_attn_scalar`). They must not be flagged.

The rule, declared before the results: a bug is **caught** when the monitor reports a
scaling finding (`scale-mismatch`, `fp16-overflow-risk` or `non-finite`) at warning or above
on the reported code, and nothing at warning or above on the fix. A trap is **passed** when
neither version gets any warning.
"""

# %%
import collections

from guide.intervals import wilson_interval
from guide.real_bugs import CASES, GROUPS, SCALING_CODES, Case, outcome
from guide.tables import Table

results = {case.name: outcome(case) for case in CASES}


def is_caught(case: Case) -> bool:
    """A bug is caught: a scaling finding on the code as reported, nothing on the
    fix."""
    reported, fixed = results[case.name]
    return bool(reported & SCALING_CODES) and not fixed


def is_flagged(case: Case) -> bool:
    """A trap is flagged: any warning on either version."""
    return bool(results[case.name][0] | results[case.name][1])


def declared(case: Case) -> str:
    return "-" if case.expected_scale is None else f"{case.expected_scale:.4g}"


def bug_table(group: str) -> Table:
    cases = [c for c in CASES if c.group == group]
    return Table(
        [
            GROUPS[group][1],
            "declared scale",
            "reported: findings",
            "fixed: findings",
            "caught",
        ],
        [
            [
                c.title,
                declared(c),
                ", ".join(sorted(results[c.name][0])) or "none",
                ", ".join(sorted(results[c.name][1])) or "none",
                "yes" if is_caught(c) else "NO",
            ]
            for c in cases
        ],
        links={GROUPS[group][1]: [c.thread for c in cases]},
    )


def trap_table(group: str) -> Table:
    cases = [c for c in CASES if c.group == group]
    return Table(
        [GROUPS[group][1], "declared scale", "findings (either version)", "passed"],
        [
            [
                c.title,
                declared(c),
                ", ".join(sorted(results[c.name][0] | results[c.name][1])) or "none",
                "NO" if is_flagged(c) else "yes",
            ]
            for c in cases
        ],
        links={GROUPS[group][1]: [c.thread for c in cases]},
    )


# %%
# ## The bugs
#
# Each row links to the thread; the two "findings" columns list what the monitor reported at
# warning or above on the code as reported and as fixed. Where the intended scale is a
# choice the monitor cannot know (a config value, a published model's own scale), the case
# declares it with `AttentionMonitor(expected_scale=...)`, as a user would, and the
# "declared scale" column shows it. The bugs come in four groups, one table each.

# %%
bug_table("missing")

# %%
bug_table("inverted")

# %%
bug_table("width")

# %%
bug_table("number")

# %%
# ## The traps
#
# Each of these was reported in its thread as a scaling bug, and each is correct. They come in
# four groups: the scale applied at another place than the scores, the scale split between q
# and k, a correct scale that reads wrong, and a scale other than $1/\sqrt{d_k}$ on purpose.

# %%
trap_table("moved")

# %%
trap_table("split")

# %%
trap_table("misread")

# %%
trap_table("purpose")

# %%
# ## Recall and false positives
#
# Recall is the share of bugs caught; the false-positive rate is the share of traps flagged.
# Each comes with Wilson's 95% interval, which keeps its coverage with a few dozen cases and
# at rates near 0 or 1.

# %%
bugs = [c for c in CASES if c.kind == "bug"]
traps = [c for c in CASES if c.kind == "trap"]
caught = [c for c in bugs if is_caught(c)]
traps_flagged = [c for c in traps if is_flagged(c)]
recall_low, recall_high = wilson_interval(len(caught), len(bugs))
fp_low, fp_high = wilson_interval(len(traps_flagged), len(traps))
print(f"bugs caught: {len(caught)} of {len(bugs)}")
print(
    f"recall: {len(caught) / len(bugs):.2f}, 95% interval {recall_low:.2f} to "
    f"{recall_high:.2f}"
)
print(
    f"fixed versions flagged: {sum(bool(results[c.name][1]) for c in bugs)} of "
    f"{len(bugs)}"
)
print(f"traps flagged: {len(traps_flagged)} of {len(traps)}")
print(
    f"false-positive rate: {len(traps_flagged) / len(traps):.2f}, "
    f"95% interval {fp_low:.2f} to {fp_high:.2f}"
)
print(
    f"cases declaring their scale: {sum(c.expected_scale is not None for c in CASES)}"
)
print(f"projects: {len(collections.Counter(c.project for c in CASES))}")

# %%
# The cases the monitor gets wrong, with what it reported:

# %%
wrong = [c for c in bugs if not is_caught(c)] + traps_flagged
Table(
    ["case (and its thread)", "kind", "reported: findings", "fixed: findings"],
    [
        [
            c.title,
            c.kind,
            ", ".join(sorted(results[c.name][0])) or "none",
            ", ".join(sorted(results[c.name][1])) or "none",
        ]
        for c in wrong
    ]
    or [["none", "-", "-", "-"]],
    links={"case (and its thread)": [c.thread for c in wrong]} if wrong else None,
)

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

from guide import calibration, stored

trained = stored.load("trained_lm")
print(trained.summary())
loss = trained.parts["seed0"]["loss"]
quarters = [float(np.mean(q)) for q in np.array_split(loss, 4)]
print(
    "training loss, mean of each quarter of the run:",
    ", ".join(f"{q:.3f}" for q in quarters),
)
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
        [
            bug,
            ", ".join(sorted(codes)) or "none",
            "yes" if codes & SCALING_CODES else "NO",
        ]
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
# - **The same code can be a bug's fix and a trap.** A kernel that needs a head size it
#   supports gets q, k and v padded with zero columns, which leave every $q \cdot k$
#   unchanged: the scale must then come from the real head size (vllm-ascend kept it, ipex-llm
#   had to add it). A check that reads the head size off the tensor the kernel receives is
#   wrong on both, in opposite directions.
# - **muP's $1/d$ and a forgotten square root look the same.** muTransformers scales by
#   `attn_mult / d` on purpose, cntkx's bug by $1/d_k$: both drop the square root, and only a
#   declared scale tells the design from the bug.
#
# The test suite (`tests/test_real_bugs.py`) runs the same cases and fails when a bug is
# missed, a fix or a trap is flagged, or a finding names the wrong cause. The cases in the
# table of misses above are marked there as expected failures that must fail: the day the
# monitor gets one right, the test says so.
