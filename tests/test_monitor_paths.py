"""Attention written in the ways real code writes it: each is seen, with its scale."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from attnscale import AttentionMonitor, MonitorReport

B, H, N, D = 2, 4, 16, 32
SCALE = D**-0.5


def _qkv(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, H, N, D, generator=g) for _ in range(3))  # type: ignore[return-value]


def _report(fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object]) -> MonitorReport:
    q, k, v = _qkv()
    with AttentionMonitor() as mon:
        fn(q, k, v)
    return mon.report()


def _exp_minus_logsumexp(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> object:
    s = q @ k.transpose(-2, -1) * SCALE
    return torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True)) @ v


def _exp_by_hand(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> object:
    """Flash-style reference code: exp(s - rowmax), weighted values, then the row sum."""
    s = q @ k.transpose(-2, -1) * SCALE
    e = torch.exp(s - s.amax(-1, keepdim=True))
    return (e @ v) / e.sum(-1, keepdim=True)


def _log_softmax(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> object:
    return F.log_softmax(q @ k.transpose(-2, -1) * SCALE, dim=-1).exp() @ v


def _ellipsis_einsum(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> object:
    s = torch.einsum("...id,...jd->...ij", q, k) * SCALE
    return torch.einsum("...ij,...jd->...id", s.softmax(-1), v)


def _per_head_multiplier(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> object:
    scale = torch.full((1, H, 1, 1), SCALE)  # one multiplier per head, equal here
    return torch.softmax((q @ k.transpose(-2, -1)) * scale, dim=-1) @ v


def _sdpa_after_a_per_head_q_factor(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> object:
    """This library's learnable temperature on the fused path: q times (1, H, 1, 1), scale 1."""
    return F.scaled_dot_product_attention(q * torch.full((1, H, 1, 1), SCALE), k, v, scale=1.0)


