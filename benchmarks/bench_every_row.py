"""The every-row statistics (``AttentionMonitor(all_rows=True)``) at one GPT-2-small layer's size,
whole rows against key chunks, timed side by side in one run.

``head_stats`` takes blocks of whole rows where a row of every batch and head fits in one chunk
of logits, and chunks of keys with an online softmax otherwise; ``head_stats_of_logits`` (eager
attention) likewise. Here the key-chunk path is forced on the same inputs by making the
whole-row path decline, so the two are measured on one machine state: pairs interleaved
(alternating which runs first), medians of the per-pair ratios.

Shapes: batch 1, 12 heads, 256 queries and keys, head size 64, as one layer of GPT-2 small at a
sequence of 256 (SDPA causal, SDPA with a boolean mask, eager logits masked with finfo.min).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

import torch

from attnscale._monitor import every_row

PAIRS = 40
torch.manual_seed(0)
L = 256
q, k = torch.randn(1, 12, L, 64), torch.randn(1, 12, L, 64)
causal = torch.ones(L, L, dtype=torch.bool).tril()
raw = q @ k.transpose(-1, -2)
logits = (raw / 8).masked_fill(~causal, torch.finfo(torch.float32).min)

CASES: dict[str, Callable[[], object]] = {
    "sdpa, is_causal": lambda: every_row.head_stats(q, k, is_causal=True),
    "sdpa, boolean mask": lambda: every_row.head_stats(q, k, attn_mask=causal),
    "eager logits": lambda: every_row.head_stats_of_logits(logits, masked=~causal, raw=raw),
}
WHOLE = (every_row._qk_whole_rows, every_row._whole_rows)


def timed(call: Callable[[], object], whole: bool) -> float:
    every_row._qk_whole_rows, every_row._whole_rows = (
        WHOLE if whole else (lambda *a: None, lambda *a: None)  # type: ignore[assignment]
    )
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


load = os.getloadavg()
print(
    f"{PAIRS} interleaved pairs, medians; {torch.get_num_threads()} torch threads; "
    f"load average {load[0]:.2f} on {os.cpu_count()} CPUs"
)
print(f"{'case':<20} {'key chunks (ms)':>15} {'whole rows (ms)':>15} {'ratio':>6}")
for name, call in CASES.items():
    for whole in (False, True, False, True):
        timed(call, whole)
    chunks: list[float] = []
    rows: list[float] = []
    for i in range(PAIRS):
        for whole in (True, False) if i % 2 else (False, True):
            (rows if whole else chunks).append(timed(call, whole))
    ratio = statistics.median(r / c for r, c in zip(rows, chunks, strict=True))
    print(
        f"{name:<20} {1e3 * statistics.median(chunks):>15.2f} "
        f"{1e3 * statistics.median(rows):>15.2f} {ratio:>6.2f}"
    )
every_row._qk_whole_rows, every_row._whole_rows = WHOLE
