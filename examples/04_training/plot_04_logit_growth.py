r"""
# Logit growth in a small language model, and QK-LayerNorm

Wortsman et al. (2023) reproduced in small Transformers an instability first seen in very large
ones: at high learning rates the attention logits grow by orders of magnitude, attention
collapses to one key per query, and the loss suffers; normalising queries and keys
(QK-LayerNorm) keeps the logits bounded and makes the final loss less sensitive to the learning
rate. We train a small byte-level language model on real English text with their recipe, with
and without QK-LayerNorm, at learning rates from $10^{-4}$ to $1$, and look for each part of
that signature.
"""

# %%
import itertools

import matplotlib.pyplot as plt
import numpy as np

from attnscale import plot_seed_bands
from guide import events, intervals, stored, style
from guide.figures import one_legend
from guide.printing import fold
from guide.studies import logit_growth
from guide.tables import Table

style.use_style()

VARIANTS = ["inverse_sqrt", "qk_layernorm"]  # the baseline first
NAMES = style.text_labels(VARIANTS)


def dash_qk_layernorm(axes: np.ndarray) -> None:
    """QK-LayerNorm's lines dashed, so the baseline shows where the two coincide."""
    for ax in axes:
        for line in ax.get_lines():
            if line.get_label() == NAMES["qk_layernorm"]:
                line.set_linestyle("--")


SMOOTH = events.SMOOTH  # steps per moving mean of the per-step records
COLLAPSE = 0.05  # normalised attention entropy below this: one key per query
RISES = (events.SPIKE / 2, events.SPIKE, 2 * events.SPIKE)  # loss spikes, varied
LARGE_LOGIT = 100.0  # the largest attention logit's size (not its margin over the row)

# %%
# ## The model, the text and the recipe
#
# A causal language model over bytes: byte and position embeddings, two pre-LayerNorm blocks
# ([AttentionBlock][attnscale.AttentionBlock]) of width 128 with four heads of $d_k = 32$, a
# final LayerNorm and a linear read-out, on windows of 64 bytes, 16 windows per step. The text
# ships with every CPython, so nothing is downloaded: the help topics of the Python reference
# (``pydoc_data.topics``, joined in key order), the first 90% for training and the rest held out.
# The recipe is Wortsman et al.'s: AdamW with $\beta = (0.9, 0.95)$, linear warmup over the
# first 10% of the 2,000 steps then cosine decay to zero, a z-loss $10^{-4} \log^2 Z$ on the
# output softmax, and weight decay of $10^{-4}$ per step on the weight matrices, *independent*
# of the learning rate (PyTorch's AdamW multiplies its ``weight_decay`` by the learning rate,
# so the run passes $10^{-4}/\eta$). Three seeds per learning rate, nine learning rates half a
# decade apart, with $1/\sqrt{d_k}$ alone (the baseline) and with
# [QK-LayerNorm][attnscale.QKLayerNorm] before it.
#
# These runs took longer than a build can afford, so they were run once
# (``nox -s experiments -- logit_growth``) and stored with their provenance:

# %%
full = stored.load("logit_growth")
print(full.summary())
halves = full.budget["halves"]
lrs = np.array([10 ** (k / 2) for k in halves])
runs = {v: [full.parts[f"{v}_lr{k}"] for k in halves] for v in VARIANTS}
first = runs["inverse_sqrt"][0]
print(
    f"corpus: pydoc_data.topics of Python {first['python']}, "
    f"SHA-256 {str(first['corpus_sha256'])[:16]}…"
)

# %%
# ## Final loss and the largest logit, against the learning rate
#
# The metric is the one Wortsman et al. plot against the learning rate: the final loss, here
# on the held-out text (32 batches after the last step). Left: its mean over the three seeds,
# with the lowest to highest seed as a band. Right: the largest attention logit any query saw
# during the run (over all steps and both layers; a logit is a query-key score after the
# scale, before the softmax), with the threshold of 100 the events below use as a dotted line;
# the axis stops at 100 times that, so a run whose logits went beyond leaves the panel.

