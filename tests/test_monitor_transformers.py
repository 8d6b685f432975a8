"""The monitor on third-party model code: Hugging Face transformers, tiny configs, random weights.

Nothing is downloaded: every model is built from a small config
(``guide.zoo``). Healthy models must give no warning, every planted bug
its code at warning or worse, every case some records, and every output must
be bitwise identical with and without the monitor.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from attnscale import AttentionMonitor, MonitorReport
from guide import zoo

FAMILIES = ("gpt2", "bert", "llama", "gemma2", "t5", "vit")
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
AT_LEAST_WARNING = {"warning", "error"}


def _cases(families: tuple[str, ...] = FAMILIES) -> list[tuple[str, str]]:
    return [(f, impl) for f in families for impl in zoo.implementations(f)]


def _watch(
    family: str, impl: str, *, grad: bool = False, monitor_kw: Any = None, **build: Any
) -> MonitorReport:
    """Run one model with and without the monitor; check outputs match; return the report."""
    model, inputs = zoo.build(family, attn_implementation=impl, **build)

    def run() -> tuple[torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        with torch.set_grad_enabled(grad):
            result = model(**inputs)
            out = getattr(result, "logits", None)
            out = result.last_hidden_state if out is None else out
            if grad:
                out.float().square().mean().backward()
        grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        return out.detach(), grads

    ref, ref_grads = run()
    with AttentionMonitor(model, **(monitor_kw or {})) as mon:
        out, grads = run()
    assert torch.equal(ref.nan_to_num(), out.nan_to_num()), "output changed by the monitor"
    assert len(grads) == len(ref_grads)
    assert all(torch.equal(a, b) for a, b in zip(grads, ref_grads, strict=True))
    report = mon.report()
    assert report.records, f"nothing captured:\n{report}"
    return report


def _severities(report: MonitorReport, code: str) -> set[str]:
    return {f.severity for f in report.findings if f.code == code}


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize(("family", "impl"), _cases())
def test_healthy_models_have_no_warning(family: str, impl: str, dtype: str) -> None:
    report = _watch(family, impl, dtype=DTYPES[dtype])
    assert report.codes("warning") == set(), str(report)
    ratios = [r.last.scale_ratio for r in report.records]
    expected = zoo.expected_scale(family) * math.sqrt(zoo.head_dim(family))
    assert ratios == [pytest.approx(expected, rel=1e-6)] * len(ratios)


@pytest.mark.parametrize(("family", "impl"), _cases(("gpt2", "llama", "vit")))
def test_training_step_gradients_unchanged_and_recorded(family: str, impl: str) -> None:
    report = _watch(family, impl, grad=True)
    assert all(
        r.last.logit_grad_norm is not None and r.last.logit_grad_norm > 0 for r in report.records
    )


@pytest.mark.parametrize(("family", "impl"), _cases())
def test_scale_turned_off_is_a_warning(family: str, impl: str) -> None:
    report = _watch(family, impl, bug="no-scale")
    assert _severities(report, "scale-mismatch") & AT_LEAST_WARNING, str(report)
    assert "no scale at all" in str(report)


def test_gemma2_soft_cap_is_read_and_scale_taken_before_it() -> None:
    report = _watch("gemma2", "eager")
    assert {r.last.softcap for r in report.records} == {50.0}  # attn_logit_softcapping
    assert [r.last.scale for r in report.records] == [
        pytest.approx(zoo.expected_scale("gemma2"))
    ] * 2


def test_wrong_query_pre_attn_scalar() -> None:
    report = _watch("gemma2", "eager", bug="wrong-scalar")
    assert _severities(report, "scale-mismatch") == {"warning"}, str(report)
    d = zoo.head_dim("gemma2")
    assert f"divided by √{d * 7 // 8} instead of √{d}" in str(report)


@pytest.mark.parametrize(("family", "impl"), _cases())
def test_grown_qk_weights_give_large_logits(family: str, impl: str) -> None:
    report = _watch(family, impl, bug="qk-x16")
    assert report.codes("warning") & {"large-logits", "entropy-collapse"}, str(report)
    assert "scale-mismatch" not in report.codes("warning")


@pytest.mark.parametrize("family", FAMILIES)
def test_fp16_overflow(family: str) -> None:
    report = _watch(family, "eager", bug="fp16-overflow", dtype=torch.float16)
    assert _severities(report, "fp16-overflow-risk") == {"error"}, str(report)
    assert "masked-rows" not in report.codes("info")  # -inf from overflow is not a mask


@pytest.mark.parametrize("impl", zoo.implementations("gpt2"))
def test_short_causal_prompt_is_healthy(impl: str) -> None:
    report = _watch("gpt2", impl, seq_len=6)
    assert report.codes("warning") == set(), str(report)


@pytest.mark.parametrize("impl", zoo.implementations("t5"))
def test_t5_decoder_is_healthy(impl: str) -> None:
    report = _watch("t5", impl, seq_len=4)
    decoder = [r for r in report.records if r.where.startswith("decoder")]
    assert decoder
    assert report.codes("warning") == set(), str(report)
    assert _severities(report, "scale-mismatch") == {"info"}  # T5's folded scale, recognised


def test_gpt2_reorder_and_upcast_uses_baddbmm() -> None:
    overrides = {"reorder_and_upcast_attn": True}
    healthy = _watch("gpt2", "eager", config_overrides=overrides)
    assert healthy.codes("warning") == set(), str(healthy)
    assert {r.last.scale_source for r in healthy.records} == {"traced"}
    off = _watch("gpt2", "eager", config_overrides={**overrides, "scale_attn_weights": False})
    assert _severities(off, "scale-mismatch") & AT_LEAST_WARNING


def test_gpt2_inverse_layer_idx_is_named_and_can_be_declared() -> None:
    overrides = {"scale_attn_by_inverse_layer_idx": True}
    report = _watch("gpt2", "eager", config_overrides=overrides)
    found = [f for f in report.findings if f.code == "scale-mismatch"]
    assert [(f.where, f.step) for f in found] == [("transformer.h.1.attn", 0)]
    assert found[0].severity == "warning"
    assert "1/(layer index + 1) = 1/2" in found[0].message

    def declared(site: str, head_dim: int) -> float:
        layer = int(site.split(".")[2])
        return head_dim**-0.5 / (layer + 1)

    report = _watch(
        "gpt2", "eager", config_overrides=overrides, monitor_kw={"expected_scale": declared}
    )
    assert report.codes("warning") == set()


class _Bridge(torch.nn.Module):
    """A wrapper in the way of TransformerLens's ``TransformerBridge``: the wrapped model at a
    private path, each block's attention again at the public path its users know."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self._original_model = model
        self.blocks = torch.nn.ModuleList()
        for block in model.transformer.h:
            public = torch.nn.Module()
            public._original_component = block
            public.attn = block.attn
            self.blocks.append(public)

    def forward(self, **inputs: torch.Tensor) -> Any:
        return self._original_model(**inputs)


def test_a_module_registered_twice_is_named_by_its_public_path() -> None:
    model, inputs = zoo.build("gpt2", attn_implementation="eager")
    bridge = _Bridge(model)
    with torch.no_grad(), AttentionMonitor(bridge) as mon:
        bridge(**inputs)
    layers = len(model.transformer.h)
    assert [r.where for r in mon.report().records] == [f"blocks.{i}.attn" for i in range(layers)]
    # held at private paths only, a module keeps the first of them
    with torch.no_grad(), AttentionMonitor(torch.nn.ModuleDict({"_inner": model})) as mon:
        model(**inputs)
    assert [r.where for r in mon.report().records] == [
        f"_inner.transformer.h.{i}.attn" for i in range(layers)
    ]
