"""Sinks on any key, the rest of a sink head's rows, and positional heads (issue 42).

A head can have a low entropy and be healthy: a sink parks its mass on one key (the first
token, or a delimiter), a positional head looks at a fixed offset (the previous token). The
monitor checks a sink head on the entropy of the rest of its rows, and leaves positional heads
out of the collapse check; a head whose rows pick one key at random is still collapsed.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
import torch
from healthy_stats import healthy_stats
from torch import nn

from attnscale import (
    THRESHOLDS,
    AttentionMonitor,
    AttentionStats,
    head_stats,
    head_stats_of_logits,
)
from attnscale._monitor.diagnosis import diagnose
from attnscale._monitor.stats import logit_stats

L = 32  # query rows and keys
HEADS = 4
STRUCTURE = ("sink_key", "sink_weight", "rest_entropy", "positional_share", "positional_offset")


def _healthy(gen: torch.Generator, batch: int = 2) -> torch.Tensor:
    """Logits of heads that spread their attention: N(0, 1), (batch, heads, L, L)."""
    return torch.randn(batch, HEADS, L, L, generator=gen)


def _sink(x: torch.Tensor, head: int, key: int, lift: float) -> None:
    """Raise one key of one head in every row by ``lift``."""
    x[:, head, :, key] += lift


def _one_key_per_row(x: torch.Tensor, head: int, keys: torch.Tensor, lift: float) -> None:
    """Raise, in each row i of one head, the key ``keys[i]`` by ``lift``."""
    x[:, head].scatter_add_(
        -1, keys.expand(x.shape[0], L)[..., None], torch.full((x.shape[0], L, 1), lift)
    )


def _random_visible_keys(gen: torch.Generator) -> torch.Tensor:
    """A key each causal row can see, drawn at random: (L,)."""
    return (torch.rand(L, generator=gen) * (torch.arange(L) + 1)).long()


def _offset_keys(offset: int) -> torch.Tensor:
    """Key i + offset in row i (key 0 where that is before the first key)."""
    return (torch.arange(L) + offset).clamp(0, L - 1)


class Attention(nn.Module):
    """Causal attention written by hand, from q and k."""

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        hidden = torch.ones(L, L, dtype=torch.bool).triu(1)
        return torch.softmax(scores.masked_fill(hidden, -math.inf), dim=-1)


def _monitored(logits: torch.Tensor, **monitor: Any) -> tuple[AttentionStats, dict[str, str]]:
    """Run ``Attention`` on q and k whose scaled product is ``logits`` (k the identity, so
    q·k_j / √d is q's entry j / √d); return the call's statistics and its findings' codes."""
    k = torch.eye(L).expand_as(logits).contiguous()
    q = logits * math.sqrt(L)
    module = Attention()
    with torch.no_grad(), AttentionMonitor(module, **monitor) as mon:
        module(q, k)
    report = mon.report()
    return report.records[0].last, {f.code: f.severity for f in report.findings}


def _causal(x: torch.Tensor) -> torch.Tensor:
    return x.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), -math.inf)


def test_a_sink_on_a_delimiter_of_a_healthy_head_is_not_an_error() -> None:
    """Head 1 parks about 0.97 of every row that sees it on key 5 (a delimiter, not the
    first token); the rest of its rows is spread. Its entropy is far under the collapse
    threshold, so the check on the whole row would call it collapsed."""
    gen = torch.Generator().manual_seed(0)
    x = _healthy(gen)
    _sink(x, head=1, key=5, lift=8.0)
    stats, codes = _monitored(x)
    # the rows before key 5 cannot see it: they keep the head's mean entropy off 0
    assert stats.head_normalized_entropy[1] < THRESHOLDS["normalized_entropy"]
    assert stats.head_sink_key[1] == 5
    assert stats.head_sink_weight[1] > THRESHOLDS["sink_weight"]
    assert stats.head_rest_entropy[1] > 0.8  # the rest is as spread as a healthy head
    assert codes == {"attention-sink": "info"}, codes
    # today's check read key 0 only: the sink's weight there is nothing
    assert stats.head_first_key_weight[1] < 0.1


