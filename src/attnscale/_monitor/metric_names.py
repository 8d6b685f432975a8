r"""What "the max logit" means in the code people already log it with, row by row.

Megatron-LM, Transformer Engine, cuDNN and Kimi K2's QK-Clip all report a largest attention
logit, and this library logs two; they agree on much (every one reads the softmax input, the
product times the scale plus any additive bias, and every one leaves masked entries out) and
differ in the rest: signed or absolute, clamped at 0 or not, per query row, per head or one
number per model, and how calls, micro-batches and processes are combined. Each row of
``DEFINITIONS`` records one, with the file it was read from (commits pinned), and ``max_logit``
computes it from one call's logits, so the rows can be compared on one example.

torchtitan has a row with no key: it logs no attention max logit (checked at the commit its source
link pins). Its row names the pattern this library's reduction follows: its MoE load balancing
stacks every layer's counts into one tensor and reduces them in one collective per step.

Reading the sources (not their code, which is not copied here):

- Transformer Engine ``DotProductAttention(return_max_logit=True)`` returns, per call, a tensor of
  shape ``[heads]``: the max over batch, query rows and keys of the scaled logits plus bias, after
  the mask (its unfused path fills masked entries with -10000, its fused path runs cuDNN, which
  leaves them at -inf); under context parallelism it is reduced with MAX over the CP group.
- Megatron-LM keeps the max of that over a step's micro-batches per layer, reduces it with one
  ``all_reduce(MAX)`` per layer over the data- and context-parallel ranks, and logs
  ``max_attention_logit``: the max over its layers and heads of a running max that starts at 0.
  The rank that writes the logs (the last) covers its own pipeline stage and tensor-parallel heads.
- cuDNN's SDPA writes ``Max`` (``set_logit_max`` in C++, ``score_max`` in Python), shape
  ``(b, h, s_q, 1)``: each query row's max of the scaled, biased, masked scores (a sink token's
  logit counts). It reduces nothing; the caller does.
- Kimi K2 (arXiv:2507.20534) defines each head's $S_{\max}^h$ as the max over the step's batch of
  the scaled $q_i\cdot k_j$, clips heads past $\tau = 100$ by $\gamma = \min(1, \tau/S_{\max}^h)$,
  applied as $\sqrt\gamma$ to that head's query and key weights (MLA: $\gamma$ on the rotary query,
  the shared rotary key left alone). It names no logging key.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch

from .report import GUIDE_URL

__all__ = ["DEFINITIONS", "LOG_NAMES", "MaxLogitDefinition", "max_logit"]

# this library's own rows: the monitor's API reference, beside the guide's pages
_REFERENCE = GUIDE_URL.removesuffix("generated/gallery/05_debugging/") + "reference/monitor/"
_MEGATRON = "https://github.com/NVIDIA/Megatron-LM/blob/d98e8a64ddf34856e74b24714e3bedb2f5a39553"
_TE = "https://github.com/NVIDIA/TransformerEngine/blob/d0067d0da6cb01811b8072a7d304f0e00344ce2b"
_CUDNN = "https://github.com/NVIDIA/cudnn-frontend/blob/3929da2ef4c1dba1bb8acb68727b9134f26f40c0"
_TITAN = "https://github.com/pytorch/torchtitan/blob/b5bcd76c66d0acb1a08b176d9639425bc55e0b2a"


@dataclasses.dataclass(frozen=True)
class MaxLogitDefinition:
    """One library's max attention logit: what it takes the max of, and over what.

    ``per`` is the granularity of one call's value: ``"row"`` (batch, heads, query rows),
    ``"head"`` or ``"call"`` (one number); several calls (layers, micro-batches, processes)
    combine by max, as ``across`` says. ``key`` is None where the library logs no max logit.
    """

    name: str  # the value of AttentionMonitor(log_names=...) where it has a key to log under
    library: str
    key: str | None
    signed: bool  # False: the max of absolute values
    clamp_at_zero: bool
    masked_out: bool
    scaled: bool  # the softmax input (scale and additive bias in), not the bare q·k
    per: Literal["row", "head", "call"] | None
    across: str  # how calls, micro-batches and processes are combined
    source: str


DEFINITIONS: tuple[MaxLogitDefinition, ...] = (
    MaxLogitDefinition(
        "attnscale",
        "attnscale (all_rows=True)",
        "attn/<site>/head<h>/max_logit",
        signed=True,
        clamp_at_zero=False,
        masked_out=True,
        scaled=True,
        per="head",
        across="max over the step's calls; processes: one all_reduce per step, every site",
        source=f"{_REFERENCE}#statistics-over-every-row",
    ),
    MaxLogitDefinition(
        "attnscale-sampled",
        "attnscale (sampled rows)",
        "attn/<site>/max_abs_logit",
        signed=False,
        clamp_at_zero=False,
        masked_out=True,
        scaled=True,
        per="call",
        across="max over the step's calls (sampled rows); processes: the same all_reduce",
        source=f"{_REFERENCE}#attnscale.AttentionStats",
    ),
    MaxLogitDefinition(
        "megatron",
        "Megatron-LM",
        "max_attention_logit",
        signed=True,
        clamp_at_zero=True,
        masked_out=True,
        scaled=True,
        per="call",
        across="max over micro-batches; one all_reduce per layer (data, context parallel); "
        "then the logging rank's layers and heads",
        source=f"{_MEGATRON}/megatron/core/optimizer/qk_clip.py",
    ),
    MaxLogitDefinition(
        "transformer-engine",
        "Transformer Engine",
        "return_max_logit=True (returned, not logged)",
        signed=True,
        clamp_at_zero=False,
        masked_out=True,
        scaled=True,
        per="head",
        across="max over the context-parallel group",
        source=f"{_TE}/transformer_engine/pytorch/attention/dot_product_attention/backends.py",
    ),
    MaxLogitDefinition(
        "cudnn",
        "cuDNN SDPA",
        "Max / score_max (an output)",
        signed=True,
        clamp_at_zero=False,
        masked_out=True,
        scaled=True,
        per="row",
        across="none: the caller reduces",
        source=f"{_CUDNN}/test/python/sdpa/fp16_ref.py",
    ),
    MaxLogitDefinition(
        "kimi",
        "Kimi K2 QK-Clip",
        "S_max (paper; no key)",
        signed=True,
        clamp_at_zero=False,
        masked_out=True,
        scaled=True,
        per="head",
        across="max over the step's whole batch",
        source="https://arxiv.org/abs/2507.20534",
    ),
    MaxLogitDefinition(
        "torchtitan",
        "torchtitan",
        None,
        signed=True,
        clamp_at_zero=False,
        masked_out=True,
        scaled=True,
        per=None,
        across="no max logit; its MoE counts: one all_reduce, all layers",
        source=f"{_TITAN}/torchtitan/components/optimizer/optimizer.py",
    ),
)

_BY_NAME = {d.name: d for d in DEFINITIONS}

#: The values of ``AttentionMonitor(log_names=...)``: this library's keys, or a library's whose
#: key it also logs under that library's definition.
LOG_NAMES = ("attnscale", "megatron")


def max_logit(
    definition: str | MaxLogitDefinition,
    logits: torch.Tensor,
    masked: torch.Tensor | None = None,
) -> torch.Tensor:
    """One attention call's max logit as ``definition`` defines it.

    Parameters
    ----------
    definition : str or MaxLogitDefinition
        A row of ``DEFINITIONS`` or its ``name``.
    logits : torch.Tensor
        The softmax input, (batch, heads, query rows, keys): scaled, bias added.
    masked : torch.Tensor, optional
        Boolean, broadcastable to ``logits``: True where a key is masked. -inf entries count as
        masked whatever it says.

    Returns
    -------
    torch.Tensor
        Float64, shaped (batch, heads, rows) per row, (heads,) per head, () per call. A row or
        head with no unmasked key gives -inf (before a clamp).

    Raises
    ------
    ValueError
        If ``definition`` is unknown or logs no max logit, or ``logits`` is not 4-D.
    TypeError
        If ``logits`` or ``masked`` is not a tensor, or ``masked`` is not boolean.
    """
    row = _definition(definition)
    x = _visible(logits, masked)
    if not row.signed:
        x = torch.where(x == -torch.inf, x, x.abs())
    if row.per == "row":
        out = x.amax(dim=-1)
    elif row.per == "head":
        out = x.amax(dim=(0, 2, 3))
    else:
        out = x.amax()
    return out.clamp_min(0.0) if row.clamp_at_zero else out


def _definition(definition: str | MaxLogitDefinition) -> MaxLogitDefinition:
    row = _BY_NAME.get(definition) if isinstance(definition, str) else definition
    if not isinstance(row, MaxLogitDefinition):
        raise ValueError(
            f"definition must be a MaxLogitDefinition or one of {', '.join(_BY_NAME)}; "
            f"got {definition!r}"
        )
    if row.per is None:
        raise ValueError(f"{row.library} logs no max attention logit")
    return row


def _visible(logits: object, masked: object) -> torch.Tensor:
    """The logits in float64 with every masked entry at -inf."""
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"logits must be a tensor, got {type(logits).__name__}")
    if logits.dim() != 4:
        raise ValueError(
            f"logits must be 4-D (batch, heads, query rows, keys), got shape {tuple(logits.shape)}"
        )
    x = logits.detach().double()
    if masked is None:
        return x
    if not isinstance(masked, torch.Tensor) or masked.dtype != torch.bool:
        raise TypeError(
            f"masked must be a boolean tensor, got {getattr(masked, 'dtype', type(masked))}"
        )
    return x.masked_fill(masked, -torch.inf)