def _rope(x: torch.Tensor) -> torch.Tensor:
    """Rotary embedding as Llama writes it: x * cos + rotate_half(x) * sin."""
    inv = 1.0 / (10000 ** (torch.arange(0, D, 2).float() / D))
    angles = torch.arange(N).float()[:, None] * inv[None, :]  # (N, D/2)
    emb = torch.cat([angles, angles], dim=-1)  # (N, D)
    half = torch.cat([-x[..., D // 2 :], x[..., : D // 2]], dim=-1)
    return x * emb.cos() + half * emb.sin()


def _scale_before_rope(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> object:
    q = _rope(q * SCALE)
    return torch.softmax(q @ _rope(k).transpose(-2, -1), dim=-1) @ v


def _factor_first(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> object:
    return torch.softmax(SCALE * q @ k.transpose(-2, -1), dim=-1) @ v


def _scaled_landmarks(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> object:
    """Nyströmformer-style: q scaled, then averaged over groups of 4 positions."""
    q_land = (q * SCALE).reshape(B, H, N // 4, 4, D).mean(-2)  # (B, H, N/4, D)
    return torch.softmax(q_land @ k.transpose(-2, -1), dim=-1) @ v


def _buffer_filled_by_copy(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> object:
    """Sliding-window style: scores written into a -inf buffer, then the softmax."""
    s = q @ k.transpose(-2, -1) * SCALE
    buf = torch.full_like(s, -math.inf)
    buf[..., : N // 2, : N // 2].copy_(s[..., : N // 2, : N // 2])
    buf[..., N // 2 :, :] = s[..., N // 2 :, :]
    return torch.softmax(buf, dim=-1) @ v


def _multi_head_attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> object:
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(H * D, H)
    x = q.permute(2, 0, 1, 3).reshape(N, B, H * D)  # (L, B, E)
    return F.multi_head_attention_forward(
        x,
        x,
        x,
        H * D,
        H,
        mha.in_proj_weight,
        mha.in_proj_bias,
        None,
        None,
        False,
        0.0,
        mha.out_proj.weight,
        mha.out_proj.bias,
        need_weights=False,
    )


@pytest.mark.parametrize(
    "fn",
    [
        _exp_minus_logsumexp,
        _exp_by_hand,
        _log_softmax,
        _ellipsis_einsum,
        _per_head_multiplier,
        _factor_first,
        _sdpa_after_a_per_head_q_factor,
        _scale_before_rope,
        _scaled_landmarks,
        _buffer_filled_by_copy,
        _multi_head_attention_forward,
    ],
)
def test_every_spelling_is_seen_with_its_scale(fn: Callable[..., object]) -> None:
    report = _report(fn)
    (record,) = report.records
    stats = record.last
    assert stats.scale == pytest.approx(SCALE, rel=1e-6), str(report)
    assert stats.head_dim == D
    assert report.codes("warning") == set(), str(report)


def test_a_buffer_keeps_its_masked_positions_out_of_the_statistics() -> None:
    stats = _report(_buffer_filled_by_copy).records[0].last
    assert stats.masked_fraction == pytest.approx(0.25)  # one quarter of the buffer never written
    assert stats.logit_std < 2.0


def test_unequal_per_head_multipliers_are_each_read() -> None:
    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> object:
        scale = torch.tensor([1.0, 1.0, 1.0, 8.0]).view(1, H, 1, 1) * SCALE  # head 3: 8x
        return torch.softmax((q @ k.transpose(-2, -1)) * scale, dim=-1) @ v

    report = _report(fn)
    stats = report.records[0].last
    assert stats.scale_per_head == pytest.approx((SCALE, SCALE, SCALE, 8 * SCALE))
    (finding,) = [f for f in report.findings if f.code == "scale-mismatch"]
    assert "head 3" in finding.message


def test_an_attention_sink_column_is_reported_as_such() -> None:
    """gpt-oss style: a learned sink logit per head joins the keys, then is dropped."""
    sink = torch.full((1, H, 1, 1), 2.0)

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> object:
        s = q @ k.transpose(-2, -1) * SCALE
        s = torch.cat([s, sink.expand(B, H, N, 1)], dim=-1)
        return torch.softmax(s, dim=-1)[..., :-1] @ v

    report = _report(fn)
    stats = report.records[0].last
    assert stats.scale == pytest.approx(SCALE)
    q, k, _ = _qkv()
    s = torch.cat([q @ k.transpose(-2, -1) * SCALE, sink.expand(B, H, N, 1)], dim=-1)
    share = torch.softmax(s, dim=-1)[..., -1].mean()
    assert stats.sink_share == pytest.approx(float(share), rel=1e-4)
    assert stats.masked_fraction == 0.0
    assert report.codes("warning") == set(), str(report)


def _normalised(scale: float, norm: str) -> MonitorReport:
    q, k, v = _qkv()
    if norm == "rms":
        q, k = F.rms_norm(q, (D,)), F.rms_norm(k, (D,))
    elif norm == "l2":
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    with AttentionMonitor() as mon:
        F.scaled_dot_product_attention(q, k, v, scale=scale)
    return mon.report()


def test_qk_normalised_with_scale_one_is_a_design() -> None:
    """Gemma 3n: RMS-normalised q and k, no 1/sqrt(d): the logit bound is checked instead."""
    report = _normalised(1.0, "rms")
    stats = report.records[0].last
    assert stats.qk_norm_cv is not None and stats.qk_norm_cv < 1e-4
    assert stats.logit_bound == pytest.approx(D, rel=1e-4)  # 1 x sqrt(D) x sqrt(D)
    (finding,) = [f for f in report.findings if f.code == "scale-mismatch"]
    assert finding.severity == "info" and "normalised per head" in finding.message
    # what the design does at initialisation (random directions, logit spread sqrt(D)) is
    # reported for what it is: large logits, not a wrong scale
    assert report.codes("warning") <= {"large-logits", "entropy-collapse"}


def test_a_logit_bound_too_tight_to_concentrate_is_a_warning() -> None:
    """Cosine attention with temperature 1: logits within ±1 cannot single out a key."""
    report = _normalised(1.0, "l2")
    assert report.records[0].last.logit_bound == pytest.approx(1.0, rel=1e-4)
    (finding,) = [f for f in report.findings if f.code == "scale-mismatch"]
    assert finding.severity == "warning" and "too tight" in finding.message


def test_unnormalised_q_and_k_are_not_read_as_normalised() -> None:
    report = _normalised(1.0, "none")  # no scale at all, on Gaussian q and k
    stats = report.records[0].last
    assert stats.qk_norm_cv is not None and stats.qk_norm_cv > 0.05
    (finding,) = [f for f in report.findings if f.code == "scale-mismatch"]
    assert finding.severity in ("warning", "error") and "no scale at all" in finding.message


def test_a_scale_before_rope_then_sdpas_default_is_double_scaling() -> None:
    """q * d^-1/2, then RoPE, then SDPA's own 1/sqrt(d): scaled twice."""
    q, k, v = _qkv()
    with AttentionMonitor() as mon:
        F.scaled_dot_product_attention(_rope(q * SCALE), _rope(k), v)
    report = mon.report()
    assert report.records[0].last.scale == pytest.approx(SCALE**2)
    (finding,) = [f for f in report.findings if f.code == "scale-mismatch"]
    assert "double scaling" in finding.message


def test_a_classifier_with_as_many_classes_as_positions_is_not_attention() -> None:
    """Single-head attention (B, N, N), then a classifier over N classes: logits of the same
    shape, but not a multiple of q·kᵀ, so not a second attention site."""
    torch.manual_seed(0)
    qkv, head = nn.Linear(D, 3 * D), nn.Linear(D, N)

    def model(x: torch.Tensor) -> torch.Tensor:
        q, k, v = qkv(x).chunk(3, dim=-1)
        s = torch.bmm(q, k.transpose(1, 2)).reshape(B, N, N)  # reshape: not followed
        h = torch.softmax(s * SCALE, dim=-1) @ v
        return torch.softmax(head(h), dim=-1)  # (B, N, N) class probabilities

    with AttentionMonitor() as mon:
        model(torch.randn(B, N, D))
    report = mon.report()
    assert len(report.records) == 1 and report.records[0].last.scale == pytest.approx(SCALE)


@pytest.mark.parametrize("factor", [D**-0.25, 0.3])
def test_a_factor_on_q_in_the_code_is_not_read_as_a_folded_initialisation(factor: float) -> None:
    """T5 folds the scale into W_q's initialisation; a factor multiplied at run time is code,
    and a wrong one is a bug whatever the ratio of the q and k spreads it leaves."""
    q, k, v = _qkv()
    with AttentionMonitor() as mon:
        torch.softmax((q * factor) @ k.transpose(-2, -1), dim=-1) @ v
    report = mon.report()
    (finding,) = [f for f in report.findings if f.code == "scale-mismatch"]
    assert finding.severity in ("warning", "error"), str(report)
    assert "folded" not in finding.message


def test_a_contrastive_head_is_not_attention() -> None:
    """CLIP-style zero-shot head: normalised image and text embeddings, their similarity
    times a learned logit scale, a softmax over the texts. It compares samples, not positions."""
    torch.manual_seed(0)
    logit_scale = nn.Parameter(torch.tensor(math.log(100.0)))

    class Head(nn.Module):
        def forward(self, image: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
            image = F.normalize(image, dim=-1)
            text = F.normalize(text, dim=-1)
            return torch.softmax(logit_scale.exp() * image @ text.T, dim=-1)

    head = Head()
    with AttentionMonitor(head) as mon:
        head(torch.randn(B * H, D), torch.randn(B * H, D))  # as many texts as images
    report = mon.report()
    assert report.records == []
    assert report.codes() == {"no-attention"}


def test_a_failure_while_following_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    from attnscale._monitor import lineage

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(lineage.Lineages, "follow", broken)
    q, k, v = _qkv()
    ref = _factor_first(q, k, v)
    with AttentionMonitor() as mon:
        out = _factor_first(q, k, v)
    assert torch.equal(ref, out)  # type: ignore[arg-type]
    (finding,) = [f for f in mon.report().findings if f.code == "monitor-error"]
    assert "planted" in finding.message


@pytest.mark.parametrize("path", ["sdpa", "hand-written", "multihead_attention"])
def test_long_calls_sample_fewer_rows_within_the_logit_budget(path: str) -> None:
    """Many heads times long keys: the rows shrink so the sampled logits stay within
    max_sampled_logits (never below 8 rows), on every path, backward included."""
    from attnscale._monitor.capture import MIN_ROWS

    b, h, n, d = 3, 8, 512, 16
    g = torch.Generator().manual_seed(0)
    x = torch.randn(b, n, h * d, generator=g, requires_grad=True)
    q = k = v = x.view(b, n, h, d).transpose(1, 2)
    mha = nn.MultiheadAttention(h * d, h, batch_first=True)
    budget = 2 * h * n * 20  # 20 rows of 2 sampled batch elements
    with AttentionMonitor(
        mha if path == "multihead_attention" else None, max_sampled_logits=budget
    ) as mon:
        if path == "multihead_attention":
            out = mha(x, x, x, need_weights=False)[0]
        elif path == "sdpa":
            out = F.scaled_dot_product_attention(q, k, v)
        else:
            out = torch.softmax(q @ k.transpose(-2, -1) * d**-0.5, dim=-1) @ v
        out.square().mean().backward()
    rep = mon.report()
    stats = rep.records[0].last
    rows = stats.sampled_rows // (2 * h)
    assert MIN_ROWS <= rows <= 20 and 2 * h * rows * n <= budget
    assert stats.logit_grad_norm is not None  # the gradient's rows match the logits'
    assert not rep.codes("info") & {"monitor-error"}, str(rep)
    with AttentionMonitor(max_sampled_logits=1) as mon, torch.no_grad():
        F.scaled_dot_product_attention(q, k, v)
    assert mon.report().records[0].last.sampled_rows == 2 * h * MIN_ROWS


class _Cross(nn.Module):
    """Cross-attention, 6 queries over 9 keys of head size 8, on one of the monitor's paths."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        extra = {"add_bias_kv": True, "add_zero_attn": True} if path == "mha+bias" else {}
        self.mha = nn.MultiheadAttention(32, 4, batch_first=True, **extra)

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        if self.path.startswith("mha"):
            return self.mha(x, memory, memory, need_weights=False)[0]
        q, k, v = (
            t.view(t.shape[0], t.shape[1], 4, 8).transpose(1, 2) for t in (x, memory, memory)
        )
        if self.path == "sdpa":
            return F.scaled_dot_product_attention(q, k, v)
        if self.path == "flex":
            from torch.nn.attention.flex_attention import flex_attention

            return flex_attention(q, k, v)
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1) @ v


@pytest.mark.filterwarnings("ignore:.*flex_attention called without torch.compile")
@pytest.mark.parametrize(
    ("path", "keys"), [("softmax", 9), ("sdpa", 9), ("flex", 9), ("mha", 9), ("mha+bias", 11)]
)
def test_shape_is_the_score_matrix_on_every_path(path: str, keys: int) -> None:
    # (batch, heads, queries, keys) everywhere: SDPA and FlexAttention gave q's shape (the
    # head size last), nn.MultiheadAttention (batch, heads, queries, head size)
    torch.manual_seed(0)
    model = _Cross(path).eval()
    with torch.no_grad(), AttentionMonitor(model) as mon:
        model(torch.randn(2, 6, 32), torch.randn(2, 9, 32))
    (record,) = mon.report().records
    assert record.last.path.startswith(path.split("+")[0].replace("mha", "multihead")), record
    assert record.last.shape == (2, 4, 6, keys)
    assert record.last.keys == keys


def test_a_lineage_is_forgotten_with_its_tensor() -> None:
    """The map of lineages holds its tensors weakly: a freed tensor's entry goes with it (a
    kept one would keep a layer's scores alive), and a new tensor at the same address does not
    inherit it."""
    from attnscale._monitor.lineage import Lineage, TensorMap

    lineages, kept = TensorMap(), torch.ones(3)
    t = torch.ones(4)
    lineages[t] = Lineage(None, 2.0)
    lineages[kept] = Lineage(None, 3.0)
    assert lineages.get(t).factor == 2.0
    del t
    assert len(lineages._data) == 1
    assert lineages.get(torch.ones(4)) is None and lineages.get(5) is None
    assert lineages.get(kept).factor == 3.0


def test_replaced_copies_a_lineage_and_names_an_unknown_field() -> None:
    from attnscale._monitor.lineage import Lineage, replaced

    lin = Lineage(None, 2.0, learned=True)
    new = replaced(lin, factor=4.0)
    assert (new.factor, new.learned, lin.factor) == (4.0, True, 2.0)
    assert new == Lineage(None, 4.0, learned=True)
    with pytest.raises(TypeError, match="facter"):
        replaced(lin, facter=1.0)


def test_the_weights_times_v_starts_no_lineage() -> None:
    """The product of a softmax's weights with v is the attention's output, not new scores:
    no lineage starts there, and the one attention call is recorded once."""
    q, k, v = (
        torch.randn(2, 4, 16, 8, generator=torch.Generator().manual_seed(i)) for i in range(3)
    )
    with AttentionMonitor() as mon:
        w = torch.softmax(q @ k.transpose(-2, -1) / 8**0.5, dim=-1)
        out = w @ v
        assert mon._capture.lineages.of(out) is None
        assert mon._capture.lineages.of(q @ k.transpose(-2, -1)) is not None
    rep = mon.report()
    assert len(rep.records) == 1 and rep.records[0].last.scale == pytest.approx(8**-0.5)
