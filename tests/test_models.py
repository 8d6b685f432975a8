"""make_model and the attention modules: their arguments, and the global random state."""

from __future__ import annotations

import pytest
import torch
from bad_input import (
    FUZZ,
    TINY_TRAIN,
    attempt,
    finite,
    junk,
    seeds,
    small_sizes,
    strategy_junk,
)
from hypothesis import given
from hypothesis import strategies as st

import attnscale as asc


def test_string_dtype_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="dtype"):
        asc.sample_scores(4, 3, dtype="float32")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dtype"):
        asc.sample_scores(4, 3, dtype=torch.int32)
    with pytest.raises(TypeError, match="dtype"):
        asc.MultiHeadAttention(8, 2, dtype="float32")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dtype"):
        asc.SimpleAttentionModel(8, 4, dtype="float32")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dtype"):
        asc.AttentionBlock(8, 2, dtype="float32")  # type: ignore[arg-type]


@pytest.mark.parametrize("device", ["meta", torch.device("meta"), "nope", 3.5])
def test_device_that_cannot_hold_data(device: object) -> None:
    with pytest.raises(ValueError, match="device"):
        asc.make_model(d_model=8, d_k=4, device=device)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="device"):
        asc.MultiHeadAttention(8, 2, device=device)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="device"):
        asc.SimpleAttentionModel(8, 4, device=device)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="device"):
        asc.AttentionBlock(8, 2, device=device)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="device"):
        asc.train("mean", device=device, **TINY_TRAIN)  # type: ignore[arg-type]


def test_model_and_training_leave_the_global_rng_alone() -> None:
    torch.manual_seed(321)
    before = torch.get_rng_state()
    asc.make_model("simple", d_model=8, d_k=4, seed=2**64 - 1)
    asc.make_model("block", d_model=8, num_heads=2, seed=3, strategy="folded_init")
    asc.train("retrieval", strategies=["cosine", "none"], model="block", num_heads=2, **TINY_TRAIN)
    asc.sample_scores(4, 10, seed=1)
    asc.make_task("retrieval", 2, 3, 4, seed=1)
    assert torch.equal(torch.get_rng_state(), before)


def test_failed_calls_leave_the_global_rng_alone() -> None:
    before = torch.get_rng_state()
    with pytest.raises(ValueError, match="strategy"):
        asc.make_model(d_model=8, d_k=4, strategy="nope")
    with pytest.raises(ValueError, match="strategy"):
        asc.train("mean", strategies=["none", "nope"], **TINY_TRAIN)
    assert torch.equal(torch.get_rng_state(), before)


@FUZZ
@given(
    model=st.one_of(st.sampled_from(asc.MODELS), junk),
    d_model=st.one_of(st.sampled_from([4, 8, 12]), junk),
    d_k=small_sizes,
    num_heads=st.one_of(st.sampled_from([1, 2, 4]), small_sizes),
    strategy=strategy_junk,
    seed=seeds,
    device=st.sampled_from([None, "cpu", torch.device("cpu"), "meta", "cuda:7", "nope", 3]),
)
def test_fuzz_make_model(model, d_model, d_k, num_heads, strategy, seed, device) -> None:
    before = torch.get_rng_state()
    ok, built = attempt(
        asc.make_model,
        model,
        d_model=d_model,
        d_k=d_k,
        num_heads=num_heads,
        strategy=strategy,
        seed=seed,
        device=device,
    )
    assert torch.equal(torch.get_rng_state(), before)
    if ok:
        assert finite(built)
        out = built(torch.randn(2, 3, int(d_model)), need_weights=True)
        assert finite(tuple(out))