# %%
held_out = {v: np.stack([r["held_out"] for r in runs[v]], axis=1) for v in VARIANTS}
peak = {
    v: np.stack([np.nanmax(r["max_logit"], axis=(1, 2)) for r in runs[v]], 1)
    for v in VARIANTS
}
fig, axes = plt.subplots(1, 2, figsize=(7.6, 3.0), layout="constrained")
plot_seed_bands(
    held_out,
    x=lrs,
    ax=axes[0],
    xlabel="peak learning rate η",
    ylabel="final held-out loss (nats/byte)",
    logx=True,
    markers=True,
    **style.strategy_kwargs(),
)
plot_seed_bands(
    peak,
    x=lrs,
    ax=axes[1],
    xlabel="peak learning rate η",
    ylabel="largest attention logit",
    logx=True,
    logy=True,
    markers=True,
    legend=False,
    **style.strategy_kwargs(),
)
axes[1].axhline(LARGE_LOGIT, color="0.3", lw=0.9, ls=":")
axes[1].set_ylim(top=100 * LARGE_LOGIT)
fig.suptitle(f"Byte-level LM, 2 layers, width 128, {len(full.budget['seeds'])} seeds")
dash_qk_layernorm(axes)
one_legend(fig)
plt.show()

# %%
# ## Learning-rate sensitivity
#
# Wortsman et al. summarise such a curve in one number, the *LR sensitivity*: the mean over the
# swept learning rates of $\min(\ell(\eta), \ell_0) - \ell^*$, where $\ell(\eta)$ is the final
# loss at rate $\eta$, $\ell_0$ the loss at initialisation (so a run that fails counts as no
# better than not training) and $\ell^*$ the best final loss over the sweep. Lower is less
# sensitive. We compute it for each seed's own sweep and give the mean over the three seeds
# with its 95% t-interval (wide, as three seeds must give), and the share of the difference
# between the variants that each learning rate contributes: a difference made at the largest
# rates is stability, one made at small rates is speed.


# %%
def lr_terms(final: np.ndarray, initial: np.ndarray) -> np.ndarray:
    """Each rate's term of Wortsman et al.'s LR sensitivity, per seed: ``final``
    losses ``(seeds, rates)`` and losses at initialisation ``(seeds,)`` to
    ``(seeds, rates)``; the sensitivity is their mean over rates."""
    curve = np.nan_to_num(final, nan=np.inf)  # a failed run is no better than l_0
    return np.minimum(curve, initial[:, None]) - curve.min(-1, keepdims=True)


initial = {
    v: runs[v][0]["loss"][:, 0] for v in VARIANTS
}  # loss at the first step, per seed
terms = {v: lr_terms(held_out[v], initial[v]) for v in VARIANTS}
rows = []
for v in VARIANTS:
    best = int(np.nanargmin(held_out[v].mean(0)))
    rows.append(
        [
            NAMES[v],
            intervals.mean_interval(terms[v].mean(-1)).text(".3f"),
            f"{held_out[v].mean(0)[best]:.3f}",
            f"{lrs[best]:.2g}",
        ]
    )
Table(
    ["variant", "LR sensitivity, nats (95% t-interval, n)", "best final loss", "at η"],
    rows,
)

# %%
per_rate = (terms["qk_layernorm"] - terms["inverse_sqrt"]).mean(0) / len(
    lrs
)  # (rates,)
diff = intervals.paired_gap(
    terms["inverse_sqrt"].mean(-1), terms["qk_layernorm"].mean(-1)
)
word = diff.verdict(
    "less", "more", "as", smallest=0.0, undecided="not clearly more or less"
)
print(
    fold(
        f"LR sensitivity in nats, QK-LayerNorm minus baseline: {diff.text('+.3f')}; "
        f"QK-LayerNorm is {word} sensitive"
    )
)
seeds = len(full.budget["seeds"])
top = np.argsort(per_rate)[
    :2
]  # the two rates that lower QK-LayerNorm's sensitivity most
print(
    f"share of the difference from the two rates that contribute most (η = "
    f"{', '.join(f'{lrs[j]:.2g}' for j in sorted(top))}): "
    f"{per_rate[top].sum() / per_rate.sum():.0%}"
)

