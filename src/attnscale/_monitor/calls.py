"""What the monitor knows of each attention path: one handler per path, in one table.

A handler reads one intercepted call (a torch function and its arguments, or a module and
its inputs) and returns a [Call][attnscale._monitor.calls.Call]: the call's logits on the
sampled rows and what the path says of its scale, mask and heads. It computes no
statistic and keeps no state: the recorder turns a ``Call`` into statistics, and the mode
only looks the function up in [HANDLERS][attnscale._monitor.calls.HANDLERS] and dispatches.
A new attention path is one function decorated with [handles][attnscale._monitor.calls.handles]
(and its test); [PATHS][attnscale._monitor.calls.PATHS] describes each path for the
reference page.

Handlers read through a [Reader][attnscale._monitor.calls.Reader], the narrow part of the
monitor they need (sampling and lineages), so that no module here imports the mode.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch

__all__ = ["HANDLERS", "PATHS", "TRACED", "Call", "Handler", "Path", "Reader", "handles"]


@dataclasses.dataclass(frozen=True)
class Call:
    """One attention call as its handler read it (sampled rows, float32 logits)."""

    kind: str  # the site's kind: "sdpa", "softmax(QK^T)", "multihead_attention", ...
    path: str  # how it was read; a row of PATHS
    logits: torch.Tensor  # the softmax input of the sampled rows, (..., rows, keys)
    shape: tuple[int, ...]  # the scores' full shape, (batch..., heads, queries, keys)
    dtype: torch.dtype
    head_dim: int | None
    num_heads: int | None
    scale: float | None
    source: str  # how the scale was read: "traced", "fitted", "sdpa-argument", ...
    q: torch.Tensor | None
    k: torch.Tensor | None
    mask: torch.Tensor | None = None  # entries a mask tensor masked, shaped like ``logits``
    sink: torch.Tensor | None = None  # key columns that are attention sinks
    outputs: torch.Tensor | None = None  # what the model computed for the sampled rows
    fit_residual: float | None = None
    softcap: float | None = None
    max_abs_qk: float | None = None
    scale_per_head: tuple[float, ...] | None = None
    scale_learned: bool = False
    scale_range: tuple[float, float] | None = None
    qk_gain_learned: bool = False
    q_rows: torch.Tensor | None = None  # q and k as (..., rows, head_dim), before their factors
    k_rows: torch.Tensor | None = None
    heads: Callable[[], Any] | None = None  # every row's per-head statistics, on demand
    # the tensor whose gradient gives the logits' (a hook reads it) and how
    gradient: tuple[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]] | None = None


class Reader(Protocol):
    """What a handler may use of the monitor: its sampling of rows and batch, its lineages
    of tensors on their way from q·kᵀ to a softmax, and its mask threshold."""

    lineages: Any
    mask_value: float
    sample_batch: int

    def size_sample(self, shape: Sequence[int]) -> None: ...

    def sample(self, t: torch.Tensor, rows_dim: int | None = None) -> torch.Tensor: ...

    def row_index(self, n: int, device: torch.device | None = None) -> torch.Tensor: ...


Handler = Callable[..., "Call | None"]


@dataclasses.dataclass(frozen=True)
class Path:
    """One attention path: how the monitor reads it, for the reference page."""

    kind: str
    fused: bool  # the scores never exist in the model: the handler recomputes them
    gradients: bool  # the gradient at the logits is measured in backward
    all_rows: bool  # ``all_rows=True`` gives per-head statistics over every row
    what: str


#: torch function (or module class) -> (site kind, handler)
HANDLERS: dict[Any, tuple[str, Handler]] = {}
#: torch function -> (site kind, handler) for calls inside code that torch.compile traces:
#: the call is kept (its tensors become outputs of the compiled graph) and the handler reads it
#: once the compiled code has returned
TRACED: dict[Any, tuple[str, Handler]] = {}
#: path name -> what the reference page says of it
PATHS: dict[str, Path] = {}


def handles(
    *targets: Any, kind: str, path: str | None = None, traced: bool = False, **facts: Any
) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of ``targets`` (torch functions, or
    module classes whose calls the global module hooks report), for sites of ``kind``;
    with ``traced``, of their calls inside code torch.compile traces
    ([TRACED][attnscale._monitor.calls.TRACED]). ``path`` and ``facts`` (``fused``,
    ``gradients``, ``all_rows``, ``what``) describe it in
    [PATHS][attnscale._monitor.calls.PATHS]."""

    def register(handler: Handler) -> Handler:
        for target in targets:
            (TRACED if traced else HANDLERS)[target] = (kind, handler)
        if path is not None:
            PATHS[path] = Path(kind=kind, **facts)
        return handler

    return register
