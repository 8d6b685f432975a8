"""The two ways the trainer's fixed-scale path forms the logits, timed side by side.

For a stack of models with weights ``W_q, W_k`` of shape ``(models, d_k, d_model)`` and tokens
``x`` of shape ``(models, batch, length, d_model)``, the logits ``alpha q . k`` can be formed

- from the queries and keys, ``q = x W_q^T`` and ``k = x W_k^T``: ``2 n d_model d_k``
  multiply-adds per model for ``n = batch * length`` tokens, then the product;
- through the ``(d_model, d_model)`` matrix ``alpha W_q^T W_k``: ``d_model^2 (d_k + n)``.

The trainer takes the second when it needs fewer operations
(``attnscale._training.stacks.bilinear_is_cheaper``). For each head size this prints the
median time of forward and backward (gradients of both weights) of each way, their ratio, which
way the trainer takes, and the largest relative difference between the two logits.

Run with ``python benchmarks/bench_logit_paths.py`` (also part of ``nox -s bench``).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from functools import partial

import torch

from attnscale._training.stacks import bilinear_is_cheaper

MODELS, BATCH, LENGTH, D_MODEL = 6, 32, 8, 64  # the mean-task page: 2 strategies x 3 seeds
D_KS = (16, 64, 256, 512)
REPEATS = 30


def through_qk(x: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, alpha: float) -> torch.Tensor:
    tokens = x.flatten(1, 2)  # (models, n, d_model)
    q = torch.bmm(tokens, w_q.transpose(1, 2)).view(*x.shape[:3], -1)  # (models, b, L, d_k)
    k = torch.bmm(tokens, w_k.transpose(1, 2)).view(*x.shape[:3], -1)  # (models, b, L, d_k)
    return (q * alpha) @ k.transpose(-2, -1)  # (models, batch, L, L)


def through_bilinear(
    x: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, alpha: float
) -> torch.Tensor:
    bilinear = (w_q.transpose(1, 2) * alpha) @ w_k  # (models, d_model, d_model)
    xm = torch.bmm(x.flatten(1, 2), bilinear).view(x.shape)  # (models, b, L, d_model)
    return xm @ x.transpose(-2, -1)  # (models, batch, L, L)


def step(
    way: Callable[..., torch.Tensor],
    x: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    alpha: float,
    upstream: torch.Tensor,
) -> None:
    """Forward, and backward to both weights, with a fixed gradient at the logits."""
    torch.autograd.grad((way(x, w_q, w_k, alpha) * upstream).sum(), [w_q, w_k])


def median_time(fn: Callable[[], None]) -> float:
    fn()  # warm-up
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    print(f"load average: {os.getloadavg()[0]:.2f} (1 min), torch {torch.__version__}")
    print(f"{MODELS} models, batch {BATCH}, length {LENGTH}, d_model {D_MODEL}")
    print(
        "| d_k | via q, k (ms) | via alpha W_q^T W_k (ms) | ratio | trainer takes | max rel diff |"
    )
    print("|---|---|---|---|---|---|")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(MODELS, BATCH, LENGTH, D_MODEL, generator=gen)
    n = BATCH * LENGTH
    for d_k in D_KS:
        w_q, w_k = (
            (torch.rand(MODELS, d_k, D_MODEL, generator=gen) * 2 - 1).div(D_MODEL**0.5)
            for _ in range(2)
        )
        w_q.requires_grad_()
        w_k.requires_grad_()
        alpha = d_k**-0.5
        upstream = torch.randn(MODELS, BATCH, LENGTH, LENGTH, generator=gen)  # dL/dlogits

        args = (x, w_q, w_k, alpha, upstream)
        t_qk = median_time(partial(step, through_qk, *args))
        t_bi = median_time(partial(step, through_bilinear, *args))
        with torch.no_grad():
            a, b = through_qk(x, w_q, w_k, alpha), through_bilinear(x, w_q, w_k, alpha)
            diff = float(((a - b).abs() / a.abs().amax()).max())
        takes = "bilinear" if bilinear_is_cheaper(D_MODEL, d_k, n) else "q, k"
        print(
            f"| {d_k} | {1e3 * t_qk:.2f} | {1e3 * t_bi:.2f} | {t_qk / t_bi:.2f}x | {takes} "
            f"| {diff:.1e} |"
        )


main()
