"""FlexAttention under torch.compile is read (issue 42, miss class 4).

transformers runs ``attn_implementation="flex_attention"`` through a compiled
``flex_attention``, and users write ``torch.compile(flex_attention)`` themselves; before,
the monitor recorded nothing there, so a missing scale went unreported. Inductor compiles
on this CPU in seconds for these tiny shapes; each test compiles at most a few graphs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import torch
from torch import nn

from attnscale import AttentionMonitor

flex = pytest.importorskip("torch.nn.attention.flex_attention")
transformers = pytest.importorskip("transformers")

# inductor's own code warns about a deprecated torch.jit API, with or without the monitor
TORCH_OWN = "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"
HEAD_DIM = 64


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    """Each test compiles afresh: flex_attention compiled for other shapes elsewhere in the
    run would reach dynamo's recompile limit, and it would then run eagerly."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _qkv(seed: int = 0, heads: int = 2, n: int = 16) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(1, heads, n, HEAD_DIM, generator=g) for _ in range(3)]


@pytest.mark.filterwarnings(TORCH_OWN)
@pytest.mark.parametrize(
    ("kwargs", "ratio", "codes"),
    [
        ({}, 1.0, set()),  # the default scale, 1/sqrt(E)
        ({"scale": 1.0}, math.sqrt(HEAD_DIM), {"scale-mismatch"}),  # the planted bug
        ({"scale": 0.5 / math.sqrt(HEAD_DIM)}, 0.5, {"scale-mismatch"}),
    ],
)
def test_a_users_compiled_flex_attention_is_read(
    kwargs: dict[str, float], ratio: float, codes: set[str]
) -> None:
    compiled = torch.compile(flex.flex_attention)
    q, k, v = _qkv()
    expected = compiled(q, k, v, **kwargs)
    with AttentionMonitor(all_rows=True) as monitor:
        out = compiled(q, k, v, **kwargs)
    report = monitor.report()
    assert torch.equal(out, expected)  # the kernel runs as without the monitor
    (record,) = report.records
    (s,) = record.series
    assert (record.kind, s.path) == ("flex_attention", "flex_attention:compiled")
    assert s.scale_ratio == pytest.approx(ratio, rel=1e-5)
    # every row's max logit per head, as QK-Clip reads it, against the scores in full
    scale = kwargs.get("scale", HEAD_DIM**-0.5)
    max_logit = (q @ k.transpose(-2, -1) * scale).amax(dim=(0, 2, 3))  # (heads,)
    assert s.heads is not None
    assert s.heads["max_logit"] == pytest.approx(max_logit.tolist(), rel=1e-4)
    assert codes <= report.codes("warning") | report.codes("error"), str(report)
    if not codes:
        assert not report.codes("error"), str(report)


class _Pair(nn.Module):
    """Two compiled flex calls in one forward, back to back: a scaled one and one
    whose score_mod multiplies the scores again (double scaling). Both are read where the
    model goes on after them, one site (the compiled code's lines are not seen)."""

    def __init__(self) -> None:
        super().__init__()
        self.flex = torch.compile(flex.flex_attention)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        a = self.flex(q, k, v)
        b = self.flex(q, k, v, score_mod=lambda s, b, h, i, j: s / math.sqrt(HEAD_DIM))
        return a + b


@pytest.mark.filterwarnings(TORCH_OWN)
def test_back_to_back_compiled_calls_are_each_read_at_their_module() -> None:
    model = _Pair()
    q, k, v = _qkv(1)
    for _ in range(2):  # the second time, the compiled code runs without tracing
        with AttentionMonitor(model) as monitor:
            model(q, k, v)
        records = monitor.report().records
        assert [r.where for r in records] == ["_Pair"]
        ratios = [s.scale_ratio for s in records[0].series]
        assert ratios == pytest.approx([1.0, 1 / math.sqrt(HEAD_DIM)], rel=1e-5)