def test_a_sink_head_whose_rest_is_collapsed_is_an_error() -> None:
    """The same sink on key 5, and what it leaves of each row on one key drawn at random:
    the rest is collapsed, and so is the head, sink or not."""
    gen = torch.Generator().manual_seed(1)
    x = _healthy(gen)
    _sink(x, head=1, key=5, lift=20.0)
    _one_key_per_row(x, head=1, keys=_random_visible_keys(gen), lift=16.0)
    stats, codes = _monitored(x)
    assert stats.head_sink_key[1] == 5 and stats.head_sink_weight[1] > THRESHOLDS["sink_weight"]
    assert stats.head_rest_entropy[1] < THRESHOLDS["normalized_entropy"] / 4
    assert codes["entropy-collapse"] == "error"
    assert codes["attention-sink"] == "info"
    stats_only = diagnose("attn", stats, THRESHOLDS)
    message = next(f.message for f in stats_only if f.code == "entropy-collapse")
    assert "head 1 with its sink on key 5 left out" in message


@pytest.mark.parametrize("offset", [-1, 0, -3])
def test_a_positional_head_is_not_entropy_collapse(offset: int) -> None:
    """Head 2 puts nearly all of each row on key i + offset (the previous token, the token
    itself, three back): one-hot rows by design. A strong preference in the logits, not a
    hand-set share."""
    gen = torch.Generator().manual_seed(2)
    x = _healthy(gen)
    _one_key_per_row(x, head=2, keys=_offset_keys(offset), lift=10.0)
    stats, codes = _monitored(x)
    assert stats.head_normalized_entropy[2] < THRESHOLDS["normalized_entropy"] / 4
    assert stats.head_positional_offset[2] == offset
    assert stats.head_positional_share[2] >= THRESHOLDS["positional_share"]
    assert "entropy-collapse" not in codes, codes
    assert "error" not in codes.values(), codes


def test_a_previous_token_head_with_a_sink_is_positional() -> None:
    """A head that parks most of each row on key 0 and gives the rest to the previous token
    (a common pattern in trained models): the rest is one-hot, but at a fixed offset."""
    gen = torch.Generator().manual_seed(3)
    x = _healthy(gen)
    _sink(x, head=0, key=0, lift=14.0)
    _one_key_per_row(x, head=0, keys=_offset_keys(-1), lift=12.0)
    stats, codes = _monitored(x)
    assert stats.head_sink_key[0] == 0
    assert stats.head_rest_entropy[0] < THRESHOLDS["normalized_entropy"] / 4
    assert stats.head_positional_offset[0] == -1
    assert "entropy-collapse" not in codes, codes


def test_a_head_collapsed_on_random_keys_is_still_an_error() -> None:
    gen = torch.Generator().manual_seed(4)
    x = _healthy(gen)
    _one_key_per_row(x, head=3, keys=_random_visible_keys(gen), lift=12.0)
    stats, codes = _monitored(x)
    assert stats.head_positional_share[3] < THRESHOLDS["positional_share"]
    assert stats.head_sink_weight[3] < THRESHOLDS["sink_weight"]
    assert codes["entropy-collapse"] == "error"


def test_rows_that_are_all_sink_give_no_nan() -> None:
    """p0 -> 1: every row of head 1 is all sink (its rest is under e^-60), so the rest has
    nothing to measure; in head 2 only the rows from 16 on are, and the rest of the others
    still counts."""
    gen = torch.Generator().manual_seed(5)
    x = _healthy(gen)
    _sink(x, head=1, key=0, lift=60.0)  # the first key: every row sees it
    x[:, 2, 16:, 7] += 60.0
    x[:, 2, :16, 7] += 6.0
    stats, codes = _monitored(x, all_rows=True)
    assert math.isnan(stats.head_rest_entropy[1])  # nothing off the sink: no rest
    assert 0.5 < stats.head_rest_entropy[2] <= 1.0
    for name in ("head_sink_weight", "head_normalized_entropy", "head_positional_share"):
        assert all(math.isfinite(v) for v in getattr(stats, name)), name
    assert stats.heads is not None and stats.heads["rest_entropy"][1] is None  # NaN in JSON
    # (its saturated rows are a large-logits matter: that check reads rows, not heads)
    assert codes["attention-sink"] == "info" and "entropy-collapse" not in codes, codes


