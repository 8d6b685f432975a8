"""Time the article's Python-loop sampler, the vectorised dot product and the chi shortcut.

All three draw the same number of scores q·k for each d_k, in one run, so the printed ratios
compare like with like. Run with ``nox -s bench`` or ``python benchmarks/bench_sampling.py``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

import attnscale as asc

N_SAMPLES = 10_000
D_KS = (16, 64, 256, 1024)
REPEATS = 5


def article_loop(d_k: int, num_samples: int) -> np.ndarray:
    """The source article's sampler: one torch.dot per sample, in a Python loop."""
    scores = []
    for _ in range(num_samples):
        q = torch.randn(d_k)
        k = torch.randn(d_k)
        scores.append(torch.dot(q, k).item())
    return np.array(scores)


def median_time(repeats: int, fn: Callable[..., object], *args: object, **kwargs: object) -> float:
    fn(*args, **kwargs)  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args, **kwargs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    torch.manual_seed(0)
    print(f"{N_SAMPLES} scores per d_k; median of {REPEATS} runs (the loop: of 3)")
    print(
        f"{'d_k':>5} {'loop (s)':>10} {'dot (s)':>10} {'chi (s)':>10} "
        f"{'loop/dot':>9} {'loop/chi':>9}"
    )
    for d_k in D_KS:
        t_loop = median_time(3, article_loop, d_k, N_SAMPLES)
        t_dot = median_time(REPEATS, asc.sample_scores, d_k, N_SAMPLES, method="dot")
        t_chi = median_time(REPEATS, asc.sample_scores, d_k, N_SAMPLES, method="chi")
        print(
            f"{d_k:5d} {t_loop:10.4f} {t_dot:10.4f} {t_chi:10.4f} "
            f"{t_loop / t_dot:9.1f} {t_loop / t_chi:9.1f}"
        )


if __name__ == "__main__":
    main()
