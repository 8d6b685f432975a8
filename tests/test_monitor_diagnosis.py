"""Unit tests of the monitor's diagnosis: a pure function of hand-built statistics."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from healthy_stats import HEAD_DIM as D
from healthy_stats import healthy_stats

from attnscale import THRESHOLDS, AttentionStats
from attnscale._monitor.diagnosis import diagnose, likely_causes, no_attention

_stats = healthy_stats


def _with_scale(scale: float, **changes: Any) -> AttentionStats:
    return _stats(scale=scale, scale_ratio=scale * math.sqrt(D), **changes)


def _codes(findings: list[Any]) -> dict[str, str]:
    return {f.code: f.severity for f in findings}


def test_healthy_statistics_give_no_finding() -> None:
    assert diagnose("layers.0.attn", _stats(), THRESHOLDS) == []


@pytest.mark.parametrize(
    ("scale", "cause"),
    [
        (1.0, "no scale at all"),
        (1 / D, "double scaling"),
        (1 / math.sqrt(4 * D), "√d_model = √(4·64)"),
        (224**-0.5 * 8, "divided by √"),
    ],
)
def test_wrong_scale_is_a_warning_whatever_the_logit_size(scale: float, cause: str) -> None:
    found = diagnose("blocks.0.attn", _with_scale(scale, logit_std=0.01), THRESHOLDS)
    assert _codes(found) == {"scale-mismatch": "warning"}
    assert cause in found[0].message
    assert f"{scale:.4g}" in found[0].message  # the factor the monitor read


def test_query_pre_attn_scalar_cause_names_the_divisor() -> None:
    # Gemma-2-9B's bug: 224**-0.5 applied where head_dim is 256
    stats = _stats(head_dim=256, scale=224**-0.5, scale_ratio=math.sqrt(256 / 224))
    (finding,) = diagnose("layers.1.self_attn", stats, THRESHOLDS)
    assert finding.severity == "warning"
    assert "√224" in finding.message and "query_pre_attn_scalar" in finding.message
    loose = {**THRESHOLDS, "scale_ratio": 1.5}
    assert diagnose("layers.1.self_attn", stats, loose) == []


def test_too_large_scale_with_wide_logits_is_an_error() -> None:
    found = diagnose("attn", _with_scale(1.0, logit_std=3.0), THRESHOLDS)
    assert _codes(found) == {"scale-mismatch": "error"}


def test_folded_initialisation_is_info() -> None:
    # T5: no run-time scale, queries sqrt(d) times smaller than keys
    stats = _with_scale(1.0, q_std=0.5 / math.sqrt(D), k_std=0.5)
    found = diagnose("encoder.block.0.layer.0.SelfAttention", stats, THRESHOLDS)
    assert _codes(found) == {"scale-mismatch": "info"}
    assert "T5" in found[0].message


def test_declared_scale() -> None:
    stats = _with_scale(1 / D)
    assert _codes(diagnose("a", stats, THRESHOLDS, 1 / D)) == {"scale-mismatch": "info"}
    assert _codes(diagnose("a", stats, THRESHOLDS, 1.0)) == {"scale-mismatch": "warning"}
    assert diagnose("a", _stats(), THRESHOLDS, D**-0.5) == []


def test_inverse_layer_index_cause() -> None:
    # GPT-2's scale_attn_by_inverse_layer_idx: layer 2 multiplies by 1/3 more
    causes = likely_causes(1 / 3, D, 12, "h.2.attn")
    assert causes == [
        "an extra factor 1/(layer index + 1) = 1/3, as GPT-2's "
        "scale_attn_by_inverse_layer_idx applies on purpose"
    ]
    # with 4 heads, 1/2 at layer 1 is also what sqrt(d_model) gives: both are named
    assert len(likely_causes(1 / 2, D, 4, "h.1.attn")) == 2


def test_unknown_scale_gives_no_scale_finding() -> None:
    assert diagnose("a", _stats(scale=None, scale_ratio=None), THRESHOLDS) == []


def test_large_logits_and_entropy_collapse_severities() -> None:
    big = THRESHOLDS["large_logit_std"]
    assert diagnose("a", _stats(logit_std=0.9 * big), THRESHOLDS) == []
    warn = diagnose("a", _stats(logit_std=1.1 * big, saturated_fraction=0.01), THRESHOLDS)
    assert _codes(warn) == {"large-logits": "warning"}
    # a wide spread where no row saturates (a mask read as logits) is not called large
    assert diagnose("a", _stats(logit_std=4.1 * big, saturated_fraction=0.0), THRESHOLDS) == []
    err = diagnose("a", _stats(logit_std=4.1 * big, saturated_fraction=0.01), THRESHOLDS)
    assert _codes(err) == {"large-logits": "error"}
    sat = diagnose("a", _stats(saturated_fraction=0.2), THRESHOLDS)
    assert _codes(sat) == {"large-logits": "warning"}
    collapse = diagnose("a", _stats(min_head_normalized_entropy=0.1), THRESHOLDS)
    assert _codes(collapse) == {"entropy-collapse": "warning"}
    collapse = diagnose("a", _stats(min_head_normalized_entropy=0.01), THRESHOLDS)
    assert _codes(collapse) == {"entropy-collapse": "error"}


def test_the_large_logits_message_names_the_rule_that_fired() -> None:
    tau, big = THRESHOLDS["max_logit"], THRESHOLDS["large_logit_std"]
    calm_head: dict[str, list[float | None]] = {"max_logit": [3.0, 0.8 * tau, 2.0, 1.0]}
    hot_head: dict[str, list[float | None]] = {"max_logit": [3.0, 2.0 * tau, 2.0, 1.0]}

    def message(**changes: Any) -> str:
        (found,) = [
            f for f in diagnose("a", _stats(**changes), THRESHOLDS) if f.code == "large-logits"
        ]
        return found.message

    # saturated rows alone, with a head whose peak is under the threshold: neither the peak
    # nor QK-Clip's factor is quoted as the cause
    rows = message(saturated_fraction=0.2, heads=calm_head)
    assert rows.startswith("Saturated rows fired this: 20% of the rows"), rows
    assert "peak logit" not in rows and "QK-Clip" not in rows and f"{0.8 * tau:.3g}" not in rows
    spread = message(logit_std=1.1 * big, saturated_fraction=0.01)
    assert spread.startswith("The logit spread fired this"), spread
    assert "Saturated rows fired" not in spread and "peak logit" not in spread
    peak = message(heads=hot_head)
    assert peak.startswith("The peak logit fired this: the largest logit of head 1"), peak
    assert f"{2.0 * tau:.3g}" in peak and "scale this head's logits by 0.5" in peak
    assert "Saturated rows" not in peak and "logit spread" not in peak
    both = message(saturated_fraction=0.2, heads=hot_head)
    assert "Saturated rows fired this" in both and "The peak logit fired this" in both


def test_a_heads_max_logit_past_the_threshold_warns() -> None:
    tau = THRESHOLDS["max_logit"]
    heads: dict[str, list[float | None]] = {"max_logit": [3.0, None, 0.9 * tau, 2.0]}
    assert diagnose("a", _stats(heads=heads), THRESHOLDS) == []
    heads = {"max_logit": [3.0, None, 2.5 * tau, 2.0]}
    (found,) = diagnose("a", _stats(heads=heads), THRESHOLDS)
    assert (found.code, found.severity) == ("large-logits", "warning")
    assert "head 2" in found.message and f"{2.5 * tau:.3g}" in found.message
    assert "by 0.4" in found.message  # QK-Clip's factor tau / S_max
    # a lower threshold is honoured; the sampled statistics alone never use it
    assert diagnose("a", _stats(heads=heads), {**THRESHOLDS, "max_logit": 1e9}) == []
    assert diagnose("a", _stats(max_abs_logit=10 * tau), THRESHOLDS) == []


def test_rows_without_two_keys_give_no_entropy_finding() -> None:
    nan = math.nan
    stats = _stats(
        entropy=nan, normalized_entropy=nan, min_head_normalized_entropy=nan, max_probability=nan
    )
    assert diagnose("a", stats, THRESHOLDS) == []


def test_masked_rows() -> None:
    info = diagnose("a", _stats(masked_rows=3, first_masked_row=(0, 1, 0)), THRESHOLDS)
    assert _codes(info) == {"masked-rows": "info"}
    assert "(0, 1, 0)" in info[0].message
    bad = _stats(masked_rows=3, masked_rows_nonfinite=3, first_masked_row=(0, 1, 0))
    assert _codes(diagnose("a", bad, THRESHOLDS)) == {"masked-rows": "error"}


def test_non_finite_and_fp16() -> None:
    assert _codes(diagnose("a", _stats(nonfinite_logits=4), THRESHOLDS)) == {"non-finite": "error"}
    near = _stats(dtype="float16", max_abs_qk=20000.0)
    assert _codes(diagnose("a", near, THRESHOLDS)) == {"fp16-overflow-risk": "warning"}
    over = _stats(dtype="float16", max_abs_qk=math.inf)
    assert _codes(diagnose("a", over, THRESHOLDS)) == {"fp16-overflow-risk": "error"}
    assert diagnose("a", _stats(dtype="bfloat16", max_abs_qk=math.inf), THRESHOLDS) == []


def test_no_attention_is_a_warning_with_its_reason() -> None:
    unmatched = no_attention(3)
    assert unmatched.severity == "warning"
    assert "3 softmax calls" in unmatched.message
    assert "ran inside the with-block" in no_attention(0).message


def test_a_bug_in_every_layer_is_one_finding_at_one_severity() -> None:
    """12 layers without the scale: one finding listing the 12 sites, not 12 paragraphs split
    into errors and warnings by the logit spread of each layer."""
    import torch
    from torch import nn

    from attnscale import AttentionMonitor

    class Layer(nn.Module):
        def __init__(self, gain: float) -> None:
            super().__init__()
            self.qk = nn.Linear(64, 128)
            nn.init.normal_(self.qk.weight, std=gain / 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k = self.qk(x).view(2, 10, 2, 4, 16).permute(2, 0, 3, 1, 4)
            return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ q  # no 1/sqrt(16)

    torch.manual_seed(0)
    # logit spreads either side of max_logit_std across the layers
    model = nn.Sequential(*(Layer(gain) for gain in torch.linspace(0.5, 2.0, 12).tolist()))
    with AttentionMonitor(model) as mon:
        for layer in model:
            layer(torch.randn(2, 10, 64))
    report = mon.report()
    spreads = [r.last.logit_std for r in report.records]
    assert min(spreads) < THRESHOLDS["max_logit_std"] < max(spreads)
    (finding,) = [f for f in report.findings if f.code == "scale-mismatch"]
    assert finding.sites == tuple(str(i) for i in range(12))
    assert finding.severity == "error"
    assert report.record(finding.where).last.logit_std > THRESHOLDS["max_logit_std"]
    assert "Seen at 12 sites ({0-11})" in finding.message
    assert "12 sites: {0-11}" in str(report)


def test_a_sink_head_is_not_entropy_collapse() -> None:
    """A head that parks its mass on the first key has a low entropy by construction
    (attention sinks, Xiao et al. 2023): an info finding, and the collapse check reads the
    other heads only."""
    sink = _stats(
        min_head_normalized_entropy=0.04,
        head_normalized_entropy=(0.9, 0.04, 0.85, 0.9),
        head_first_key_weight=(0.05, 0.93, 0.04, 0.05),
    )
    codes = _codes(diagnose("a", sink, THRESHOLDS))
    assert codes == {"attention-sink": "info"}
    finding = next(f for f in diagnose("a", sink, THRESHOLDS) if f.code == "attention-sink")
    assert "head 1: 0.93" in finding.message
    # a collapsed head beside the sink is still a collapse
    both = dataclasses.replace(sink, head_normalized_entropy=(0.9, 0.04, 0.1, 0.9))
    assert _codes(diagnose("a", both, THRESHOLDS)) == {
        "attention-sink": "info",
        "entropy-collapse": "warning",
    }
    # without per-head numbers (an older report) the minimum over heads decides, as before
    old = dataclasses.replace(sink, head_normalized_entropy=None, head_first_key_weight=None)
    assert _codes(diagnose("a", old, THRESHOLDS)) == {"entropy-collapse": "error"}


def test_saturated_rows_of_positional_heads_are_not_large_logits() -> None:
    """A previous-token head is sharp by design (the held-out checkpoints' page: Whisper's
    first decoder layer warned on its positional heads' one-hot rows alone); a sink head's
    saturated rows still count (a too-large scale parks heads on one key as well)."""
    heads = {
        "saturated_fraction": 0.45,
        "head_saturated_fraction": (0.9, 0.0, 0.0),
        "head_sink_weight": (0.05, 0.02, 0.03),
    }
    positional = _stats(**heads, head_positional_share=(0.95, 0.1, 0.2))
    assert "large-logits" not in _codes(diagnose("a", positional, THRESHOLDS))
    sinks = {**heads, "head_sink_weight": (0.9, 0.02, 0.03)}
    sink = _stats(**sinks, head_positional_share=(0.1, 0.1, 0.1))
    assert "large-logits" in _codes(diagnose("a", sink, THRESHOLDS))
    plain = _stats(**heads, head_positional_share=(0.3, 0.1, 0.2))  # the same rows, no structure
    found = [f for f in diagnose("a", plain, THRESHOLDS) if f.code == "large-logits"]
    assert found and "30% of the rows" in found[0].message  # the mean over the three heads
