r"""Attention logit growth at a realistic length: ``logit_growth`` at 512 tokens and four layers.

The model, corpus and recipe of ``logit_growth`` (byte-level pre-LN blocks of width 128 with
four heads of $d_k = 32$, CPython's help topics, AdamW with warmup then cosine decay, z-loss,
independent weight decay), with windows of 512 bytes instead of 64 and four blocks instead of
two; 4 windows per step (2,048 tokens, twice ``logit_growth``'s), 1,000 steps (the same number
of tokens in all), the first 100 of them warmup. Four learning rates half a decade apart around
the place where the short model's baseline became unstable, three seeds, with $1/\sqrt{d_k}$
alone and with QK-LayerNorm: does the signature of logit growth hold at this length and depth?
"""

from __future__ import annotations

from typing import Any

from .. import stored
from . import MODEL_CODE, logit_growth

FULL: dict[str, Any] = {
    **logit_growth.FULL,
    "halves": [-5, -4, -3, -2],  # 10^-2.5 to 10^-1
    "steps": 1000,
    "stop_after": 1000,
    "warmup": 100,
    "layers": 4,
    "context": 512,
    "batch_size": 4,
    "eval_batches": 16,
}
#: The build's rerun and the fingerprint: the first 50 steps of the baseline at the lowest
#: rate, seed 0 (about 15 s on one core).
REDUCED: dict[str, Any] = {
    **FULL,
    "variants": ["inverse_sqrt"],
    "halves": [-5],
    "seeds": [0],
    "stop_after": 50,
    "eval_batches": 2,
}

#: ``logit_growth``'s, checked with ``python -m guide.stored spread logit_growth_long`` on an
#: Intel Xeon with AVX-512, 2026-12-06, across its six arithmetics: the worst array lay at
#: 0.0009 of its tolerance (the held-out loss), and the planted change (every Adam step 1%
#: larger) moved the held-out loss and the loss by 13.8 tolerances.
TOLERANCES: stored.Tolerances = logit_growth.TOLERANCES


EXPERIMENT = stored.Experiment(
    name="logit_growth_long",
    parts=logit_growth.parts,
    run_part=logit_growth.run_part,
    full=FULL,
    reduced=REDUCED,
    agree=logit_growth.agree,
    uses=(logit_growth, *MODEL_CODE),
)
