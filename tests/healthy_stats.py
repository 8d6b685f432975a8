"""The statistics of one healthy attention call, for tests that feed diagnose() and the
report by hand (scale 1/sqrt(64), modest logits, nothing masked)."""

from __future__ import annotations

import dataclasses
from typing import Any

from attnscale import AttentionStats

HEAD_DIM = 64


def healthy_stats(**changes: Any) -> AttentionStats:
    """Statistics of a healthy call, with ``changes``."""
    base = AttentionStats(
        step=0,
        path="softmax",
        shape=(2, 4, 32, 32),
        dtype="float32",
        head_dim=HEAD_DIM,
        num_heads=4,
        scale=HEAD_DIM**-0.5,
        scale_ratio=1.0,
        scale_source="traced",
        scale_fit_residual=None,
        softcap=None,
        q_std=0.5,
        k_std=0.5,
        max_abs_qk=None,
        logit_mean=0.0,
        logit_std=0.3,
        max_abs_logit=1.2,
        entropy=3.3,
        normalized_entropy=0.95,
        min_head_normalized_entropy=0.94,
        max_probability=0.08,
        saturated_fraction=0.0,
        masked_fraction=0.0,
        masked_rows=0,
        masked_rows_nonfinite=0,
        first_masked_row=None,
        nonfinite_logits=0,
        nonfinite_outputs=0,
        sampled_rows=256,
    )
    return dataclasses.replace(base, **changes)
