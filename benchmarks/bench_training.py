"""Training 8 seeds in one batched call vs 8 sequential calls of the same configuration.

For each configuration and thread count, prints the median wall time of both ways (after a
warm-up), their ratio, and the largest difference between the per-step losses of the two ways
(they must agree to float32 rounding).

Batching removes per-step overhead, not arithmetic: 8 models do 8 times the matrix products of
one. The last columns are the share of the batched call's time spent in matrix products (from
``torch.profiler``) and ``sequential / (share * batched)``: the speed-up batching would reach if
everything but those products took no time at all, an upper bound, since the sequential runs
do the same products.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import torch
from torch.profiler import profile

import attnscale

T = TypeVar("T")
SEEDS = list(range(8))
REPEATS = 3
THREADS = (1, 2)
MATMULS = {"aten::bmm", "aten::mm", "aten::addmm", "aten::baddbmm"}
CONFIGS = {
    # The article's model and data, 2 epochs (32 steps) per measurement.
    "article (d_model 128, d_k 64)": {
        "task": "reconstruction",
        "d_model": 128,
        "d_k": 64,
        "num_samples": 500,
        "epochs": 2,
    },
    # A small model, where per-step overhead dominates.
    "small (d_model 32, d_k 16)": {
        "task": "mean",
        "d_model": 32,
        "d_k": 16,
        "num_samples": 256,
        "epochs": 2,
    },
}


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def sequential(task: str, kw: dict[str, Any]) -> torch.Tensor:
    return torch.cat([attnscale.train(task, seeds=s, **kw).loss for s in SEEDS])


def batched(task: str, kw: dict[str, Any]) -> torch.Tensor:
    return attnscale.train(task, seeds=SEEDS, **kw).loss


def matmul_share(task: str, kw: dict[str, Any]) -> float:
    with profile() as prof:
        batched(task, kw)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    return sum(e.self_cpu_time_total for e in events if e.key in MATMULS) / total


def main() -> None:
    print(f"load average: {os.getloadavg()[0]:.2f} (1 min), torch {torch.__version__}")
    print(
        "| configuration | threads | 8 sequential (s) | 1 batched (s) | speed-up "
        "| max loss diff | batched time in matmuls | bound on speed-up |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label, cfg in CONFIGS.items():
        for threads in THREADS:
            kw: dict[str, Any] = dict(
                cfg, strategies="inverse_sqrt", test_samples=32, num_threads=threads
            )
            task = kw.pop("task")
            attnscale.train(task, seeds=SEEDS[:2], **kw)  # warm-up
            t_seq, seq_loss = timed(partial(sequential, task, kw))  # (seeds, steps)
            t_bat, bat_loss = timed(partial(batched, task, kw))  # (seeds, steps)
            diff = float((seq_loss - bat_loss).abs().max())
            ok = torch.allclose(seq_loss, bat_loss, rtol=1e-4, atol=1e-6)
            share = matmul_share(task, kw)
            print(
                f"| {label} | {threads} | {t_seq:.2f} | {t_bat:.2f} | {t_seq / t_bat:.2f}x "
                f"| {diff:.1e}{'' if ok else ' MISMATCH'} | {share:.0%} "
                f"| {t_seq / (share * t_bat):.1f}x |"
            )
            if not ok:
                raise SystemExit("batched and sequential results differ")


main()