# %%
# The last line says where the difference comes from. Nearly all of QK-LayerNorm's lower
# sensitivity comes from the two rates where it contributes most, near the top of the sweep,
# where the baseline ends far above its best loss and QK-LayerNorm does not: that part is
# stability. The remainder comes from small
# rates, where QK-LayerNorm simply trains faster in the same number of steps: that part is
# speed, not stability.

# %%
# ## Learning rate by learning rate
#
# Per rate: the final held-out loss of each variant (mean, lowest to highest seed), the paired
# difference (QK-LayerNorm minus baseline, per seed), and the largest attention logit of each.

# %%
rows = []
for j, lr in enumerate(lrs):
    a, b = held_out["inverse_sqrt"][:, j], held_out["qk_layernorm"][:, j]
    d = b - a
    rows.append(
        [
            f"{lr:.2g}",
            f"{a.mean():.3f} ({a.min():.3f}–{a.max():.3f})",
            f"{b.mean():.3f} ({b.min():.3f}–{b.max():.3f})",
            f"{d.mean():+.3f} ({d.min():+.3f} to {d.max():+.3f})",
            f"{np.median(peak['inverse_sqrt'][:, j]):.3g}",
            f"{np.median(peak['qk_layernorm'][:, j]):.3g}",
        ]
    )
Table(
    [
        "η",
        "final loss, baseline",
        "QK-LayerNorm",
        "QK-LN minus baseline (seed range)",
        "largest logit, baseline (median seed)",
        "QK-LN",
    ],
    rows,
)

# %%
better = [
    f"{lr:.2g}"
    for j, lr in enumerate(lrs)
    if (held_out["qk_layernorm"][:, j] < held_out["inverse_sqrt"][:, j]).all()
]
worse = [
    f"{lr:.2g}"
    for j, lr in enumerate(lrs)
    if (held_out["qk_layernorm"][:, j] > held_out["inverse_sqrt"][:, j]).all()
]
print(fold(f"rates where QK-LayerNorm ends lower on every seed: {better or 'none'}"))
print(f"rates where it ends higher on every seed: {worse or 'none'}")

# %%
# ## Which comes first: the logits or the loss?
#
# The signature is an order of events: the logits grow and attention collapses *before* the
# loss goes wrong. For every run we find three steps, each on a moving mean over 20 steps
# (the rules are fixed here, before the counts):
#
# - **logits grow:** the first step whose largest attention logit exceeds 100. This is the
#   logit's absolute size, not its margin over the rest of its row: a softmax ignores a
#   common shift, so a logit of 100 says the logits have grown (and that float16 or bfloat16
#   would round them coarsely), not that attention has collapsed; collapse is the next event;
# - **attention collapses:** the first step whose normalised attention entropy (the mean over
#   queries of the entropy over the keys it sees, divided by its maximum; the lower of the two
#   layers) falls below 0.05, i.e. nearly one key per query;
# - **loss spikes:** the first step whose training loss is more than 0.5 nats above the lowest
#   it had been so far.
#
# A dash means the event never happened in the run.


# %%
moving_mean = events.moving_mean


def run_events(run: dict[str, np.ndarray]) -> np.ndarray:
    """1-based steps of (logits grow, attention collapses, loss spikes) per seed:
    ``(seeds, 3)``."""
    out = []
    for loss, logit, entropy in zip(
        run["loss"], run["max_logit"], run["entropy"], strict=True
    ):
        collapse = events.first(moving_mean(entropy.min(-1)) < COLLAPSE) + SMOOTH - 1
        grow = events.first(moving_mean(logit.max(-1)) > LARGE_LOGIT) + SMOOTH - 1
        out.append([grow, collapse, events.loss_spike(loss)])
    return np.array(out) + 1


def steps_text(values: np.ndarray) -> str:
    return " / ".join("-" if np.isnan(s) else f"{s:.0f}" for s in values)


rows, order = [], {v: [] for v in VARIANTS}
for v in VARIANTS:
    for j, lr in enumerate(lrs):
        ev = run_events(runs[v][j])  # (seeds, 3)
        if np.isnan(ev).all():
            continue
        rows.append([NAMES[v], f"{lr:.2g}", *(steps_text(ev[:, e]) for e in range(3))])
        spiked = ~np.isnan(ev[:, 2])
        order[v] += [
            "collapse first" if ev[s, 1] < ev[s, 2] else "spike first"
            for s in np.flatnonzero(spiked)
        ]
