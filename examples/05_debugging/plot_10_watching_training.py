r"""
# Watching attention during training

Attention problems rarely show in the first forward pass: in long runs the attention logits grow
until the loss spikes (Dehghani et al. 2023; Wortsman et al. 2023), and attention entropy
collapses (Zhai et al. 2023). The monitor can stay on for a whole run: it measures every
`every`-th optimizer step, computes each head's largest logit and entropy over every query row
(`all_rows=True`), keeps a bounded history, hands a flat dict of scalars to any logger, and
reports the step at which each problem first appeared. This page trains the small language model
of the [logit-growth page](../04_training/plot_04_logit_growth.md) at a learning rate at which its
logits grow, with and without QK-LayerNorm, and measures how long before the loss spike the
monitor warned.
"""

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from attnscale import THRESHOLDS, AttentionMonitor, MonitorReport
from attnscale._docs import events, stored, style
from attnscale._docs.studies import logit_growth
from attnscale._docs.tables import Table

style.use_style()

VARIANTS = ["inverse_sqrt", "qk_layernorm"]  # the baseline first
NAMES = style.text_labels(VARIANTS)
ETA = 0.1  # peak learning rate
SEED = 0
STEPS = 300  # the first 300 steps of the 2,000-step schedule
EVERY = 10  # the monitor measures every 10th optimizer step
TAU = THRESHOLDS["max_logit"]  # a head's max logit above this warns
ENTROPY = THRESHOLDS["normalized_entropy"]  # a head's entropy below this warns
BUDGET = logit_growth.FULL
WATCHED = ("large-logits", "entropy-collapse")  # findings that grow over a run

# %%
# ## The run, and the metric
#
# The model, text and schedule are the logit-growth page's: a byte-level causal language model
# (two pre-LayerNorm blocks of width 128, four heads of $d_k = 32$, windows of 64 bytes, 16 per
# step) on the help topics that ship with CPython, AdamW with $\beta = (0.9, 0.95)$, linear
# warmup over 200 steps then cosine decay over 2,000, and a z-loss on the output. The build
# runs the first 300 steps, once with $1/\sqrt{d_k}$ alone and once with QK-LayerNorm, same seed
# and batches. The loop is a plain PyTorch loop; the monitor is one `with` statement around it.
#
# The metric, fixed before any run: the **lead time**, the loss spike's step minus the first
# measured step at which the monitor warned of large logits or entropy collapse. A loss spike is
# the logit-growth page's rule: the first 20-step mean of the training loss that is more than
# 0.5 nats above the lowest 20-step mean so far. A positive lead time is a warning that came
# first.


# %%
def batches(data: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    start = torch.randint(
        0, data.numel() - BUDGET["context"] - 1, (BUDGET["batch_size"],), generator=gen
    )
    window = data[start[:, None] + torch.arange(BUDGET["context"] + 1)]
    return window[:, :-1], window[:, 1:]


def schedule(t: int) -> float:
    warmup, steps = BUDGET["warmup"], BUDGET["steps"]
    if t < warmup:
        return (t + 1) / warmup
    return 0.5 * (1 + np.cos(np.pi * (t - warmup) / (steps - warmup)))


def setup(strategy: str) -> tuple[torch.nn.Module, torch.optim.Optimizer, torch.Generator]:
    torch.manual_seed(SEED)
    model = logit_growth.TinyLM(BUDGET, strategy)
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    others = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [
            # weight decay per step, independent of the learning rate
            {"params": matrices, "weight_decay": BUDGET["weight_decay"] / ETA},
            {"params": others, "weight_decay": 0.0},
        ],
        lr=ETA,
        betas=(0.9, 0.95),
    )
    batches_seed = SEED + 1_000_003  # the stored run's batches
    return model, opt, torch.Generator().manual_seed(batches_seed)


