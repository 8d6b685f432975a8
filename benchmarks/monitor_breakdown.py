"""Where the monitor's time goes in one GPT-2-small forward pass: its own parts, timed in place.

``python benchmarks/monitor_breakdown.py [eager|sdpa] [--all-rows]``

Wraps the monitor's own functions (the handlers, the recording of a call, the flush and its
statistics, the lineages, the module hooks) with timers and prints, per forward pass, the
milliseconds and calls of each, largest first. Times nest: ``_guarded`` holds the handlers and
``record``; ``flush`` holds ``grouped_logit_stats``; ``post_hook`` holds ``flush``. With
``--all-rows``, ``_every_row`` holds the every-row statistics of each call: on eager attention
``_probability_block`` (from the model's weights), on SDPA ``_fold`` (after q·kᵀ is formed
again), each holding ``top_two`` and ``_smallest_visible``; then ``_Rows.sink`` (each head's sink
key and the rows' logit there) and the masks. A fresh monitor per forward, as in
``bench_monitor.py``. The wrappers add a few microseconds per call, and the machine's noise
moves every row by 10-20% from run to run: compare parts within one run, and overall cost with
``bench_monitor.py``.
"""

from __future__ import annotations

import collections
import functools
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import transformers

from attnscale import AttentionMonitor
from attnscale._monitor import calls, capture, every_row, hooks, lineage, structure

FORWARDS, WARMUP = 10, 3
spent: collections.defaultdict[str, float] = collections.defaultdict(float)
count: collections.Counter[str] = collections.Counter()


def timed(name: str, f: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(f)
    def run(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return f(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - t0
            count[name] += 1

    return run


C = capture.Capture
for name in (
    "_guarded",
    "flush",
    "record",
    "_softmax_call",
    "sample",
    "_site",
    "_per_head",
    "_every_row",
):
    setattr(C, name, timed(name, getattr(C, name)))
for name in ("grouped_logit_stats", "grouped_qk_spreads", "row_sums", "_used_dims"):
    setattr(capture, name, timed(name, getattr(capture, name)))
lineage.Lineages.follow = timed("lineages.follow", lineage.Lineages.follow)  # type: ignore[method-assign]
for name in ("_probability_block", "_qk_whole_rows", "_fold", "_smallest_visible"):
    setattr(every_row, name, timed(name, getattr(every_row, name)))
for name in ("top_two", "sink_keys"):  # every_row calls them as structure.<name>
    setattr(structure, name, timed(name, getattr(structure, name)))
every_row._Rows.sink = timed("_Rows.sink", every_row._Rows.sink)  # type: ignore[method-assign]
for name in ("__init__", "block", "padding"):
    setattr(every_row._Masks, name, timed(f"_Masks.{name}", getattr(every_row._Masks, name)))
for func, (kind, handler) in list(calls.HANDLERS.items()):
    calls.HANDLERS[func] = (kind, timed(f"handler {kind}", handler))
hooks.REGISTRY._pre = timed("pre_hook", hooks.REGISTRY._pre)  # type: ignore[method-assign]
hooks.REGISTRY._post = timed("post_hook", hooks.REGISTRY._post)  # type: ignore[method-assign]

impl = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else "eager"
all_rows = "--all-rows" in sys.argv
torch.manual_seed(0)
config = transformers.GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=256)
model = transformers.GPT2Model._from_config(config, attn_implementation=impl).eval()
ids = torch.randint(0, config.vocab_size, (1, 256))


def forward() -> None:
    with torch.no_grad(), AttentionMonitor(model, all_rows=all_rows) as monitor:
        model(input_ids=ids)
    monitor.report()


for _ in range(WARMUP):
    forward()
spent.clear()
count.clear()
t0 = time.perf_counter()
for _ in range(FORWARDS):
    forward()
total = (time.perf_counter() - t0) / FORWARDS
print(f"gpt2-small, {impl}, all_rows={all_rows}: {1e3 * total:.1f} ms per monitored forward")
print(f"{'part':<28} {'ms/forward':>10} {'calls':>7} {'us/call':>8}")
for name, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
    print(
        f"{name:<28} {1e3 * seconds / FORWARDS:>10.2f} {count[name] / FORWARDS:>7.0f} "
        f"{1e6 * seconds / count[name]:>8.1f}"
    )