Table(
    [
        "variant",
        "η",
        "logits grow (step, per seed)",
        "attention collapses",
        "loss spikes",
    ],
    rows,
)

# %%
for v in VARIANTS:
    print(
        f"{NAMES[v]}: {len(order[v])} runs spiked; attention collapsed first in "
        f"{order[v].count('collapse first')}, the loss in "
        f"{order[v].count('spike first')}"
    )

# %%
# The ordering rests on thresholds fixed before the counts. Moving them shows how much it
# depends on them: the entropy threshold of a collapse and the rise that counts as a spike,
# each halved and doubled, with the count of spiked runs in which attention collapsed first.
# Under every pair the baseline's attention collapsed first in most of its spiked runs and
# QK-LayerNorm's in none of them (the lines below the table): the order does not hang on
# the thresholds chosen.


# %%
def collapse_first(
    run: dict[str, np.ndarray], floor: float, rise: float
) -> tuple[int, int]:
    """(runs whose loss spiked, of those the ones whose attention collapsed first)."""
    spiked = first = 0
    for loss, entropy in zip(run["loss"], run["entropy"], strict=True):
        spike = events.loss_spike(loss, rise=rise)
        if np.isnan(spike):
            continue
        spiked += 1
        collapse = events.first(moving_mean(entropy.min(-1)) < floor) + SMOOTH - 1
        first += bool(collapse < spike)
    return spiked, first


varied = {}  # (variant, entropy threshold, spike rise) -> (spiked runs, collapse first)
for v in VARIANTS:
    for floor, rise in itertools.product((COLLAPSE / 2, COLLAPSE, 2 * COLLAPSE), RISES):
        counts = [collapse_first(run, floor, rise) for run in runs[v]]
        varied[v, floor, rise] = tuple(sum(c[i] for c in counts) for i in (0, 1))
Table(
    ["variant", "collapse: entropy below", "spike: rise, nats", "collapse first"],
    [
        [NAMES[v], f"{f:g}", f"{r:g}", f"{k} of {n}"]
        for (v, f, r), (n, k) in varied.items()
    ],
)

# %%
for v in VARIANTS:
    shares = [k / n for (w, _, _), (n, k) in varied.items() if w == v and n]
    print(
        fold(
            f"{NAMES[v]}: attention collapsed first in {min(shares):.0%} to "
            f"{max(shares):.0%} of "
            f"the spiked runs, over {len(shares)} pairs of thresholds"
        )
    )

# %%
# ## One run of each, step by step
#
# The lowest learning rate at which the baseline's loss spiked on every seed, for both
# variants: the training loss, the largest attention logit and the normalised attention
# entropy (the lower layer of the two), over the steps (moving means over 20 steps; the band is
# the lowest to highest seed). The dotted line marks the logit threshold of 100; the logit
# axis stops at 100 times that, so a diverged run leaves the panel at the top.

# %%
j = next(
    j
    for j in range(len(lrs))
    if not np.isnan(run_events(runs["inverse_sqrt"][j])[:, 2]).any()
)
fig, axes = plt.subplots(1, 3, figsize=(8.6, 3.0), layout="constrained")
series = {
    "training loss (nats/byte)": lambda r: r["loss"],
    "largest attention logit": lambda r: r["max_logit"].max(-1),
    "entropy / max (min of 2 layers)": lambda r: r["entropy"].min(-1),
}
for ax, (label, get) in zip(axes, series.items(), strict=True):
    curves = {v: np.stack([moving_mean(s) for s in get(runs[v][j])]) for v in VARIANTS}
    plot_seed_bands(
        curves,
        x=np.arange(SMOOTH, full.budget["steps"] + 1),
        ax=ax,
        xlabel="step",
        ylabel=label,
        logy=label.startswith("largest"),
        legend=False,
        **style.strategy_kwargs(),
    )
