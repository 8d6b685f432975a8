r"""``logit_growth_long``'s sweep, half a decade further down.

The 512-token, four-layer runs of ``logit_growth_long`` (the same model, corpus, recipe, budget
and seeds, baseline and QK-LayerNorm) at $\eta = 10^{-3}$: both variants' best final loss there
was at its lowest rate, $10^{-2.5}$, the edge of its grid, and a best rate is bracketed only by
a worse rate on either side. A run of its own, so that the eight stored parts stay as they are.
"""

from __future__ import annotations

from typing import Any

from .. import stored
from . import MODEL_CODE, logit_growth, logit_growth_long

FULL: dict[str, Any] = {**logit_growth_long.FULL, "halves": [-6]}
#: The build's rerun and the fingerprint: the first 50 steps of the baseline, seed 0.
REDUCED: dict[str, Any] = {
    **FULL,
    "variants": ["inverse_sqrt"],
    "seeds": [0],
    "stop_after": 50,
    "eval_batches": 2,
}

#: ``logit_growth``'s, checked with ``python -m guide.stored spread logit_growth_long_below`` on
#: an AMD EPYC with AVX-512, 2026-12-06, across its six arithmetics: the worst array lay at
#: 0.0006 of its tolerance (the loss), and the planted change (every Adam step 1% larger) moved
#: the held-out loss by 19.8 tolerances.
TOLERANCES: stored.Tolerances = logit_growth.TOLERANCES


EXPERIMENT = stored.Experiment(
    name="logit_growth_long_below",
    parts=logit_growth.parts,
    run_part=logit_growth.run_part,
    full=FULL,
    reduced=REDUCED,
    agree=logit_growth.agree,
    uses=(logit_growth_long, logit_growth, *MODEL_CODE),
)
