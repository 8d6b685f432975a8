r"""
# Watching attention during training

Attention problems rarely show in the first forward pass: in long runs the attention logits grow
until the loss spikes (Dehghani et al. 2023; Wortsman et al. 2023), and attention entropy
collapses (Zhai et al. 2023). The monitor can stay on for a whole run: it measures every
`every`-th optimizer step, computes each head's largest logit and entropy over every query row
(`all_rows=True`), keeps a bounded history, hands a flat dict of scalars to any logger, and
reports the step at which each problem first appeared. This page trains the small language model
of the [logit-growth page](../04_training/plot_04_logit_growth.md) at a learning rate at which its
logits grow, with and without QK-LayerNorm, and measures, over 20 stored runs per variant, how
long before the loss spike the monitor warned.
"""

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from attnscale import THRESHOLDS, AttentionMonitor
from guide import events, intervals, stored, style
from guide.printing import fold
from guide.studies import monitor_training as study
from guide.tables import Table

style.use_style()

VARIANTS = ["inverse_sqrt", "qk_layernorm"]  # the baseline first
NAMES = style.text_labels(VARIANTS)
BUDGET = study.FULL  # the model, text and schedule of the logit-growth page
ETA = BUDGET["lr"]  # peak learning rate
SEED = 0
STEPS = BUDGET["stop_after"]  # the first 300 steps of the 2,000-step schedule
EVERY = BUDGET["every"]  # the monitor measures every 10th optimizer step
WARMUP = BUDGET["warmup"]
EARLY = 60  # the report printed below is this step's
TAU = THRESHOLDS["max_logit"]  # a head's max logit above this warns
ENTROPY = THRESHOLDS["normalized_entropy"]  # a head's entropy below this warns

# %%
# ## The run, and the metric
#
# The model, text and schedule are the logit-growth page's: a byte-level causal language model
# (two pre-LayerNorm blocks of width 128, four heads of $d_k = 32$, windows of 64 bytes, 16 per
# step) on the help topics that ship with CPython, AdamW with $\beta = (0.9, 0.95)$, linear
# warmup over 200 steps then cosine decay over 2,000, and a z-loss on the output. The build
# runs the first 300 steps, once with $1/\sqrt{d_k}$ alone and once with QK-LayerNorm, same seed
# and batches. The loop is a plain PyTorch loop; the monitor is one `with` statement around it.
# (The model's set-up and one training step are the study's `setup` and `train_step`, which the
# stored runs below ran too.)
#
# The metric, fixed before any run: the **lead time**, the loss spike's step minus the first
# measured step at which the monitor warned of large logits or entropy collapse. A loss spike is
# the logit-growth page's rule: the first 20-step mean of the training loss that is more than
# 0.5 nats above the lowest 20-step mean so far. A positive lead time is a warning that came
# first.


# %%
text = study.train_text()
runs = {}
for variant in VARIANTS:
    model, opt, sched, gen = study.setup(BUDGET, variant, SEED)
    logged: list[dict[str, float]] = []
    monitor = AttentionMonitor(
        model,
        all_rows=True,
        every=EVERY,
        optimizer=opt,
        history=100,
        log=logged.append,
    )
    losses = []
    with monitor:
        for step in range(1, STEPS + 1):
            losses.append(study.train_step(BUDGET, model, opt, sched, text, gen))
            if step == EARLY:
                early = monitor.report()  # a report can be read at any step
    runs[variant] = {
        "report": monitor.report(),
        "early": early,
        "logged": logged,
        "loss": np.array(losses),
    }

# %%
# ## What the logger receives
#
# At the end of each measured step, the `log` callable gets one flat dict of floats with stable
# keys, `attn/<site>/<statistic>`, so `log=wandb.log` works as it is, and TensorBoard or a CSV
# file take one line of glue (see [AttentionMonitor][attnscale.AttentionMonitor]). With
# `all_rows=True` it holds, per head, the largest logit, the mean entropy over the rows
# (divided by its maximum, the log of the number of keys) and the factor QK-Clip would apply.
# Here, the baseline's last measured step, first layer:

# %%
last = runs["inverse_sqrt"]["logged"][-1]
Table(
    ["key", "value"],
    [
        [k, f"{v:.4g}"]
        for k, v in last.items()
        if k.startswith("attn/blocks.0.") or k == "attn/step"
    ],
)


# %%
# ## The same number in other libraries
#
# Megatron-LM, Transformer Engine, cuDNN and Kimi K2's QK-Clip each report a largest attention
# logit, and not quite the same one. All of them read the softmax input (the product times the
# scale, plus any additive bias) and leave masked entries out; they differ in the sign, in a
# clamp at 0, in what one value covers, and in how layers, micro-batches and processes combine.
# The tables are printed from the monitor's table of definitions
# (`attnscale._monitor.metric_names`), each row as read in the source it links (Megatron-LM's
# per-head numbers are Transformer Engine's); a test computes every row on one causal example
# built so that each of these differences changes the number. torchtitan logs no max logit;
# its row is there for the way it reduces its MoE layers' counts, one collective for every
# layer, which the monitor follows.

# %%
from attnscale._monitor.metric_names import DEFINITIONS


def yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


computed = [d for d in DEFINITIONS if d.per is not None]
Table(
    [
        "library",
        "logged as",
        "max of",
        "clamped at 0",
        "masked entries",
        "one value per",
    ],
    [
        [
            d.library,
            d.key,
            ("logit" if d.signed else "|logit|")
            + (", scaled" if d.scaled else ", unscaled"),
            yes_no(d.clamp_at_zero),
            "left out" if d.masked_out else "counted",
            d.per,
        ]
        for d in computed
    ],
)


# %%
# How each combines calls and processes, and where it was read (commits pinned):


# %%
def source_label(url: str) -> str:
    """A short name for a source: the arXiv number, the file, or this site's
    reference."""
    if "arxiv.org" in url:
        return "arXiv:" + url.rsplit("/", 1)[-1]
    if url.startswith("https://github.com/"):
        return url.rsplit("/", 1)[-1]
    return "API reference"


Table(
    ["library", "combined over calls and processes", "source"],
    [[d.library, d.across, source_label(d.source)] for d in DEFINITIONS],
    links={"source": [d.source for d in DEFINITIONS]},
)

# %%
# The monitor logs each head's signed maximum over every row of the step, the number QK-Clip
# compares with its threshold and divides it by, which Transformer Engine and cuDNN give too:
# kept signed and unclamped, so a head whose logits are all negative reads as such, not as 0.
# `AttentionMonitor(..., log_names="megatron")` adds Megatron-LM's `max_attention_logit`,
# under Megatron's definition, so that a dashboard built for Megatron runs reads this one.


# %%
# ## The curves, head by head
#
# Per head, from the dicts the logger received: the largest attention logit and the entropy,
# at every 10th step, with the monitor's thresholds (dotted) and the training loss. A solid
# vertical line marks the first step at which the monitor warned, a dashed one the loss spike,
# and a grey band the learning rate's warmup.


# %%
records = {
    v: study.records(list(r["loss"]), r["logged"], r["report"]) for v, r in runs.items()
}


fig, axes = plt.subplots(
    2, 3, figsize=(8, 5.2), layout="constrained", sharex=True, sharey="col"
)
for row, variant in zip(axes, VARIANTS, strict=True):
    run = runs[variant]
    loss = run["loss"]
    row[0].plot(np.arange(STEPS), loss, color="0.75", lw=0.6)
    smooth = events.moving_mean(loss)
    row[0].plot(
        np.arange(events.SMOOTH - 1, STEPS), smooth, color="C0", label="20-step mean"
    )
    row[0].set_ylabel(f"{NAMES[variant]}\ntraining loss (nats/byte)")
    record = records[variant]
    for ax, stat, bound, label in (
        (row[1], "max_logit", TAU, "largest logit per head"),
        (row[2], "entropy", ENTROPY, "entropy / log(keys), per head"),
    ):
        for name, values in zip(record["heads"], record[stat].T, strict=True):
            layer = int(name.split(".")[1])
            ax.plot(record["steps"], values, color=f"C{layer}", lw=0.9, alpha=0.8)
        ax.axhline(bound, color="0.3", ls=":", lw=1)
        ax.set_ylabel(label)
    row[1].set_yscale("symlog", linthresh=10)
    row[1].set_ylim(bottom=0)
    warning = float(study.first_warning(record["warned"]))
    spike = events.loss_spike(loss)
    for ax in row:
        ax.axvspan(0, WARMUP, color="0.92", lw=0, zorder=0)
        if not np.isnan(warning):
            ax.axvline(warning, color="C3", lw=1.2)
        if not np.isnan(spike):
            ax.axvline(spike, color="k", ls="--", lw=1.2)
