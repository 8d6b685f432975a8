"""Computations that a guide page and the fact-check share, so their numbers agree.

Site-only, no stability promise. A guide page and the fact-check call the same function with the
same settings. The article's training run is cached: the docs build runs every example in one
process, so the fact-check reuses the training page's models instead of training them again.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch

from ..softmax import softmax_jacobian_norm
from ..training import TrainingResult, train

__all__ = [
    "ARTICLE",
    "ARTICLE_SEEDS",
    "SIGMAS",
    "PairedGap",
    "article_experiment",
    "jacobian_norm_peak",
    "paired_gap",
    "softmax_rows",
]

#: Logit scales of the softmax-gradient page: 1/4 to 128, a quarter octave apart.
SIGMAS: tuple[float, ...] = tuple(2 ** (j / 4) for j in range(-8, 29))

#: The source article's experiment: reconstruction, d_model 128, d_k = d_v = 64, 8 tokens,
#: 500 samples, batch 32, Adam at 1e-3, 100 epochs, with and without the scale.
ARTICLE: dict[str, object] = {
    "task": "reconstruction",
    "strategies": ("inverse_sqrt", "none"),
    "d_model": 128,
    "d_k": 64,
    "seq_len": 8,
    "num_samples": 500,
    "batch_size": 32,
    "lrs": 1e-3,
    "epochs": 100,
}
#: The seeds of the training page.
ARTICLE_SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4)


def softmax_rows(seed: int = 0, rows: int = 2000, n: int = 64) -> torch.Tensor:
    """Standard-normal rows ``(rows, n)``; the softmax-gradient page's logits are ``sigma * z``."""
    return torch.randn(rows, n, generator=torch.Generator().manual_seed(seed))


def jacobian_norm_peak(z: torch.Tensor) -> tuple[float, float]:
    """Where the mean softmax-Jacobian norm of the rows ``sigma * z`` peaks over ``SIGMAS``.

    Returns ``(sigma, mean norm there)``.
    """
    norms = softmax_jacobian_norm(torch.tensor(SIGMAS)[:, None, None] * z).mean(-1)  # (sigmas,)
    i = int(norms.argmax())
    return SIGMAS[i], float(norms[i])


@functools.lru_cache(maxsize=4)
def article_experiment(seeds: tuple[int, ...] = ARTICLE_SEEDS) -> TrainingResult:
    """Train the article's two variants on ``seeds`` (cached per tuple of seeds)."""
    return train(**ARTICLE, seeds=list(seeds))  # type: ignore[arg-type]


# Two-sided 95% quantiles of Student's t by degrees of freedom (n - 1 for n paired seeds).
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


class PairedGap(NamedTuple):
    """Final-epoch loss of the two variants and their difference paired by seed."""

    scaled: float  # mean over seeds of the scaled model's final-epoch loss
    unscaled: float
    gap: float  # mean of (unscaled - scaled), seed by seed
    low: float  # 95% t-interval of the mean gap
    high: float


def paired_gap(res: TrainingResult) -> PairedGap:
    """Unscaled minus scaled final-epoch loss (the article's measure), paired by seed."""
    last = {k: v[:, -1] for k, v in res.by_variant("loss", per_epoch=True).items()}
    gap = last["none"] - last["inverse_sqrt"]  # (seeds,)
    n = gap.numel()
    half = _T95[n - 1] * gap.std().item() / math.sqrt(n)
    mean = gap.mean().item()
    return PairedGap(
        last["inverse_sqrt"].mean().item(),
        last["none"].mean().item(),
        mean,
        mean - half,
        mean + half,
    )
