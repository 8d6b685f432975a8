"""Overhead of AttentionMonitor on three models, timed with and without it in one run.

- ``encoder``: a 4-layer ``nn.TransformerEncoder`` (batch 32 x sequence 128 x
  width 256); in eval mode PyTorch runs its fused fast path.
- ``gpt2-small``: Hugging Face ``transformers``' GPT-2 at the size of GPT-2
  small (12 layers, d_model 768, 12 heads), random weights, batch 1 x
  sequence 256, eager attention (the monitor follows every operation) and
  sdpa.
- ``tiny``: the same GPT-2 code at 2 layers of width 64 and 8 tokens; its
  ratio shows the fixed cost per call rather than the cost per element.

Targets (issue 42): on ``gpt2-small``, eager and SDPA, a forward pass at most 1.10x with the
default settings and 1.15x with ``all_rows``, and no dearer than the peer below; a training step
(forward, backward, AdamW) at most 1.02x at ``every=10`` (and 1.10x measuring every step, issue
25's target).
``eval, all_rows`` adds the per-head statistics over every row
(``AttentionMonitor(all_rows=True)``). ``eval, no stats`` runs the monitor with its statistics
switched off: what intercepting every torch function and following the lineages from q·kᵀ to
the softmax costs by itself, the floor under the other rows. ``eval, empty mode`` runs the
model inside a torch-function mode that only calls each function it sees: the floor under any
design that reads attention by intercepting torch functions, as the monitor does (and as issue
42's "mode that only dispatches" does), whatever it then computes. The two measurements
are interleaved pair by pair (alternating which one runs first), and the table
reports the median of the per-pair ratios, so that load from other processes
hits both sides of a ratio alike, with a 95% interval for that median: a target is met where
the whole interval is under it, missed where the whole interval is over. The last column is
the time spent inside the monitor's own statistics per forward pass, measured directly. The
load average is printed with the table: on a shared machine, read the ratio together with it.

``eval, output_attentions`` is a peer without the monitor: the eager model returns its weights
(``output_attentions=True``) and user code takes the entropy of every row of every layer, the
cheapest full-coverage entropy there is where the model computes its weights.

``gpt2-small, TransformerLens`` is the peer the issue names: TransformerLens's
``TransformerBridge`` over the same GPT-2-small (with its language-model head, which the bridge
needs; random weights, a one-word tokenizer written here, nothing downloaded), where
``eval, hook entropy`` takes the same entropy in a hook on every layer's
``hook_pattern``, the way TransformerLens users read attention, and ``eval, no_grad`` runs the
monitor over the bridge; ``eval, empty mode`` is the empty mode over the bridge. All three
ratios have the same plain bridge below them. It needs the ``bench`` extra (``nox -s bench``
installs it); without it the rows are skipped, with a line that says so.

``faults p/m``: the median minor page faults of a plain and of a watched forward pass. With
glibc's allocator, a process whose heap top is trimmed and grown again within a pass (its
``brk`` moves by megabytes many times a pass) faults on every page of the regrown memory, and
the model's own operations pay for it. The monitor's allocations shift the heap's layout, and
which layout a process settles in varies from process to process: the same code may fault on
thousands of pages a pass in one process and on none in another, which is part of the eager
ratio's spread between runs; the column shows which case each row met. To read the monitor's
cost without that, run the benchmark again with trimming off for both sides of each ratio, e.g.
``MALLOC_TRIM_THRESHOLD_=2000000000 MALLOC_MMAP_THRESHOLD_=1000000000``: the header prints the
settings a run used.

Targets are judged by the 95% interval: ``met`` where all of it is at or under the target,
``missed`` where all of it is over, ``undecided`` otherwise.

Three more measurements tell where the forward target's floor is. The every-row statistics of
one eager layer, from the weights the model computed (``head_stats_of_logits(probs=...)``, as
the monitor does) and from the logits alone. The least reading any full-coverage statistics
need: on the eager path, one pass over each layer's logits and weights for the row maxima and
one for the entropy's sum (``amax``, ``amax``, ``vecdot``); on SDPA, where the weights never
exist, forming every logit once more and one softmax per layer. Each as a fraction of the plain
forward pass, added to the ``no stats`` ratio: the least a forward pass with full-coverage
statistics can cost with this design on this machine, whatever the statistics' code.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here is downloaded: fail, never fetch
import transformers
from torch import nn
from torch.overrides import TorchFunctionMode

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


def verdict(interval: tuple[float, float], target: float) -> str:
    """``met``, ``missed`` or ``undecided``: where the 95% interval lies against the target."""
    low, high = interval
    return "met" if high <= target else "missed" if low > target else "undecided"


stats_seconds = 0.0


statistics_on = True  # off: the monitor intercepts and follows lineages, computes nothing


def timed_statistics(method: Callable[..., None]) -> Callable[..., None]:
    """A Capture method (reading calls, or measuring them at a flush), adding its time to
    ``stats_seconds``; skipped while the statistics are off."""

    def run(self: capture.Capture, *args: object) -> None:
        global stats_seconds
        if not statistics_on:
            return
        t0 = time.perf_counter()
        try:
            method(self, *args)
        finally:
            stats_seconds += time.perf_counter() - t0

    return run


capture.Capture._guarded = timed_statistics(capture.Capture._guarded)  # type: ignore[method-assign]
capture.Capture.flush = timed_statistics(capture.Capture.flush)  # type: ignore[method-assign]


def encoder() -> tuple[nn.Module, Callable[[], object]]:
    torch.manual_seed(SEED)
    layer = nn.TransformerEncoderLayer(256, 8, batch_first=True)
    model = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
    x = torch.randn(32, 128, 256)
    return model, lambda **_: model(x)


def gpt2(layers: int, width: int, heads: int, seq: int, impl: str) -> Callable[[], tuple]:
    def build() -> tuple[nn.Module, Callable[[], object]]:
        torch.manual_seed(SEED)
        config = transformers.GPT2Config(
            n_layer=layers, n_embd=width, n_head=heads, n_positions=max(seq, 8)
        )
        model = transformers.GPT2Model._from_config(config, attn_implementation=impl)
        ids = torch.randint(0, config.vocab_size, (1, seq))
        return model, lambda **kwargs: model(input_ids=ids, **kwargs)

    return build


def transformer_lens_bridge() -> tuple[nn.Module, Callable[..., object]]:
    """GPT-2-small inside TransformerLens's bridge; the call takes ``fwd_hooks``, as
    ``run_with_hooks`` does (none by default)."""
    import tempfile

    import tokenizers
    from transformer_lens import TransformerBridge

    torch.manual_seed(SEED)
    config = transformers.GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=256)
    hf = transformers.GPT2LMHeadModel._from_config(config, attn_implementation="eager")
    # the bridge wants a tokenizer it can reload by path: one word, saved to a temporary folder
    word = tokenizers.Tokenizer(tokenizers.models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    special = dict.fromkeys(("unk_token", "bos_token", "eos_token", "pad_token"), "<unk>")
    with tempfile.TemporaryDirectory() as folder:
        transformers.PreTrainedTokenizerFast(tokenizer_object=word, **special).save_pretrained(
            folder
        )
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        bridge = TransformerBridge.boot_transformers("gpt2", hf_model=hf, tokenizer=tokenizer)
    ids = torch.randint(0, config.vocab_size, (1, 256))

    def call(fwd_hooks: tuple[tuple[str, Callable[..., object]], ...] = ()) -> object:
        return bridge.run_with_hooks(ids, return_type=None, fwd_hooks=list(fwd_hooks))

    return bridge, call


CASES = {
    "encoder": encoder,
    "gpt2-small, eager": gpt2(12, 768, 12, 256, "eager"),
    "gpt2-small, sdpa": gpt2(12, 768, 12, 256, "sdpa"),
    "tiny gpt2, eager": gpt2(2, 64, 4, 8, "eager"),
    "gpt2-small, TransformerLens": transformer_lens_bridge,
}
TL = "gpt2-small, TransformerLens"


# -- memory pages: a monitor whose allocations make glibc trim the heap and grow it again makes
# the model's next tensors come from fresh pages (minor page faults, each a zeroed 4 KiB page),
# a cost outside the statistics' own time; it should fault about as often as the plain model.
def minor_faults(run: Callable[[], object]) -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    run()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def page_faults(name: str) -> dict[str, float]:
    """Median minor page faults of one forward pass of ``name``, plain and in the monitor."""
    model, call = CASES[name]()
    model.eval()

    def watched() -> None:
        with torch.no_grad(), AttentionMonitor(model):
            call()

    def plain() -> None:
        with torch.no_grad():
            call()

    for _ in range(WARMUP + 1):
        plain()
        watched()
    return {
        label: statistics.median(minor_faults(run) for _ in range(5))
        for label, run in (("plain", plain), ("monitor", watched))
    }


if "--faults" in sys.argv:  # one model's page faults, alone in this process (see the end)
    print(json.dumps(page_faults(sys.argv[sys.argv.index("--faults") + 1])))
    raise SystemExit

load = os.getloadavg()
malloc = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}
print(
    f"{PAIRS} interleaved pairs per mode, medians; {torch.get_num_threads()} torch threads; "
    f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs; "
    f"transformers {transformers.__version__}; malloc settings "
    + (" ".join(f"{k}={v}" for k, v in sorted(malloc.items())) or "as the C library sets them")
)
print(
    f"{'model':<27} {'mode':<24} {'plain (ms)':>10} {'monitor (ms)':>12} {'ratio':>6} "
    f"{'95% CI':>11} {'stats (ms)':>10} {'faults p/m':>12}  target"
)
FORWARD_TARGETS = {"eval, no_grad": 1.10, "eval, all_rows": 1.15}  # gpt2-small, eager and sdpa
FORWARD_TARGET = FORWARD_TARGETS["eval, all_rows"]
TARGET_MODELS = ("gpt2-small, eager", "gpt2-small, sdpa")
PEER = "eval, output_attentions"  # no monitor: the model's weights, and their entropy
TL_PEER = "eval, hook entropy"  # no monitor: TransformerLens's hooks, the same entropy
EMPTY = "eval, empty mode"  # no monitor: a torch-function mode that only runs each call


class EmptyMode(TorchFunctionMode):
    """Sees every torch function and only runs it: what any design that reads attention through
    a torch-function mode pays before it does anything with what it sees."""

    def __torch_function__(
        self,
        func: Callable[..., object],
        types: object,
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        return func(*args, **(kwargs or {}))


def head_entropy(weights: torch.Tensor) -> list[float]:
    """Each head's mean entropy over every row of one layer's weights (batch, heads, L, S)."""
    return torch.special.entr(weights).sum(-1).mean(dim=(0, 2)).tolist()


def entropy_of_returned_weights(call: Callable[..., object]) -> None:
    """The peer: every layer's weights returned by the model, and their head entropy."""
    out = call(output_attentions=True)
    for weights in out.attentions:  # type: ignore[attr-defined]
        head_entropy(weights)


