"""Per-head statistics over every row, from q and k in key chunks, against brute force."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from attnscale import AttentionMonitor, HeadStats, head_stats


def _brute(
    q: torch.Tensor,
    k: torch.Tensor,
    scale: float,
    visible: torch.Tensor,
    bias: torch.Tensor | None = None,
    causal: bool = False,
) -> dict[str, torch.Tensor]:
    """The same statistics from the full float64 matrix, row by row. Under ``causal``,
    max |q·k| is over the visible products (the masked ones are never formed)."""
    group = q.shape[-3] // k.shape[-3]
    k = k.repeat_interleave(group, dim=-3)
    qk = q.double() @ k.double().transpose(-2, -1)  # (B, H, L, S)
    x = qk * scale + (0 if bias is None else bias.double())
    visible = torch.broadcast_to(visible, x.shape)
    n = visible.sum(-1)  # (B, H, L)
    xm = x.masked_fill(~visible, -math.inf)
    p = torch.softmax(xm, -1)
    ent = torch.special.entr(p.nan_to_num(0.0)).sum(-1) / n.clamp_min(2).log()
    lse = torch.logsumexp(xm, -1)
    out: dict[str, list[float]] = {
        k_: []
        for k_ in (
            "max_logit",
            "min_logit",
            "entropy",
            "lse",
            "first_key_weight",
            "masked_rows",
            "max_abs_qk",
        )
    }
    for h in range(q.shape[-3]):
        some, live = n[:, h] >= 1, n[:, h] >= 2
        xv = x[:, h][visible[:, h]]
        out["max_logit"].append(float(xv.max()) if xv.numel() else -math.inf)
        out["min_logit"].append(float(xv.min()) if xv.numel() else math.inf)
        out["entropy"].append(float(ent[:, h][live].mean()) if live.any() else math.nan)
        out["lse"].append(float(lse[:, h][some].mean()) if some.any() else math.nan)
        out["first_key_weight"].append(
            float(p[:, h, :, 0][some].mean()) if some.any() else math.nan
        )
        out["masked_rows"].append(float((~some).double().mean()))
        formed = qk[:, h][visible[:, h]] if causal else qk[:, h]
        out["max_abs_qk"].append(float(formed.abs().max()))
    return {k_: torch.tensor(v, dtype=torch.float64) for k_, v in out.items()}


def _assert_close(stats: HeadStats, ref: dict[str, torch.Tensor], rel: float = 1e-5) -> None:
    for name, want in ref.items():
        got = getattr(stats, name)
        assert torch.allclose(got, want, rtol=rel, atol=rel, equal_nan=True), (name, got, want)


def _qk(
    heads: int = 4,
    kv_heads: int = 4,
    length: int = 37,
    keys: int = 37,
    d: int = 16,
    size: float = 3.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    q = size * torch.randn(2, heads, length, d, generator=gen)
    k = torch.randn(2, kv_heads, keys, d, generator=gen)
    return q, k


@pytest.mark.parametrize("chunk", [1, 5, 16, 128])
def test_matches_brute_force_without_a_mask(chunk: int) -> None:
    q, k = _qk()
    stats = head_stats(q, k, chunk=chunk)
    _assert_close(stats, _brute(q, k, 1 / 4, torch.ones(1, dtype=torch.bool)))


@pytest.mark.parametrize(("length", "keys", "chunk"), [(20, 20, 7), (12, 30, 5), (30, 12, 4)])
def test_causal_and_grouped_query_heads(length: int, keys: int, chunk: int) -> None:
    q, k = _qk(heads=6, kv_heads=2, length=length, keys=keys)
    visible = torch.ones(length, keys, dtype=torch.bool).tril()
    for c in (chunk, None):  # the key chunks a query cannot see are skipped
        stats = head_stats(q, k, is_causal=True, chunk=c, scale=0.3)
        _assert_close(stats, _brute(q, k, 0.3, visible, causal=True))
        assert stats.entropy_rows.tolist() == [2 * (length - 1)] * 6  # row 0: one key


@pytest.mark.parametrize("low", [-math.inf, torch.finfo(torch.float32).min, -100.0])
def test_additive_masks_of_any_value_and_fully_masked_rows(low: float) -> None:
    q, k = _qk(length=12, keys=30)
    gen = torch.Generator().manual_seed(3)
    visible = torch.rand(2, 1, 12, 30, generator=gen) > 0.6
    visible[0, 0, 4] = False  # a row with no key at all
    mask = torch.zeros(visible.shape).masked_fill(~visible, low)
    stats = head_stats(q, k, attn_mask=mask, chunk=8)
    _assert_close(stats, _brute(q, k, 0.25, visible))
    assert stats.masked_rows.tolist() == pytest.approx([1 / 24] * 4)
    same = head_stats(q, k, attn_mask=visible, chunk=8)  # the boolean form
    _assert_close(same, _brute(q, k, 0.25, visible))


@pytest.mark.parametrize(("length", "keys", "chunk"), [(3, 50, 5), (12, 30, 2), (12, 30, None)])
@pytest.mark.parametrize("mask_heads", [0, 1, 6])  # no mask, one for all heads, one per head
def test_whole_rows_and_key_chunks_with_grouped_heads_and_masks(
    length: int, keys: int, chunk: int | None, mask_heads: int
) -> None:
    """Blocks of whole rows where a row of every batch and head fits in ``chunk`` keys' worth
    of values, key chunks with an online softmax where it does not (3 queries, 50 keys)."""
    q, k = _qk(heads=6, kv_heads=2, length=length, keys=keys)
    gen = torch.Generator().manual_seed(5)
    visible = torch.ones(1, 1, length, keys, dtype=torch.bool)
    if mask_heads:
        visible = torch.rand(2, mask_heads, length, keys, generator=gen) > 0.3
        visible[..., 0] = True
    mask = visible if mask_heads else None
    stats = head_stats(q, k, attn_mask=mask, chunk=chunk, scale=0.2)
    _assert_close(stats, _brute(q, k, 0.2, visible))
    if not mask_heads:
        causal = torch.ones(length, keys, dtype=torch.bool).tril()
        stats = head_stats(q, k, is_causal=True, chunk=chunk, scale=0.2)
        _assert_close(stats, _brute(q, k, 0.2, causal, causal=True))


def test_a_bias_is_part_of_the_logits() -> None:
    q, k = _qk(length=10, keys=10)
    bias = torch.linspace(-3, 3, 100).reshape(10, 10)  # ALiBi-like: not a mask
    stats = head_stats(q, k, attn_mask=bias, chunk=3)
    _assert_close(stats, _brute(q, k, 0.25, torch.ones(1, dtype=torch.bool), bias))


def test_heads_whose_max_logit_is_not_positive() -> None:
    """QK-Clip code that divides by the max logit, or takes its log, gives NaN here."""
    q, k = _qk(length=9, keys=9)
    k = -k.abs()
    q = q.abs()  # every logit < 0
    stats = head_stats(q, k, chunk=4)
    assert bool((stats.max_logit < 0).all())
    _assert_close(stats, _brute(q, k, 0.25, torch.ones(1, dtype=torch.bool)))
    assert stats.qk_clip_factor(100.0).tolist() == [1.0] * 4
    big = head_stats(q * 0 + 40, k * 0 + 40, chunk=4)  # every logit = 40 * 40 * 16 / 4
    assert big.qk_clip_factor(100.0).tolist() == pytest.approx([100 / 6400] * 4)


def test_large_logits_and_float16_headroom() -> None:
    q, k = _qk(length=16, keys=16, size=200.0)
    stats = head_stats(q.half(), k.half(), chunk=5)
    ref = _brute(q.half().float(), k.half().float(), 0.25, torch.ones(1, dtype=torch.bool))
    _assert_close(stats, ref)
    assert stats.fp16_headroom.tolist() == pytest.approx((65504 / ref["max_abs_qk"]).tolist())
    assert bool((stats.entropy >= 0).all())


def test_merge_is_the_statistics_of_both_calls() -> None:
    q, k = _qk(length=14, keys=14)
    a = head_stats(q[:1], k[:1], is_causal=True)
    b = head_stats(q[1:], k[1:], is_causal=True)
    both = head_stats(q, k, is_causal=True)
    merged = a.merge(b)
    for name in (
        "max_logit",
        "min_logit",
        "max_abs_qk",
        "entropy",
        "lse",
        "first_key_weight",
        "rows",
        "masked",
    ):
        assert torch.allclose(getattr(merged, name), getattr(both, name), rtol=1e-6), name


class _LargestTensor(TorchDispatchMode):
    """The largest tensor any operation creates (a view of its input creates none)."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        inputs = {
            a.untyped_storage().data_ptr()
            for a in (*args, *(kwargs or {}).values())
            if isinstance(a, torch.Tensor)
        }
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:
                self.largest = max(self.largest, t.numel())
        return out


