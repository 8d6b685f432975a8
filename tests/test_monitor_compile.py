"""torch.compile under the monitor runs as without it, and the report says what it missed."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnscale import AttentionMonitor

D, H, N, B = 64, 4, 10, 2


class Hand(nn.Module):
    """Hand-written attention, scaled by 1/sqrt(head_dim)."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).view(B, N, 3, H, D // H).permute(2, 0, 3, 1, 4)
        w = torch.softmax(q @ k.transpose(-2, -1) * (D // H) ** -0.5, dim=-1)
        return (w @ v).transpose(1, 2).reshape(B, N, D)


def _model(name: str) -> nn.Module:
    torch.manual_seed(0)
    if name == "encoder":
        return nn.TransformerEncoderLayer(D, H, dim_feedforward=128, dropout=0.0, batch_first=True)
    return Hand()


def _run(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad()
    out = model(x)
    out.square().sum().backward()
    return out.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]


# inductor's own code warns about a deprecated torch.jit API, with or without the monitor
TORCH_OWN = "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"


@pytest.mark.filterwarnings(TORCH_OWN)
@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("name", ["encoder", "hand"])
def test_a_compiled_model_runs_as_without_the_monitor(name: str, backend: str) -> None:
    torch._dynamo.reset()
    model = _model(name)
    compiled = torch.compile(model, backend=backend)
    x = torch.randn(B, N, D, generator=torch.Generator().manual_seed(1))
    with AttentionMonitor(model) as mon:  # the first call compiles inside the block
        out, grads = _run(compiled, x)
    ref_out, ref_grads = _run(compiled, x)
    assert torch.equal(out, ref_out)
    assert all(torch.equal(a, b) for a, b in zip(grads, ref_grads, strict=True))
    report = mon.report()
    if backend == "eager":
        # the eager backend runs the traced graph's torch calls, which the monitor sees, at
        # the compiled module's site (its submodules' hooks do not run inside the graph)
        with AttentionMonitor(model) as plain:
            model(x)
        assert [r.where for r in report.records] == [type(model).__name__]
        seen, expected = report.records[0].last, plain.report().records[0].last
        assert (seen.scale, seen.scale_source) == (expected.scale, expected.scale_source)
        assert seen.logit_std == pytest.approx(expected.logit_std, rel=1e-5)
        assert "compiled" not in report.codes("info")
        return
    (finding,) = [f for f in report.findings if f.code == "compiled"]
    assert finding.severity == "warning" and finding.where == type(model).__name__
    assert "1 call(s) ran compiled" in finding.message
    assert "_orig_mod" in finding.message


@pytest.mark.filterwarnings(TORCH_OWN)
def test_what_runs_uncompiled_is_still_measured() -> None:
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = nn.Sequential(Hand(), Hand())
    model[0] = torch.compile(model[0])  # the first layer compiled, the default backend
    x = torch.randn(B, N, D)
    with AttentionMonitor(model) as mon:
        model(x)
    report = mon.report()
    assert [r.where for r in report.records] == ["1"]  # the uncompiled layer
    assert [(f.code, f.where) for f in report.findings] == [("compiled", "0")]


def test_exit_leaves_no_global_hook_and_no_warning_filter() -> None:
    """Compiled code called after the block must not warn about the monitor's hooks."""
    import warnings

    from torch.nn.modules import module as module_mod

    filters = list(warnings.filters)
    assert not module_mod._has_any_global_hook()
    model = Hand()
    with AttentionMonitor(model):
        model(torch.randn(B, N, D))
    assert not module_mod._has_any_global_hook()
    assert warnings.filters == filters


@pytest.mark.filterwarnings(TORCH_OWN)
def test_compiled_flex_attention_is_read_and_its_kernel_runs_as_without_the_monitor() -> None:
    """Compiled, FlexAttention runs as a kernel; the compiled code keeps its arguments for the
    monitor, which reads them once it returns (tests/test_monitor_flex_compiled.py has more)."""
    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    compiled = torch.compile(flex.flex_attention)  # inductor, as transformers compiles it
    # three buffers: inductor before torch 2.12 refuses one buffer passed as q, k and v
    q, k, v = torch.randn(3, 1, 2, 8, 16).unbind(0)
    expected = compiled(q, k, v)
    with AttentionMonitor() as monitor:
        out = compiled(q, k, v)
    torch._dynamo.reset()
    report = monitor.report()
    assert torch.equal(out, expected)
    (record,) = report.records
    assert record.last.path == "flex_attention:compiled"
    assert record.last.scale_ratio == pytest.approx(1.0)
    assert "no-attention" not in report.codes()


def test_an_error_in_compiled_flex_attention_is_the_one_raised_without_the_monitor() -> None:
    """Dynamo gives up on flex_attention (it raises: no backward on CPU) and runs it eagerly,
    compiling the frames it calls on their own. The monitor's mode, compiled so, read
    ``query.dim()`` as False and raised another error; it is now never a frame of its own."""
    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    compiled = torch.compile(flex.flex_attention, backend="eager")
    q = torch.randn(1, 2, 8, 16, requires_grad=True)
    with pytest.raises(Exception) as without:
        compiled(q, q, q)
    torch._dynamo.reset()
    with pytest.raises(Exception) as within, AttentionMonitor():
        compiled(q, q, q)
    torch._dynamo.reset()
    assert type(within.value) is type(without.value)
    assert str(within.value) == str(without.value)
