"""Overhead of AttentionMonitor on three models, timed with and without it in one run.

- ``encoder``: a 4-layer ``nn.TransformerEncoder`` (batch 32 x sequence 128 x
  width 256); in eval mode PyTorch runs its fused fast path.
- ``gpt2-small``: Hugging Face ``transformers``' GPT-2 at the size of GPT-2
  small (12 layers, d_model 768, 12 heads), random weights, batch 1 x
  sequence 256, eager attention (the monitor follows every operation) and
  sdpa.
- ``tiny``: the same GPT-2 code at 2 layers of width 64 and 8 tokens; its
  ratio shows the fixed cost per call rather than the cost per element.

Targets (issue 25): a forward pass at most 1.05x on ``gpt2-small``; a training step (forward,
backward, AdamW) at most 1.10x with the monitor measuring every step and 1.02x at ``every=10``.
``eval, all_rows`` adds the per-head statistics over every row
(``AttentionMonitor(all_rows=True)``). ``eval, no stats`` runs the monitor with its statistics
switched off: what intercepting every torch function and following the lineages from q·kᵀ to
the softmax costs by itself, the floor under the other rows. The two measurements
are interleaved pair by pair (alternating which one runs first), and the table
reports the median of the per-pair ratios, so that load from other processes
hits both sides of a ratio alike, with a 95% interval for that median: a target is met where
the whole interval is under it, missed where the whole interval is over. The last column is
the time spent inside the monitor's own statistics per forward pass, measured directly. The
load average is printed with the table: on a shared machine, read the ratio together with it.

Two more measurements tell where the forward target's floor is. The every-row statistics of one
eager layer, from the weights the model computed (``head_stats_of_logits(probs=...)``, as the
monitor does) and from the logits alone. And what full coverage costs at the least where the
weights never exist (SDPA): forming every logit once more and one softmax per layer, as a
fraction of the plain forward pass.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import time
from collections.abc import Callable

import torch
import transformers
from torch import nn

from attnscale import AttentionMonitor, head_stats_of_logits
from attnscale._monitor import capture

SEED = 0
WARMUP, PAIRS = 1, 15


def median_interval(values: list[float]) -> tuple[float, float]:
    """A distribution-free interval for the median of ``values``: the order statistics k and
    n + 1 - k, with k from the binomial distribution, covering it at least 95% of the time
    where there are 6 values or more (the whole range, which is less sure, below that)."""
    xs, n = sorted(values), len(values)
    k, below = 0, 0.0  # below: P(Binomial(n, 1/2) <= k - 1)
    while below + math.comb(n, k) / 2**n <= 0.025:
        below += math.comb(n, k) / 2**n
        k += 1
    return (xs[0], xs[-1]) if k == 0 else (xs[k - 1], xs[n - k])


stats_seconds = 0.0
_guarded = capture.Capture._guarded


statistics_on = True  # off: the monitor intercepts and follows lineages, computes nothing


def timed_guarded(self: capture.Capture, where: str, kind: str, fn: Callable[[], None]) -> None:
    """Capture._guarded, adding up the time spent in the monitor's statistics."""
    global stats_seconds
    if not statistics_on:
        return
    t0 = time.perf_counter()
    try:
        _guarded(self, where, kind, fn)
    finally:
        stats_seconds += time.perf_counter() - t0


capture.Capture._guarded = timed_guarded  # type: ignore[method-assign]


def encoder() -> tuple[nn.Module, Callable[[], object]]:
    torch.manual_seed(SEED)
    layer = nn.TransformerEncoderLayer(256, 8, batch_first=True)
    model = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
    x = torch.randn(32, 128, 256)
    return model, lambda: model(x)


def gpt2(layers: int, width: int, heads: int, seq: int, impl: str) -> Callable[[], tuple]:
    def build() -> tuple[nn.Module, Callable[[], object]]:
        torch.manual_seed(SEED)
        config = transformers.GPT2Config(
            n_layer=layers, n_embd=width, n_head=heads, n_positions=max(seq, 8)
        )
        model = transformers.GPT2Model._from_config(config, attn_implementation=impl)
        ids = torch.randint(0, config.vocab_size, (1, seq))
        return model, lambda: model(input_ids=ids)

    return build


CASES = {
    "encoder": encoder,
    "gpt2-small, eager": gpt2(12, 768, 12, 256, "eager"),
    "gpt2-small, sdpa": gpt2(12, 768, 12, 256, "sdpa"),
    "tiny gpt2, eager": gpt2(2, 64, 4, 8, "eager"),
}

load = os.getloadavg()
print(
    f"{PAIRS} interleaved pairs per mode, medians; {torch.get_num_threads()} torch threads; "
    f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs; "
    f"transformers {transformers.__version__}"
)
print(
    f"{'model':<20} {'mode':<16} {'plain (ms)':>10} {'monitor (ms)':>12} {'ratio':>6} "
    f"{'95% CI':>11} {'stats (ms)':>10}"
)


def timed(
    model: nn.Module, call: Callable[[], object], training: bool, watch: bool, all_rows: bool
) -> float:
    """Seconds for one forward pass, with or without the monitor."""
    t0 = time.perf_counter()
    with torch.set_grad_enabled(training):
        if watch:
            with AttentionMonitor(model, all_rows=all_rows) as monitor:
                call()
            monitor.report()
        else:
            call()
    return time.perf_counter() - t0


