r"""
# The comparison table: 1/√d_k against every fix in real use

One table for all the score-scaling techniques: where each acts, what it bounds, what it costs and
who uses it, with measured columns computed by this script. It replaces the source article's
three-row table, which omits most of these techniques and misstates what initialisation does.
"""

# %%
import os
import time

import matplotlib.pyplot as plt
import numpy as np
import torch

import attnscale
from guide import style
from guide.printing import fold
from guide.tables import Table

style.use_style()

SEED = 0
D_MODEL = 256
NUM_HEADS = 4  # head dimension d_k = 64
SEQ_LEN = 64
BATCH = 4
GAIN = (
    10.0  # weight growth factor applied to W_q and W_k for the "under growth" columns
)
# Timing shape (small, so the docs build stays fast; see benchmarks/bench_scaling.py for
# more).
TIME_BATCH, TIME_LEN, REPEATS = 2, 64, 9
VARIANTS = {name: (name, None) for name in attnscale.SCALING_STRATEGIES}
VARIANTS["softcap_50"] = ("inverse_sqrt", 50.0)


# %%
# ## Measure: logits at initialisation and under weight growth, parameters, cost
#
# Each strategy gets the same projection weights (same seed), except T5's folded init, which
# re-initialises $W_q$ and $W_k$. Cost is the median forward+backward time of one
# [MultiHeadAttention][attnscale.MultiHeadAttention] call relative to $1/\sqrt{d_k}$, measured
# round-robin so that all strategies see the same machine load. That time is measured on the
# CPU that built this page (its core count is printed below), at a small batch and length: it
# says little about a GPU, where fused attention kernels hide element-wise work on $q$ and $k$
# behind memory traffic.
# The "extra params / FLOPs" column, counted from the formulas (parameters in total over all
# heads, FLOPs per head), carries over to any hardware; read the measured time as this
# machine's, not as a GPU estimate.

# %%
torch.manual_seed(SEED)
x = torch.randn(BATCH, SEQ_LEN, D_MODEL)
measured: dict[str, dict[str, float]] = {}
modules: dict[str, attnscale.MultiHeadAttention] = {}
with torch.no_grad():
    for label, (name, cap) in VARIANTS.items():
        torch.manual_seed(SEED)
        mha = attnscale.MultiHeadAttention(
            D_MODEL, NUM_HEADS, strategy=name, softcap=cap
        )
        modules[label] = mha
        init = mha(x, need_weights=True, need_logits=True)
        mha.q_proj.weight.mul_(GAIN)
        mha.k_proj.weight.mul_(GAIN)
        grown = mha(x, need_weights=True, need_logits=True)
        mha.q_proj.weight.div_(GAIN)
        mha.k_proj.weight.div_(GAIN)
        measured[label] = {
            "params": sum(p.numel() for p in mha.strategy.parameters()),
            "std0": float(
                init.logits.var(-1, correction=0).mean().sqrt()
            ),  # within-row
            "h0": attnscale.softmax_entropy(init.logits, normalized=True).mean().item(),
            "h_grown": attnscale.softmax_entropy(grown.logits, normalized=True)
            .mean()
            .item(),
            "max_grown": float(grown.logits.abs().max()),
        }

x_time = torch.randn(TIME_BATCH, TIME_LEN, D_MODEL)
times: dict[str, list[float]] = {label: [] for label in VARIANTS}
for rep in range(REPEATS + 2):  # the first two rounds are warm-up
    for label, mha in modules.items():
        mha.zero_grad(set_to_none=True)
        start = time.perf_counter()
        mha(x_time, is_causal=True).output.sum().backward()
        if rep >= 2:
            times[label].append(time.perf_counter() - start)