for ax in axes[1]:
    ax.set_xlabel("step")
handles = [
    plt.Line2D([], [], color="C0", label="layer 1 heads / loss (20-step mean)"),
    plt.Line2D([], [], color="C1", label="layer 2 heads"),
    plt.Line2D([], [], color="C3", label="monitor warned"),
    plt.Rectangle((0, 0), 1, 1, color="0.92", label="warmup"),
]
if any(not np.isnan(events.loss_spike(runs[v]["loss"])) for v in VARIANTS):
    handles.append(plt.Line2D([], [], color="k", ls="--", label="loss spike"))
fig.legend(handles=handles, loc="outside lower center", ncols=3)
fig.suptitle(
    f"η = {ETA:g}, seed {SEED}: the monitor at every {EVERY}th step, all query rows"
)
plt.show()

# %%
# ## This build's runs against the stored ones
#
# At this learning rate training is chaotic: a difference in the last bit of one sum (another
# CPU, another thread count) grows until the loss curves part, and the events move by tens of
# steps. The two runs above show how the monitor behaves; they decide nothing. The counts below
# come from 20 stored runs per variant, seeds 0 to 19, each the same loop with the monitor on
# (`monitor_training` in the guide's studies). This build's runs are seed 0 of those, rerun
# here: their first 50 steps must match the stored seed 0's loss within 1%, before the runs
# part, and their first warning must lie within the range the stored seeds span, widened by
# their interquartile range on each side. A failed check fails the build.

# %%
watched = stored.load("monitor_training")
print(watched.summary())
live = {v: study.stack([records[v]], [SEED]) for v in VARIANTS}
stored.checks_table(stored.verify(watched, live))

# %%
# Per variant, over its 20 stored runs: how many the monitor warned (of large logits or entropy
# collapse), how many had a loss spike, how many of those were warned first, and by how many
# steps (median, with a distribution-free 95% interval for it). Each count comes with a 95%
# Wilson interval for the rate it estimates. Spikes during the warmup are counted apart: the
# learning rate still rises then, so a spike there says as much about the schedule as about
# the monitor.


# %%
def rate(k: int, of: int) -> str:
    """``k`` of ``of`` with a 95% Wilson interval for the rate."""
    low, high = intervals.wilson_interval(k, of)
    return f"{k} of {of} ({100 * low:.0f} to {100 * high:.0f}%)"


def lead_text(leads: np.ndarray) -> str:
    """The median lead time with its distribution-free 95% interval, and the runs behind
    it."""
    if leads.size < 2:
        return f"{leads[0]:.0f}, 1 run: no interval" if leads.size else "no run"
    low, high = intervals.median_interval(leads)
    return f"{np.median(leads):.0f} ({low:.0f} to {high:.0f}), {leads.size} runs"


summary = {}
rows = []
for v in VARIANTS:
    part = watched.parts[v]
    warn = study.first_warning(part["warned"])
    spike = np.array([events.loss_spike(loss) for loss in part["loss"]])
    n = len(part["seeds"])
    spiked, was_warned = ~np.isnan(spike), ~np.isnan(warn)
    ahead = spiked & was_warned & (warn < spike)
    summary[v] = {"runs": n, "warned": int(was_warned.sum())}
    rows.append(
        [
            NAMES[v],
            rate(int(was_warned.sum()), n),
            rate(int(spiked.sum()), n),
            f"{int((spiked & (spike < WARMUP)).sum())} of {int(spiked.sum())}",
            rate(int(ahead.sum()), int(spiked.sum())) if spiked.any() else "no spike",
            lead_text((spike - warn)[ahead]),
        ]
    )
