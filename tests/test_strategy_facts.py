"""Each strategy's ``used_by`` entries, checked against the model code that others wrote.

A model in ``transformers`` is checked on the module itself (tiny config, random weights): the
normalisation's width, the initial scale, the initialisation. A model outside it (ViT-22B, the
μTransfer GPT-3) is checked against the paper its strategy cites. A new ``used_by`` entry fails
here until someone adds its check.
"""

from __future__ import annotations

import importlib
import math
import re
from types import ModuleType

import pytest
import torch

import attnscale as asc
from guide import zoo

transformers = pytest.importorskip("transformers")

HIDDEN, HEADS, HEAD_DIM = 64, 4, 16
LLM = {
    "vocab_size": 32,
    "hidden_size": HIDDEN,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": HEADS,
    "num_key_value_heads": HEADS,
    "head_dim": HEAD_DIM,
}


def _modeling(module: str) -> ModuleType:
    return importlib.import_module(f"transformers.models.{module}.modeling_{module}")


def _attention(module: str, config: str, attention: str, **kwargs: object) -> torch.nn.Module:
    cfg = getattr(transformers, config)(**{**LLM, **kwargs})
    return getattr(_modeling(module), attention)(cfg, layer_idx=0)


def _rms_per_head(attn: torch.nn.Module) -> None:
    """q_norm/k_norm normalise each head's HEAD_DIM features to RMS 1 at init, with no bias."""
    for norm in (attn.q_norm, attn.k_norm):
        assert tuple(norm.weight.shape) == (HEAD_DIM,)
        assert getattr(norm, "bias", None) is None
        x = 5.0 * torch.randn(3, HEADS, HEAD_DIM) + 2.0
        y = norm(x)
        assert torch.allclose(y.pow(2).mean(-1), torch.ones(3, HEADS), atol=1e-3)
        assert not torch.allclose(y.mean(-1), torch.zeros(3, HEADS), atol=1e-2)  # not centred


def _gemma3() -> None:
    _rms_per_head(_attention("gemma3", "Gemma3TextConfig", "Gemma3Attention"))


def _qwen3() -> None:
    _rms_per_head(_attention("qwen3", "Qwen3Config", "Qwen3Attention"))