for name, build in CASES.items():
    model, call = build()
    modes = ["eval, no_grad", "train, forward"]
    if name.startswith("gpt2"):
        modes.append("eval, all_rows")  # AttentionMonitor(all_rows=True)
        modes.append("eval, no stats")  # interception alone: the floor of this design
    for mode in modes:
        training = mode.startswith("train")
        all_rows = mode.endswith("all_rows")
        statistics_on = not mode.endswith("no stats")
        model.train(training)
        for _ in range(WARMUP):
            timed(model, call, training, watch=False, all_rows=all_rows)
            timed(model, call, training, watch=True, all_rows=all_rows)
        t_plain: list[float] = []
        t_mon: list[float] = []
        stats_seconds = 0.0
        for i in range(PAIRS):
            order = (False, True) if i % 2 == 0 else (True, False)
            for watch in order:
                (t_mon if watch else t_plain).append(timed(model, call, training, watch, all_rows))
        ratios = [m / p for m, p in zip(t_mon, t_plain, strict=True)]
        print(
            f"{name:<20} {mode:<16} {1e3 * statistics.median(t_plain):>10.1f} "
            f"{1e3 * statistics.median(t_mon):>12.1f} {statistics.median(ratios):>6.2f} "
            f"{'{:.2f}-{:.2f}'.format(*median_interval(ratios)):>11} "
            f"{1e3 * stats_seconds / PAIRS:>10.1f}"
        )


# -- a training step over a run: forward, backward and AdamW, with the monitor at every=N --

TRAIN_PAIRS, BLOCK = 3, 10  # pairs of BLOCK-step blocks: one measured step per block at every=10
print(
    f"\ntraining steps (forward, backward, AdamW), gpt2-small sdpa; {TRAIN_PAIRS} pairs of "
    f"{BLOCK}-step blocks, medians"
)
print(f"{'monitor':<28} {'plain (ms)':>10} {'monitor (ms)':>12} {'ratio':>6} {'ratio range':>11}")
model, _ = CASES["gpt2-small, sdpa"]()
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
ids = torch.randint(0, 50257, (1, 256), generator=torch.Generator().manual_seed(SEED))


def block(monitor: AttentionMonitor | None) -> float:
    """Seconds per training step over BLOCK steps, inside ``monitor`` when given."""
    t0 = time.perf_counter()
    with monitor if monitor is not None else contextlib.nullcontext():
        for _ in range(BLOCK):
            model(input_ids=ids).last_hidden_state.square().mean().backward()
            opt.step()
            opt.zero_grad()
    return (time.perf_counter() - t0) / BLOCK


for label, kwargs in [
    ("every=1", {"every": 1}),
    ("every=10", {"every": 10}),
    ("every=10, all_rows", {"every": 10, "all_rows": True}),
]:
    monitor = AttentionMonitor(model, optimizer=opt, history=100, **kwargs)  # one per run
    block(None)
    block(monitor)
    plain: list[float] = []
    watched: list[float] = []
    for i in range(TRAIN_PAIRS):
        for watch in (False, True) if i % 2 == 0 else (True, False):
            (watched if watch else plain).append(block(monitor if watch else None))
    ratios = [m / p for m, p in zip(watched, plain, strict=True)]
    print(
        f"{label:<28} {1e3 * statistics.median(plain):>10.1f} "
        f"{1e3 * statistics.median(watched):>12.1f} {statistics.median(ratios):>6.2f} "
        f"{min(ratios):>5.2f}-{max(ratios):<5.2f}"
    )


# -- the every-row statistics of one eager layer: from the model's weights, or from the logits --
print("\nevery-row statistics of one gpt2-small layer (12 heads, 256 x 256, causal), per call")
gen = torch.Generator().manual_seed(SEED)
qk = torch.randn(1, 12, 256, 256, generator=gen) * 8
visible = torch.ones(256, 256, dtype=torch.bool).tril()
logits = torch.where(visible, qk / 8, torch.finfo(torch.float32).min)
weights = logits.softmax(-1)
for threads in (1, torch.get_num_threads()):
    torch.set_num_threads(threads)
    times: dict[str, list[float]] = {"weights": [], "logits": []}
    for i in range(20):
        for source in ("weights", "logits") if i % 2 == 0 else ("logits", "weights"):
            t0 = time.perf_counter()
            head_stats_of_logits(
                logits, masked=~visible, raw=qk, probs=weights if source == "weights" else None
            )
            times[source].append(time.perf_counter() - t0)
    w, lg = (statistics.median(times[s]) for s in ("weights", "logits"))
    print(
        f"{threads} thread(s): from the weights {1e3 * w:.2f} ms, from the logits alone "
        f"{1e3 * lg:.2f} ms ({lg / w:.1f}x)"
    )

# -- what full coverage costs at the least on the SDPA path: every logit formed once more --
# SDPA never materialises the weights, so statistics over every row must form q·kᵀ and one
# softmax-sized pass per layer, whatever else they do: the floor under "sdpa, all_rows".
model, _ = CASES["gpt2-small, sdpa"]()
model.eval()
q = torch.randn(1, 12, 256, 64, generator=gen)
k = torch.randn(1, 12, 256, 64, generator=gen)
plain_t: list[float] = []
logits_t: list[float] = []
with torch.no_grad():
    for i in range(PAIRS + WARMUP):
        t0 = time.perf_counter()
        model(input_ids=ids)
        t1 = time.perf_counter()
        for _ in range(12):  # one per layer
            (q @ k.transpose(-2, -1)).softmax(-1)
        t2 = time.perf_counter()
        if i >= WARMUP:
            plain_t.append(t1 - t0)
            logits_t.append(t2 - t1)
print(
    f"\nforming every logit and one softmax per layer, gpt2-small sdpa: "
    f"{1e3 * statistics.median(logits_t):.1f} ms per forward, "
    f"{statistics.median(logits_t) / statistics.median(plain_t):.1%} of the plain forward "
    f"({1e3 * statistics.median(plain_t):.1f} ms)"
)
