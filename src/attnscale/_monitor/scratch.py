"""Buffers that the every-row statistics' full-size temporaries reuse while a monitor measures.

A temporary of a few MB that is freed and allocated again comes, with glibc's allocator, from
fresh pages more often than not (the freed memory goes back to the system past the trim
threshold): each 4 KiB page is then a page fault and a zeroing, which together cost more than
the pass that fills the tensor. Inside [pooled][] the every-row passes take their temporaries
from buffers kept as long as the pool, one per use; outside it (``head_stats`` called on its
own) [buffer][] allocates as usual.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator, Sequence

import torch

__all__ = ["Pool", "buffer", "pooled"]


class Pool:
    """Flat buffers by use (name, dtype, device), grown to the largest size asked of them."""

    def __init__(self) -> None:
        self._flat: dict[tuple[str, torch.dtype, torch.device], torch.Tensor] = {}

    def take(
        self, name: str, shape: Sequence[int], dtype: torch.dtype, device: torch.device
    ) -> torch.Tensor:
        """A contiguous tensor of ``shape``, its values left as they were: the one buffer of
        use ``name``, so one use must be done with it before it is taken again."""
        n, key = math.prod(shape), (name, dtype, torch.device(device))
        flat = self._flat.get(key)
        if flat is None or flat.numel() < n:
            flat = self._flat[key] = torch.empty(n, dtype=dtype, device=device)
        return flat[:n].view(tuple(shape))


_POOL: contextvars.ContextVar[Pool | None] = contextvars.ContextVar("attnscale_pool", default=None)


@contextlib.contextmanager
def pooled(pool: Pool) -> Iterator[None]:
    """Take the temporaries of [buffer][] from ``pool`` inside the block."""
    token = _POOL.set(pool)
    try:
        yield
    finally:
        _POOL.reset(token)


def buffer(
    name: str, shape: Sequence[int], dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """An uninitialised contiguous tensor: from the pool in use, the buffer of use ``name``;
    outside [pooled][], a new one."""
    pool = _POOL.get()
    if pool is None:
        return torch.empty(tuple(shape), dtype=dtype, device=device)
    return pool.take(name, shape, dtype, device)
