r"""# The monitor on real architectures

Every model family below comes from Hugging Face `transformers`, built from a tiny config with
random weights and run through the monitor with eager attention and, where `transformers` has
that path, with SDPA (Gemma-2 has none). First as the library ships them, then with a bug
planted through the model's own config switch or weights. This is the test that matters for a
debugging tool: code that other people wrote.
"""

# %%
SEED = 0

import math
import textwrap
import time

import matplotlib.pyplot as plt
import torch
import transformers

from attnscale import AttentionMonitor, MonitorReport
from guide import zoo  # tiny-config builders, used by this site and its tests
from guide.printing import fold
from guide.style import use_style
from guide.tables import Table

use_style()

start = time.perf_counter()
print(f"transformers {transformers.__version__}, torch {torch.__version__}")
print(fold(f"{len(zoo.FAMILIES)} families: {', '.join(zoo.FAMILIES)}"))


def watch(family: str, impl: str, **build: object) -> tuple[MonitorReport, bool]:
    """Run one model with and without the monitor: its report, and whether outputs
    match."""
    model, inputs = zoo.build(family, attn_implementation=impl, seed=SEED, **build)
    with torch.no_grad():
        plain = zoo.run(model, inputs)
        with AttentionMonitor(model) as monitor:
            watched = zoo.run(model, inputs)
    return monitor.report(), torch.equal(plain.nan_to_num(), watched.nan_to_num())


def scale_read(report: MonitorReport) -> str:
    """The scales the monitor read, as multiples of 1/sqrt(head_dim)."""
    ratios = sorted(
        {round(r.last.scale_ratio, 3) for r in report.records if r.last.scale_ratio}
    )
    return ", ".join(f"{x:g}" for x in ratios) or "-"


def verdict(report: MonitorReport) -> str:
    """Warnings and errors by code; infos in brackets; 'no warning' when there are
    none."""
    worst: dict[str, str] = {}
    for f in (
        report.findings
    ):  # sorted errors first, so the first severity seen is the worst
        worst.setdefault(f.code, f.severity)
    loud = [f"{code} ({sev})" for code, sev in worst.items() if sev != "info"]
    quiet = [code for code, sev in worst.items() if sev == "info"]
    text = ", ".join(loud) or "no warning"
    return text + (f" [info: {', '.join(quiet)}]" if quiet else "")


# %%
# ## Healthy models
#
# One row per family and attention implementation (Gemma-2 has no SDPA path in `transformers`:
# SDPA cannot apply its soft-cap). The scale column is what the monitor read, as a multiple of
# $1/\sqrt{d_\text{head}}$: it comes from the `scale=` argument on the SDPA path and from the
# scalar factors between $QK^\top$ and the softmax on the eager path, including a factor applied
# to q straight after its projection (OPT, Whisper). Each run also compares the model's outputs
# with and without the monitor bit for bit; a verdict would say `OUTPUT CHANGED` if they
# differed.

healthy = {}
rows = []
for family in zoo.FAMILIES:
    row = [family, zoo.head_dim(family)]
    for impl in ("eager", "sdpa"):
        if impl not in zoo.implementations(family):
            row += ["-", "no such path"]
            continue
        report, same = watch(family, impl)
        healthy[family, impl] = report
        row += [
            scale_read(report),
            verdict(report) + ("" if same else " OUTPUT CHANGED"),
        ]
    rows.append(row)
Table(
    [
        "family",
        "head_dim",
        "scale, eager",
        "verdict, eager",
        "scale, sdpa",
        "verdict, sdpa",
    ],
    rows,
)

# %%
# T5 is the one family whose scale reads as $\sqrt{d_\text{head}}$ times the reference: it has
# no scale at run time. Its initialisation makes the queries about $\sqrt{d_\text{head}}$ times
# smaller than the keys instead, and the monitor recognises that fold from the measured spreads
# of q and k, so it says `info`, not a warning. Llama's `masked-rows` info comes from its left
# padding: padded query positions attend to nothing, and their outputs are never used.

quiet = sum(not r.codes("warning") for r in healthy.values())
print(f"healthy cases without a warning: {quiet} of {len(healthy)}")
assert quiet == len(healthy), "the prose above says every healthy model passes"

# %%
# ## Planted bugs
#
# Each bug is made the way it happens in real code:
#
# - **no scale:** GPT-2's `scale_attn_weights=False`, Gemma-2's `query_pre_attn_scalar=1`,
#   T5's query weights without the folded factor, and for the other families their attention
#   modules' `scaling` attribute set to 1 (both paths read it at every call). Falcon is left
#   out: its code hard-codes the scale, so no switch can remove it.
# - **wrong `query_pre_attn_scalar`:** Gemma-2 with the scalar at 7/8 of `head_dim`, the ratio
#   of the real Gemma-2-9B bug (224 where the head size is 256).
# - **q/k weights ×16:** logits 256 times too wide, with the scale itself intact.
# - **float16 overflow:** float16 weights with q and k grown until the raw product passes 65504.
#
# Each cell names the expected finding(s) the monitor raised at warning or error level, or
# says `missed`. A `-` marks a combination that was not run: Falcon without its scale (no switch
# removes it) and Gemma-2 on SDPA (no such path). Gemma-2's wrong scalar has a paragraph of its
# own below.