def entropy_in_pattern_hooks(call: Callable[..., object]) -> None:
    """TransformerLens's peer: the same entropy, taken in a hook on every layer's pattern."""

    def take(pattern: torch.Tensor, hook: object) -> None:
        head_entropy(pattern)

    call(fwd_hooks=((lambda name: name.endswith("attn.hook_pattern"), take),))


def timed(
    model: nn.Module, call: Callable[..., object], training: bool, watch: bool, mode: str
) -> float:
    """Seconds for one forward pass, plain or watched (by the monitor, or by the peer)."""
    t0 = time.perf_counter()
    with torch.set_grad_enabled(training):
        if watch and mode == PEER:
            entropy_of_returned_weights(call)
        elif watch and mode == TL_PEER:
            entropy_in_pattern_hooks(call)
        elif watch and mode == EMPTY:
            with EmptyMode():
                call()
        elif watch:
            with AttentionMonitor(model, all_rows=mode.endswith("all_rows")) as monitor:
                call()
            monitor.report()
        else:
            call()
    return time.perf_counter() - t0


# (model, mode): median plain seconds, median ratio, its interval
results: dict[tuple[str, str], tuple[float, float, tuple[float, float]]] = {}


for name, build in CASES.items():
    try:
        model, call = build()
    except ImportError as missing:  # TransformerLens: the bench extra
        print(f"{name:<27} skipped: {missing.name} is not installed (pip install -e '.[bench]')")
        continue
    modes = ["eval, no_grad", "train, forward"]
    if name == TL:  # the monitor and the peer over one bridge
        modes = ["eval, no_grad", TL_PEER, EMPTY]
    elif name.startswith("gpt2"):
        modes.append("eval, all_rows")  # AttentionMonitor(all_rows=True)
        modes.append("eval, no stats")  # interception alone: the floor of this design
        modes.append(EMPTY)  # a mode that does nothing: the floor of any mode's design
    if name == "gpt2-small, eager":
        modes.append(PEER)
    for mode in modes:
        training = mode.startswith("train")
        statistics_on = not mode.endswith("no stats")
        model.train(training)
        for _ in range(WARMUP):
            timed(model, call, training, False, mode)
            timed(model, call, training, True, mode)
        t_plain: list[float] = []
        t_mon: list[float] = []
        faults: dict[bool, list[int]] = {False: [], True: []}
        stats_seconds = 0.0
        for i in range(PAIRS):
            order = (False, True) if i % 2 == 0 else (True, False)
            for watch in order:
                before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                (t_mon if watch else t_plain).append(timed(model, call, training, watch, mode))
                faults[watch].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
        ratios = [m / p for m, p in zip(t_mon, t_plain, strict=True)]
        interval = median_interval(ratios)
        results[(name, mode)] = (statistics.median(t_plain), statistics.median(ratios), interval)
        target = ""
        if name in TARGET_MODELS and mode in FORWARD_TARGETS:
            goal = FORWARD_TARGETS[mode]
            target = f"<={goal}: {verdict(interval, goal)}"
        print(
            f"{name:<27} {mode:<24} {1e3 * statistics.median(t_plain):>10.1f} "
            f"{1e3 * statistics.median(t_mon):>12.1f} {statistics.median(ratios):>6.2f} "
            f"{'{:.2f}-{:.2f}'.format(*interval):>11} "
            f"{1e3 * stats_seconds / PAIRS:>10.1f} "
            f"{'{:.0f}/{:.0f}'.format(*(statistics.median(faults[w]) for w in (False, True))):>12}"
            f"  {target}"
        )