median = {label: sorted(t)[len(t) // 2] for label, t in times.items()}
for (
    label
) in VARIANTS:  # per round, against 1/sqrt(d_k) in the same round: one load for both
    ratios = torch.tensor(times[label]) / torch.tensor(times["inverse_sqrt"])
    q1, q2, q3 = torch.quantile(ratios, torch.tensor([0.25, 0.5, 0.75])).tolist()
    measured[label] |= {"cost": q2, "cost_q1": q1, "cost_q3": q3}
print(
    fold(
        f"timing shape: batch {TIME_BATCH}, length {TIME_LEN}, d_model {D_MODEL}, "
        f"{NUM_HEADS} heads; inverse_sqrt takes {1e3 * median['inverse_sqrt']:.2f} ms "
        f"(median of {REPEATS})"
    )
)
print(
    f"timed on this machine: {os.cpu_count()} logical CPU cores, "
    f"{torch.get_num_threads()} torch thread(s)"
)

# %%
# ## Relative cost and entropy under growth
#
# Left: forward+backward time relative to $1/\sqrt{d_k}$ (1 = same cost): per round, the
# ratio to $1/\sqrt{d_k}$'s time in the same round; the bar is the median over the rounds and
# the whisker their interquartile range, the noise of this machine. Right: attention entropy
# over $\ln n$ after multiplying $W_q$ and $W_k$ by $g$ (printed above the table).


# %%
def plot_strategy_bars(
    labels, values, *, ax, xlabel, colors, reference=None, spread=None
):
    """Horizontal bars, one per strategy, each with its value printed at its end."""
    v = np.asarray(values, dtype=float)
    y = np.arange(len(labels))[::-1]  # the first strategy on top
    ax.barh(y, v, color=colors, height=0.6)
    ends = v
    if spread is not None:  # whiskers from low to high
        low, high = (
            np.asarray(spread[0], dtype=float),
            np.asarray(spread[1], dtype=float),
        )
        ax.errorbar(
            v, y, xerr=[v - low, high - v], fmt="none", ecolor="0.45", capsize=2, lw=1.0
        )
        ends = np.maximum(v, high)
    for yi, vi, end in zip(y, v, ends, strict=True):
        ax.annotate(
            f"{vi:.2f}",
            (end, yi),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize="small",
        )
    if reference is not None:
        ax.axvline(reference, color="0.3", linewidth=0.8, linestyle="--")
    ax.set_yticks(y, labels)
    ax.set_xlabel(xlabel)
    ax.margins(x=0.15)


labels = list(VARIANTS)
display = style.labels(labels)  # display labels, from the site's one table
shown = [display[v] for v in labels]
colours = list(
    style.colours(labels).values()
)  # each strategy's colour, as on every page
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(7, 3.6), layout="constrained")
plot_strategy_bars(
    shown,
    [measured[v]["cost"] for v in labels],
    ax=ax1,
    xlabel="CPU time per call / that of $1/\\sqrt{d_k}$",
    reference=1.0,
    colors=colours,
    spread=(
        [measured[v]["cost_q1"] for v in labels],
        [measured[v]["cost_q3"] for v in labels],
    ),
)
plot_strategy_bars(
    shown,
    [measured[v]["h_grown"] for v in labels],
    ax=ax2,
    xlabel=f"entropy / ln n at g = {GAIN:g}",
    colors=colours,
)
ax2.set_yticks([])
fig.suptitle(
    "CPU time (forward+backward) and robustness to weight growth, per strategy"
)
print(
    f"weight growth for the measured columns: g = {GAIN:g} on W_q and W_k; d_k = "
    f"{D_MODEL // NUM_HEADS}, {SEQ_LEN} keys"
)

# %%
# ## The table
#
# The descriptive columns come from each strategy class: its extra parameters, in total over all
# $H$ heads, and its extra FLOPs per head, for $n$ queries, $m$ keys and head dimension $d$ (the
# product $QK^\top$ itself costs $2nmd$ per head), the models that use it and the papers to
# cite (`cost`, `used_by` and `citation` on [ScoreScaling][attnscale.ScoreScaling]). The last
# six columns are measured above: extra parameters at this size, logit standard deviation and
# entropy at initialisation, entropy and largest logit after weight growth by $g$, and relative
# cost. The soft-cap is a function rather than a strategy, so its row is written here; the two
# rows at the end are the generic tools the article's table lists, which do not act on the
# logits.

# %%
DESCRIBE = {  # where it acts, core idea, what it bounds
    "none": ("logits", "softmax(q·k)", "nothing"),
    "inverse_sqrt": ("logits", "Var(q·k) = d_k at init → 1", "init variance only"),
    "inverse_d": (
        "logits",
        "q, k correlate in training: q·k ∝ d_k",
        "width growth after training",
    ),
    "learnable_temperature": ("logits", "α_h learned, init 1/√d_k", "nothing"),
    "qk_layernorm": ("q, k per head", "LN(q)·LN(k)/√d_k", "|l| ≤ √d_k·gains"),
    "qk_rmsnorm": ("q, k per head", "RMS(q)·RMS(k)/√d_k", "|l| ≤ √d_k·gains"),
    "cosine": ("q, k per head", "s_h·cos(q, k), s init 10, ≤ 100", "|l| ≤ s ≤ 100"),
    "folded_init": (
        "W_q init",
        "std(W_q) = (d_model·d_k)^-½, no run-time scale",
        "init variance only",
    ),
}
STATIC = {}
for name, (acts_on, idea, bounds) in DESCRIBE.items():
    cls = type(modules[name].strategy)
    used_by = ", ".join(cls.used_by) or "no model alone"
    STATIC[name] = (acts_on, idea, cls.cost, bounds, used_by, ", ".join(cls.citation))
STATIC["softcap_50"] = (
    "logits",
    "c·tanh(l/c) after 1/√d_k",
    "0 / 3nm",
    "|l| < c (not entropy)",
    "Gemma 2 (50), Grok-1 (30)",
    "arXiv:2408.00118",
)
headers = [
    "technique",
    "acts on",
    "core idea",
    "extra params / FLOPs",
    "bounds",
    "used by",
    "refs",
    "params (measured)",
    "logit std @ init",
    "H/ln n @ init",
    f"H/ln n @ g={GAIN:g}",
    f"max abs logit @ g={GAIN:g}",
    "CPU time vs 1/√d_k (this machine)",
]
rows = []
for label, static in STATIC.items():
    m = measured[label]
    rows.append(
        [
            style.text_labels([label])[label],
            *static,
            f"{m['params']:.0f}",
            f"{m['std0']:.2f}",
            f"{m['h0']:.2f}",
            f"{m['h_grown']:.3f}",
            f"{m['max_grown']:.1f}",
            f"{m['cost']:.2f}",
        ]
    )
rows.append(
    [
        "LayerNorm on sublayers",
        "block input x",
        "normalise x per token",
        "2·d_model / O(d_model)",
        "Var(x) only, not W_q, W_k",
        "every Transformer",
        "arXiv:1607.06450",
        "-",
        "-",
        "-",
        "-",
        "-",
        "-",
    ]
)
rows.append(
    [
        "Xavier / Kaiming init",
        "all weights",
        "set Var(W) from fan-in/out",
        "0 / 0",
        "nothing after step 0",
        "generic",
        "-",
        "-",
        "-",
        "-",
        "-",
        "-",
        "-",
    ]
)
table = Table(headers, rows)
table

# %%
# ## Reading the table
#
# - **Only the normalising techniques bound the logits whatever the projection weights do.**
#   QK-LayerNorm, QK-RMSNorm and cosine attention keep the entropy under weight growth where it
#   was at initialisation; every fixed or learned multiplier (no scale, $1/\sqrt{d_k}$, $1/d_k$,
#   the learnable temperature, T5's folded init) only sets where the logits start. Their bound is
#   in terms of their own learnable parameters: $\sqrt{d_k}$ times the gains for QK-norm, the
#   logit scale (clamped at 100, as in Swin V2) for cosine; training can move both.
# - **The soft-cap bounds the logits, not the attention**: its largest logit stays below the cap,
#   but with $c = 50$ the attention can still be one-hot.
# - **Initialisation is not a run-time control.** The article says good initialisation gives
#   unit-variance q and k; PyTorch's default `nn.Linear` init gives $\mathrm{Var}(q_i) = 1/3$
#   (the logit standard deviation of $1/\sqrt{d_k}$ at init is printed in the table), and once the
#   weights move, the init no longer says anything. T5 is the exception that proves the rule: it
#   puts the whole scale into the init, and nothing keeps it there.
# - **LayerNorm on the sublayers** normalises the block input $x$, which is what our
#   unit-variance inputs already are; it cannot stop $W_q$, $W_k$ from growing. "Internal
#   covariate shift" is a contested explanation of why LayerNorm helps, not an established fact.
# - **Cost**: the fixed scales ride on PyTorch's fused attention. The normalising strategies add
#   element-wise work on $q$ and $k$; the soft-cap and anything that returns weights take the
#   explicit path, which materialises the $n \times m$ logits. Rows that do identical work (no
#   scaling, $1/\sqrt{d_k}$, $1/d_k$) show how large the timing noise is. The benchmark
#   `benchmarks/bench_scaling.py` measures the same ratios on a larger shape.
# - **Which one is best depends on the task and the learning rate.** The training section's
#   [strategy grid](../04_training/plot_03_all_strategies.md) trains every strategy at its own
#   best learning rate on two opposite tasks and prints where $1/\sqrt{d_k}$ stands; it
#   compares the scale with no scale on
#   [three tasks](../04_training/plot_02_where_scaling_matters.md), and its
#   [logit-growth page](../04_training/plot_04_logit_growth.md) tests QK-LayerNorm as a guard
#   against logit growth in a small language model.
#
# ## References
#
# Vaswani et al. 2017, arXiv:1706.03762; Yang et al. 2022, arXiv:2203.03466; Henry et al. 2020,
# arXiv:2010.04245; Dehghani et al. 2023, arXiv:2302.05442; Wortsman et al. 2023,
# arXiv:2309.14322; Liu et al. 2022, arXiv:2111.09883; Raffel et al. 2020, arXiv:1910.10683;
# Gemma Team 2024, arXiv:2408.00118; Ba et al. 2016, arXiv:1607.06450 (LayerNorm).