def test_memory_is_linear_in_the_length() -> None:
    """No tensor larger than batch x heads x L x chunk is ever made: O(B·H·L), not O(L^2)."""
    batch, heads, length, d, chunk = 1, 2, 2048, 8, 64
    q, k = torch.randn(batch, heads, length, d), torch.randn(batch, heads, length, d)
    mask = torch.ones(length, length, dtype=torch.bool).tril()  # the mask is the caller's
    with _LargestTensor() as mode:
        head_stats(q, k, is_causal=True, chunk=chunk)
    assert mode.largest <= batch * heads * length * chunk
    assert mode.largest * 16 < batch * heads * length * length
    with _LargestTensor() as mode:
        head_stats(q, k, attn_mask=mask, chunk=chunk)
    assert mode.largest <= max(batch * heads * length * chunk, mask.numel())


@pytest.mark.parametrize(
    ("kwargs", "error", "names"),
    [
        ({"q": torch.randn(4, 8)}, TypeError, "q"),
        ({"k": torch.randn(2, 3, 9, 8)}, ValueError, "k's heads"),
        ({"k": torch.randn(2, 4, 9, 7)}, ValueError, "head_dim"),
        ({"attn_mask": torch.ones(3, 5, dtype=torch.bool)}, ValueError, "attn_mask"),
        ({"chunk": 0}, ValueError, "chunk"),
    ],
)
def test_bad_input_names_the_argument(
    kwargs: dict[str, Any], error: type[Exception], names: str
) -> None:
    args: dict[str, Any] = {"q": torch.randn(2, 4, 9, 8), "k": torch.randn(2, 4, 9, 8)}
    args.update(kwargs)
    with pytest.raises(error, match=names):
        head_stats(**args)