BUGS = {
    "no-scale": {
        "families": [f for f in zoo.FAMILIES if f != "falcon"],
        "impls": "all",
    },
    "wrong-scalar": {"families": ["gemma2"], "impls": "all"},
    "qk-x16": {"families": list(zoo.FAMILIES), "impls": ["eager"]},
    "fp16-overflow": {"families": list(zoo.FAMILIES), "impls": ["eager"]},
}
EXPECTED = {  # the finding each bug must raise, at warning or error
    "no-scale": {"scale-mismatch"},
    "wrong-scalar": {"scale-mismatch"},
    "qk-x16": {"large-logits", "entropy-collapse"},
    "fp16-overflow": {"fp16-overflow-risk"},
}
planted = {}
cells: dict[str, dict[str, str]] = {family: {} for family in zoo.FAMILIES}
for bug, where in BUGS.items():
    for family in where["families"]:
        impls = (
            zoo.implementations(family) if where["impls"] == "all" else where["impls"]
        )
        for impl in impls:
            dtype = torch.float16 if bug == "fp16-overflow" else torch.float32
            report, same = watch(family, impl, bug=bug, dtype=dtype)
            planted[bug, family, impl] = bool(report.codes("warning") & EXPECTED[bug])
            loud = sorted(report.codes("warning") & EXPECTED[bug]) or ["missed"]
            cells[family][f"{bug}, {impl}"] = ", ".join(loud) + (
                "" if same else " CHANGED"
            )
columns = ["no-scale, eager", "no-scale, sdpa", "qk-x16, eager", "fp16-overflow, eager"]
Table(
    ["family", *columns],
    [
        [family, *(cells[family].get(c, "-") for c in columns)]
        for family in zoo.FAMILIES
    ],
)

# %%
# The same rules catch every one of them. The missing scale is caught whether or not the
# logits of a freshly built model are already wide, because the finding follows what the code
# does: training would widen small logits later, and by then the run is already going wrong.
# Gemma-2's wrong scalar changes the scale by only a few percent (printed below) and is still
# caught, since the monitor reads the scale from the code rather than estimating it from the
# logits; the message names the divisor it read.

for bug in BUGS:
    cases = [caught for (b, *_), caught in planted.items() if b == bug]
    print(f"{bug:>14}: caught {sum(cases)} of {len(cases)}")
assert all(planted.values()), "the prose above says every planted bug is caught"

wrong, _ = watch("gemma2", "eager", bug="wrong-scalar")
off = wrong.records[0].last.scale_ratio
print(
    f"Gemma-2's wrong scalar changes the scale by {100 * (off - 1):.1f}%; the finding:"
)
print(
    textwrap.fill(
        next(f.message for f in wrong.findings if f.code == "scale-mismatch"), 88
    )
)

# %%
# ## What the monitor read
#
# The scale per family, healthy and with the scale removed. T5 applies no scale at run time,
# so its point counts the factor folded into its query weights as well: the scale read times
# q's spread over k's, which the monitor measures. Every healthy model then sits on 1, and
# removing the scale moves every family but Falcon to $\sqrt{d_\text{head}}$, whatever its way
# of writing attention. Falcon has only its healthy point: it is left out of the no-scale bug,
# since its code hard-codes the scale.


def effective(report: MonitorReport, family: str) -> float:
    """The scale read, times sqrt(head_dim); for T5 with its folded factor, q's spread
    over k's."""
    s = report.records[0].last
    assert s.scale_ratio is not None
    if family == "t5":
        assert s.q_std is not None and s.k_std
        return s.scale_ratio * s.q_std / s.k_std
    return s.scale_ratio


families = list(zoo.FAMILIES)
fig, ax = plt.subplots(figsize=(6.4, 4.8), layout="constrained")
for i, family in enumerate(families):
    ratio = effective(healthy[family, "eager"], family)
    ax.plot(ratio, i, "o", color="0.15", label="healthy" if i == 0 else None)
    if family != "falcon":
        report, _ = watch(family, "eager", bug="no-scale")
        removed = effective(report, family)
        ax.plot(removed, i, "s", color="0.5", fillstyle="none", markersize=9)
ax.plot([], [], "s", color="0.5", fillstyle="none", markersize=9, label="scale removed")
for d in sorted({zoo.head_dim(f) for f in families}):
    ax.axvline(math.sqrt(d), color="0.6", linestyle=":", linewidth=1)
ax.axvline(1.0, color="0.3", linewidth=1)
ax.set_xscale("log", base=2)
ax.xaxis.set_major_formatter("{x:g}")
ax.set_xlim(0.8, 8)
ax.set_yticks(
    range(len(families)), [f"{f} (folded)" if f == "t5" else f for f in families]
)
ax.invert_yaxis()
ax.set_xlabel(
    r"scale read $\times\sqrt{d_\mathrm{head}}$ (1: correct; dotted: "
    r"$\sqrt{d_\mathrm{head}}$)"
)
fig.suptitle("Scale read by the monitor, eager attention")
fig.legend(loc="outside lower center", ncols=2)

# %%
# ## What this page does not show
#
# The models here are freshly initialised, so their logits are small and only bugs in the
# code, or planted in the weights, show. A model that trains into large logits gets findings
# like those in the `qk-x16` column above: `large-logits` in every family, and
# `entropy-collapse` too in all but BERT and RoBERTa. The training section shows when that
# happens. Kernels the monitor cannot see into (FlashAttention, xformers, custom CUDA) leave no
# record, and the report then says `no-attention` at warning level rather than passing in
# silence.
#
# ## References
#
# - Gemma-2-9B's `query_pre_attn_scalar`:
#   [transformers#31891](https://github.com/huggingface/transformers/issues/31891).
# - T5 (Raffel et al. 2020, arXiv:1910.10683) folds the scale into the initialisation.
# - API: [AttentionMonitor][attnscale.AttentionMonitor].

print(f"page time: {time.perf_counter() - start:.1f} s")