Table(
    [
        "variant",
        "warned",
        "loss spiked",
        "spikes during the warmup",
        "warned before the spike",
        "lead time, steps: median (95% interval)",
    ],
    rows,
)

# %%
# ## Warnings by episode, spikes after the warmup, other thresholds
#
# A run's first warning may belong to an earlier episode that training got over, and a spike
# during the warmup says as much about the schedule as about the monitor. So the lead time is
# also measured from the start of the *warning episode* running at the spike (or the last one
# before it: consecutive measured steps at which some head is past a threshold, replayed from
# the per-head values the stored runs logged), for every spike and for the spikes after the
# warmup alone; and both thresholds are moved by a factor 2 each way (the logit threshold up
# while the entropy threshold goes down is the less sensitive monitor).


# %%
def episode_starts(part: dict[str, np.ndarray], tau: float, floor: float) -> np.ndarray:
    """Per run: (loss spike, first warning, start of the episode running at the
    spike)."""
    out = []
    for s in range(len(part["seeds"])):
        spike, steps = events.loss_spike(part["loss"][s]), part["steps"][s]
        hot = (part["max_logit"][s] > tau).any(-1) | (part["entropy"][s] < floor).any(
            -1
        )
        first = steps[hot][0] if hot.any() else np.nan
        live = np.flatnonzero(hot & (steps <= spike))
        if np.isnan(spike) or not live.size:
            out.append((spike, first, np.nan))
            continue
        start = live[-1]
        while start > 0 and hot[start - 1]:
            start -= 1
        out.append((spike, first, steps[start]))
    return np.array(out)


def median_range(values: np.ndarray) -> str:
    values = values[np.isfinite(values)]
    if not values.size:
        return "no run"
    spread = f"{values.min():.0f} to {values.max():.0f}"
    return f"{np.median(values):.0f} ({spread}), {values.size} runs"


rows, by_episode = [], {}
for v in VARIANTS:
    for factor in (0.5, 1.0, 2.0):
        r = episode_starts(watched.parts[v], TAU * factor, ENTROPY / factor)
        after = r[:, 0] >= WARMUP
        by_episode[v, factor] = r
        rows.append(
            [
                NAMES[v],
                f"{TAU * factor:g}, {ENTROPY / factor:g}",
                median_range(r[:, 0] - r[:, 1]),
                median_range(r[:, 0] - r[:, 2]),
                median_range((r[:, 0] - r[:, 2])[after]),
            ]
        )
Table(
    [
        "variant",
        "thresholds: max logit, entropy",
        "lead from the first warning: median (range)",
        "lead from the episode at the spike",
        "the same, spikes after the warmup",
    ],
    rows,
)

# %%
# For the baseline the line below counts the spikes whose warning episode began at the run's
# first warning: where that is every spike, the lead is not borrowed from an earlier episode
# that training got over. The lead is long because the warnings come early, during the warmup,
# while the spikes come near or after its end; moving both thresholds by a factor 2 moves the
# median lead by a few measured steps (the table).

# %%
base = by_episode["inverse_sqrt", 1.0]
spiked = ~np.isnan(base[:, 0])
same = int((base[spiked, 1] == base[spiked, 2]).sum())
print(
    f"baseline spikes whose warning episode began at the run's first warning: {same} "
    f"of "
    f"{int(spiked.sum())}"
)

# %%
# Does watching change what is watched? The monitor's hooks read the attention and write
# nothing back, so the baseline trained again from the same seed without it must give the same
# losses, bit for bit (the first 60 steps, enough to see any difference: training here is
# chaotic, so one would grow):

# %%
model, opt, sched, gen = study.setup(BUDGET, "inverse_sqrt", SEED)
plain = np.array(
    [study.train_step(BUDGET, model, opt, sched, text, gen) for _ in range(EARLY)]
)
gap = float(np.abs(plain - runs["inverse_sqrt"]["loss"][:EARLY]).max())
print(
    fold(
        f"largest difference in the training loss over the first {EARLY} steps, with "
        f"the monitor (all_rows=True) and without: {gap:g}"
    )
)

# %%
# The baseline's report, as `print(monitor.report())` shows it, here read at step 60, while the
# run is still the same on every machine (the report at the end of a chaotic run names other
# heads and sites on another CPU); each finding says at which run step it first appeared:

# %%
print(runs["inverse_sqrt"]["early"])

# %%
# ## Over every stored run
#
# The runs above share one learning rate. The logit-growth page's stored runs (nine learning rates from
# $10^{-4}$ to 1, three seeds, with and without QK-LayerNorm, 2,000 steps each) kept at every
# step each layer's largest logit over every query row of the batch: the same number as the
# largest of the monitor's per-head `max_logit`. So the monitor's max-logit rule can be replayed
# on them as it would have run with `every=10`: the warning step is the first multiple of 10 at
# which a logit exceeded 100. (Their entropy was kept as a mean over heads, not per head, so the
# entropy rule cannot be replayed.) A dash is an event that never happened.

# %%
full = stored.load("logit_growth")
print(full.summary())
lrs = {k: 10 ** (k / 2) for k in full.budget["halves"]}
measured = np.arange(full.budget["stop_after"]) % EVERY == 0


def replay(part: dict[str, np.ndarray]) -> np.ndarray:
    """Per seed: (warning step of the max-logit rule at every=10, loss spike step)."""
    return np.array(
        [
            [events.first((logit.max(-1) > TAU) & measured), events.loss_spike(loss)]
            for loss, logit in zip(part["loss"], part["max_logit"], strict=True)
        ]
    )


def steps_text(values: np.ndarray) -> str:
    return " / ".join("-" if np.isnan(s) else f"{s:.0f}" for s in values)


replayed = {(v, k): replay(full.parts[f"{v}_lr{k}"]) for v in VARIANTS for k in lrs}
Table(
    ["variant", "η", "warned (step, per seed)", "loss spike", "lead time"],
    [
        [
            NAMES[v],
            f"{lrs[k]:.2g}",
            steps_text(ev[:, 0]),
            steps_text(ev[:, 1]),
            steps_text(ev[:, 1] - ev[:, 0]),
        ]
        for (v, k), ev in replayed.items()
        if not np.isnan(ev).all()
    ],
)

# %%
# ## How often the warning came first
#
# Per variant, over its 27 runs: of the runs whose loss spiked, how many were warned before the
# spike (and by how many steps: median and range), how many after it or never; and of the runs
# that were warned, how many never spiked within their 2,000 steps (false alarms, for this
# purpose: their logits were large, but the loss did not pay for it in this run).

# %%
rows, replay_summary = [], {}
for v in VARIANTS:
    ev = np.concatenate([replayed[(v, k)] for k in lrs])  # (runs, 2)
    warn, spike = ev[:, 0], ev[:, 1]
    spiked, was_warned = ~np.isnan(spike), ~np.isnan(warn)
    ahead = spiked & was_warned & (warn < spike)
    leads = (spike - warn)[ahead]
    replay_summary[v] = (
        int(spiked.sum()),
        int(ahead.sum()),
        int((was_warned & ~spiked).sum()),
        int(was_warned.sum()),
    )
    rows.append(
        [
            NAMES[v],
            f"{spiked.sum()} of {len(ev)}",
            f"{ahead.sum()} of {spiked.sum()}",
            f"{np.median(leads):.0f} ({leads.min():.0f} to {leads.max():.0f})"
            if leads.size
            else "-",
            f"{(spiked & ~ahead).sum()}",
            f"{(was_warned & ~spiked).sum()} of {was_warned.sum()}",
        ]
    )
Table(
    [
        "variant",
        "runs whose loss spiked",
        "warned before the spike",
        "lead time, steps: median (range)",
        "spiked with no earlier warning",
        "warned, never spiked",
    ],
    rows,
)

# %%
# ## What this shows
#
# Read off the stored runs by rules in the code: whether the baseline was warned before every
# spike, whether QK-LayerNorm's runs at this page's rate were warned at all, and whether the
# warning also fires in runs that never spike.