def test_from_existing_logits_with_a_mask_and_the_raw_product() -> None:
    from attnscale import head_stats_of_logits

    q, k = _qk(length=11, keys=23)
    visible = torch.ones(11, 23, dtype=torch.bool).tril(diagonal=12)
    qk = q @ k.transpose(-2, -1)
    logits = (qk * 0.25).masked_fill(~visible, torch.finfo(torch.float32).min)
    stats = head_stats_of_logits(logits, masked=~visible, raw=qk, chunk=6)
    _assert_close(stats, _brute(q, k, 0.25, visible))
    inf_masked = head_stats_of_logits((qk * 0.25).masked_fill(~visible, -math.inf), chunk=6)
    ref = _brute(q, k, 0.25, visible)
    ref.pop("max_abs_qk")
    _assert_close(inf_masked, ref)
    assert torch.isnan(inf_masked.max_abs_qk).all()
    assert set(stats.to_dict()) >= {"max_logit", "entropy", "first_key_weight", "masked_rows"}


@pytest.mark.parametrize("chunk", [None, 1, 5])
def test_from_logits_whole_rows_and_key_chunks_agree(chunk: int | None) -> None:
    """Finite logits take whole rows at a time; a NaN, +inf or unmasked -inf entry sends the
    call to the key-chunk path, which leaves those entries out. Both match brute force."""
    from attnscale import head_stats_of_logits

    q, k = _qk(length=10, keys=12)
    visible = torch.ones(10, 12, dtype=torch.bool).tril(diagonal=2)
    logits = (q @ k.transpose(-2, -1) * 0.25).masked_fill(~visible, torch.finfo(torch.float32).min)
    ref = _brute(q, k, 0.25, visible)
    ref.pop("max_abs_qk")
    _assert_close(head_stats_of_logits(logits, masked=~visible, chunk=chunk), ref)
    for bad, where in (
        (math.nan, (0, 1, 3, 0)),
        (math.inf, (1, 2, 5, 1)),
        (-math.inf, (1, 0, 9, 4)),
    ):
        broken = logits.clone()
        broken[where] = bad
        left = torch.broadcast_to(visible, broken.shape).clone()
        left[where] = False
        stats = head_stats_of_logits(broken, masked=~visible, chunk=chunk)
        ref = _brute(q, k, 0.25, left)
        ref.pop("max_abs_qk")
        _assert_close(stats, ref)


