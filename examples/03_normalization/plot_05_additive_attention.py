r"""
# Additive attention against scaled dot-product

Additive (Bahdanau) attention scores a query and a key with a small tanh network instead of a dot
product. We measure, as $d_k$ grows, how spread out its scores are, how peaked its softmax is and
what it costs, next to the dot product with and without $1/\sqrt{d_k}$.
"""

# %%
import math
import os
import time

import matplotlib.pyplot as plt
import torch
from matplotlib.ticker import LogLocator, NullFormatter, StrMethodFormatter

import attnscale
from attnscale import plot_strategy_curves
from guide import style
from guide.figures import one_legend
from guide.printing import fold

style.use_style()

SEED = 0
D_KS = (
    16,
    64,
    256,
    1024,
)  # query and key width d_k; the additive layer gets hidden = d_k
BATCH = 4  # independent sets of queries and keys
Q_LEN = 16  # queries per set: BATCH * Q_LEN attention rows per d_k
K_LEN = 64  # keys per row, n
REPEATS = 5  # timed forwards per layer and d_k (after one warm-up)
THREADS = 1  # the timings' torch threads
NAMES = ("additive", "none", "inverse_sqrt")  # additive, q.k, q.k / sqrt(d_k)
LOOK = style.strategy_kwargs()
TEXT = {"additive": "additive", "none": "q·k", "inverse_sqrt": "q·k/√d_k"}

# %%
# ## Two ways to score a query against a key
#
# The dot product scores a pair as $q \cdot k$ (or $q \cdot k / \sqrt{d_k}$); additive attention
# (Bahdanau et al. 2015) as
#
# $$
# s(q, k) = w_v^\top \tanh(W_q q + W_k k),
# $$
#
# a network with one hidden layer of $h$ tanh units, here
# [AdditiveAttention][attnscale.AdditiveAttention] with $h = d_k$ (the same width as the dot
# product's $q$ and $k$) and PyTorch's default ``nn.Linear`` initialisation. Queries and keys
# have unit-variance Gaussian components, as everywhere in this guide; they enter the dot
# product as they are, because the dot product has no weights of its own (in a Transformer
# they would be the outputs of $W_q$ and $W_k$), while the additive score needs its three
# weight matrices. For each $d_k$ we measure, over rows of $n$ keys: the spread of the scores
# within a row (the square root of the mean within-row variance), the mean normalised softmax
# entropy $H / \log n$ (1 is uniform attention, 0 is one-hot), and the time of one forward
# pass.

# %%
results: dict[str, dict[str, list[float]]] = {
    name: {"std": [], "entropy": [], "time": []} for name in NAMES
}
checks: dict[str, list[float]] = {"var_wq_q": [], "var_u": [], "max_s": [], "l1_wv": []}
checks |= {"std_all": []}
# One random stream for inputs and weights: a second generator with the same seed would
# repeat the weights' uniform draws in the inputs and correlate the two.
torch.manual_seed(SEED)
layers = {}
inputs = {}
with torch.no_grad():
    for d_k in D_KS:
        q = torch.randn(BATCH, Q_LEN, d_k)  # (batch, q_len, d_k)
        k = torch.randn(BATCH, K_LEN, d_k)  # (batch, k_len, d_k)
        v = torch.randn(BATCH, K_LEN, d_k)  # (batch, k_len, d_v = d_k)
        additive = attnscale.AdditiveAttention(query_dim=d_k, key_dim=d_k, hidden=d_k)
        layers[d_k], inputs[d_k] = additive, (q, k, v)
        logits = {"additive": additive(q, k, v, need_logits=True).logits}
        for name in ("none", "inverse_sqrt"):  # one head: (batch, 1, length, d_k)
            res = attnscale.scaled_dot_product_attention(
                q.unsqueeze(1),
                k.unsqueeze(1),
                v.unsqueeze(1),
                strategy=name,
                need_logits=True,
            )
            logits[name] = res.logits.squeeze(1)  # (batch, q_len, k_len)
        for name, s in logits.items():
            results[name]["std"].append(
                float(s.var(dim=-1, correction=0).mean().sqrt())
            )
            h = attnscale.softmax_entropy(s, normalized=True)  # (batch, q_len)
            results[name]["entropy"].append(float(h.mean()))
        # What the text below relies on: the hidden units' input and the bound on |s|.
        wq_q = additive.q_proj(q)  # (batch, q_len, hidden)
        u = wq_q.unsqueeze(2) + additive.k_proj(k).unsqueeze(
            1
        )  # (batch, q_len, k_len, hidden)
        checks["var_wq_q"].append(float(wq_q.var()))
        checks["var_u"].append(float(u.var()))
        checks["max_s"].append(float(logits["additive"].abs().max()))
        checks["l1_wv"].append(float(additive.score_proj.weight.abs().sum()))
        checks["std_all"].append(float(logits["additive"].std()))

    # Timing: three forwards on the same inputs, round-robin so that all see the same
    # machine load; the fastest of REPEATS runs after one warm-up (the least disturbed
    # by other work), on one thread (two threads wait for each other whenever another
    # program takes a core). "projected" is the dot product after the additive layer's
    # own W_q and W_k, so that it pays for the same projections; "inverse_sqrt" is the
    # dot product on q and k as they are.
    sdpa = attnscale.scaled_dot_product_attention

    def projected_dot(layer, q, k, v):
        """The dot product after the additive layer's projections (q, k: one head,
        4-D)."""
        return sdpa(layer.q_proj(q), layer.k_proj(k), v)  # (batch, 1, q_len, d_v)

    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    for d_k in D_KS:
        q, k, v = inputs[d_k]
        q4, k4, v4 = (
            q.unsqueeze(1),
            k.unsqueeze(1),
            v.unsqueeze(1),
        )  # (batch, 1, length, d_k)
        calls = {  # name: (function, arguments)
            "additive": (layers[d_k], (q, k, v)),
            "projected": (projected_dot, (layers[d_k], q4, k4, v4)),
            "inverse_sqrt": (sdpa, (q4, k4, v4)),
        }
        times: dict[str, list[float]] = {name: [] for name in calls}
        for rep in range(REPEATS + 1):
            for name, (call, args) in calls.items():
                start = time.perf_counter()
                call(*args)
                if rep:
                    times[name].append(time.perf_counter() - start)
        for name, t in times.items():
            results.setdefault(name, {"time": []})["time"].append(min(t))
    torch.set_num_threads(threads)  # as it was, for whatever runs next in this process

