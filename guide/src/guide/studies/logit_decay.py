r"""Weight decay's strength against attention logit growth, trained.

The language model, corpus, recipe, learning rates and seeds of ``logit_growth`` (two pre-LN
blocks of width 128 on CPython's help topics, AdamW, warmup then cosine decay, z-loss, 2,000
steps, learning rates $10^{-4}$ to $1$ half a decade apart, three seeds), with $1/\sqrt{d_k}$
and the independent weight decay (per step, times the schedule, not times the learning rate, as
in Wortsman et al. 2023, arXiv:2309.14322) changed from the recipe's $10^{-4}$:

- ``no_decay``: none;
- ``decay_x10``: $10^{-3}$, ten times the recipe's (over the schedule, it would shrink an
  untrained weight by a factor of about $e$).

The baseline, the recipe's $10^{-4}$, is ``logit_growth``'s stored ``inverse_sqrt`` run: the
same seeds and batches.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import stored
from . import MODEL_CODE, logit_growth

#: Each variant's weight decay per step.
DECAY = {"no_decay": 0.0, "decay_x10": 1e-3}

FULL: dict[str, Any] = {**logit_growth.FULL, "variants": list(DECAY)}
#: The build's rerun and the fingerprint: the first 100 steps of both variants at η = 0.01,
#: seed 0, as for ``logit_fixes``.
REDUCED: dict[str, Any] = {
    **FULL,
    "halves": [-4],
    "seeds": [0],
    "stop_after": 100,
    "eval_batches": 4,
}


def recipe(variant: str, budget: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The budget of one variant: its weight decay (no other change to ``train_lm``)."""
    if variant not in DECAY:
        raise ValueError(f"variant must be one of {', '.join(DECAY)}, got {variant!r}")
    return {**budget, "weight_decay": DECAY[variant]}, {}


def run_part(part: str, budget: dict[str, Any], device: str) -> dict[str, np.ndarray]:
    return logit_growth.run_variant(part, budget, device, recipe)


#: ``logit_growth``'s, checked with ``python -m guide.stored spread logit_decay`` on an AMD EPYC
#: with AVX-512, 2026-12-06, across its six arithmetics: the worst array lay at 0.018 of its
#: tolerance (the largest logit), and the planted change (every Adam step 1% larger) moved the
#: loss by 12.4 tolerances and the entropy by 26.7.
TOLERANCES: stored.Tolerances = logit_growth.TOLERANCES


EXPERIMENT = stored.Experiment(
    name="logit_decay",
    parts=logit_growth.parts,
    run_part=run_part,
    full=FULL,
    reduced=REDUCED,
    agree=logit_growth.agree,
    uses=(logit_growth, *MODEL_CODE),
)