def train_step(
    model: torch.nn.Module,
    opt: torch.optim.Optimizer,
    sched: torch.optim.lr_scheduler.LRScheduler | None,
    data: torch.Tensor,
    gen: torch.Generator,
) -> float:
    x, y = batches(data, gen)
    logits = model(x)[0].reshape(-1, logit_growth.VOCAB)
    loss = F.cross_entropy(logits, y.reshape(-1))
    z_loss = BUDGET["z_loss"] * torch.logsumexp(logits, -1).square().mean()
    opt.zero_grad(set_to_none=True)
    (loss + z_loss).backward()
    opt.step()
    if sched is not None:
        sched.step()
    return float(loss.detach())


text, _ = logit_growth.corpus()
train_text = text[: int(0.9 * text.numel())]
runs = {}
for variant in VARIANTS:
    model, opt, gen = setup(variant)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    logged: list[dict[str, float]] = []
    monitor = AttentionMonitor(
        model, all_rows=True, every=EVERY, optimizer=opt, history=100, log=logged.append
    )
    with monitor:
        losses = [train_step(model, opt, sched, train_text, gen) for _ in range(STEPS)]
    runs[variant] = {"report": monitor.report(), "logged": logged, "loss": np.array(losses)}

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
# ## The curves, head by head
#
# Per head, from the dicts the logger received: the largest attention logit and the entropy,
# at every 10th step, with the monitor's thresholds (dotted) and the training loss. A solid
# vertical line marks the first step at which the monitor warned, a dashed one the loss spike.