def against_peer(label: str, model: str, peer_mode: str, own_mode: str = "eval, no_grad") -> None:
    """The forward ratio of ``own_mode`` (the monitor's by default) on ``model`` against a
    peer's, each over plain runs of that model: ``not dearer`` where the whole interval is at or
    under the peer's, ``dearer`` where it is all above."""
    if (model, peer_mode) not in results or (model, own_mode) not in results:
        return
    own, peer = results[(model, own_mode)], results[(model, peer_mode)]
    (own_low, own_high), (peer_low, peer_high) = own[2], peer[2]
    whose = "the monitor's" if own_mode == "eval, no_grad" else own_mode.removeprefix("eval, ")
    print(
        f"{label}: {whose} forward ratio {own[1]:.2f} (95% CI {own_low:.2f}-{own_high:.2f})"
        f" against {peer_mode.removeprefix('eval, ')}'s {peer[1]:.2f} ({peer_low:.2f}-"
        f"{peer_high:.2f}): "
        + (
            "not dearer"
            if own_high <= peer_low
            else "dearer"
            if own_low > peer_high
            else "undecided"
        )
    )


print()
against_peer("gpt2-small, eager", "gpt2-small, eager", PEER)
against_peer("gpt2-small in TransformerLens's bridge", TL, TL_PEER)
# the floor of the design issue 42 asks for (a mode that dispatches), against the same peer
against_peer("gpt2-small in TransformerLens's bridge", TL, TL_PEER, EMPTY)