def _all_cases() -> torch.Tensor:
    """One batch holding each case above in one head: a sink on key 5 with a collapsed
    rest, a previous-token head with a sink, a positional head, a random collapse."""
    gen = torch.Generator().manual_seed(6)
    x = _healthy(gen)
    _sink(x, head=0, key=5, lift=20.0)
    _one_key_per_row(x, head=0, keys=_random_visible_keys(gen), lift=16.0)
    _sink(x, head=1, key=0, lift=14.0)
    _one_key_per_row(x, head=1, keys=_offset_keys(-1), lift=12.0)
    _one_key_per_row(x, head=2, keys=_offset_keys(-2), lift=10.0)
    _one_key_per_row(x, head=3, keys=_random_visible_keys(gen), lift=12.0)
    return x


def test_sampled_and_every_row_statistics_agree() -> None:
    """The sampled statistics (every row sampled here: 32 rows, 2 sequences) and those over
    every row, from q and k and from the logits (with and without the model's weights, in
    chunks of keys), read each head's structure alike."""
    raw = _all_cases()
    x = _causal(raw)
    sampled = logit_stats(x, mask_value=-1e4, saturation=0.99)
    q, k = raw * math.sqrt(L), torch.eye(L).expand_as(raw)  # q·k / √L is raw
    visible = torch.ones(L, L, dtype=torch.bool).tril()
    every = {
        "logits": head_stats_of_logits(x),
        "weights": head_stats_of_logits(x, probs=torch.softmax(x, -1)),
        "key chunks": head_stats_of_logits(x, chunk=5),
        "q and k": head_stats(q, k, is_causal=True),
        "q and k, key chunks": head_stats(q, k, is_causal=True, chunk=5),
        "q and k, a mask": head_stats(q, k, attn_mask=visible),
        "q and k, a mask, key chunks": head_stats(q, k, attn_mask=visible, chunk=5),
    }
    for path, stats in every.items():
        for name in STRUCTURE:
            got = getattr(stats, name).tolist()
            assert got == pytest.approx(sampled[f"head_{name}"], rel=1e-4, abs=1e-6), (path, name)
    assert sampled["head_sink_key"][:2] == (5.0, 0.0)
    assert sampled["head_positional_offset"][1:3] == (-1.0, -2.0)


def test_the_monitor_reports_both_paths_alike() -> None:
    """Through AttentionMonitor(all_rows=True): the per-head lists over every row are the
    sampled ``head_*`` fields (all rows and sequences are sampled at this size)."""
    stats, _ = _monitored(_all_cases(), all_rows=True)
    assert stats.heads is not None
    for name in STRUCTURE:
        want = getattr(stats, f"head_{name}")
        assert stats.heads[name] == pytest.approx(want, rel=1e-4, abs=1e-6), name


def test_blocks_of_rows_merge_to_the_whole() -> None:
    """Statistics of two blocks of rows, each told where its first row is, merge to those of
    every row; without ``first_row`` the second block's offsets would be off by its start."""
    x = _causal(_all_cases())
    whole = head_stats_of_logits(x)
    top = head_stats_of_logits(x[:, :, :12])
    bottom = head_stats_of_logits(x[:, :, 12:], first_row=12)
    merged = top.merge(bottom)
    # heads 0 and 1 have a sink (each block finds it); heads 1 and 2 a fixed offset (each
    # block finds it, head 0's rest and head 3 are random and may differ between blocks)
    for name, heads in (
        ("sink_key", [0, 1]),
        ("sink_weight", [0, 1]),
        ("rest_entropy", [0, 1]),
        ("positional_share", [1, 2]),
        ("positional_offset", [1, 2]),
    ):
        got, want = getattr(merged, name)[heads], getattr(whole, name)[heads]
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-7), name
    unplaced = head_stats_of_logits(x[:, :, 12:])
    assert unplaced.positional_offset[2] == -2 + 12
    with pytest.raises(ValueError, match="first_row"):
        head_stats_of_logits(x, first_row=-1)


