r"""Where the missing scale matters: scaled, unscaled, and unscaled from the scaled model's start.

Three variants of the article's single-head model, each with its own learning-rate sweep on a
quarter-decade grid: $1/\sqrt{d_k}$ (``inverse_sqrt``), no scale (``none``), and no scale with
$W_q$ and $W_k$ initialised $d_k^{1/4}$ times smaller (``none_matched``), whose logits start
exactly where the scaled model's do. Under Adam ``none_matched`` at learning rate $\eta$ is the
scaled model with $\eta\, d_k^{1/4}$ on $W_q, W_k$ (and $\eta$ on the rest), so the shift of its
best rate measures how much the query and key learning rate decides. Three tasks (uniform,
one-hot by position, one-hot by content), two head sizes with $d_k = d_{\text{model}}$ (one
head; the product $W_q^\top W_k$ has full rank), five seeds, 2,048 Adam steps everywhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import stored
from . import TRAINING_CODE, _sweep

FULL: dict[str, Any] = {
    "tasks": ["mean", "reconstruction", "retrieval"],
    "variants": ["inverse_sqrt", "none", "none_matched"],
    "d_ks": [16, 128],
    "quarters": list(range(-14, -3)),  # 10^-3.5 to 10^-1, widened where a best rate is at an end
    "seeds": [0, 1, 2, 3, 4],
    "steps": 2048,
    "window": 64,
    "test_samples": 1024,
    "batch_size": 32,
    "seq_len": 8,
    "extend": True,
}
#: The build's rerun: a few of the same models, same data and steps.
REDUCED: dict[str, Any] = {
    **FULL,
    "tasks": ["mean"],
    "variants": ["inverse_sqrt", "none"],  # one stack: one training call
    "d_ks": [16],
    "quarters": [-8],
    "seeds": [0, 1],
    "extend": False,
}


def variants(names: list[str], d_k: int) -> dict[str, tuple[str, float]]:
    """Label to (strategy, gain on the initial W_q and W_k)."""
    every = {
        "inverse_sqrt": ("inverse_sqrt", 1.0),
        "none": ("none", 1.0),
        "none_matched": ("none", d_k**-0.25),
    }
    return {name: every[name] for name in names}


def parts(budget: dict[str, Any]) -> list[str]:
    return [f"{task}_d{d}" for task in budget["tasks"] for d in budget["d_ks"]]


def run_part(part: str, budget: dict[str, Any], device: str) -> dict[str, np.ndarray]:
    task, d = part.rsplit("_d", 1)
    d_k = int(d)
    return _sweep.sweep_budget(task, variants(budget["variants"], d_k), d_k, budget, device)


#: ``part/array`` -> [Tolerance][guide.stored.Tolerance] within which a fingerprint
#: rerun on another arithmetic must reproduce the stored values. Measured with ``python -m
#: guide.stored spread scaling_matters`` on an Intel Xeon with AVX-512, 2026-12-05,
#: across six arithmetics (default; MKL_CBWR=COMPATIBLE; ATEN_CPU_CAPABILITY=avx2 and =default;
#: 2 and 3 threads) and with every Adam step 1% larger (planted): the mean task's curves reach
#: round-off level, where the last bits grow over the steps (relative differences up to 0.8 by
#: the end), so only their first 16 windows are compared: there the largest arithmetic moved
#: 0.17 of the tolerance below and the planted change 13 times it.
TOLERANCES: stored.Tolerances = {
    "*/curve_*": stored.Tolerance(5e-3, 1e-8, first=16),
    "*": stored.Tolerance(1e-4, 1e-8),
}


EXPERIMENT = stored.Experiment(
    name="scaling_matters",
    parts=parts,
    run_part=run_part,
    full=FULL,
    reduced=REDUCED,
    agree=_sweep.agree,
    uses=(_sweep, *TRAINING_CODE),
)