axes[1].axhline(LARGE_LOGIT, color="0.3", lw=0.9, ls=":")
axes[1].set_ylim(top=100 * LARGE_LOGIT)
fig.suptitle(f"η = {lrs[j]:.2g}: the baseline and QK-LayerNorm, {seeds} seeds")
dash_qk_layernorm(axes)
one_legend(fig)
plt.show()

# %%
# ## What this run shows
#
# Each part of the signature, read off the numbers above by a rule stated in the code: the
# rates where the baseline's logits pass 100 on every seed and QK-LayerNorm's do not; which
# event comes first in the runs whose loss spiked; and the sign of the LR-sensitivity
# difference when its interval excludes zero.

# %%
grows = {v: (peak[v] > LARGE_LOGIT).all(0) for v in VARIANTS}  # (rates,): on every seed
only_baseline = [
    f"{lr:.2g}"
    for lr, a, b in zip(lrs, grows["inverse_sqrt"], grows["qk_layernorm"], strict=True)
    if a and not b
]
spiked = {v: (len(order[v]), order[v].count("collapse first")) for v in VARIANTS}
n, c = spiked["inverse_sqrt"]
n_ln, c_ln = spiked["qk_layernorm"]
Table(
    ["part of the signature", "measured", "seen here"],
    [
        [
            "the baseline's logits pass 100 at rates where QK-LayerNorm's do not",
            f"at η = {', '.join(only_baseline) or 'no rate'}; largest logit of any "
            f"run: baseline "
            f"{np.nanmax(peak['inverse_sqrt']):.3g}, QK-LayerNorm "
            f"{np.nanmax(peak['qk_layernorm']):.3g}",
            "yes" if only_baseline else "no",
        ],
        [
            "the baseline's attention collapses before its loss spikes",
            f"in {c} of its {n} runs whose loss spiked",
            "yes" if n and c == n else "partly" if c else "no",
        ],
        [
            "QK-LayerNorm's runs that fail, fail loss first (plain divergence)",
            f"in {n_ln - c_ln} of its {n_ln} runs whose loss spiked",
            "yes" if n_ln and c_ln == 0 else "partly" if c_ln < n_ln else "no",
        ],
        [
            "QK-LayerNorm lowers the LR sensitivity",
            f"{terms['qk_layernorm'].mean():.3f} against "
            f"{terms['inverse_sqrt'].mean():.3f} "
            f"nats; difference {diff.text('+.3f')}; "
            f"{per_rate[top].sum() / per_rate.sum():.0%} of it from two rates",
            "yes"
            if diff.high < 0
            else "the opposite"
            if diff.low > 0
            else "not resolved",
        ],
    ],
)

# %%
# QK-LayerNorm bounds the *inputs* of the dot product, not the logits: its LayerNorm gains are
# learned, so at the highest rates its logits can still grow once training has gone wrong. This
# is one small model (two layers, 2,000 steps, three seeds): it shows the mechanism at one size,
# not how it scales with the model, which is the subject of Wortsman et al.'s Figure 1.
#
# ## Checked at every build
#
# While this page is built, the first 100 steps of one stored run (baseline, η = 0.01, seed 0)
# are trained again with the same batches; the loss and each layer's largest logit must match
# the stored ones within 1%, or the build fails. The text must be the same too: another Python
# release ships other help topics, and there the rerun is skipped with a note (the test suite
# requires the build's Python to have the stored text).

# %%
same_text = logit_growth.corpus()[1] == str(first["corpus_sha256"])
if not same_text:
    print(
        f"This Python's pydoc_data.topics differs from Python {first['python']}'s, the "
        f"stored "
        "run's text: the rerun is skipped."
    )
checks = stored.verify(full, stored.rerun("logit_growth")) if same_text else []
stored.checks_table(checks)

# %%
# ## References
#
# - Wortsman et al. 2023, *Small-scale proxies for large-scale Transformer training
#   instabilities*, arXiv:2309.14322 (attention logit growth, QK-LayerNorm, z-loss, independent
#   weight decay, LR sensitivity).
# - Dehghani et al. 2023, *Scaling Vision Transformers to 22 Billion Parameters*,
#   arXiv:2302.05442 (QK-LayerNorm against attention logit growth).
