"""Per-path adapters: attention computed inside a torch kernel, recomputed on sampled rows.

- ``F.scaled_dot_product_attention``: q, k and the mask are read at the call.
- ``F.multi_head_attention_forward`` called directly: as the module, from its arguments.
- ``nn.MultiheadAttention`` (every path, the fused fast paths included) and the fused
  ``nn.TransformerEncoderLayer``: the statistics are recomputed from the module's weights and
  inputs after the call, since the fast paths run without any torch function the monitor
  could intercept.

Each adapter is the handler of its path (``calls.handles``): it builds the logits of the
sampled rows (masks applied as the kernel applies them) and returns them as a ``Call``; where
the logits never exist in the autograd graph, the call says how to pull the gradient at the
output back through the softmax.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from .calls import PATHS, Call, Path, Reader, handles
from .every_row import HeadStats, head_stats, head_stats_of_logits, rows_of_qk
from .lineage import head_scales, physical, position_range, unscaled, value

__all__ = [
    "flex_attention_op",
    "fused_encoder_arguments",
    "mha_arguments",
    "on_flex",
    "on_mha",
    "on_mha_forward",
    "on_sdpa",
    "softmax_backward",
]


def _sdpa_arguments(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> dict[str, Any]:
    """The arguments of a call to ``F.scaled_dot_product_attention``, by name (a plain call:
    ``inspect.Signature.bind`` costs more than the rest of reading the call)."""
    return {
        "query": query,
        "key": key,
        "value": value,
        "attn_mask": attn_mask,
        "dropout_p": dropout_p,
        "is_causal": is_causal,
        "scale": scale,
        "enable_gqa": enable_gqa,
    }


_MHA_SIG = inspect.signature(nn.MultiheadAttention.forward)
_ENCODER_SIG = inspect.signature(nn.TransformerEncoderLayer.forward)
_MHA_FORWARD_SIG = inspect.signature(F.multi_head_attention_forward)


def softmax_backward(logits: torch.Tensor, dp: torch.Tensor) -> torch.Tensor:
    """dS = P * (dP - rowsum(dP * P)) for P = softmax(S): the gradient at the logits."""
    p = torch.softmax(logits, dim=-1).nan_to_num(0.0)  # (..., rows, k_len)
    return p * (dp - (dp * p).sum(-1, keepdim=True))


def _repeat_heads(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Grouped-query attention: repeat k's (or v's) heads to q's count."""
    if t.dim() >= 3 and like.dim() >= 3 and t.shape[-3] != like.shape[-3]:
        return t.repeat_interleave(like.shape[-3] // t.shape[-3], dim=-3)
    return t


# -- F.scaled_dot_product_attention ----------------------------------------------------------


@handles(
    F.scaled_dot_product_attention,
    kind="sdpa",
    path="sdpa",
    fused=True,
    gradients=True,
    all_rows=True,
    what="F.scaled_dot_product_attention: the logits of the sampled rows recomputed from q "
    "and k with its scale and masks",
)
def on_sdpa(
    capture: Reader, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
) -> Call:
    b = _sdpa_arguments(*args, **kwargs)
    given_q, given_k = b["query"], b["key"]  # inside torch.vmap, one sample's view
    b = {name: physical(v) for name, v in b.items()}
    out = physical(out)
    q, k = b["query"], b["key"]
    scale = b.get("scale")
    head_dim = int(q.shape[-1])
    c = 1 / math.sqrt(head_dim) if scale is None else value(scale)
    capture.size_sample((*q.shape[:-1], k.shape[-2]))
    qs = capture.sample(q, rows_dim=q.dim() - 2)
    ks = _repeat_heads(capture.sample(k), qs)
    logits = (qs.float() @ ks.float().transpose(-2, -1)) * c  # (..., rows, k_len)
    logits, positions = _sdpa_masks(capture, b, logits, q.shape[:-2], q.shape[-2], k.shape[-2])
    max_abs_qk = None
    if q.dtype == torch.float16:
        max_abs_qk = float((qs.float() @ ks.float().transpose(-2, -1)).abs().max())
    return Call(
        kind="sdpa",
        path="sdpa",
        logits=logits,
        mask=positions,
        shape=(*q.shape[:-1], int(k.shape[-2])),  # the scores': (..., heads, L, S)
        dtype=q.dtype,
        head_dim=head_dim,
        num_heads=int(q.shape[-3]) if q.dim() >= 4 else None,
        source="sdpa-default" if scale is None else "sdpa-argument",
        q=qs,
        k=ks,
        outputs=capture.sample(out, out.dim() - 2) if isinstance(out, torch.Tensor) else None,
        max_abs_qk=max_abs_qk,
        # as before the factors on q and k, which the scale includes
        q_rows=unscaled(qs, capture.lineages.prescale(given_q)),
        k_rows=unscaled(ks, capture.lineages.prescale(given_k)),
        heads=lambda: rows_of_qk(
            q, k, scale=c, attn_mask=b.get("attn_mask"), is_causal=b.get("is_causal", False)
        ),
        gradient=_sdpa_gradient(capture, b, qs, logits, out),
        **_prescaled_scale(capture, given_q, given_k, c, logits.shape),
    )


def _sdpa_gradient(
    capture: Reader, b: dict[str, Any], qs: torch.Tensor, logits: torch.Tensor, out: Any
) -> tuple[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]] | None:
    """The logits never exist in the graph, but the gradient dO reaching the output does.
    With P = softmax(S) and O = P V, backward gives dP = dO V^T and
    dS = P * (dP - rowsum(dP * P)), exact on the sampled rows. With dropout on P the mask
    is unknown, so no gradient is recorded."""
    if not isinstance(out, torch.Tensor) or float(b.get("dropout_p", 0.0)) != 0.0:
        return None
    vs = _repeat_heads(capture.sample(b["value"]), qs)

    def grad_at_logits(grad_out: torch.Tensor) -> torch.Tensor:
        g = capture.sample(grad_out, rows_dim=grad_out.dim() - 2).float()  # (.., rows, dv)
        return softmax_backward(logits, g @ vs.float().transpose(-2, -1))

    return out, grad_at_logits