@pytest.mark.parametrize("chunk", [None, 5])  # one block of rows, or blocks of 4 rows
@pytest.mark.parametrize("fill", [torch.finfo(torch.float32).min, -math.inf])
def test_from_the_models_probabilities_without_an_exponential(
    fill: float, chunk: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given the weights the model computed, the statistics come from them and the logits,
    with no exponential: brute force's numbers, with a fully masked row, a head whose logits
    are all negative (max_logit < 0), a mask filled with ``fill``, and no mask at all.
    Float16 weights, or an unmasked -inf logit, take the general path."""
    from attnscale import head_stats_of_logits
    from attnscale._monitor import every_row

    q, k = _qk(length=10, keys=12)
    visible = torch.ones(10, 12, dtype=torch.bool).tril(diagonal=2)
    visible[3] = False  # a row with no key
    bias = torch.tensor([0.0, -50.0, 0.0, 0.0]).reshape(1, 4, 1, 1)  # head 1: all below 0
    qk = q @ k.transpose(-2, -1)
    logits = (qk * 0.25 + bias).masked_fill(~visible, fill)
    weights = logits.softmax(-1)  # NaN in the row with no key under -inf, as a model's
    general = every_row._whole_rows

    def refused(*args: object) -> None:
        raise AssertionError("the general path ran")

    monkeypatch.setattr(every_row, "_whole_rows", refused)
    with _LargestTensor() as mode:
        stats = head_stats_of_logits(logits, masked=~visible, raw=qk, probs=weights, chunk=chunk)
    if chunk is not None:  # a block of rows at a time, and the per-row statistics stacked
        rows = 2 * 4 * 10
        assert mode.largest <= max(rows * chunk, 6 * rows) < logits.numel()
    ref = _brute(q, k, 0.25, visible, bias)
    _assert_close(stats, ref)
    assert float(stats.max_logit[1]) < 0
    unmasked = (qk * 0.25 + bias).softmax(-1)
    _assert_close(
        head_stats_of_logits(qk * 0.25 + bias, probs=unmasked, chunk=chunk),
        {
            n: v
            for n, v in _brute(q, k, 0.25, torch.ones(1, dtype=torch.bool), bias).items()
            if n != "max_abs_qk"
        },
    )

    ran = []
    monkeypatch.setattr(every_row, "_whole_rows", lambda *a: ran.append(1) or general(*a))
    _assert_close(head_stats_of_logits(logits, masked=~visible, raw=qk, probs=weights.half()), ref)
    broken = logits.clone()
    broken[0, 2, 5, 1] = -math.inf  # an unmasked -inf: left out of the keys
    left = torch.broadcast_to(visible, broken.shape).clone()
    left[0, 2, 5, 1] = False
    got = head_stats_of_logits(broken, masked=~visible, probs=broken.softmax(-1))
    want = _brute(q, k, 0.25, left, bias)
    want.pop("max_abs_qk")
    _assert_close(got, want)
    assert len(ran) == 2


def test_weights_on_masked_entries_above_the_visible_ones_take_the_general_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A finite mask value above a head's visible logits (-5 against logits near -50): the
    model's weights then sit on masked keys, and the shortcut from them would be wrong. The
    statistics come from the general path, over the visible keys alone."""
    from attnscale import head_stats_of_logits
    from attnscale._monitor import every_row

    q, k = _qk(length=10, keys=12)
    visible = torch.ones(10, 12, dtype=torch.bool).tril(diagonal=2)
    bias = torch.tensor([0.0, -50.0, 0.0, 0.0]).reshape(1, 4, 1, 1)
    qk = q @ k.transpose(-2, -1)
    logits = (qk * 0.25 + bias).masked_fill(~visible, -5.0)
    general = every_row._whole_rows
    ran = []
    monkeypatch.setattr(every_row, "_whole_rows", lambda *a: ran.append(1) or general(*a))
    stats = head_stats_of_logits(logits, masked=~visible, raw=qk, probs=logits.softmax(-1))
    assert ran == [1]
    _assert_close(stats, _brute(q, k, 0.25, visible, bias))


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_the_monitor_reports_every_rows_max_logit_on_gpt2(impl: str) -> None:
    """AttentionMonitor(all_rows=True) on transformers' GPT-2: each layer's per-head max
    logit and entropy over every row, against the scores rebuilt from the layer's q and k."""
    transformers = pytest.importorskip("transformers")

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2, n_embd=64, n_head=4, n_positions=80, vocab_size=97, attn_implementation=impl
    )
    model = transformers.GPT2Model(config).eval()
    ids = torch.randint(0, 97, (3, 80))  # 80 rows: more than the 64 the sample keeps
    qk: list[tuple[torch.Tensor, torch.Tensor]] = []

    def keep(module: torch.nn.Module, args: Any, output: Any) -> None:
        q, k, _ = output.split(64, dim=-1)
        qk.append(tuple(t.reshape(3, 80, 4, 16).transpose(1, 2) for t in (q, k)))  # type: ignore[arg-type]

    hooks = [block.attn.c_attn.register_forward_hook(keep) for block in model.h]
    with torch.no_grad(), AttentionMonitor(model, all_rows=True) as monitor:
        model(ids)
    for h in hooks:
        h.remove()
    report = monitor.report()
    assert len(report.records) == 2
    causal = torch.ones(80, 80, dtype=torch.bool).tril()
    for record, (q, k) in zip(report.records, qk, strict=True):
        heads = record.last.heads
        assert heads is not None
        ref = _brute(q, k, 1 / 4, causal)
        assert heads["max_logit"] == pytest.approx(ref["max_logit"].tolist(), rel=1e-5)
        assert heads["entropy"] == pytest.approx(ref["entropy"].tolist(), rel=1e-5)
        assert heads["first_key_weight"] == pytest.approx(
            ref["first_key_weight"].tolist(), rel=1e-5
        )
    without = AttentionMonitor(model)
    with torch.no_grad(), without:
        model(ids)
    assert without.report().records[0].last.heads is None  # off by default