if "--forward" in sys.argv:  # the forward table only (a few minutes instead of a quarter hour)
    raise SystemExit

# -- a training step over a run: forward, backward and AdamW, with the monitor at every=N --

BLOCK = 10  # pairs of steps per block: a block holds one measured step at every=10
# every=N: the most a training step may cost, and the blocks measured (more where the target
# is within the step time's noise of 1)
TRAIN_TARGETS = {1: (1.10, 10), 10: (1.02, 20)}
print(
    f"\ntraining steps (forward, backward, AdamW), gpt2-small sdpa, every row's statistics "
    f"(all_rows); blocks of {BLOCK} pairs of steps, one step plain and one in the monitor; "
    f"the ratio of each block's sums, medians"
)
print(
    f"{'monitor':<30} {'plain (ms)':>10} {'monitor (ms)':>12} {'ratio':>6} {'95% CI':>11}  target"
)
model, _ = CASES["gpt2-small, sdpa"]()
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
ids = torch.randint(0, 50257, (1, 256), generator=torch.Generator().manual_seed(SEED))


def train_step(monitor: AttentionMonitor | None) -> float:
    """Seconds for one training step, inside ``monitor`` (entering and leaving it included)
    when given."""
    t0 = time.perf_counter()
    with monitor if monitor is not None else contextlib.nullcontext():
        model(input_ids=ids).last_hidden_state.square().mean().backward()
        opt.step()
        opt.zero_grad()
    return time.perf_counter() - t0


