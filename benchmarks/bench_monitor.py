"""Overhead of AttentionMonitor on a 4-layer nn.TransformerEncoder forward pass.

Batch 32 x sequence 128 x width 256, timed with and without the monitor in one
run. Target: at most 1.5x with statistics on.

The two measurements are interleaved pair by pair (alternating which one runs
first), and the table reports the median of the per-pair ratios, so that load
from other processes hits both sides of a ratio alike. The last column is the
time spent inside the monitor's own statistics per forward pass, measured
directly; it does not depend on how busy the machine is in the way the ratio
does. The load average is printed with the table: on a shared machine, read
the ratio together with it.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from attnscale import AttentionMonitor

SEED = 0
BATCH, SEQ, WIDTH, HEADS, LAYERS = 32, 128, 256, 8, 4
WARMUP, PAIRS = 1, 7


class TimedMonitor(AttentionMonitor):
    """AttentionMonitor that adds up the time spent in its statistics."""

    stats_seconds = 0.0

    def _safely(self, kind: str, where: str | None, fn: Callable[[], None]) -> None:
        t0 = time.perf_counter()
        try:
            super()._safely(kind, where, fn)
        finally:
            TimedMonitor.stats_seconds += time.perf_counter() - t0


torch.manual_seed(SEED)
layer = nn.TransformerEncoderLayer(WIDTH, HEADS, batch_first=True)
model = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
x = torch.randn(BATCH, SEQ, WIDTH)


def forward() -> None:
    if model.training:
        model(x)
    else:
        with torch.no_grad():
            model(x)


def plain() -> float:
    t0 = time.perf_counter()
    forward()
    return time.perf_counter() - t0


def monitored() -> float:
    t0 = time.perf_counter()
    with TimedMonitor(model) as monitor:
        forward()
    monitor.report()
    return time.perf_counter() - t0


load = os.getloadavg()
print(
    f"{PAIRS} interleaved pairs per mode, medians; {torch.get_num_threads()} torch threads; "
    f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs"
)
print(
    f"{'mode':<26} {'plain (ms)':>10} {'monitor (ms)':>12} {'ratio':>6} "
    f"{'ratio range':>11} {'stats (ms)':>10}"
)
for mode in ("eval, no_grad (fast path)", "train, forward"):
    model.train(mode.startswith("train"))
    for _ in range(WARMUP):
        plain()
        monitored()
    t_plain: list[float] = []
    t_mon: list[float] = []
    TimedMonitor.stats_seconds = 0.0
    for i in range(PAIRS):
        if i % 2 == 0:
            p = plain()
            m = monitored()
        else:
            m = monitored()
            p = plain()
        t_plain.append(p)
        t_mon.append(m)
    ratios = [m / p for m, p in zip(t_mon, t_plain, strict=True)]
    print(
        f"{mode:<26} {1e3 * statistics.median(t_plain):>10.1f} "
        f"{1e3 * statistics.median(t_mon):>12.1f} {statistics.median(ratios):>6.2f} "
        f"{min(ratios):>5.2f}-{max(ratios):<5.2f} "
        f"{1e3 * TimedMonitor.stats_seconds / PAIRS:>10.1f}"
    )