@pytest.mark.parametrize(
    "case", ["plain", "causal-and-padding", "bias-and-zero-keys", "per-head-float"]
)
def test_all_rows_on_multihead_attention_match_brute_force(case: str) -> None:
    """nn.MultiheadAttention's per-head statistics over every row of the whole batch, against
    logits rebuilt from its own projections (checked against the weights it returns)."""
    b, n, e, h = 3, 7, 16, 4
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(
        e,
        h,
        batch_first=True,
        add_bias_kv=case == "bias-and-zero-keys",
        add_zero_attn=case == "bias-and-zero-keys",
    ).eval()
    with torch.no_grad():
        mha.in_proj_weight.mul_(3.0)
    x = torch.randn(b, n, e)
    kwargs: dict[str, Any] = {}
    if case == "causal-and-padding":
        kwargs["attn_mask"] = torch.ones(n, n, dtype=torch.bool).triu(1)
        kwargs["key_padding_mask"] = torch.arange(n)[None, :] >= torch.tensor([[7], [5], [3]])
    if case == "per-head-float":
        kwargs["attn_mask"] = torch.randn(b * h, n, n)
    with AttentionMonitor(mha, all_rows=True) as mon, torch.no_grad():
        _, weights = mha(x, x, x, need_weights=True, average_attn_weights=False, **kwargs)
    heads = mon.report().records[0].last.heads
    assert heads is not None
    # brute force: the logits from the module's weights, masked as the module masks them
    wq, wk, _ = mha.in_proj_weight.chunk(3)
    bq, bk, _ = mha.in_proj_bias.chunk(3)
    d = e // h
    q = (x @ wq.T + bq).view(b, n, h, d).transpose(1, 2)
    k = (x @ wk.T + bk).view(b, n, h, d).transpose(1, 2)
    if case == "bias-and-zero-keys":
        k = torch.cat(
            [k, mha.bias_k.view(1, h, 1, d).expand(b, h, 1, d), torch.zeros(b, h, 1, d)], 2
        )
    s = q @ k.transpose(-2, -1) / math.sqrt(d)  # (b, h, n, keys)
    if case == "causal-and-padding":
        masked = kwargs["attn_mask"][None, None] | kwargs["key_padding_mask"][:, None, None, :]
        s = s.masked_fill(masked, -math.inf)
    if case == "per-head-float":
        s = s + kwargs["attn_mask"].view(b, h, n, n)
    p = torch.softmax(s, -1)
    torch.testing.assert_close(p, weights, atol=1e-5, rtol=1e-4)  # the rebuilt logits are right
    live = torch.isfinite(s)
    padding = kwargs.get("key_padding_mask", torch.zeros(b, n, dtype=torch.bool))
    real = ~padding[:, None, :, None]  # padding queries are left out of the statistics
    max_logit = s.masked_fill(~(live & real), -math.inf).amax((0, 2, 3))
    ent = -(p * p.clamp_min(1e-30).log()).sum(-1) / live.sum(-1).clamp_min(2).log()  # (b, h, n)
    rows = (live.sum(-1) >= 2) & real[..., 0]
    entropy = (ent * rows).sum((0, 2)) / rows.sum((0, 2))
    assert heads["max_logit"] == pytest.approx(max_logit.tolist(), rel=1e-5)
    assert heads["entropy"] == pytest.approx(entropy.tolist(), rel=1e-4, abs=1e-6)


