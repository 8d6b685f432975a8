"""Argument validation shared by the public API.

Every public function checks its inputs with these helpers so that bad input
fails early, with a message naming the argument and what was expected, rather
than deep inside torch or as a silent NaN.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

import torch


def positive_int(value: object, name: str) -> int:
    """Return ``value`` as an ``int`` if it is a whole number > 0, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive integer, got {type(value).__name__}")
    if not float(value).is_integer() or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(float(value))


def finite_float(value: object, name: str) -> float:
    """Return ``value`` as a finite ``float``, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value


def positive_float(value: object, name: str) -> float:
    """Return ``value`` as a finite ``float`` > 0, else raise."""
    value = finite_float(value, name)
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return value


def non_negative_float(value: object, name: str) -> float:
    """Return ``value`` as a finite ``float`` >= 0, else raise."""
    value = finite_float(value, name)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return value


def probability(value: object, name: str, *, open_interval: bool = False) -> float:
    """Return ``value`` as a float in [0, 1] (or (0, 1) with ``open_interval``)."""
    value = finite_float(value, name)
    ok = 0.0 < value < 1.0 if open_interval else 0.0 <= value <= 1.0
    if not ok:
        interval = "(0, 1)" if open_interval else "[0, 1]"
        raise ValueError(f"{name} must lie in {interval}, got {value!r}")
    return value


def one_of(value: object, name: str, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise naming them."""
    choices = tuple(choices)
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def float_tensor(value: object, name: str, *, min_dim: int = 1) -> torch.Tensor:
    """Check that ``value`` is a floating-point tensor with at least ``min_dim`` dims."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if not value.is_floating_point():
        raise TypeError(f"{name} must have a floating-point dtype, got {value.dtype}")
    if value.dim() < min_dim:
        raise ValueError(
            f"{name} must have at least {min_dim} dimension(s), got shape {tuple(value.shape)}"
        )
    return value


def make_generator(
    generator: torch.Generator | None, seed: int | None, device: torch.device | str = "cpu"
) -> torch.Generator:
    """Return ``generator``, or a new one seeded with ``seed`` (0 if neither is given)."""
    if generator is not None and seed is not None:
        raise ValueError("pass either generator or seed, not both")
    if generator is not None:
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        return generator
    if seed is None:
        seed = 0
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return gen