def test_random_collapsed_heads_stay_under_the_positional_threshold() -> None:
    """How ``positional_share`` was chosen: heads whose causal rows are one-hot on a random
    key reach a share at one offset by chance, and over the fewest rows a structure is read
    from (``MIN_ROWS``, of one sequence) they stay well under the threshold (the fewer the
    rows, the higher the chance share)."""
    from attnscale._monitor.structure import MIN_ROWS

    gen = torch.Generator().manual_seed(7)
    n = MIN_ROWS + 1  # the first causal row has one key: MIN_ROWS rows count
    shares = []
    for _ in range(200):
        x = torch.zeros(1, 1, n, n)
        keys = (torch.rand(n, generator=gen) * (torch.arange(n) + 1)).long()
        x[0, 0].scatter_(-1, keys[:, None], 30.0)
        x = x.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
        shares.append(logit_stats(x, mask_value=-1e4, saturation=0.99)["head_positional_share"][0])
    assert max(shares) < THRESHOLDS["positional_share"] - 0.15
    fewer = logit_stats(x[..., 1:, 1:], mask_value=-1e4, saturation=0.99)
    assert math.isnan(fewer["head_positional_share"][0])


def test_diagnosis_reads_sinks_rest_and_positional_heads() -> None:
    """The diagnosis as a pure function of per-head numbers."""
    base = healthy_stats(
        normalized_entropy=0.6,
        min_head_normalized_entropy=0.02,
        max_probability=0.3,
        head_normalized_entropy=(0.9, 0.02, 0.03, 0.9),
        head_first_key_weight=(0.05, 0.01, 0.02, 0.05),
        head_sink_key=(3.0, 7.0, 9.0, 0.0),
        head_sink_weight=(0.05, 0.95, 0.04, 0.05),
        head_rest_entropy=(0.9, 0.85, 0.03, 0.9),
        head_positional_share=(0.1, 0.1, 0.97, 0.1),
        head_positional_offset=(0.0, -4.0, -1.0, 2.0),
    )
    found = {f.code: f for f in diagnose("a", base, THRESHOLDS)}
    assert set(found) == {"attention-sink"}  # head 1: a sink with a spread rest; 2: positional
    assert "head 1: 0.95 on key 7" in found["attention-sink"].message
    # the same heads, but head 2 not positional: its collapse is an error
    plain = dataclasses.replace(base, head_positional_share=(0.1, 0.1, 0.3, 0.1))
    assert {f.code: f.severity for f in diagnose("a", plain, THRESHOLDS)} == {
        "attention-sink": "info",
        "entropy-collapse": "error",
    }
    # head 1's rest collapsed: an error, named for the sink
    rest = dataclasses.replace(base, head_rest_entropy=(0.9, 0.01, 0.03, 0.9))
    (collapse,) = [f for f in diagnose("a", rest, THRESHOLDS) if f.code == "entropy-collapse"]
    assert collapse.severity == "error"
    assert "0.01 of log(n - 1) in head 1 with its sink on key 7 left out" in collapse.message
    # an all-sink head (no rest to measure) is a sink, not a collapse
    empty = dataclasses.replace(base, head_rest_entropy=(0.9, math.nan, 0.03, 0.9))
    assert {f.code for f in diagnose("a", empty, THRESHOLDS)} == {"attention-sink"}
    # a stricter threshold puts head 2 back in the check
    strict = {**THRESHOLDS, "positional_share": 0.99}
    assert "entropy-collapse" in {f.code for f in diagnose("a", base, strict)}