def test_a_failing_statistic_leaves_no_empty_site(monkeypatch: pytest.MonkeyPatch) -> None:
    """A monitor bug in one statistic is a monitor error in the report, never a site without
    a call (which the report's text could not print)."""
    from attnscale._monitor import adapters

    def broken(*args: Any, **kwargs: Any) -> HeadStats:
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr(adapters, "rows_of_qk", broken)
    q = k = v = torch.randn(1, 2, 5, 4)
    with AttentionMonitor(all_rows=True) as mon:
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
    report = mon.report()
    assert report.records == []
    assert "broken on purpose" in " ".join(str(report).split())  # wrapped at 88 columns


def test_a_failing_reduction_per_head_is_reported_at_its_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The every-row statistics are reduced per head at the flush, for all calls together: a
    failure there is a monitor error at each call's site, and the call keeps its sampled
    statistics, without per-head ones."""
    from attnscale._monitor import every_row

    def broken(*args: Any, **kwargs: Any) -> HeadStats:
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr(every_row._Rows, "per_head", broken)
    q = k = v = torch.randn(1, 2, 5, 4)
    with AttentionMonitor(all_rows=True) as mon:
        for _ in range(2):
            torch.nn.functional.scaled_dot_product_attention(q, k, v)
    report = mon.report()
    (record,) = report.records
    assert [s.heads for s in record.series] == [None, None]
    assert record.series[0].entropy is not None
    assert "broken on purpose" in " ".join(str(report).split())


@pytest.mark.filterwarnings("ignore:.*flex_attention called without torch.compile")
def test_all_rows_on_flex_attention_match_brute_force() -> None:
    """Eager FlexAttention with a soft-cap score_mod and a causal block mask: per-head max logit
    and entropy over every row, against the logits written out by hand."""
    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    b, h, n, d = 2, 3, 80, 8  # more rows than one block of 64
    torch.manual_seed(0)
    q, k, v = (3 * torch.randn(b, h, n, d) for _ in range(3))

    def soft_cap(score: torch.Tensor, b: Any, h: Any, i: Any, j: Any) -> torch.Tensor:
        return 20 * torch.tanh(score / 20)

    causal = flex.create_block_mask(lambda b, h, i, j: i >= j, None, None, n, n, device="cpu")
    with AttentionMonitor(all_rows=True) as mon:
        flex.flex_attention(q, k, v, score_mod=soft_cap, block_mask=causal)
    heads = mon.report().records[0].last.heads
    assert heads is not None
    s = 20 * torch.tanh(q @ k.transpose(-2, -1) / math.sqrt(d) / 20)
    s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
    p = torch.softmax(s, -1)
    keys = torch.arange(1, n + 1).float()  # query i sees i + 1 keys
    ent = -(p * p.clamp_min(1e-30).log()).sum(-1)[..., 1:] / keys[1:].log()  # rows with >= 2
    assert heads["max_logit"] == pytest.approx(s.amax((0, 2, 3)).tolist(), rel=1e-5)
    assert heads["entropy"] == pytest.approx(ent.mean((0, 2)).tolist(), rel=1e-4)


def test_all_rows_leaves_learned_sink_columns_out_of_the_keys() -> None:
    """GPT-OSS-style attention: a learned logit per head is joined to the scores before the
    softmax. The per-head statistics are over the keys (the column is not a q·k product), and
    the product's own shape gives max |q·k| (it crashed on the longer rows)."""
    heads, length, d = 2, 12, 8

    class WithSink(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.sink = nn.Parameter(torch.tensor([50.0, -3.0]))

        def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
            scores = q @ k.transpose(-2, -1) / math.sqrt(d)
            column = self.sink.view(1, heads, 1, 1).expand(1, heads, length, 1)
            return torch.softmax(torch.cat([column, scores], dim=-1), dim=-1)

    q, k = _qk(heads=heads, kv_heads=heads, length=length, keys=length, d=d)
    q, k = q[:1], k[:1]
    module = WithSink()
    with torch.no_grad(), AttentionMonitor(module, all_rows=True) as monitor:
        module(q, k)
    report = monitor.report()
    assert not report.codes("info") & {"monitor-error"}, str(report)
    got = report.records[0].last.heads
    ref = _brute(q, k, d**-0.5, torch.ones(1, dtype=torch.bool))
    assert got["max_logit"] == pytest.approx(ref["max_logit"].tolist(), rel=1e-5)
    assert got["entropy"] == pytest.approx(ref["entropy"].tolist(), rel=1e-5)
    assert got["max_abs_qk"] == pytest.approx(ref["max_abs_qk"].tolist(), rel=1e-5)


def test_sampled_statistics_give_each_heads_entropy_and_first_key_weight() -> None:
    from attnscale._monitor.stats import logit_stats

    gen = torch.Generator().manual_seed(5)
    x = 3 * torch.randn(2, 3, 6, 9, generator=gen)
    x[:, 1, :, 0] += 20  # head 1: a sink on key 0
    out = logit_stats(x, mask_value=-1e4, saturation=0.99)
    p = torch.softmax(x.double(), -1)
    ent = torch.special.entr(p).sum(-1) / math.log(9)
    assert out["head_normalized_entropy"] == pytest.approx(
        ent.mean(dim=(0, 2)).tolist(), rel=1e-5, abs=1e-6
    )
    assert out["head_first_key_weight"] == pytest.approx(
        p[..., 0].mean(dim=(0, 2)).tolist(), rel=1e-5
    )
    assert out["head_first_key_weight"][1] > 0.99


def _pooling_cases() -> list[tuple[str, Any]]:
    """Every-row calls of each path that takes buffers from a pool: hand-written causal
    attention (from the model's weights, its mask read from the logits), the same with a key
    padding mask, and q·k for SDPA (causal; and a float mask), in two sizes."""
    from functools import partial

    from attnscale import head_stats_of_logits

    cases: list[tuple[str, Any]] = []
    gen = torch.Generator().manual_seed(3)
    for b, h, n in ((2, 3, 40), (1, 2, 24)):  # the second smaller: buffers reused, cut
        q, k = (torch.randn(b, h, n, 8, generator=gen) * 3 for _ in range(2))
        qk = q @ k.transpose(-2, -1)
        visible = torch.ones(n, n, dtype=torch.bool).tril()
        logits = torch.where(visible, qk / 8**0.5, torch.finfo(torch.float32).min)
        padded = torch.zeros(b, 1, 1, n, dtype=torch.bool)
        padded[0, ..., -3:] = True
        masked = ~visible | padded
        bias = torch.randn(n, n, generator=gen).masked_fill(~visible, -math.inf)
        padded_logits = logits.masked_fill(masked, -1e9)
        size = f"{b}x{h}x{n}"
        cases += [
            (
                f"weights {size}",
                partial(
                    head_stats_of_logits,
                    logits,
                    masked=logits <= -1e4,
                    raw=qk,
                    probs=logits.softmax(-1),
                ),
            ),
            (
                f"padding {size}",
                partial(
                    head_stats_of_logits,
                    padded_logits,
                    masked=masked,
                    raw=qk,
                    probs=padded_logits.softmax(-1),
                ),
            ),
            (f"sdpa causal {size}", partial(head_stats, q, k, is_causal=True)),
            (f"sdpa bias {size}", partial(head_stats, q, k, attn_mask=bias)),
        ]
    return cases


def test_pooled_buffers_change_no_statistic() -> None:
    """Inside a monitor the every-row passes take their temporaries from buffers kept for its
    life (``scratch.pooled``), reused by calls of other shapes: the statistics are the same
    to the bit as with fresh tensors."""
    from attnscale._monitor.scratch import Pool, pooled

    cases = _pooling_cases()
    fresh = [run().to_dict() for _, run in cases]
    pool = Pool()
    for _ in range(2):  # the second round: every buffer already there, holding old values
        with pooled(pool):
            again = [run().to_dict() for _, run in cases]
        for (name, _), a, b in zip(cases, fresh, again, strict=True):
            assert a == b, name


def test_calls_reduced_per_head_together_match_each_alone() -> None:
    """The monitor reduces the every-row statistics of all calls alike at once (their heads
    joined); each call's statistics are those it has alone, and calls of another shape are
    reduced apart."""
    from attnscale._monitor.every_row import per_head_of, rows_of_logits, rows_of_qk

    gen = torch.Generator().manual_seed(5)
    calls = []
    for n in (32, 32, 20, 32):
        q, k = (torch.randn(2, 3, n, 8, generator=gen) * 2 for _ in range(2))
        calls.append(rows_of_qk(q, k, is_causal=True))
    logits = torch.randn(2, 3, 32, 32, generator=gen) * 4
    calls.append(rows_of_logits(logits, probs=logits.softmax(-1)))
    alone = [c.per_head().to_dict() for c in calls]
    together = [h.to_dict() for h in per_head_of(calls)]

    def numbers(values: list[float | None]) -> list[float]:
        return [math.nan if v is None else v for v in values]

    for a, b in zip(alone, together, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            expected = pytest.approx(numbers(a[key]), rel=1e-12, abs=1e-15, nan_ok=True)
            assert numbers(b[key]) == expected, key
