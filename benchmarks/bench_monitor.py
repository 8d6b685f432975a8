"""Overhead of AttentionMonitor on a 4-layer nn.TransformerEncoder forward pass.

Batch 32 x sequence 128 x width 256, timed with and without the monitor in one
run (median of repeats after warm-up). Target: at most 1.5x with statistics on.
"""

from __future__ import annotations

import time

import torch
from torch import nn

from attnscale import AttentionMonitor

SEED = 0
BATCH, SEQ, WIDTH, HEADS, LAYERS = 32, 128, 256, 8, 4
WARMUP, REPEATS = 1, 5

torch.manual_seed(SEED)
layer = nn.TransformerEncoderLayer(WIDTH, HEADS, batch_first=True)
model = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
x = torch.randn(BATCH, SEQ, WIDTH)


def median_time(fn: object, monitored: bool) -> float:
    times = []
    for i in range(WARMUP + REPEATS):
        t0 = time.perf_counter()
        if monitored:
            with AttentionMonitor(model) as monitor:
                fn()  # type: ignore[operator]
            monitor.report()
        else:
            fn()  # type: ignore[operator]
        if i >= WARMUP:
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


print(f"{'mode':<28} {'plain (ms)':>10} {'monitor (ms)':>12} {'ratio':>6}")
for mode in ("eval, no_grad (fast path)", "train, forward"):
    model.train(mode.startswith("train"))

    def forward() -> None:
        if model.training:
            model(x)
        else:
            with torch.no_grad():
                model(x)

    # interleave the two measurements so that machine noise hits both alike
    plain = median_time(forward, False)
    monitored = median_time(forward, True)
    plain = min(plain, median_time(forward, False))
    print(f"{mode:<28} {1e3 * plain:>10.1f} {1e3 * monitored:>12.1f} {monitored / plain:>6.2f}")
