"""attnscale.testing: the check users put in their own test suites."""

from __future__ import annotations

import pytest
import torch

from attnscale.testing import assert_attention_healthy

transformers = pytest.importorskip("transformers")


def _gpt2(scaled: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2, n_embd=64, n_head=4, vocab_size=50, scale_attn_weights=scaled
    )
    return transformers.GPT2LMHeadModel(config).eval()


def test_a_healthy_model_passes_and_a_missing_scale_fails() -> None:
    ids = torch.randint(0, 50, (2, 16))
    report = assert_attention_healthy(_gpt2(scaled=True), {"input_ids": ids})
    assert len(report.records) == 2
    with pytest.raises(AssertionError, match="scale-mismatch"):
        assert_attention_healthy(_gpt2(scaled=False), ids)


def test_a_model_without_attention_fails() -> None:
    with pytest.raises(AssertionError, match="no-attention"):
        assert_attention_healthy(torch.nn.Linear(4, 4), torch.randn(2, 4))


def test_bad_arguments_name_themselves() -> None:
    with pytest.raises(ValueError, match="fail_on"):
        assert_attention_healthy(torch.nn.Linear(4, 4), torch.randn(2, 4), fail_on="fatal")
    with pytest.raises(TypeError, match="model"):
        assert_attention_healthy("gpt2", torch.randn(2, 4))  # type: ignore[arg-type]
