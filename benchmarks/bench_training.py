"""Training 8 seeds in one batched call vs 8 sequential calls of the same configuration.

Prints, for each configuration, the median wall time of both ways (after a warm-up), their
ratio, and the largest difference between the per-step losses of the two ways (they must agree
to float32 rounding). Both ways use one CPU thread (``num_threads=1``).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import torch

import attnscale

T = TypeVar("T")
SEEDS = list(range(8))
REPEATS = 3
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


def main() -> None:
    print(f"load average: {os.getloadavg()[0]:.2f} (1 min), torch {torch.__version__}")
    print("| configuration | 8 sequential (s) | 1 batched (s) | speed-up | max loss diff |")
    print("|---|---|---|---|---|")
    for label, cfg in CONFIGS.items():
        kw: dict[str, Any] = dict(cfg, strategies="inverse_sqrt", test_samples=32, num_threads=1)
        task = kw.pop("task")
        attnscale.train(task, seeds=SEEDS[:2], **kw)  # warm-up
        t_seq, seq_loss = timed(partial(sequential, task, kw))  # (seeds, steps)
        t_bat, bat_loss = timed(partial(batched, task, kw))  # (seeds, steps)
        diff = float((seq_loss - bat_loss).abs().max())
        ok = torch.allclose(seq_loss, bat_loss, rtol=1e-4, atol=1e-6)
        print(
            f"| {label} | {t_seq:.2f} | {t_bat:.2f} | {t_seq / t_bat:.2f}x | {diff:.1e}"
            f"{'' if ok else ' MISMATCH'} |"
        )
        if not ok:
            raise SystemExit("batched and sequential results differ")


main()