def _steered_gpt2(impl: str, pattern: str) -> tuple[nn.Module, torch.Tensor]:
    """A one-layer transformers GPT-2 with random weights in which head 1 is steered: its
    query at position i is its key at position i - 1 (``"previous"``) or at a random earlier
    position (``"random"``), times 5. Token embeddings are zero, so each layer input is its
    position embedding, and the query weights solve X W_q = the wanted queries exactly."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=1, n_embd=64, n_head=4, n_positions=L, vocab_size=97, attn_implementation=impl
    )
    model = transformers.GPT2Model(config).eval()
    gen = torch.Generator().manual_seed(8)
    with torch.no_grad():
        model.wte.weight.zero_()
        model.wpe.weight.copy_(torch.randn(L, 64, generator=gen))
        block = model.h[0]
        x = block.ln_1(model.wpe.weight)  # (L, 64): what the attention's projection sees
        w, b = block.attn.c_attn.weight, block.attn.c_attn.bias  # (64, 192): [q | k | v]
        q_cols, k_cols = slice(16, 32), slice(64 + 16, 64 + 32)
        w[:, k_cols] = torch.randn(64, 16, generator=gen) / 8
        b[q_cols], b[k_cols] = 0.0, 0.0
        keys = x @ w[:, k_cols]  # (L, 16)
        if pattern == "previous":
            looked_at = (torch.arange(L) - 1).clamp_min(0)
        else:
            looked_at = _random_visible_keys(gen)
        w[:, q_cols] = torch.linalg.pinv(x) @ (5 * keys[looked_at])
    return model, torch.zeros(2, L, dtype=torch.long)


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_a_previous_token_head_in_gpt2_is_not_collapse(impl: str) -> None:
    """transformers' GPT-2, steered so that head 1 attends to the previous token: its
    entropy is deep in the collapse region, and the monitor reads it as positional. The same
    head looking at random earlier positions instead is still an entropy-collapse error."""
    model, ids = _steered_gpt2(impl, "previous")
    with torch.no_grad(), AttentionMonitor(model, all_rows=True) as mon:
        model(ids)
    stats = mon.report().records[0].last
    codes = {f.code: f.severity for f in mon.report().findings}
    assert stats.head_normalized_entropy[1] < THRESHOLDS["normalized_entropy"] / 4
    assert stats.head_positional_offset[1] == -1
    assert stats.head_positional_share[1] >= THRESHOLDS["positional_share"]
    assert stats.heads is not None and stats.heads["positional_offset"][1] == -1
    assert "entropy-collapse" not in codes and "error" not in codes.values(), codes
    model, ids = _steered_gpt2(impl, "random")
    with torch.no_grad(), AttentionMonitor(model) as mon:
        model(ids)
    stats = mon.report().records[0].last
    assert stats.head_normalized_entropy[1] < THRESHOLDS["normalized_entropy"] / 4
    assert {f.code: f.severity for f in mon.report().findings}["entropy-collapse"] == "error"


def test_top_two_finds_the_first_largest_and_second_largest() -> None:
    """The indices of each row's largest and second largest entries, the first on a tie, as
    a stable sort gives them: with ties (entries rounded to 0.5), masked entries (-inf) and
    rows of one valid key, rows whose only valid key is the last and rows of ties only, in
    float32 and float64, over rows of several widths; the input is left as it was."""
    from attnscale._monitor.structure import top_two

    gen = torch.Generator().manual_seed(9)
    for keys in (37, 64, 160):
        for dtype in (torch.float32, torch.float64):
            x = (2 * torch.randn(6, 50, keys, generator=gen)).round().to(dtype) / 2
            x = x.masked_fill(torch.rand(6, 50, keys, generator=gen) < 0.3, -math.inf)
            x[0, 0, 1:] = -math.inf  # one valid key: the second is any index
            x[0, 1, :] = -math.inf  # none
            x[0, 1, keys - 1] = 0.0  # ... but the last
            x[0, 2, :] = 1.0  # every key at the maximum
            before = x.clone()
            high, top, second = top_two(x)
            assert torch.equal(x, before)
            order = torch.sort(x, dim=-1, descending=True, stable=True).indices
            assert torch.equal(high, x.amax(-1))
            assert torch.equal(top, order[..., 0])
            assert torch.equal(second[1:], order[1:, ..., 1])
            assert torch.equal(second[0, 2:], order[0, 2:, 1])


class Decoding(nn.Module):
    """One decoding step: one query row per sequence against every cached key."""

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)


def test_a_decoding_step_is_too_few_rows_for_a_structure() -> None:
    """One query row per sequence: a head one-hot on some key is not a pattern across rows,
    so it is no sink and no positional head but collapsed; a head one-hot on the first key is
    a sink, as the monitor has always read it."""
    gen = torch.Generator().manual_seed(10)
    x = torch.randn(2, HEADS, 1, L, generator=gen)
    x[:, 1, 0, 17] += 14.0  # one-hot on key 17
    x[:, 2, 0, 0] += 14.0  # one-hot on the first key
    k = torch.eye(L).expand(2, HEADS, L, L)
    module = Decoding()
    with torch.no_grad(), AttentionMonitor(module) as mon:
        module(x * math.sqrt(L), k)
    report = mon.report()
    stats = report.records[0].last
    assert all(math.isnan(v) for v in stats.head_sink_weight)  # 2 rows: nothing read
    codes = {f.code: f for f in report.findings}
    assert codes["entropy-collapse"].severity == "error"
    assert "head 2: 1 on key 0" in codes["attention-sink"].message
    assert "head 1" not in codes["attention-sink"].message
