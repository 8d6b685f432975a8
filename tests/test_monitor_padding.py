"""Padding queries stay out of the per-head statistics.

A padded batch masks the padding tokens as keys; as queries they still attend over the real
keys, and their rows used to enter the entropy, saturation and per-head statistics. The
same sequences unpadded are the reference.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch import nn

from attnscale import AttentionMonitor, AttentionStats

# sampled per-row statistics, and per-head ones
_SAMPLED = ("normalized_entropy", "max_probability", "saturated_fraction", "entropy")
_PER_HEAD = ("head_normalized_entropy", "head_first_key_weight", "head_sink_weight")
_EVERY_ROW = ("max_logit", "entropy", "rows", "masked_rows", "sink_weight", "first_key_weight")


def _stats(model: nn.Module, all_rows: bool, *args: Any, **kwargs: Any) -> AttentionStats:
    with torch.no_grad(), AttentionMonitor(model, all_rows=all_rows) as mon:
        model(*args, **kwargs)
    (record,) = mon.report().records
    return record.last


def _assert_same(padded: AttentionStats, unpadded: AttentionStats, all_rows: bool) -> None:
    for name in _SAMPLED:
        assert getattr(padded, name) == pytest.approx(getattr(unpadded, name), rel=1e-5), name
    for name in _PER_HEAD:
        got, want = getattr(padded, name), getattr(unpadded, name)
        assert got == pytest.approx(want, rel=1e-5, abs=1e-7, nan_ok=True), name
    if all_rows:
        assert padded.heads is not None and unpadded.heads is not None
        for name in _EVERY_ROW:
            got, want = padded.heads[name], unpadded.heads[name]
            assert got == pytest.approx(want, rel=1e-5, abs=1e-7, nan_ok=True), name


@pytest.mark.parametrize("all_rows", [False, True])
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_bert_padding_queries_leave_the_statistics_unchanged(
    implementation: str, all_rows: bool
) -> None:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=64,
        initializer_range=0.5,  # peaked rows: the padding rows' entropy differs from the rest
        attn_implementation=implementation,
    )
    model = transformers.BertModel(config).eval()
    ids = torch.randint(5, 100, (2, 8))
    padded = torch.cat([ids, torch.zeros(2, 4, dtype=torch.long)], 1)
    mask = torch.cat([torch.ones(2, 8), torch.zeros(2, 4)], 1).long()
    reference = _stats(model, all_rows, ids)
    stats = _stats(model, all_rows, padded, attention_mask=mask)
    _assert_same(stats, reference, all_rows)
    assert stats.masked_rows == 0  # the padding rows are not rows without a key either


@pytest.mark.parametrize("all_rows", [False, True])
def test_multihead_attention_key_padding_queries_are_left_out(all_rows: bool) -> None:
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 2, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight.mul_(4)  # peaked rows
    x = torch.randn(2, 20, 16)  # MIN_ROWS rows and more: the sink statistics are defined
    padded = torch.cat([x, torch.randn(2, 4, 16)], 1)
    kpm = torch.zeros(2, 24, dtype=torch.bool)
    kpm[:, 20:] = True
    reference = _stats(mha, all_rows, x, x, x)
    stats = _stats(mha, all_rows, padded, padded, padded, key_padding_mask=kpm)
    _assert_same(stats, reference, all_rows)


def test_cross_attention_keeps_a_query_whose_index_is_a_padding_key() -> None:
    # the keys are another sequence (8 queries, 9 keys, the last 3 padding): key i is not
    # query i's token, and no query row is left out
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 2, batch_first=True).eval()
    q, kv = torch.randn(2, 8, 16), torch.randn(2, 9, 16)
    kpm = torch.zeros(2, 9, dtype=torch.bool)
    kpm[:, 6:] = True
    stats = _stats(mha, True, q, kv, kv, key_padding_mask=kpm)
    assert stats.heads is not None
    assert stats.heads["rows"] == [16.0, 16.0]  # every query of both sequences
    assert stats.sampled_rows == 2 * 2 * 8
    assert not math.isnan(stats.normalized_entropy)