for every, (target, blocks) in TRAIN_TARGETS.items():
    # One monitor for the run. Its steps are the monitored model's calls (no optimizer given):
    # the plain steps between them, outside the monitor, are not counted, so one monitored step
    # in `every` is measured. Steps alternate plain and monitored (in either order), so that
    # slow drifts of the machine's speed hit both sides of a block's ratio alike.
    monitor = AttentionMonitor(model, history=100, every=every, all_rows=True)
    for watch in (False, True) * BLOCK:
        train_step(monitor if watch else None)
    plain: list[float] = []
    watched: list[float] = []
    for _ in range(blocks):
        sums = {False: 0.0, True: 0.0}
        for i in range(BLOCK):
            for watch in (False, True) if i % 2 == 0 else (True, False):
                sums[watch] += train_step(monitor if watch else None)
        plain.append(sums[False] / BLOCK)
        watched.append(sums[True] / BLOCK)
    ratios = [m / p for m, p in zip(watched, plain, strict=True)]
    interval = median_interval(ratios)
    print(
        f"{f'every={every}, all_rows, {blocks} blocks':<30} "
        f"{1e3 * statistics.median(plain):>10.1f} "
        f"{1e3 * statistics.median(watched):>12.1f} {statistics.median(ratios):>6.2f} "
        f"{'{:.2f}-{:.2f}'.format(*interval):>11}  <={target}: {verdict(interval, target)}"
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

# -- the least any full-coverage statistics cost: what they must read, per layer --
# Eager: every statistic over every row needs at least the row maxima of the logits and of the
# weights (max logit, log-sum-exp) and the sum of p·x (entropy), one pass each. SDPA never
# materialises the weights: every logit formed once more and one softmax. Added to the
# monitor's interception alone ("no stats"), the least this design can cost on this machine.
q = torch.randn(1, 12, 256, 64, generator=gen)
k = torch.randn(1, 12, 256, 64, generator=gen)
LEAST_READS = {
    "gpt2-small, eager": lambda: (
        logits.amax(-1),
        weights.amax(-1),
        torch.linalg.vecdot(weights, logits),
    ),
    "gpt2-small, sdpa": lambda: (q @ k.transpose(-2, -1)).softmax(-1),
}
print("\nthe least full coverage can cost: no stats + the least reading of 12 layers")
for name, least_reads in LEAST_READS.items():
    model, call = CASES[name]()
    model.eval()
    plain_t: list[float] = []
    reads_t: list[float] = []
    with torch.no_grad():
        for i in range(PAIRS + WARMUP):
            t0 = time.perf_counter()
            call()
            t1 = time.perf_counter()
            for _ in range(12):  # one per layer
                least_reads()
            t2 = time.perf_counter()
            if i >= WARMUP:
                plain_t.append(t1 - t0)
                reads_t.append(t2 - t1)
    share = statistics.median(reads_t) / statistics.median(plain_t)
    _, floor, (floor_low, _) = results[(name, "eval, no stats")]
    print(
        f"{name}: reads {1e3 * statistics.median(reads_t):.1f} ms per forward, {share:.1%} of "
        f"the plain forward; no stats {floor:.2f} (95% CI from {floor_low:.2f}) + {share:.1%} = "
        f"{floor + share:.2f} (at least {floor_low + share:.2f}): the {FORWARD_TARGET} target "
        + ("is out of reach" if floor_low + share > FORWARD_TARGET else "is not ruled out")
        + " for this design on this machine"
    )


# -- what changing torch's thread count costs the model ---------------------------------------
# The monitor used to read every call on one thread (set_num_threads(1), then back): torch then
# clears oneDNN's cache and resizes its thread pools, and the model's next operations run
# slower, a cost outside the statistics' own time. It now changes the count once per forward
# pass, for the statistics of all calls together (``Capture.flush``).
if torch.get_num_threads() > 1:
    model, call = CASES["gpt2-small, eager"]()
    model.eval()
    threads = torch.get_num_threads()
    toggling = [False]

    def toggle(*_: object) -> None:
        if toggling[0]:
            torch.set_num_threads(1)
            torch.set_num_threads(threads)

    for block in model.h:  # type: ignore[union-attr]
        block.attn.register_forward_hook(toggle)
    times: dict[bool, list[float]] = {False: [], True: []}
    with torch.no_grad():
        for i in range(PAIRS + WARMUP):
            for on in (False, True) if i % 2 == 0 else (True, False):
                toggling[0] = on
                t0 = time.perf_counter()
                call()
                if i >= WARMUP:
                    times[on].append(time.perf_counter() - t0)
    ratios = [t / p for t, p in zip(times[True], times[False], strict=True)]
    low, high = median_interval(ratios)
    print(
        f"\ngpt2-small, eager, no monitor: one thread-count change and back per layer costs the "
        f"forward pass {statistics.median(ratios):.3f}x (95% CI {low:.3f}-{high:.3f})"
    )


# Each in fresh processes: a process that ran the tables above has a heap of their making, and
# the counts there moved several-fold between runs.
FAULT_PROCESSES = 3
for name in ("gpt2-small, eager", "gpt2-small, sdpa"):
    counts = [
        json.loads(
            subprocess.run(
                [sys.executable, __file__, "--faults", name],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.splitlines()[-1]
        )
        for _ in range(FAULT_PROCESSES)
    ]
    plain, watched = ([c[label] for c in counts] for label in ("plain", "monitor"))
    print(
        f"{name}: minor page faults per forward pass, medians of {FAULT_PROCESSES} fresh "
        f"processes (each the median of 5 passes): plain {statistics.median(plain):.0f} "
        f"(range {min(plain):.0f}-{max(plain):.0f}), in the monitor "
        f"{statistics.median(watched):.0f} ({min(watched):.0f}-{max(watched):.0f})"
    )
