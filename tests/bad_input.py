"""Shared by the bad-input tests in each module's test file: every case ends in a clear
ValueError/TypeError naming the argument (asserted with ``match=``), or in the right answer.

Hypothesis strategies of junk values, sizes, reals and tensors for the fuzz tests, and the
settings they run under."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import attnscale as asc

NAN, INF = float("nan"), float("inf")

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

TINY_TRAIN = {"epochs": 2, "num_samples": 8, "test_samples": 4, "d_model": 8, "d_k": 4}

TINY_TRAIN["batch_size"] = 4


def finite(value: object) -> bool:
    """True if every number in ``value`` (floats, tensors, tuples, module parameters) is finite."""
    if isinstance(value, torch.nn.Module):
        return all(finite(p) for p in value.parameters())
    if isinstance(value, torch.Tensor):
        return not value.is_floating_point() or bool(torch.isfinite(value).all())
    if isinstance(value, tuple | list):
        return all(finite(v) for v in value)
    if isinstance(value, float):
        return math.isfinite(value)
    return True


FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

_JUNK_SCALARS = [
    None,
    "x",
    "float32",
    NAN,
    INF,
    -INF,
    -1,
    0,
    -2.5,
    2.5,
    1e-300,
    1e300,
    10**400,
    -(10**400),
    2**64,
    True,
    np.int64(-3),
    np.float32(NAN),
    Fraction(1, 3),
    [],
    [1.0],
    torch.tensor(2.0),
    torch.empty(0),
]

junk = st.sampled_from(_JUNK_SCALARS)

sizes = st.one_of(st.integers(1, 12), junk, st.integers(1, 12).map(np.int32))

reals = st.one_of(st.floats(-1e3, 1e3), st.floats(allow_nan=True, allow_infinity=True), junk)

variances = st.one_of(st.floats(0, 10), reals)

rhos = st.one_of(st.floats(-1, 1), reals)

seeds = st.one_of(st.integers(0, 2**64 - 1), junk, st.integers(-5, 5).map(np.int64))

float_dtypes = st.sampled_from(FLOAT_DTYPES)

dtypes = st.one_of(float_dtypes, st.sampled_from([torch.int64, torch.bool, "float32", None]))

elements = st.one_of(
    st.floats(-50, 50), st.sampled_from([NAN, INF, -INF, 1e30, -1e30, 0.0, 65504.0])
)


@st.composite
def tensors(draw, min_dim: int = 1, max_dim: int = 3, max_side: int = 4) -> torch.Tensor:
    shape = draw(st.lists(st.integers(0, max_side), min_size=min_dim, max_size=max_dim))
    values = draw(st.lists(elements, min_size=math.prod(shape), max_size=math.prod(shape)))
    dtype = draw(
        st.sampled_from([*FLOAT_DTYPES, torch.float32, torch.float32, torch.int64, torch.bool])
    )
    t = torch.tensor(values, dtype=torch.float64).reshape(shape)
    if dtype in (torch.int64, torch.bool):
        return torch.nan_to_num(t).clamp(-100, 100).to(dtype)
    return t.to(dtype)


tensor_or_junk = st.one_of(tensors(), tensors(min_dim=0, max_dim=0), junk)


def attempt(call, *args, **kwargs):
    """Run ``call``; return ``(True, result)``, or ``(False, None)`` for ValueError/TypeError."""
    try:
        return True, call(*args, **kwargs)
    except (ValueError, TypeError):
        return False, None


strategy_junk = st.one_of(st.sampled_from(asc.SCALING_STRATEGIES), junk)

small_sizes = st.one_of(
    st.integers(1, 8), st.sampled_from([None, "4", NAN, -1, 0, 2.5, 4.0, True, torch.tensor(4)])
)
