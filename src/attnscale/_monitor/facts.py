"""The monitor's facts, one table each: its thresholds and the findings it reports.

Each threshold row carries its default, the range of values that mean something
(validation is derived from it) and where its finding turns from a warning into an error;
each finding code carries the guide page that explains it and what it means. The monitor
reference page is generated from these tables (``attnscale_tools.mkdocs_hooks``), so nothing here
is restated elsewhere.
"""

from __future__ import annotations

import dataclasses
import math
import numbers

from .. import _checks

__all__ = ["FINDINGS", "THRESHOLDS", "THRESHOLD_TABLE", "FindingCode", "Threshold", "checked"]


@dataclasses.dataclass(frozen=True)
class Threshold:
    """One threshold of the diagnosis."""

    default: float
    finding: str  # the finding code it drives
    meaning: str
    low: float  # the values that mean something: between low and high
    high: float = math.inf
    low_open: bool = True  # low itself excluded
    high_open: bool = True
    # the finding is an error (not a warning) past the threshold times this; None: never
    error_at: float | None = None
    why: str = ""  # how the default was chosen

    def domain(self) -> str:
        """The admissible values, in words: ``in (0, 1)``, ``> 0``, ``>= 1``, ``< 0``."""
        if self.high == math.inf:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        if self.low == -math.inf:
            return f"{'<' if self.high_open else '<='} {self.high:g}"
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"in {left}{self.low:g}, {self.high:g}{right}"

    def admits(self, v: float) -> bool:
        above = v > self.low if self.low_open else v >= self.low
        below = v < self.high if self.high_open else v <= self.high
        return above and below


#: Every threshold: its default, its finding, its domain and its escalation.
THRESHOLD_TABLE: dict[str, Threshold] = {
    "scale_ratio": Threshold(
        1.05,
        "scale-mismatch",
        "flag an effective scale this many times off 1/sqrt(head_dim) (or off the declared "
        "expected_scale)",
        low=1.0,
        low_open=False,
        why="the scale is read from the code, not estimated, so the tolerance can be tight: "
        "Gemma-2-9B's query_pre_attn_scalar bug (224 where head_dim is 256) is a factor of 1.069",
    ),
    "max_logit_std": Threshold(
        2.0,
        "scale-mismatch",
        "a too-large scale is an error, not a warning, once the within-row logit std is above this",
        low=0.0,
    ),
    "large_logit_std": Threshold(
        15.0,
        "large-logits",
        "within-row logit std (only where some row saturates)",
        low=0.0,
        error_at=4.0,
        why="calibrated on the guide's trained language model (trained_lm): its healthy first "
        "layer reaches a spread of about 7 with under 1% of rows saturated",
    ),
    "max_logit": Threshold(
        100.0,
        "large-logits",
        "a head's largest logit over every query row (all_rows=True measures it)",
        low=0.0,
        why="QK-Clip's tau (Kimi K2), the bound it keeps each head under",
    ),
    "saturation": Threshold(
        0.99,
        "large-logits",
        "a row is saturated when its largest probability exceeds this",
        low=0.0,
        high=1.0,
    ),
    "saturated_fraction": Threshold(
        0.1, "large-logits", "share of saturated rows", error_at=5.0, low=0.0, high=1.0
    ),
    "normalized_entropy": Threshold(
        0.2,
        "entropy-collapse",
        "a head's mean entropy / log(n) below this (for a sink head: of the rest of its rows)",
        error_at=0.25,
        low=0.0,
        high=1.0,
    ),
    "sink_weight": Threshold(
        0.5,
        "attention-sink",
        "a head whose mean weight on one key (any key: the first token, a delimiter) is at "
        "least this parks its mass there",
        why="Xiao et al. 2023",
        low=0.0,
        high=1.0,
    ),
    "positional_share": Threshold(
        0.8,
        "entropy-collapse",
        "a head whose rows put their largest weight (past a sink) at one fixed offset from the "
        "query in at least this share of its rows is positional, not collapsed",
        low=0.0,
        high=1.0,
        high_open=False,
        why="chosen on synthetic heads and the guide's own models before any held-out "
        "checkpoint: collapsed heads whose rows pick random keys stay under it",
    ),
    "fp16_headroom": Threshold(
        8.0,
        "fp16-overflow-risk",
        "warn when max |q.k| is within this factor of 65504",
        low=1.0,
        low_open=False,
    ),
    "mask_value": Threshold(
        -1e4,
        "masked-rows",
        "where no mask tensor is in sight, logits at or below this count as masked",
        low=-math.inf,
        high=0.0,
    ),
    "mask_leak": Threshold(
        0.01, "leaky-mask", "masked keys still get more than this share of a row", low=0.0, high=1.0
    ),
}

#: Default thresholds; any of them can be overridden as a keyword argument of
#: [AttentionMonitor][attnscale.AttentionMonitor]. Their domains, escalations and reasons
#: are on the monitor's reference page.
THRESHOLDS: dict[str, float] = {name: row.default for name, row in THRESHOLD_TABLE.items()}


def checked(name: str, value: object) -> float:
    """``value`` as threshold ``name``, or a clear error naming it and its domain."""
    row = THRESHOLD_TABLE[name]
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"threshold {name} must be a real number, got {type(value).__name__}")
    v = _checks.finite_float(value, name)
    if not row.admits(v):
        raise ValueError(f"{name} must be {row.domain()}, got {v!r}")
    return v


@dataclasses.dataclass(frozen=True)
class FindingCode:
    """One kind of finding: the guide page that explains it (under the debugging section)
    and what it means."""

    page: str
    meaning: str


#: Every code a report can hold.
FINDINGS: dict[str, FindingCode] = {
    "scale-mismatch": FindingCode(
        "plot_01_scale_bugs/",
        "the effective scale is off 1/sqrt(head_dim) (or off the declared one); the message "
        "names the likely cause, or says why the scale is a design (learned, folded into the "
        "initialisation, normalised q and k, a length temperature)",
    ),
    "large-logits": FindingCode(
        "plot_02_soft_cap/",
        "the softmax is in its collapse region: wide logits with saturated rows, or a head's "
        "max logit past QK-Clip's bound",
    ),
    "entropy-collapse": FindingCode(
        "plot_04_entropy_collapse/",
        "a head that is neither a sink nor positional attends to almost one key per row",
    ),
    "attention-sink": FindingCode(
        "plot_11_attention_sinks/",
        "a head parks most of its weight on one key; its collapse check reads the rest",
    ),
    "masked-rows": FindingCode(
        "plot_08_masking/", "query rows with no valid key (an error where their output is NaN)"
    ),
    "leaky-mask": FindingCode(
        "plot_08_masking/", "masked keys with a finite mask value still receive probability"
    ),
    "non-finite": FindingCode(
        "plot_03_fp16_overflow/",
        "NaN or inf in the logits or outputs, or already in q and k",
    ),
    "fp16-overflow-risk": FindingCode(
        "plot_03_fp16_overflow/", "q·k in float16 close to its largest finite value"
    ),
    "no-attention": FindingCode(
        "plot_05_checklist/", "no attention was measured: the report vouches for nothing"
    ),
    "compiled": FindingCode(
        "plot_05_checklist/", "calls that ran compiled, where the monitor cannot see"
    ),
    "monitor-error": FindingCode(
        "plot_05_checklist/", "the monitor failed at a site; the model ran unchanged"
    ),
}