# %%
def per_head(logged: list[dict[str, float]], stat: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Steps, and per ``site/head`` the series of one per-head statistic."""
    steps = np.array([d["attn/step"] for d in logged])
    keys = sorted({k for d in logged for k in d if k.endswith(f"/{stat}") and "/head" in k})
    return steps, {
        k.removeprefix("attn/").removesuffix(f"/{stat}"): np.array(
            [d.get(k, np.nan) for d in logged]
        )
        for k in keys
    }


def warned(report: MonitorReport) -> dict[str, int]:
    """The first monitor step of each finding that can grow over a run."""
    return {
        f.code: f.first_step
        for f in report.findings
        if f.code in WATCHED and f.first_step is not None
    }


fig, axes = plt.subplots(2, 3, figsize=(8, 5.2), layout="constrained", sharex=True, sharey="col")
for row, variant in zip(axes, VARIANTS, strict=True):
    run = runs[variant]
    loss = run["loss"]
    row[0].plot(np.arange(STEPS), loss, color="0.75", lw=0.6)
    smooth = events.moving_mean(loss)
    row[0].plot(np.arange(events.SMOOTH - 1, STEPS), smooth, color="C0", label="20-step mean")
    row[0].set_ylabel(f"{NAMES[variant]}\ntraining loss (nats/byte)")
    for ax, stat, bound, label in (
        (row[1], "max_logit", TAU, "largest logit per head"),
        (row[2], "entropy", ENTROPY, "entropy / log(keys), per head"),
    ):
        steps, series = per_head(run["logged"], stat)
        for name, values in series.items():
            layer = int(name.split(".")[1])
            ax.plot(steps, values, color=f"C{layer}", lw=0.9, alpha=0.8)
        ax.axhline(bound, color="0.3", ls=":", lw=1)
        ax.set_ylabel(label)
    row[1].set_yscale("symlog", linthresh=10)
    row[1].set_ylim(bottom=0)
    marks = warned(run["report"])
    spike = events.loss_spike(loss)
    for ax in row:
        if marks:
            ax.axvline(min(marks.values()), color="C3", lw=1.2)
        if not np.isnan(spike):
            ax.axvline(spike, color="k", ls="--", lw=1.2)
for ax in axes[1]:
    ax.set_xlabel("step")
handles = [
    plt.Line2D([], [], color="C0", label="layer 1 heads / loss (20-step mean)"),
    plt.Line2D([], [], color="C1", label="layer 2 heads"),
    plt.Line2D([], [], color="C3", label="monitor warned"),
]
if any(not np.isnan(events.loss_spike(runs[v]["loss"])) for v in VARIANTS):
    handles.append(plt.Line2D([], [], color="k", ls="--", label="loss spike"))
fig.legend(handles=handles, loc="outside lower center", ncols=4)
fig.suptitle(f"η = {ETA:g}, seed {SEED}: the monitor at every {EVERY}th step, all query rows")
plt.show()

# %%
# ## Lead time in these two runs
#
# With the largest rise of the 20-step mean loss above its lowest value so far, which the spike
# rule compares with 0.5 nats: a run can stall or worsen by less than that and not count.

# %%
rows = []
lead = {}
for variant in VARIANTS:
    run = runs[variant]
    marks = warned(run["report"])
    spike = events.loss_spike(run["loss"])
    first = min(marks.values()) if marks else np.nan
    lead[variant] = spike - first
    smooth = events.moving_mean(run["loss"])
    rows.append(
        [
            NAMES[variant],
            ", ".join(
                f"{code} at {step}" for code, step in sorted(marks.items(), key=lambda m: m[1])
            )
            or "never",
            f"{(smooth - np.minimum.accumulate(smooth)).max():.2f}",
            "-" if np.isnan(spike) else f"{spike:.0f}",
            "-" if np.isnan(lead[variant]) else f"{lead[variant]:+.0f} steps",
            f"{smooth[-1]:.3f}",
        ]
    )
Table(
    [
        "variant",
        "monitor warned (step)",
        "largest rise of the loss, nats",
        "loss spike (step)",
        "lead time",
        "final loss (20-step mean)",
    ],
    rows,
)

# %%
# The baseline's report, as `print(monitor.report())` shows it; each finding says at which run
# step it first appeared:

# %%
print(runs["inverse_sqrt"]["report"])

# %%
# ## Over every stored run
#
# Two runs are an anecdote. The logit-growth page's stored runs (nine learning rates from
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
rows, summary = [], {}
for v in VARIANTS:
    ev = np.concatenate([replayed[(v, k)] for k in lrs])  # (runs, 2)
    warn, spike = ev[:, 0], ev[:, 1]
    spiked, was_warned = ~np.isnan(spike), ~np.isnan(warn)
    ahead = spiked & was_warned & (warn < spike)
    leads = (spike - warn)[ahead]
    summary[v] = (
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
# Read off the numbers above by rules in the code: whether the baseline was warned before every
# spike, whether QK-LayerNorm's run on this page was warned at all, and whether the warning also
# fires in runs that never spike.

# %%
spiked, ahead, false_alarms, warned_runs = summary["inverse_sqrt"]
ln_spiked, ln_ahead, _, _ = summary["qk_layernorm"]
page_ln = warned(runs["qk_layernorm"]["report"])
Table(
    ["question", "measured", "answer"],
    [
        [
            "did the monitor warn before the baseline's loss spiked?",
            f"in {ahead} of its {spiked} spiked runs",
            "always" if spiked and ahead == spiked else "sometimes" if ahead else "no",
        ],
        [
            f"was QK-LayerNorm's run on this page (η = {ETA:g}) warned?",
            ", ".join(f"{c} at step {s}" for c, s in page_ln.items()) or "no finding",
            "yes" if page_ln else "no",
        ],
        [
            "did QK-LayerNorm's spikes come with an earlier warning?",
            f"in {ln_ahead} of its {ln_spiked} spiked runs",
            "always" if ln_spiked and ln_ahead == ln_spiked else "sometimes" if ln_ahead else "no",
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
model, opt, gen = setup("inverse_sqrt")
BLOCK, ROUNDS = 20, 5


monitors = {
    every: AttentionMonitor(model, all_rows=True, every=every, optimizer=opt, history=100)
    for every in (10, 1)
}


def block_time(every: int | None) -> float:
    start = time.perf_counter()
    if every is None:
        for _ in range(BLOCK):
            train_step(model, opt, None, train_text, gen)
    else:
        with monitors[every]:
            for _ in range(BLOCK):
                train_step(model, opt, None, train_text, gen)
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