# %%
spiked, ahead, false_alarms, warned_runs = replay_summary["inverse_sqrt"]
ln_spiked, ln_ahead, _, _ = replay_summary["qk_layernorm"]
ln = summary["qk_layernorm"]
Table(
    ["question", "measured", "answer"],
    [
        [
            "did the monitor warn before the baseline's loss spiked?",
            f"in {ahead} of its {spiked} spiked runs",
            "always" if spiked and ahead == spiked else "sometimes" if ahead else "no",
        ],
        [
            f"were QK-LayerNorm's stored runs at η = {ETA:g} warned?",
            f"in {ln['warned']} of its {ln['runs']} runs",
            "always"
            if ln["warned"] == ln["runs"]
            else "sometimes"
            if ln["warned"]
            else "no",
        ],
        [
            "did QK-LayerNorm's spikes come with an earlier warning?",
            f"in {ln_ahead} of its {ln_spiked} spiked runs",
            "always"
            if ln_spiked and ln_ahead == ln_spiked
            else "sometimes"
            if ln_ahead
            else "no",
        ],
        [
            "does the warning also fire in baseline runs that never spike?",
            f"{false_alarms} of its {warned_runs} warned runs never spiked",
            "yes" if false_alarms else "no",
        ],
    ],
)

# %%
# What the answers mean for one's own run: where the first answer is "always", a max-logit
# warning came before each of this model's spikes without QK-LayerNorm, early enough to act,
# for one measured step in ten. It is not a forecast: where the last answer is "yes", logits
# passed the threshold in runs that went on training, and a divergence in which the loss goes
# first (QK-LayerNorm's failures at the highest rates, where the third answer is "no") gives a
# logit threshold nothing to see. Treat the warning as a reason to lower the learning rate or to
# bound the logits (QK-LayerNorm, QK-Clip, a soft-cap), and the loss as the judge. This is one
# small model at one size; the lead time at scale is not measured here.
#
# ## What the monitor costs in this loop
#
# The training step of this model (forward, backward, AdamW) timed side by side on the machine
# that built this page, in alternating blocks of 20 steps: without the monitor, with it at
# `every=10` and at `every=1`, both with `all_rows=True`; each setting keeps one monitor,
# entered again for each of its blocks, as over a run. The ratio is the median block time over
# the median block time without the monitor. For the GPT-2-small shape, and a peer's cost
# (the entropy of the weights `output_attentions` returns), run
# `python benchmarks/bench_monitor.py`.

# %%
model, opt, _, gen = study.setup(BUDGET, "inverse_sqrt", SEED)
BLOCK, ROUNDS = 20, 5


monitors = {
    every: AttentionMonitor(
        model, all_rows=True, every=every, optimizer=opt, history=100
    )
    for every in (10, 1)
}


def block_time(every: int | None) -> float:
    start = time.perf_counter()
    if every is None:
        for _ in range(BLOCK):
            study.train_step(BUDGET, model, opt, None, text, gen)
    else:
        with monitors[every]:
            for _ in range(BLOCK):
                study.train_step(BUDGET, model, opt, None, text, gen)
    return (time.perf_counter() - start) / BLOCK


for g in opt.param_groups:
    g["lr"] = 1e-4  # keep the weights where they are while timing
block_time(None)  # warm-up
times: dict[str, list[float]] = {"none": [], "every=10": [], "every=1": []}
for _ in range(ROUNDS):
    times["none"].append(block_time(None))
    times["every=10"].append(block_time(10))
    times["every=1"].append(block_time(1))
plain = np.median(times["none"])
Table(
    ["monitor", "ms per step (median block)", "ratio to no monitor"],
    [
        [name, f"{1e3 * np.median(t):.1f}", f"{np.median(t) / plain:.2f}×"]
        for name, t in times.items()
    ],
)

# %%
# ## References
#
# - Dehghani et al. 2023, *Scaling Vision Transformers to 22 Billion Parameters*,
#   arXiv:2302.05442 (attention logit growth; QK-LayerNorm).
# - Wortsman et al. 2023, *Small-scale proxies for large-scale Transformer training
#   instabilities*, arXiv:2309.14322 (logit growth at high learning rates in small models).
# - Zhai et al. 2023, *Stabilizing Transformer Training by Preventing Attention Entropy
#   Collapse*, arXiv:2303.06296.
# - Kimi Team 2025, *Kimi K2: Open Agentic Intelligence*, arXiv:2507.20534 (QK-Clip: per-head
#   max logit, τ = 100).