def _prescaled_scale(
    capture: Reader,
    q: torch.Tensor,
    k: torch.Tensor,
    c: float,
    shape: torch.Size,
    head_factor: torch.Tensor | None = None,
) -> dict[str, Any]:
    """The kernel's scale times the factors applied to q and k before the call, per head too."""
    lq, lk = capture.lineages.prescaled(q), capture.lineages.prescaled(k)
    for hf in (lq.head_factor, lk.head_factor):
        if hf is not None:
            head_factor = hf if head_factor is None else head_factor * hf
    scale, per_head = head_scales(c * lq.factor * lk.factor, head_factor, shape)
    return {
        "scale": scale,
        "scale_per_head": per_head,
        "scale_learned": lq.learned or lk.learned,
        "scale_range": position_range(scale, lq, lk),
        "qk_gain_learned": lq.gain or lk.gain,
    }


def _sdpa_masks(
    capture: Reader,
    b: dict[str, Any],
    logits: torch.Tensor,
    batch: torch.Size,
    lq: int,
    lk: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits with SDPA's causal and explicit masks applied, and what a float mask masked."""
    rows = capture.row_index(lq, logits.device)
    if b.get("is_causal", False):  # aligned at the top left, as torch's kernels: i sees j <= i
        after = torch.arange(lk, device=logits.device) > rows.unsqueeze(-1)
        logits = logits.masked_fill(after, -math.inf)
    mask, positions = b.get("attn_mask"), None
    if mask is not None:
        full = torch.broadcast_to(mask, (*batch, lq, lk))  # (..., q_len, k_len)
        full = capture.sample(full)[..., rows, :]
        if full.dtype == torch.bool:
            logits = logits.masked_fill(~full, -math.inf)
        else:
            positions = torch.broadcast_to(capture.lineages.additive_mask(full), logits.shape)
            logits = logits + full.float()
    return logits, _known(positions, logits)


def _known(positions: torch.Tensor | None, logits: torch.Tensor) -> torch.Tensor:
    """The masked positions where every mask of the call is known (SDPA's and the module's
    arguments): none beyond those given, so a very negative logit is a logit, not a mask."""
    return (
        torch.zeros((), dtype=torch.bool, device=logits.device) if positions is None else positions
    )


# -- FlexAttention -----------------------------------------------------------------------------


PATHS["multihead_attention:encoder-fastpath"] = Path(
    kind="multihead_attention",
    fused=True,
    gradients=False,
    all_rows=True,
    what="nn.TransformerEncoderLayer run as one fused kernel: its attention recomputed from "
    "the layer's input, its pre-norm and the attention weights",
)


def flex_attention_op() -> Any:
    """The operator FlexAttention runs (eager, and the one dynamo traces when compiled)."""
    try:
        from torch._higher_order_ops.flex_attention import flex_attention
    except ImportError:  # a torch without FlexAttention
        return object()
    return flex_attention


@handles(
    flex_attention_op(),  # what eager flex_attention runs (compiled: compiled.py)
    kind="flex_attention",
    path="flex_attention",
    fused=True,
    gradients=False,
    all_rows=True,
    what="eager FlexAttention: score_mod and mask_mod applied to the sampled rows' scores; "
    "its scale includes score_mod's slope at zero, per head",
)
def on_flex(
    capture: Reader, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
) -> Call:
    """The ``flex_attention`` higher-order operator, as eager ``flex_attention`` calls it.

    Its arguments are q, k, v, the traced ``score_mod``, the block mask as a tuple (its
    ``mask_mod`` last), the scale, kernel options and the buffers the two functions read.
    The logits of the sampled rows are ``score_mod`` applied to the scaled scores, with
    ``mask_mod`` applied as the kernel applies it. What ``score_mod`` does to the scale is
    measured on a probe: its slope at scores of zero, per head, so a ``score_mod`` that
    multiplies the scores counts in the scale while a bias, a soft-cap or a mask does not.
    """
    q, k, score_mod, block_mask, c = args[0], args[1], args[3], args[4], value(args[5])
    score_buffers, mask_buffers = _flex_buffers(args, kwargs)
    capture.size_sample((*q.shape[:-1], k.shape[-2]))
    qs = capture.sample(q, rows_dim=2)  # (nb, heads, rows, d)
    ks = _repeat_heads(capture.sample(k), qs)
    nb, heads, lq, lk = qs.shape[0], q.shape[1], q.shape[2], k.shape[2]
    rows = capture.row_index(lq, q.device)
    grid = (
        torch.arange(nb, device=q.device),
        torch.arange(heads, device=q.device),
        rows,
        torch.arange(lk, device=q.device),
    )
    scores = (qs.float() @ ks.float().transpose(-2, -1)) * c  # (nb, heads, rows, k_len)
    mods = _flex_grid(score_mod, 1, score_buffers)
    keep = _flex_grid(block_mask[-1], 0, mask_buffers)(*grid).broadcast_to(scores.shape)
    logits = mods(scores, *grid).float().masked_fill(~keep, -math.inf)
    slope = _score_mod_slope(mods, grid, scores, keep)  # (heads,)
    same = bool(torch.allclose(slope, slope[0], rtol=1e-5))
    head_factor = None if same else slope[:, None, None]
    read = _prescaled_scale(
        capture, q, k, c * float(slope[0]) if same else c, logits.shape, head_factor
    )
    head_dim = int(q.shape[-1])
    # No gradient is watched: FlexAttention has no backward on CPU, where this could be tested.
    return Call(
        kind="flex_attention",
        path="flex_attention",
        logits=logits,
        shape=(*q.shape[:-1], lk),  # the scores': (B, heads, L, S)
        dtype=q.dtype,
        head_dim=head_dim,
        num_heads=heads,
        source="flex_attention",
        q=qs,
        k=ks,
        outputs=None,
        max_abs_qk=float((scores / c).abs().max()) if q.dtype == torch.float16 and c else None,
        q_rows=unscaled(qs, capture.lineages.prescale(q)),
        k_rows=unscaled(ks, capture.lineages.prescale(k)),
        heads=lambda: _flex_head_stats(q, k, c, mods, _flex_grid(block_mask[-1], 0, mask_buffers)),
        **read,
    )


def _flex_buffers(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The buffers ``score_mod`` and ``mask_mod`` read, as the operator was given them."""
    score = args[7] if len(args) > 7 else kwargs.get("score_mod_other_buffers", ())
    mask = args[8] if len(args) > 8 else kwargs.get("mask_mod_other_buffers", ())
    return tuple(score), tuple(mask)


def _flex_head_stats(
    q: torch.Tensor,
    k: torch.Tensor,
    c: float,
    mods: Callable[..., Any],
    keeps: Callable[..., Any],
    block: int = 64,
) -> HeadStats:
    """Every row's per-head statistics of a FlexAttention call: its logits (``score_mod`` on
    the scaled scores, ``mask_mod`` applied) for one block of query rows at a time, merged,
    so memory stays O(batch · heads · block · keys)."""
    kf = _repeat_heads(k, q).float()
    b, heads, lq, lk = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    axes = (torch.arange(b, device=q.device), torch.arange(heads, device=q.device))
    keys = torch.arange(lk, device=q.device)
    out: HeadStats | None = None
    for start in range(0, lq, block):
        rows = torch.arange(start, min(start + block, lq), device=q.device)
        raw = q[:, :, rows].float() @ kf.transpose(-2, -1)  # (b, heads, block, keys)
        grid = (*axes, rows, keys)
        logits = mods(raw * c, *grid).float()
        keep = keeps(*grid).broadcast_to(logits.shape)
        part = head_stats_of_logits(logits, masked=~keep, raw=raw, first_row=start)
        out = part if out is None else out.merge(part)
    assert out is not None
    return out


def _flex_grid(fn: Callable[..., Any], scores: int, buffers: tuple[Any, ...]) -> Callable[..., Any]:
    """``fn(*scores, b, h, q_idx, kv_idx, *buffers)`` over the whole (b, h, q, kv) grid.

    FlexAttention's functions are written for one position; as in its own reference
    implementation, they are vectorised with one ``vmap`` per axis.
    """
    lead = (0,) * scores
    rest = (None,) * len(buffers)
    for dims in ((None, None, None, 0), (None, None, 0, None), (None, 0, None, None)):
        fn = torch.vmap(fn, in_dims=(*lead, *dims, *rest), out_dims=0)
    fn = torch.vmap(fn, in_dims=(*lead, 0, None, None, None, *rest), out_dims=0)

    def call(*args: Any) -> Any:
        from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex

        with TransformGetItemToIndex():  # `table[h]` in a score_mod: an index, as in the kernel
            return fn(*args, *buffers)

    return call


def _score_mod_slope(
    mods: Callable[..., Any],
    grid: tuple[torch.Tensor, ...],
    scores: torch.Tensor,
    keep: torch.Tensor,
) -> torch.Tensor:
    """d score_mod / d score at scores of ±δ, the median over each head's kept positions."""
    delta = 1e-2
    # in float64, so that a large bias the score_mod adds cancels exactly in the difference
    up: torch.Tensor = mods(torch.full_like(scores, delta, dtype=torch.float64), *grid)
    down: torch.Tensor = mods(torch.full_like(scores, -delta, dtype=torch.float64), *grid)
    slope = ((up.double() - down.double()) / (2 * delta)).masked_fill(~keep, math.nan)
    # (nb, heads, rows, k_len) -> (heads,)
    return slope.transpose(0, 1).reshape(scores.shape[1], -1).nanmedian(dim=1).values.float()


# -- nn.MultiheadAttention and the fused nn.TransformerEncoderLayer ----------------------------


def mha_arguments(module: nn.MultiheadAttention, args: Any, kwargs: Any) -> dict[str, Any]:
    """The arguments of an ``nn.MultiheadAttention`` call, by name."""
    return dict(_MHA_SIG.bind(module, *args, **kwargs).arguments)


def fused_encoder_arguments(
    layer: nn.TransformerEncoderLayer, args: Any, kwargs: Any
) -> tuple[dict[str, Any], Callable[[torch.Tensor], torch.Tensor] | None]:
    """What the fused encoder layer gave its attention: the MHA arguments, and its pre-norm."""
    a = _ENCODER_SIG.bind(layer, *args, **kwargs).arguments
    src = a["src"]
    mask = a.get("src_mask")
    if mask is None and a.get("is_causal", False):
        n = src.shape[-2]
        mask = torch.ones(n, n, dtype=torch.bool, device=src.device).triu(1)
    norm = layer.norm1
    normed = (
        (lambda t: F.layer_norm(t, norm.normalized_shape, norm.weight, norm.bias, norm.eps))
        if layer.norm_first
        else None
    )
    bound = {
        "query": src,
        "key": src,
        "attn_mask": mask,
        "key_padding_mask": a.get("src_key_padding_mask"),
        "is_causal": False,
    }
    return bound, normed


@handles(
    F.multi_head_attention_forward,
    kind="multihead_attention",
    path="multihead_attention",
    fused=True,
    gradients=True,
    all_rows=True,
    what="nn.MultiheadAttention (its module hook) or F.multi_head_attention_forward called "
    "directly: q and k projected again from the inputs and weights, always 1/√head_dim",
)
def on_mha_forward(
    capture: Reader, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
) -> Call | None:
    """``F.multi_head_attention_forward`` called directly, not through the module."""
    b = _MHA_FORWARD_SIG.bind(*args, **kwargs).arguments
    if b.get("static_k") is not None or b.get("static_v") is not None:
        return None  # precomputed keys: nothing to project
    separate = b.get("use_separate_proj_weight", False)
    module = SimpleNamespace(  # what on_mha reads from an nn.MultiheadAttention
        num_heads=b["num_heads"],
        _qkv_same_embed_dim=not separate,
        in_proj_weight=b["in_proj_weight"],
        in_proj_bias=b["in_proj_bias"],
        q_proj_weight=b.get("q_proj_weight"),
        k_proj_weight=b.get("k_proj_weight"),
        v_proj_weight=b.get("v_proj_weight"),
        bias_k=b["bias_k"],
        bias_v=b["bias_v"],
        add_zero_attn=b["add_zero_attn"],
        out_proj=SimpleNamespace(weight=b["out_proj_weight"]),
        dropout=b["dropout_p"],
        training=b.get("training", True),
        batch_first=False,
    )
    return on_mha(capture, module, b, out)  # type: ignore[arg-type]


def on_mha(
    capture: Reader,
    m: nn.MultiheadAttention,
    a: dict[str, Any],
    output: Any,
    *,
    normed: Callable[[torch.Tensor], torch.Tensor] | None = None,
    path: str = "multihead_attention",
) -> Call:
    inputs = _MhaInputs(capture, m, a, normed)
    q, k = inputs.project(inputs.query[inputs.rows], 0), inputs.project(inputs.key, 1)
    q = inputs.heads(q, len(inputs.rows))  # (nb, heads, rows, d)
    k = inputs.heads(inputs.extra_keys(k, m.bias_k), -1)  # (nb, heads, k_len, d)
    c = 1 / math.sqrt(inputs.d)
    qk = q @ k.transpose(-2, -1)  # (nb, heads, rows, k_len)
    logits, positions = _mha_masks(capture, inputs, qk * c, a)
    outputs = None
    if inputs.lengths is not None:
        # the nested tensor has no padding rows: the padded output the layer returns is 0
        lens = torch.tensor(inputs.lengths[: inputs.nb], device=inputs.rows.device)[:, None]
        q_keep = inputs.rows[None, :] < lens
        outputs = torch.softmax(logits, dim=-1).masked_fill(~q_keep[:, None, :, None], 0.0)
    dtype = a["query"].dtype
    out = output[0] if isinstance(output, tuple) else None
    dropout = m.dropout if m.training else 0.0
    watch = isinstance(out, torch.Tensor) and dropout == 0 and inputs.lengths is None
    return Call(
        kind="multihead_attention",
        path=path,
        logits=logits,
        mask=positions,
        shape=(inputs.bsz, m.num_heads, inputs.lq, logits.shape[-1]),  # appended keys too
        dtype=dtype,
        head_dim=inputs.d,
        num_heads=m.num_heads,
        scale=c,
        source="multihead_attention",
        q=q,
        k=k,
        q_rows=q,
        k_rows=k,
        outputs=outputs,
        max_abs_qk=float(qk.abs().max()) if dtype == torch.float16 else None,
        heads=lambda: _mha_head_stats(inputs, a),
        gradient=_mha_gradient(inputs, logits, out) if watch else None,  # type: ignore[arg-type]
    )


class _MhaInputs:
    """An ``nn.MultiheadAttention`` call's inputs as (length, batch, embed), sampled."""

    def __init__(
        self,
        capture: Reader,
        m: nn.MultiheadAttention,
        a: dict[str, Any],
        normed: Callable[[torch.Tensor], torch.Tensor] | None,
    ) -> None:
        query, key, value = a["query"], a["key"], a.get("value", a["key"])
        self.kpm = a.get("key_padding_mask")
        self.lengths: list[int] | None = None
        if query.is_nested:
            self.lengths = [int(t.shape[0]) for t in query.unbind()]
            query = query.to_padded_tensor(0.0)
            key = value = query if a["key"] is a["query"] else key.to_padded_tensor(0.0)
        if normed is not None:
            query = key = value = normed(query)
        self.batched = query.dim() == 3
        if not self.batched:  # (L, E) -> (L, 1, E)
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if self.kpm is not None:
                self.kpm = self.kpm.unsqueeze(0)
        elif m.batch_first or normed is not None or self.lengths is not None:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))  # (L, B, E)
        self.seq_first = self.batched and not m.batch_first
        self.lq, self.bsz, e = query.shape
        self.nb = min(self.bsz, capture.sample_batch)
        self.all_query, self.all_key = query, key  # every batch element, for all_rows
        self.query, self.key, self.value = (t[:, : self.nb] for t in (query, key, value))
        self.m, self.e, self.d = m, e, e // m.num_heads
        capture.size_sample((self.bsz, m.num_heads, self.lq, key.shape[0]))
        self.rows = capture.row_index(self.lq, query.device)

    def project(self, x: torch.Tensor, which: int) -> torch.Tensor:
        """x through the q (0), k (1) or v (2) input projection, in float32."""
        m = self.m
        if m._qkv_same_embed_dim:
            w = m.in_proj_weight.chunk(3)[which]
        else:
            w = (m.q_proj_weight, m.k_proj_weight, m.v_proj_weight)[which]
        bias = None if m.in_proj_bias is None else m.in_proj_bias.chunk(3)[which].float()
        return F.linear(x.float(), w.float(), bias)

    def extra_keys(self, k: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """The learned bias key (value) and the zero key the module appends."""
        nb = k.shape[1]
        if bias is not None:
            k = torch.cat([k, bias.float().expand(1, nb, self.e)])
        if self.m.add_zero_attn:
            k = torch.cat([k, k.new_zeros(1, nb, self.e)])
        return k

    def heads(self, x: torch.Tensor, length: int) -> torch.Tensor:
        """(length, batch, E) -> (batch, heads, length, d)."""
        return x.reshape(length, x.shape[1], self.m.num_heads, self.d).permute(1, 2, 0, 3)


def _mha_masks(
    capture: Reader, inputs: _MhaInputs, logits: torch.Tensor, a: dict[str, Any]
) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits with the module's masks applied, and what its float masks masked."""
    lq, lk, rows, nb = inputs.lq, logits.shape[-1], inputs.rows, inputs.nb
    attn_mask = a.get("attn_mask")
    if attn_mask is None and a.get("is_causal", False):
        allowed = torch.ones(lq, lk, dtype=torch.bool, device=logits.device).tril()[rows]
        logits = logits.masked_fill(~allowed, -math.inf)
    positions = None
    for mask, padding in ((attn_mask, False), (inputs.kpm, True)):
        if mask is None:
            continue
        if mask.dtype == torch.bool:
            logits = logits.masked_fill(_mha_aligned(mask, padding, inputs, lk), -math.inf)
            continue
        logits = logits + _mha_aligned(mask, padding, inputs, lk).float()
        # what the user's mask masks, read before the appended keys' zero columns join it
        # (they would split a bias that is negative everywhere into two groups, a mask)
        p = _mha_aligned(capture.lineages.additive_mask(mask), padding, inputs, lk)
        p = torch.broadcast_to(p, logits.shape)
        positions = p if positions is None else positions | p
    if inputs.lengths is not None:
        lens = torch.tensor(inputs.lengths[:nb], device=logits.device)[:, None]  # (nb, 1)
        keep = torch.arange(lk, device=logits.device)[None, :] < lens  # (nb, S)
        logits = logits.masked_fill(~keep[:, None, None, :], -math.inf)
        q_keep = rows[None, :] < lens  # (nb, rows)
        logits = logits.masked_fill(~q_keep[:, None, :, None], -math.inf)
    return logits, _known(positions, logits)


def _mha_aligned(mask: torch.Tensor, padding: bool, inputs: _MhaInputs, lk: int) -> torch.Tensor:
    """A key padding mask (B, S) or an attention mask ((L, S) or (B · heads, L, S)) in the
    sampled logits' layout, (nb, heads or 1, rows, lk): the keys the module appends (the bias
    key, the zero key) are columns past the mask's, never masked."""
    nb = inputs.nb
    if padding:  # (B, S) -> (nb, 1, 1, S)
        mask = mask[:nb].reshape(nb, 1, 1, -1)
    else:
        if mask.dim() == 3:  # (batch * heads, L, S) -> (batch, heads, L, S)
            mask = mask.reshape(inputs.bsz, inputs.m.num_heads, *mask.shape[-2:])[:nb]
        mask = mask[..., inputs.rows, :]
    if lk > mask.shape[-1]:
        mask = F.pad(
            mask, (0, lk - mask.shape[-1]), value=False if mask.dtype == torch.bool else 0.0
        )
    return mask


def _mha_head_stats(inputs: _MhaInputs, a: dict[str, Any]) -> HeadStats:
    """Every row's per-head statistics of an ``nn.MultiheadAttention`` call, from q and k
    projected for the whole batch, with the module's masks as one additive bias."""
    m, lq = inputs.m, inputs.lq
    q = inputs.heads(inputs.project(inputs.all_query, 0), lq)  # (B, heads, L, d)
    k = inputs.project(inputs.all_key, 1)
    lk = k.shape[0]  # before the appended keys, which no mask covers
    k = inputs.heads(inputs.extra_keys(k, m.bias_k), -1)  # (B, heads, S, d)
    bsz, keys = q.shape[0], k.shape[-2]
    attn_mask, biases = a.get("attn_mask"), []
    if attn_mask is not None:  # (L, S), or (B · heads, L, S)
        per_head = attn_mask.dim() == 3
        shape = (-1, m.num_heads, lq, lk) if per_head else (1, 1, lq, lk)
        biases.append(_as_bias(attn_mask.reshape(shape)))
    if inputs.kpm is not None:
        biases.append(_as_bias(inputs.kpm.reshape(bsz, 1, 1, lk)))
    if inputs.lengths is not None:  # a nested batch: the padding keys and rows do not exist
        lens = torch.tensor(inputs.lengths, device=q.device)[:, None, None, None]
        pos = torch.arange(lq, device=q.device)
        pad = (pos[None, None, :, None] >= lens) | (pos[None, None, None, :] >= lens)
        biases.append(_as_bias(pad))
    bias = sum(biases[1:], biases[0]) if biases else None
    if bias is not None and keys > lk:
        bias = F.pad(bias, (0, keys - lk))
    causal = attn_mask is None and bool(a.get("is_causal", False))
    return head_stats(q, k, scale=1 / math.sqrt(inputs.d), attn_mask=bias, is_causal=causal)


def _as_bias(mask: torch.Tensor) -> torch.Tensor:
    """A mask in nn.MultiheadAttention's sense (True: masked; or a float bias) as a bias."""
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, device=mask.device).masked_fill(mask, -math.inf)
    return mask.float()


def _mha_gradient(
    inputs: _MhaInputs, logits: torch.Tensor, out: torch.Tensor
) -> tuple[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
    m, nb, rows = inputs.m, inputs.nb, inputs.rows
    v = inputs.extra_keys(inputs.project(inputs.value, 2), m.bias_v)
    v = inputs.heads(v, -1)  # (nb, heads, k_len, d)
    w_out = m.out_proj.weight.detach().float()
    batched, seq_first = inputs.batched, inputs.seq_first

    def grad_at_logits(g: torch.Tensor) -> torch.Tensor:
        # the output is out_proj(concat of heads): pull dO back through out_proj
        g = g.float() if batched else g.float().unsqueeze(1)
        g = g if seq_first or not batched else g.transpose(0, 1)  # (L, B, E)
        g = g[rows, :nb] @ w_out  # (rows, nb, E)
        g = inputs.heads(g, len(rows))  # (nb, heads, rows, d)
        return softmax_backward(logits, g @ v.transpose(-2, -1))

    return out, grad_at_logits