# %%
# ## The figure
#
# Left: the spread of the scores within a row. Right: how uniform each row's attention is.
# The dot-product curves carry the labels they have everywhere in this guide: "no scale" is
# $q \cdot k$, $1/\sqrt{d_k}$ is $q \cdot k / \sqrt{d_k}$.

# %%
fig, (ax_s, ax_h) = plt.subplots(1, 2, figsize=(7, 3.4))
plot_strategy_curves(
    D_KS,
    {name: results[name]["std"] for name in NAMES},
    ax=ax_s,
    xlabel="query and key width $d_k$",
    ylabel="score std within a row",
    logy=True,
    legend=True,
    **LOOK,
)
plot_strategy_curves(
    D_KS,
    {name: results[name]["entropy"] for name in NAMES},
    ax=ax_h,
    xlabel="query and key width $d_k$",
    ylabel="mean $H / \\log n$",
    legend=True,
    **LOOK,
)
ax_h.set_ylim(0, 1.05)
# ticks at 1, 2 and 5 per decade, as plain numbers: the additive curve sits near 0.2
ax_s.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
ax_s.yaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
ax_s.yaxis.set_minor_formatter(NullFormatter())
ax_s.set_title("Score spread")
ax_h.set_title(f"Softmax entropy, $n = {K_LEN}$ keys")
one_legend(fig, ncols=3)

# %%
# The same numbers:

print(f"rows per d_k: {BATCH * Q_LEN}, keys per row n = {K_LEN}, hidden = d_k")
print(
    f"{'d_k':>5} | {'score std: ' + ', '.join(TEXT[n] for n in NAMES):>36} |"
    f" {'H/log n: ' + ', '.join(TEXT[n] for n in NAMES):>34}"
)
for i, d_k in enumerate(D_KS):
    std = "  ".join(f"{results[n]['std'][i]:9.3f}" for n in NAMES)
    ent = "  ".join(f"{results[n]['entropy'][i]:9.3f}" for n in NAMES)
    print(f"{d_k:5d} | {std:>36} | {ent:>34}")
growth = {n: results[n]["std"][-1] / results[n]["std"][0] for n in NAMES}
print(
    fold(
        f"score std at d_k = {D_KS[-1]} over d_k = {D_KS[0]}: "
        + ", ".join(f"{TEXT[n]} x{growth[n]:.2f}" for n in NAMES)
        + f" (sqrt of the width ratio: x{math.sqrt(D_KS[-1] / D_KS[0]):.0f})"
    )
)

