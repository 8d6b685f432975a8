r"""Every score-scaling strategy over a wide learning-rate sweep, and learning-rate transfer.

Two parts per task of the strategy grid: every strategy of the library at every learning rate
from $10^{-4}$ to $1$ on a quarter-decade grid (widened if a best rate sits at an end), five
seeds, 2,048 Adam steps on fresh data, one head with $d_k = d_{\text{model}} = 64$; on a task
that wants uniform attention (``mean``) and one that wants one-hot attention
(``reconstruction``). Then a width sweep: $1/\sqrt{d_k}$ against μP's $1/d_k$ at three widths
($d_k = d_{\text{model}}$), on the content-addressed ``retrieval`` task, to see whose best
learning rate stays put as the model widens.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attnscale import SCALING_STRATEGIES

from .. import stored
from . import TRAINING_CODE, _sweep

FULL: dict[str, Any] = {
    "tasks": ["mean", "reconstruction"],
    "strategies": list(SCALING_STRATEGIES),
    "d_k": 64,
    "widths": [32, 64, 128],
    "width_task": "retrieval",
    "width_strategies": ["inverse_sqrt", "inverse_d"],
    "quarters": list(range(-16, 1)),  # 1e-4 to 1
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
    "strategies": ["inverse_sqrt", "inverse_d"],  # one stack: one training call
    "widths": [],
    "quarters": [-8],
    "seeds": [0],
    "extend": False,
}


def parts(budget: dict[str, Any]) -> list[str]:
    return [*budget["tasks"], *(f"width_d{d}" for d in budget["widths"])]


def run_part(part: str, budget: dict[str, Any], device: str) -> dict[str, np.ndarray]:
    if part.startswith("width_d"):
        task, d_k, names = budget["width_task"], int(part[7:]), budget["width_strategies"]
    else:
        task, d_k, names = part, budget["d_k"], budget["strategies"]
    return _sweep.sweep_budget(task, {name: (name, 1.0) for name in names}, d_k, budget, device)


#: ``part/array`` -> [Tolerance][guide.stored.Tolerance] within which a fingerprint
#: rerun on another arithmetic must reproduce the stored values. Measured with ``python -m
#: guide.stored spread strategy_grid`` on an Intel Xeon with AVX-512, 2026-12-05,
#: across six arithmetics (default; MKL_CBWR=COMPATIBLE; ATEN_CPU_CAPABILITY=avx2 and =default;
#: 2 and 3 threads) and with every Adam step 1% larger (planted): its curves part over the steps
#: (relative 0.3 to 0.6 by the end), and its final losses moved by 20% under the arithmetics, as
#: much as under the planted change, so they are left to the curves. Over the curves' first 16
#: windows, the largest arithmetic moved 0.10 of the tolerance below and the planted change 17
#: times it.
TOLERANCES: stored.Tolerances = {
    "*/curve_*": stored.Tolerance(2e-3, 1e-8, first=16),
    "*/train_loss": stored.Tolerance(0.0, first=0),
    "*/test_loss": stored.Tolerance(0.0, first=0),
    "*": stored.Tolerance(1e-4, 1e-8),
}


EXPERIMENT = stored.Experiment(
    name="strategy_grid",
    parts=parts,
    run_part=run_part,
    full=FULL,
    reduced=REDUCED,
    agree=_sweep.agree,
    uses=(_sweep, *TRAINING_CODE),
)