def _persimmon() -> None:
    attn = _attention(
        "persimmon",
        "PersimmonConfig",
        "PersimmonAttention",
        qk_layernorm=True,
        head_dim=None,
        num_key_value_heads=None,
    )
    for norm in (attn.q_layernorm, attn.k_layernorm):
        assert isinstance(norm, torch.nn.LayerNorm)
        assert tuple(norm.normalized_shape) == (HIDDEN // HEADS,)  # per head, with a bias
        assert norm.bias is not None


def _swin_v2() -> None:
    swin = _modeling("swinv2")
    config = transformers.Swinv2Config(
        embed_dim=HIDDEN, num_heads=[HEADS], depths=[1], window_size=4
    )
    attn = swin.Swinv2SelfAttention(config, HIDDEN, HEADS, window_size=4)
    ours = asc.CosineScale(HEAD_DIM, HEADS)
    assert torch.allclose(attn.logit_scale.exp().flatten(), ours.effective_scale().detach())


def _inverse_sqrt(family: str) -> None:
    # zoo's scales are checked against the running models in test_monitor_transformers.py.
    assert zoo.expected_scale(family) == zoo.head_dim(family) ** -0.5


def _t5(module: str, config: str, model: str) -> None:
    cfg = getattr(transformers, config)(
        vocab_size=32, d_model=256, d_kv=64, d_ff=64, num_layers=1, num_heads=4
    )
    torch.manual_seed(0)
    net = getattr(_modeling(module), model)(cfg)
    attn = net.encoder.block[0].layer[0].SelfAttention
    assert float(attn.q.weight.detach().std()) == pytest.approx((256 * 64) ** -0.5, rel=0.05)
    assert float(attn.k.weight.detach().std()) == pytest.approx(256**-0.5, rel=0.05)
    ours = asc.MultiHeadAttention(256, 4, strategy="folded_init", bias=False)
    assert float(ours.q_proj.weight.detach().std()) == pytest.approx((256 * 64) ** -0.5, rel=0.05)


CHECKS = {
    ("inverse_sqrt", "BERT"): lambda: _inverse_sqrt("bert"),
    ("inverse_sqrt", "GPT-2"): lambda: _inverse_sqrt("gpt2"),
    ("inverse_sqrt", "Llama"): lambda: _inverse_sqrt("llama"),
    ("qk_layernorm", "Persimmon"): _persimmon,
    ("qk_rmsnorm", "Gemma 3"): _gemma3,
    ("qk_rmsnorm", "Qwen 3"): _qwen3,
    ("cosine", "Swin Transformer V2"): _swin_v2,
    ("folded_init", "T5"): lambda: _t5("t5", "T5Config", "T5Model"),
    ("folded_init", "mT5"): lambda: _t5("mt5", "MT5Config", "MT5Model"),
}
# Not in transformers: the paper in the strategy's citation describes the model.
FROM_PAPER = {
    ("qk_layernorm", "ViT-22B"): "2302.05442",
    ("inverse_d", "μTransfer GPT-3"): "2203.03466",
}
STRATEGIES = {name: type(asc.make_strategy(name, 4)) for name in asc.SCALING_STRATEGIES}


def test_every_used_by_entry_has_a_check() -> None:
    pairs = {(name, model) for name, cls in STRATEGIES.items() for model in cls.used_by}
    assert pairs == set(CHECKS) | set(FROM_PAPER)


@pytest.mark.parametrize("pair", sorted(CHECKS), ids="/".join)
def test_used_by_matches_the_model_code(pair: tuple[str, str]) -> None:
    CHECKS[pair]()


@pytest.mark.parametrize("pair", sorted(FROM_PAPER), ids="/".join)
def test_used_by_outside_transformers_cites_its_paper(pair: tuple[str, str]) -> None:
    assert f"arXiv:{FROM_PAPER[pair]}" in STRATEGIES[pair[0]].citation


def test_olmo2_normalises_the_full_width_so_it_is_listed_nowhere() -> None:
    attn = _attention("olmo2", "Olmo2Config", "Olmo2Attention")
    assert tuple(attn.q_norm.weight.shape) == (HEADS * HEAD_DIM,)  # all heads at once
    assert not any("OLMo" in m for cls in STRATEGIES.values() for m in cls.used_by)


@pytest.mark.parametrize("name", asc.SCALING_STRATEGIES)
def test_facts_are_filled_in(name: str) -> None:
    cls = STRATEGIES[name]
    assert re.fullmatch(r"\S+ / \S+", cls.cost), cls.cost
    assert cls.citation and all(re.fullmatch(r"arXiv:\d{4}\.\d{5}", c) for c in cls.citation)
    assert all(isinstance(m, str) and m for m in cls.used_by)


def test_constant_scale_flag_matches_the_logits() -> None:
    """constant_scale is True exactly where the logits are a fixed multiple of raw q . k."""
    torch.manual_seed(0)
    q, k = torch.randn(2, 2, 5, 8), 3.0 * torch.randn(2, 2, 5, 8)
    for name, cls in STRATEGIES.items():
        strat = asc.make_strategy(name, 8, 2)
        with torch.no_grad():  # move learnable parameters off their initial values
            for p in strat.parameters():
                p.add_(0.3 * torch.randn_like(p))
        qq, kk, alpha = strat.prepare(q, k)
        logits = torch.as_tensor(alpha) * (qq @ kk.transpose(-2, -1))
        ratio = logits / (q @ k.transpose(-2, -1))
        constant = bool(torch.allclose(ratio, ratio.flatten()[0].expand_as(ratio)))
        assert cls.constant_scale == constant, name
        if constant:
            assert float(ratio.flatten()[0]) == pytest.approx(float(strat.effective_scale()[0]))


def test_a_subclass_is_not_constant_scale_unless_it_says_so() -> None:
    class Doubled(asc.InverseSqrt):
        def prepare(self, query, key):
            return query, 2.0 * key.tanh(), 1.0

    class Renamed(asc.InverseSqrt):
        constant_scale = True

    assert asc.InverseSqrt.constant_scale and not Doubled.constant_scale
    assert Renamed.constant_scale
    assert math.isfinite(float(Doubled(4).effective_scale()[0]))