# %%
# Without the scale the spread grows by about the square root of the width ratio and the
# entropy falls towards one-hot attention; with $1/\sqrt{d_k}$ both stay put. The additive
# spread changes by the printed factor over the same range, and its rows stay almost uniform:
# at initialisation its scores are smaller than the scaled dot product's, so its attention is
# flatter, and training has to sharpen it.
#
# ## Why the additive score stays small as $d_k$ grows
#
# **The bound.** Each hidden unit $\tanh(u_i)$ lies in $[-1, 1]$, so
#
# $$
# |s(q, k)| = \Big|\sum_{i=1}^{h} (w_v)_i \tanh(u_i)\Big| \le \sum_{i=1}^{h} |(w_v)_i|
# = \lVert w_v \rVert_1 ,
# $$
#
# whatever $d_k$ and however large $q$ and $k$ are. The dot product has no such bound:
# $q \cdot k$ has standard deviation $\sqrt{d_k}$ for unit-variance components, which is why
# the unscaled curve climbs in the figure and its softmax entropy falls.
#
# **The initialisation.** ``nn.Linear`` draws each weight from
# $U(\pm 1/\sqrt{\text{fan\_in}})$, of variance $1/(3\,\text{fan\_in})$. A component of $W_q q$
# is a sum of $d_k$ terms $W_{ij} q_j$, so its variance is
# $d_k \cdot \frac{1}{3 d_k} \cdot 1 = \frac13$ for every $d_k$: the initialisation's
# $1/\sqrt{\text{fan\_in}}$ does for the additive score what $1/\sqrt{d_k}$ does for the dot
# product. The tanh input $u = W_q q + W_k k$ then has variance $\frac23$, and with
# $(w_v)_i$ of variance $\frac{1}{3h}$ the score has variance about
# $h \cdot \frac{1}{3h}\, \mathbb{E}[\tanh^2(u)] = \mathbb{E}[\tanh^2(u)]/3$, independent of
# $d_k$ and of $h$ (treating the $h$ units as independent). The bound
# $\lVert w_v \rVert_1$ is about $h \cdot \mathbb{E}|(w_v)_i| = h / (2\sqrt{h}) = \sqrt{h}/2$.
# The score spread *within a row* (the figure's left panel) is smaller than the overall
# spread, because a row's scores share their query. Predicted and measured:

# %%
u_grid = torch.linspace(
    -12, 12, 200_001, dtype=torch.float64
)  # E[tanh^2(u)], u ~ N(0, 2/3)
density = torch.exp(-(u_grid**2) / (2 * 2 / 3)) / math.sqrt(2 * math.pi * 2 / 3)
e_tanh2 = float((torch.tanh(u_grid) ** 2 * density).sum() * (u_grid[1] - u_grid[0]))
print(
    fold(
        f"predicted: Var(W_q q) = {1 / 3:.3f}, Var(u) = {2 / 3:.3f}, "
        f"overall score std = sqrt(E[tanh^2(u)] / 3) = {math.sqrt(e_tanh2 / 3):.3f}"
    )
)
print(
    f"{'d_k':>5} {'Var(W_q q)':>11} {'Var(u)':>7} {'score std':>10} {'max |s|':>8} "
    f"{'|w_v|_1':>8} {'sqrt(h)/2':>10}"
)
for i, d_k in enumerate(D_KS):
    print(
        f"{d_k:5d} {checks['var_wq_q'][i]:11.3f} {checks['var_u'][i]:7.3f} "
        f"{checks['std_all'][i]:10.3f} {checks['max_s'][i]:8.3f} "
        f"{checks['l1_wv'][i]:8.2f} "
        f"{math.sqrt(d_k) / 2:10.2f}"
    )

# %%
# The variances of $W_q q$ and of $u$ stay close to their predicted values at every $d_k$.
# The overall score spread scatters around its prediction, most at small $d_k$, where
# $h = d_k$ units are few and one draw of $w_v$ weighs more. Every score is inside its bound
# $\lVert w_v \rVert_1$, and further inside as $d_k$ grows: the largest $|s|$ stays of the
# same size while the bound grows with $h$ like $\sqrt{h}/2$. The bound limits what training
# can do to the scores for a given $w_v$, not their size at the start.
#
# ## What Vaswani et al. say
#
# §3.2.1 of *Attention Is All You Need* compares the two functions: for small $d_k$ they
# perform similarly, and additive attention outperforms dot-product attention *without
# scaling* for larger $d_k$, citing Britz et al. (2017), who compared additive and
# multiplicative attention in trained translation models. Vaswani et al. suspect that large
# dot products push the softmax into regions of extremely small gradients, and divide by
# $\sqrt{d_k}$ instead of switching to the additive form: the two are similar in theoretical
# complexity, but the dot product is "much faster and more space-efficient in practice". The
# figure shows the mechanism at initialisation: without the scale the entropy falls as $d_k$
# grows, while the additive and the scaled dot-product rows stay spread out. It does not
# reproduce the training result, which needs trained translation models; the
# [training section](../04_training/plot_01_article_experiment.md) shows what the missing scale
# does in training.
#
# ## Cost
#
# For $n$ queries and $m$ keys, the additive layer projects them ($h(n d_q + m d_k)$
# multiply-adds), forms every sum $W_q q_i + W_k k_j$ ($nmh$ additions), takes $nmh$ tanh and
# $nmh$ multiply-adds for $w_v$, and materialises a ``(batch, q_len, k_len, hidden)`` tensor.
# The dot product $QK^\top$ takes $nmd$ multiply-adds and forms only the
# ``(batch, q_len, k_len)`` logits. A Transformer's dot product also projects its inputs with
# $W_q$ and $W_k$, so we time it twice: after the additive layer's own $W_q$ and $W_k$ (the
# same projections, so the difference is the scoring), and on $q$ and $k$ as they are. Both
# then take the same softmax and the same $nmd_v$ multiply-adds for the values, left out of the
# counts. Times are the fastest of the repeats, on one thread of the CPU that built this page
# (its core count is printed below), with
# [scaled_dot_product_attention][attnscale.scaled_dot_product_attention] on its default fused
# path:

# %%
print(
    "counts per forward for the whole batch, from the formulas; float32 intermediate "
    "sizes"
)
print(
    f"timed on this machine: {os.cpu_count()} logical CPU cores, {THREADS} torch "
    f"thread(s)"
)
# counts and times as two tables: one is wider than the page's output box
counts, times = [], []
for i, d_k in enumerate(D_KS):
    h = d_k
    proj = h * BATCH * (Q_LEN * d_k + K_LEN * d_k)  # W_q q and W_k k
    pairs = BATCH * Q_LEN * K_LEN  # query-key pairs in the batch
    mb_add, mb_dot = pairs * h * 4 / 2**20, pairs * 4 / 2**20
    t_add, t_proj, t_dot = (
        1e3 * results[n]["time"][i] for n in ("additive", "projected", "inverse_sqrt")
    )
    counts.append(
        f"{d_k:5d} | {proj:20.2e} {pairs * h:8.2e} {pairs * d_k:8.2e} {pairs * h:8.2e} "
        f"| {mb_add:8.1f} {mb_dot:5.2f}"
    )
    times.append(
        f"{d_k:5d} | {t_add:8.2f} {t_proj:9.2f} {t_dot:6.2f} | {t_add / t_proj:16.1f}"
    )
print(
    f"{'d_k':>5} | {'multiply-adds: proj.':>20} {'w_v':>8} {'QK^T':>8} {'tanh':>8} | "
    f"{'MB: add.':>8} {'dot':>5}"
)
print("\n".join(counts))
print()
print(
    f"{'d_k':>5} | {'ms: add.':>8} {'proj.+dot':>9} {'dot':>6} | "
    f"{'add./(proj.+dot)':>16}"
)
print("\n".join(times))

# %%
fig, ax = plt.subplots(figsize=(5.5, 3.4))
plot_strategy_curves(
    D_KS,
    {
        name: [1e3 * t for t in results[name]["time"]]
        for name in ("additive", "projected")
    },
    ax=ax,
    xlabel="query and key width $d_k$ (hidden $h = d_k$)",
    ylabel="time per forward (ms)",
    logy=True,
    legend=False,
    colors=LOOK["colors"] | {"projected": LOOK["colors"]["inverse_sqrt"]},
    labels=LOOK["labels"]
    | {"projected": "$W_q, W_k$, then dot product $/\\sqrt{d_k}$"},
)
ax.set_title("Forward time on this CPU, same inputs and projections")
one_legend(fig, ncols=2)

# %%
# At equal width ($h = d_k$) the additive scores take as many multiply-adds for $w_v$ as
# $QK^\top$ takes in all (the two printed columns are equal), plus $nmh$ tanh, and an
# intermediate tensor $h$ times the size of the logits (the two MB columns). At this page's
# shapes the shared projections are the largest count, yet the additive layer is the slower
# one at every $d_k$ in the last column: the dot product is one matrix multiplication, the
# additive score a broadcast, a tanh and a reduction over a tensor $h$ times larger. The
# times are this machine's, at small sizes; the memory column carries over to any hardware.
#
# ## References
#
# - Bahdanau, Cho, Bengio (2015). *Neural Machine Translation by Jointly Learning to Align and
#   Translate*. arXiv:1409.0473. The additive score.
# - Vaswani et al. (2017). *Attention Is All You Need*. arXiv:1706.03762, §3.2.1: the
#   comparison of additive and dot-product attention, and the $1/\sqrt{d_k}$ scale.
# - Britz, Goldie, Luong, Le (2017). *Massive Exploration of Neural Machine Translation
#   Architectures*. arXiv:1703.03906. Additive against multiplicative attention in trained
#   models.
# - Zhang, Lipton, Li, Smola. *Dive into Deep Learning*, section "Attention Scoring Functions"
#   (d2l.ai): additive and scaled dot-product attention side by side.