@pytest.mark.filterwarnings(TORCH_OWN)
def test_two_calls_in_one_compiled_graph_are_both_read() -> None:
    """Both calls are kept by the same graph (an earlier chain of links kept only the first)."""

    @torch.compile(fullgraph=True)
    def stacked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return flex.flex_attention(flex.flex_attention(q, k, v, scale=1.0), k, v)

    q, k, v = _qkv(3)
    for _ in range(2):  # compiled on the first pass, run from dynamo's cache on the second
        with AttentionMonitor() as monitor:
            stacked(q, k, v)
        (record,) = monitor.report().records
        ratios = [s.scale_ratio for s in record.series]
        assert ratios == pytest.approx([math.sqrt(HEAD_DIM), 1.0], rel=1e-5)


@pytest.mark.filterwarnings(TORCH_OWN)
@pytest.mark.filterwarnings("ignore:.*flex_attention called without torch.compile")
def test_a_graph_run_in_python_is_read_once() -> None:
    """Eager flex_attention runs its operator in a graph compiled with dynamo's "eager"
    backend, as ``torch.compile(..., backend="eager")`` does: the mode sees the call at run
    time and the traced code keeps it too; it is one call, read eagerly. Mixed with inductor
    calls, each call is read once with its own scale."""
    q, k, v = _qkv(4)
    by_eager = torch.compile(flex.flex_attention, backend="eager")
    by_inductor = torch.compile(flex.flex_attention)
    with AttentionMonitor() as monitor:
        by_inductor(q, k, v, scale=1.0)
        flex.flex_attention(q, k, v)
        by_eager(q, k, v, scale=0.5 / math.sqrt(HEAD_DIM))
        by_inductor(q, k, v, scale=1.0)
    (record,) = monitor.report().records
    seen = sorted((s.path, round(s.scale_ratio, 4)) for s in record.series)
    assert seen == [
        ("flex_attention", 0.5),
        ("flex_attention", 1.0),
        ("flex_attention:compiled", 8.0),
        ("flex_attention:compiled", 8.0),
    ]


def _llama(scaling: float | None) -> tuple[nn.Module, torch.Tensor]:
    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=128,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=HEAD_DIM,
        max_position_embeddings=64,
        attn_implementation="flex_attention",
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():  # wide logits, so that a missing scale saturates the softmax
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(4.0)
            layer.self_attn.k_proj.weight.mul_(4.0)
            if scaling is not None:
                layer.self_attn.scaling = scaling
    ids = torch.randint(0, 64, (1, 16), generator=torch.Generator().manual_seed(2))
    return model, ids


@pytest.mark.filterwarnings(TORCH_OWN)
# transformers builds its block mask with a flag torch deprecates, with or without the monitor
@pytest.mark.filterwarnings("ignore:_compile flag on create_block_mask:DeprecationWarning")
@pytest.mark.parametrize(("scaling", "ratio"), [(None, 1.0), (1.0, math.sqrt(HEAD_DIM))])
def test_transformers_flex_attention_is_read(scaling: float | None, ratio: float) -> None:
    model, ids = _llama(scaling)
    with torch.no_grad():
        expected = model(ids).logits
        with AttentionMonitor(model) as monitor:
            out = model(ids).logits
    report = monitor.report()
    assert torch.equal(out, expected)
    sites = {r.where: r for r in report.records}
    assert set(sites) == {f"model.layers.{i}.self_attn" for i in range(2)}, str(report)
    for record in sites.values():
        (s,) = record.series
        assert (record.kind, s.path, s.head_dim) == (
            "flex_attention",
            "flex_attention:compiled",
            HEAD_DIM,
        )
        assert s.scale_ratio == pytest.approx(ratio, rel=1e-5)
    found = report.codes("warning") | report.codes("error")
    if scaling is None:
        assert "scale-mismatch" not in found, str(report)
    else:
        assert "scale-mismatch" in found, str(report)
