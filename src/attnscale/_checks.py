"""Argument validation shared by the public API.

Every public function checks its inputs with these helpers so that bad input
fails early, with a message naming the argument and what was expected, rather
than deep inside torch or as a silent NaN.

Integers are accepted as Python ``int`` or any ``numbers.Integral`` (numpy
integers included) and may be arbitrarily large; helpers that hand a value to
torch bound it there, so the error names the argument instead of torch's
``Overflow when unpacking long``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence

import torch

#: Seeds are unsigned 64-bit integers in torch.
MAX_SEED = 2**64 - 1
# torch computes a tensor's storage size in bytes as a signed 64-bit integer.
_MAX_BYTES = 2**63 - 1


def show(value: object) -> str:
    """``repr(value)`` for an error message, short even for huge integers.

    Python refuses to print integers of more than 4300 digits, and a 400-digit
    number buries the message; those are described by their size instead.
    """
    if isinstance(value, int | numbers.Integral):
        n = int(value)  # bools are small, so they fall through to repr
        if abs(n) >= 10**20:
            sign = "-" if n < 0 else ""
            return f"{sign}an integer of about 10**{math.log10(abs(n)):.0f}"
    return repr(value)


def _whole(value: numbers.Real) -> int | None:
    """``value`` as an ``int`` if it is a whole number, else None (never overflows)."""
    if isinstance(value, numbers.Integral):
        return int(value)
    try:
        # math.floor works on floats and fractions of any size, without going through float.
        floor = math.floor(value)
    except (OverflowError, ValueError):  # inf or nan
        return None
    return int(floor) if floor == value else None


def positive_int(value: object, name: str) -> int:
    """Return ``value`` as an ``int`` if it is a whole number > 0, else raise.

    Accepts Python and numpy integers of any size and whole floats such as ``64.0``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive integer, got {type(value).__name__}")
    n = _whole(value)
    if n is None or n <= 0:
        raise ValueError(f"{name} must be a positive integer, got {show(value)}")
    return n


def integer(value: object, name: str, *, low: int, high: int) -> int:
    """Return ``value`` as an ``int`` if it is an integer in ``[low, high]``, else raise.

    Only integer types are accepted (Python or numpy, not bool and not floats): this is for
    seeds and indices, where ``2.0`` is more likely a mistake than a size.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    n = int(value)
    if not low <= n <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {show(high)}], got {show(value)}")
    return n


def rng_seed(value: object, name: str = "seed") -> int:
    """Return ``value`` as a seed: an integer in ``[0, 2**64 - 1]``, as torch accepts."""
    return integer(value, name, low=0, high=MAX_SEED)


def finite_float(value: object, name: str) -> float:
    """Return ``value`` as a finite ``float``, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    try:
        value = float(value)
    except OverflowError:  # an integer beyond float range, e.g. 10**400
        raise ValueError(f"{name} must be finite (within float range), got {show(value)}") from None
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
        raise ValueError(
            f"{name} must be one of {', '.join(map(repr, choices))}; got {show(value)[:80]}"
        )
    return value


def float_dtype(value: object, name: str = "dtype") -> torch.dtype:
    """Return ``value`` if it is a floating ``torch.dtype``, else raise ``TypeError``.

    Strings such as ``"float32"`` are refused, as torch itself refuses them.
    """
    if not isinstance(value, torch.dtype):
        raise TypeError(
            f"{name} must be a torch.dtype such as torch.float32, got "
            f"{type(value).__name__} {show(value)[:80]}"
        )
    if not value.is_floating_point:
        raise TypeError(f"{name} must be a floating dtype, got {value}")
    return value


def device(value: object, name: str = "device") -> torch.device:
    """Return ``value`` as a ``torch.device`` that exists here and can hold data, else raise.

    ``"meta"`` devices are refused: their tensors have shapes but no values, so nothing
    computed on them can be read.
    """
    try:
        dev: torch.device = torch.device(value)  # type: ignore[call-overload]
    except (RuntimeError, TypeError, ValueError) as err:
        raise ValueError(f"{name} must name a torch device, got {show(value)[:80]}") from err
    if dev.type == "meta":
        raise ValueError(f"{name}={str(dev)!r} cannot hold data; use 'cpu' or an accelerator")
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"{name}={str(dev)!r} was requested but CUDA is not available")
        if dev.index is not None and dev.index >= count:
            raise ValueError(f"{name}={str(dev)!r}: there are only {count} CUDA device(s)")
    elif dev.type != "cpu":
        try:
            torch.empty(0, device=dev)
        except (RuntimeError, AssertionError, NotImplementedError) as err:
            raise ValueError(f"{name}={str(dev)!r} is not available: {err}") from err
    return dev


def allocation(shape: Sequence[int], dtype: torch.dtype, names: str) -> None:
    """Raise ``ValueError`` if a tensor of ``shape`` and ``dtype`` is too large for torch.

    torch counts a tensor's bytes in a signed 64-bit integer; beyond that it fails with
    ``Storage size calculation overflowed`` (or cannot even read the sizes). ``names`` says
    which arguments set ``shape``.
    """
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > _MAX_BYTES:
        raise ValueError(
            f"{names} too large: a tensor of shape ({', '.join(map(show, shape))}) "
            f"and dtype {dtype} would need about 2**{math.log2(nbytes):.0f} bytes"
        )


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


def matches(value: torch.Tensor, name: str, reference: torch.Tensor, what: str) -> None:
    """Check that ``value`` has the dtype and device of ``reference`` (described by ``what``).

    A dtype mismatch is a ``TypeError``, a device mismatch a ``ValueError``; both name the
    argument, instead of torch's ``mat1 and mat2 must have the same dtype``.
    """
    if value.dtype != reference.dtype:
        raise TypeError(
            f"{name} has dtype {value.dtype}, unlike {what} ({reference.dtype}); "
            "convert one of them with .to()"
        )
    if value.device != reference.device:
        raise ValueError(f"{name} is on {value.device}, unlike {what} ({reference.device})")


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
    gen = torch.Generator(device=device)
    gen.manual_seed(rng_seed(0 if seed is None else seed))
    return gen


def placement(device_: object, dtype: object) -> tuple[torch.device | None, torch.dtype]:
    """Validated ``device`` and ``dtype`` for new parameters (None: torch's defaults)."""
    return (
        None if device_ is None else device(device_),
        torch.get_default_dtype() if dtype is None else float_dtype(dtype),
    )


def tokens(x: object, name: str, d_model: int, weight: torch.Tensor) -> torch.Tensor:
    """Check a module input of shape ``(batch, length, d_model)`` against the module's weights."""
    t = float_tensor(x, name, min_dim=3)
    if t.dim() != 3 or t.shape[-1] != d_model:
        raise ValueError(f"{name} must have shape (batch, length, {d_model}), got {tuple(t.shape)}")
    matches(t, name, weight, "the module's parameters")
    return t
