"""Attention-scaling bugs reported in public issue threads, and deliberate look-alikes.

This module is private: it exists for the documentation site and the test suite
only, and it promises no stability at all.

Each [Case][guide.real_bugs.Case] names one public issue or pull-request
thread. A ``"bug"`` is a scaling bug that was reported and fixed there; a ``"trap"``
is a deliberate design that looks like a scaling bug, questioned in the thread and
confirmed as intended. ``build(fixed)`` returns a small module (CPU, seeded random
weights) that reproduces the code path of the thread: the same projections and head
split, the scale applied at the same place, through ``F.scaled_dot_product_attention``
(with or without ``scale=``) or written out by hand. ``build(False)`` is the code as
reported and ``build(True)`` the code as fixed; for a trap both are the same. The
modules are written for this project, not copied: sizes are small (hidden size 48 to
256, 1 to 8 heads, 8 to 32 tokens, batch 2), and where a real size matters (Gemma-2's
224 against 256) the small model keeps the real ratio. Steps that do not touch the
scale (rotary embeddings, dropout, caches) are left out.

A scaling monitor should flag every bug (its ``build(False)``) and stay quiet on its
fix, and stay quiet on both versions of every trap. ``expected_scale`` is the scale a
user would declare for the model because it is not 1/sqrt(head_dim) by design (a
config value the user chose, or a published model whose scale differs); it is None
where the intended scale is the standard one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from attnscale._monitor import AttentionMonitor, MonitorReport

__all__ = ["CASES", "GROUPS", "SCALING_CODES", "Case", "outcome", "report"]


@dataclass(frozen=True)
class Case:
    """One publicly reported scaling bug, or one deliberate design that looks like one.

    Attributes
    ----------
    name : str
        Short identifier, e.g. ``"opt_double_scale"``.
    title : str
        One line for a table.
    project : str
        The repository of the thread, ``owner/name``.
    thread : str
        The address of the issue or pull request.
    kind : str
        ``"bug"`` or ``"trap"``.
    what : str
        What the code did (bug), or why the design is deliberate (trap).
    fix : str
        What the fix changed; empty for a trap.
    build : callable
        ``build(fixed)`` returns the module; ``fixed=False`` is the code as reported.
    inputs : callable
        ``inputs(generator)`` returns the module's example inputs.
    expected_scale : float or None
        The scale a user would declare, where the intended scale is not 1/sqrt(head_dim).
    group : str
        Which kind of bug or trap it is, a key of [GROUPS][guide.real_bugs.GROUPS].
    """

    name: str
    title: str
    project: str
    thread: str
    kind: str
    what: str
    fix: str
    build: Callable[[bool], nn.Module]
    inputs: Callable[[torch.Generator], tuple[Tensor, ...]]
    expected_scale: float | None = None
    group: str = ""


# ---------------------------------------------------------------------------
# shared helpers
# ---------------------------------------------------------------------------

_BATCH = 2


def _randn(*shapes: tuple[int, ...]) -> Callable[[torch.Generator], tuple[Tensor, ...]]:
    """Inputs: one standard normal tensor of each shape (batch first)."""

    def make(g: torch.Generator) -> tuple[Tensor, ...]:
        return tuple(torch.randn(_BATCH, *s, generator=g) for s in shapes)

    return make


def _call(layer: nn.Module, x: Tensor) -> Tensor:
    """``layer(x)``, typed: ``nn.Module.__call__`` is typed as returning Any."""
    out: Tensor = layer(x)
    return out


def _split(x: Tensor, heads: int) -> Tensor:
    """(batch, tokens, heads * head_dim) -> (batch, heads, tokens, head_dim)."""
    b, n, _ = x.shape
    return x.view(b, n, heads, -1).transpose(1, 2)


def _merge(x: Tensor) -> Tensor:
    """(batch, heads, tokens, head_dim) -> (batch, tokens, heads * head_dim)."""
    b, h, n, d = x.shape
    return x.transpose(1, 2).reshape(b, n, h * d)


def _future(n: int) -> Tensor:
    """Boolean (n, n) mask, True above the diagonal: the keys a causal query must not see."""
    return torch.ones(n, n, dtype=torch.bool).triu(1)


def _additive_causal(n: int, value: float) -> Tensor:
    """Additive (n, n) causal mask: 0 where a query may look, ``value`` elsewhere."""
    return torch.zeros(n, n).masked_fill(_future(n), value)


class _Seeded(nn.Module):
    """Base of every module here: which version it is, and weights from a fixed seed."""

    def __init__(self, fixed: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fixed = fixed


class _Attention(_Seeded):
    """A base with separate q, k, v and output projections; k and v may have fewer heads."""

    def __init__(
        self,
        fixed: bool,
        dim: int,
        heads: int,
        *,
        head_dim: int | None = None,
        kv_heads: int | None = None,
        bias: bool = False,
    ) -> None:
        super().__init__(fixed)
        self.heads = heads
        self.head_dim = head_dim or dim // heads
        self.kv_heads = kv_heads or heads
        inner, kv = heads * self.head_dim, self.kv_heads * self.head_dim
        self.q_proj = nn.Linear(dim, inner, bias=bias)
        self.k_proj = nn.Linear(dim, kv, bias=bias)
        self.v_proj = nn.Linear(dim, kv, bias=bias)
        self.o_proj = nn.Linear(inner, dim, bias=bias)

    def qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Project and split into heads; grouped k and v are repeated up to the query heads."""
        q = _split(self.q_proj(x), self.heads)
        k = _split(self.k_proj(x), self.kv_heads)
        v = _split(self.v_proj(x), self.kv_heads)
        groups = self.heads // self.kv_heads
        return q, k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)


# ---------------------------------------------------------------------------
# bugs
# ---------------------------------------------------------------------------


class _OPT(_Attention):
    """transformers' OPTAttention on the sdpa path: q is scaled right after its projection."""

    def __init__(self, fixed: bool) -> None:
        super().__init__(fixed, 64, 4, bias=True)
        self.scaling = self.head_dim**-0.5

    def forward(self, x: Tensor) -> Tensor:
        q = _split(self.q_proj(x) * self.scaling, self.heads)
        k, v = _split(self.k_proj(x), self.heads), _split(self.v_proj(x), self.heads)
        # before the fix no scaling reached the kernel, so sdpa added its default
        scale = 1.0 if self.fixed else None
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
        return _call(self.o_proj, _merge(out))


class _GPT2(_Seeded):
    """transformers' GPT2Attention on the sdpa path, with scale_attn_by_inverse_layer_idx."""

    def __init__(self, fixed: bool, dim: int = 64, heads: int = 4, layer_idx: int = 3) -> None:
        super().__init__(fixed)
        self.heads = heads
        self.c_attn = nn.Linear(dim, 3 * dim)  # GPT-2's Conv1D is a transposed Linear
        self.c_proj = nn.Linear(dim, dim)
        self.scale_attn_weights = True
        self.scale_attn_by_inverse_layer_idx = True
        self.layer_idx = layer_idx
        scaling = (dim // heads) ** -0.5 if self.scale_attn_weights else 1.0
        if self.scale_attn_by_inverse_layer_idx:
            scaling /= layer_idx + 1
        self.scaling = scaling  # what the fix computes and passes on

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = (_split(t, self.heads) for t in self.c_attn(x).split(x.shape[-1], dim=2))
        scale = self.scaling if self.fixed else None  # before the fix: no scale passed
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
        return _call(self.c_proj, _merge(out))


class _Gemma2(_Attention):
    """transformers' Gemma2Attention, eager: scale from query_pre_attn_scalar, tanh soft-cap."""

    def __init__(self, fixed: bool, dim: int, query_pre_attn_scalar: float) -> None:
        super().__init__(fixed, dim, 4, head_dim=32, kv_heads=2)
        self.scaling = query_pre_attn_scalar**-0.5
        self.softcap = 50.0

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.qkv(x)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        w = torch.tanh(w / self.softcap) * self.softcap
        w = w + _additive_causal(x.shape[1], torch.finfo(w.dtype).min)
        p = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        return _call(self.o_proj, _merge(p @ v))


class _LlamaCppGemma2(_Attention):
    """llama.cpp's Gemma-2 graph: ggml_scale on Q, then kq, soft-cap, soft_max_ext(kq_scale=1)."""

    def __init__(self, fixed: bool, n_embd: int = 112, n_head: int = 4) -> None:
        super().__init__(fixed, n_embd, n_head, head_dim=32, kv_heads=2)
        # the fix: the 9B model divides by sqrt(n_embd_head_k), not sqrt(n_embd / n_head)
        self.q_scale = 1.0 / math.sqrt(self.head_dim if fixed else n_embd // n_head)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.qkv(x)
        q = q * self.q_scale
        kq = q @ k.transpose(-2, -1)
        kq = torch.tanh(kq * (1.0 / 50.0)) * 50.0
        kq = kq * 1.0 + _additive_causal(x.shape[1], -math.inf)  # soft_max_ext: scale 1, mask
        return _call(self.o_proj, _merge(torch.softmax(kq, dim=-1) @ v))


class _PLaMo2(_Attention):
    """llama.cpp's PLaMo2 attention layers: RMS-normed q and k, then build_attn(kq_scale)."""

    def __init__(self, fixed: bool) -> None:
        super().__init__(fixed, 64, 4)
        self.q_norm = nn.RMSNorm(self.head_dim)
        self.k_norm = nn.RMSNorm(self.head_dim)
        self.kq_scale = 1.0 / math.sqrt(self.head_dim) if fixed else 1.0

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.qkv(x)
        q, k = self.q_norm(q), self.k_norm(k)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.kq_scale)
        return _call(self.o_proj, _merge(out))


class _XTransformers(_Attention):
    """x-transformers' Attention with qk_norm=True (cosine similarity) on the flash path."""

    def __init__(self, fixed: bool) -> None:
        super().__init__(fixed, 64, 4)
        self.scale = 10.0  # qk_norm_scale, the scale Attend receives when qk_norm is on

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.qkv(x)
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)  # l2norm, one group
        default_scale = q.shape[-1] ** -0.5  # what sdpa applies by itself
        ratio = self.scale / default_scale if self.fixed else default_scale / self.scale
        out = F.scaled_dot_product_attention(q * ratio, k, v, is_causal=True)
        return _call(self.o_proj, _merge(out))


_MAXTEXT_MASK_VALUE = -0.7 * torch.finfo(torch.float32).max  # MaxText's DEFAULT_MASK_VALUE


class _MaxTextMLA(_Seeded):
    """MaxText's MLA layer: the query is pre-scaled and the attention kernel applies no scale.

    ``kernel="splash"`` is the TPU flash kernel (modelled by sdpa with ``scale=1.0``);
    ``kernel="dot_product"`` is AttentionOp.apply_attention_dot, which normalises by
    hand: exp(s - rowmax), the weighted values, then a division by the row sum.
    """

    def __init__(self, fixed: bool, kernel: str = "splash", dim: int = 64, heads: int = 4) -> None:
        super().__init__(fixed)
        self.kernel = kernel
        nope, rope = 24, 8
        self.heads, self.nope, self.rope, self.rank, self.v_dim = heads, nope, rope, 32, 16
        self.wq = nn.Linear(dim, heads * (nope + rope), bias=False)
        self.wkv_a = nn.Linear(dim, self.rank + rope, bias=False)
        self.kv_norm = nn.RMSNorm(self.rank)
        self.wkv_b = nn.Linear(self.rank, heads * (nope + self.v_dim), bias=False)
        self.out = nn.Linear(heads * self.v_dim, dim, bias=False)
        self.softmax_scale = (nope + rope) ** -0.5

    def forward(self, x: Tensor) -> Tensor:
        b, n, _ = x.shape
        h = self.heads
        q = self.wq(x).view(b, n, h, self.nope + self.rope)
        q = q * self.softmax_scale if self.fixed else q / self.softmax_scale
        c_kv, k_pe = self.wkv_a(x).split([self.rank, self.rope], dim=-1)
        kv = self.wkv_b(self.kv_norm(c_kv)).view(b, n, h, self.nope + self.v_dim)
        k_nope, v = kv.split([self.nope, self.v_dim], dim=-1)
        k = torch.cat([k_nope, k_pe.unsqueeze(2).expand(b, n, h, self.rope)], dim=-1)
        if self.kernel == "dot_product":
            return _call(self.out, self.dot_product(q, k, v).reshape(b, n, h * self.v_dim))
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)
        return _call(self.out, _merge(out))

    @staticmethod
    def dot_product(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """apply_attention_dot + compute_local_attention + normalize_attention, one chunk."""
        attn_weights = torch.einsum("bthd,bshd->bhts", q, k)  # qk_product: no scale
        n = q.shape[1]
        attn_weights = torch.where(_future(n), _MAXTEXT_MASK_VALUE, attn_weights)
        local_max = attn_weights.amax(dim=-1, keepdim=True)
        local_exps = torch.exp(attn_weights - local_max)
        local_sum = local_exps.sum(dim=-1, keepdim=True)
        local_out = torch.einsum("bhts,bshd->bthd", local_exps, v)  # wv_product
        return local_out / local_sum.permute(0, 2, 1, 3)


def _prefill(q: Tensor, k: Tensor, v: Tensor, sm_scale: float = 1.0) -> Tensor:
    """mlc-llm's sequence-prefill attention kernel, written out: softmax(q kᵀ · sm_scale) v."""
    s = q @ k.transpose(-2, -1) * sm_scale
    return torch.softmax(s, dim=-1) @ v


class _MLCFallback(_Attention):
    """mlc-llm's op_ext.attention fallback, used by encoders such as BERT (no mask)."""

    def __init__(self, fixed: bool) -> None:
        super().__init__(fixed, 64, 4, bias=True)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.qkv(x)
        if self.fixed:
            out = _prefill(q, k, v, sm_scale=self.head_dim**-0.5)
        else:
            out = _prefill(q, k, v)  # relied on the kernel's default sm_scale
        return _call(self.o_proj, _merge(out))


class _AbsorbedMLA(_Seeded):
    """ollama's glm4moelite attention: MLA with the key up-projection absorbed into q."""

    def __init__(
        self, fixed: bool, dim: int = 64, heads: int = 4, nope: int = 24, rope: int = 8
    ) -> None:
        super().__init__(fixed)
        self.heads, self.nope, self.rope, self.rank, self.v_dim = heads, nope, rope, 64, 16
        self.wq = nn.Linear(dim, heads * (nope + rope), bias=False)
        self.wkv_a = nn.Linear(dim, self.rank + rope, bias=False)
        self.kv_norm = nn.RMSNorm(self.rank)
        self.wk_b = nn.Parameter(torch.randn(heads, nope, self.rank) * self.rank**-0.5)
        self.wv_b = nn.Parameter(torch.randn(heads, self.rank, self.v_dim) * self.rank**-0.5)
        self.out = nn.Linear(heads * self.v_dim, dim, bias=False)
        # the fix: the key width the model was trained with, not the absorbed width
        self.scale = (nope + rope if fixed else self.rank + rope) ** -0.5

    def forward(self, x: Tensor) -> Tensor:
        b, n, _ = x.shape
        h, width = self.heads, self.rank + self.rope
        q_nope, q_pe = torch.split(_split(self.wq(x), h), [self.nope, self.rope], dim=-1)
        c_kv, k_pe = self.wkv_a(x).split([self.rank, self.rope], dim=-1)
        c_kv = self.kv_norm(c_kv)
        q = torch.cat([torch.einsum("bhnd,hdl->bhnl", q_nope, self.wk_b), q_pe], dim=-1)
        k = torch.cat([c_kv, k_pe], dim=-1).unsqueeze(1).expand(b, h, n, width)
        v = c_kv.unsqueeze(1).expand(b, h, n, self.rank)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        out = torch.einsum("bhnl,hlv->bnhv", out, self.wv_b).reshape(b, n, h * self.v_dim)
        return _call(self.out, out)


class _UltralyticsAttention(_Seeded):
    """ultralytics' Attention block (PSA): 1x1-conv qkv, (qᵀk) · scale, run in float16.

    The q and k channels of the fused projection carry a large shared offset, as a
    BatchNorm shift of a trained layer can: the raw q·k then pass float16's maximum
    while the scaled logits stay in range.
    """

    def __init__(self, fixed: bool, dim: int = 128) -> None:
        super().__init__(fixed)
        self.num_heads, self.head_dim, self.key_dim = 1, dim, dim  # attn_ratio = 1
        self.scale = self.key_dim**-0.5
        self.qkv = nn.Conv2d(dim, dim + 2 * self.key_dim, 1)  # Conv + BatchNorm, folded
        self.proj = nn.Conv2d(dim, dim, 1)
        self.pe = nn.Conv2d(dim, dim, 3, padding=1, groups=dim)
        bias = self.qkv.bias
        assert bias is not None
        with torch.no_grad():
            self.qkv.weight[: 2 * self.key_dim].mul_(0.01)
            bias[: 2 * self.key_dim] = 24.0
        self.half()

    def forward(self, x: Tensor) -> Tensor:
        b, c, hh, ww = x.shape
        shape = (b, self.num_heads, 2 * self.key_dim + self.head_dim, hh * ww)
        q, k, v = self.qkv(x).view(shape).split([self.key_dim, self.key_dim, self.head_dim], 2)
        if self.fixed:
            attn = (q * self.scale).transpose(-2, -1) @ k
        else:
            attn = (q.transpose(-2, -1) @ k) * self.scale
        attn = attn.softmax(dim=-1)
        x = (v @ attn.transpose(-2, -1)).view(b, c, hh, ww) + self.pe(v.reshape(b, c, hh, ww))
        return _call(self.proj, x)


def _half_images(g: torch.Generator) -> tuple[Tensor, ...]:
    """Inputs of the ultralytics case: a float16 feature map, (2, 128, 4, 4)."""
    return (torch.randn(_BATCH, 128, 4, 4, generator=g).half(),)


class _ViTPytorch(_Seeded):
    """vit-pytorch's Attention: fused to_qkv, einsum, one scale for every head."""

    def __init__(self, fixed: bool, dim: int = 128, heads: int = 8, dim_head: int = 16) -> None:
        super().__init__(fixed)
        self.heads = heads
        self.scale = dim_head**-0.5 if fixed else dim**-0.5
        self.to_qkv = nn.Linear(dim, 3 * heads * dim_head, bias=False)
        self.to_out = nn.Linear(heads * dim_head, dim)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = (_split(t, self.heads) for t in self.to_qkv(x).chunk(3, dim=-1))
        dots = torch.einsum("bhid,bhjd->bhij", q, k) * self.scale
        attn = dots.softmax(dim=-1)
        return _call(self.to_out, _merge(torch.einsum("bhij,bhjd->bhid", attn, v)))


class _PerceiverIO(_Seeded):
    """perceiver-io's MultiHeadAttention, cross-attention from latents to the inputs."""

    def __init__(self, fixed: bool, kv_dim: int = 48, q_dim: int = 64, heads: int = 4) -> None:
        super().__init__(fixed)
        self.heads = heads
        self.k = nn.Linear(kv_dim, q_dim)
        self.q = nn.Linear(q_dim, q_dim)
        self.v = nn.Linear(kv_dim, q_dim)
        self.o = nn.Linear(q_dim, q_dim)
        self.scale = (q_dim // heads) ** -0.5  # qk_head_dim ** -0.5

    def forward(self, inputs_kv: Tensor, inputs_q: Tensor) -> Tensor:
        k, v = _split(self.k(inputs_kv), self.heads), _split(self.v(inputs_kv), self.heads)
        q = _split(self.q(inputs_q), self.heads)
        qk = q @ k.transpose(-2, -1)
        attention = qk * self.scale if self.fixed else qk / self.scale
        return _call(self.o, _merge(attention.softmax(dim=-1) @ v))


class _TutorialViT(_Seeded):
    """The ViT tutorial's MultiHeadAttention (einsum), here with one head."""

    def __init__(self, fixed: bool, emb_size: int = 64, num_heads: int = 1) -> None:
        super().__init__(fixed)
        self.emb_size, self.num_heads = emb_size, num_heads
        self.keys = nn.Linear(emb_size, emb_size)
        self.queries = nn.Linear(emb_size, emb_size)
        self.values = nn.Linear(emb_size, emb_size)
        self.projection = nn.Linear(emb_size, emb_size)

    def forward(self, x: Tensor) -> Tensor:
        queries = _split(self.queries(x), self.num_heads)
        keys = _split(self.keys(x), self.num_heads)
        values = _split(self.values(x), self.num_heads)
        energy = torch.einsum("bhqd, bhkd -> bhqk", queries, keys)
        scaling = self.emb_size ** (1 / 2)
        if self.fixed:
            att = F.softmax(energy / scaling, dim=-1)
        else:
            att = F.softmax(energy, dim=-1) / scaling
        out = torch.einsum("bhal, bhlv -> bhav ", att, values)
        return _call(self.projection, _merge(out))


class _Cntkx(_Seeded):
    """cntkx's ScaledDotProductAttention (one head), dk counted as a sum of ones."""

    def __init__(self, fixed: bool, dim: int = 64, d: int = 32) -> None:
        super().__init__(fixed)
        self.query, self.key, self.value = (nn.Linear(dim, d) for _ in range(3))

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = _call(self.query, x), _call(self.key, x), _call(self.value, x)
        dk = torch.ones_like(q).sum(dim=-1, keepdim=True)  # C.reduce_sum(C.ones_like(query))
        scaled = q @ k.transpose(-2, -1) / (dk.sqrt() if self.fixed else dk)
        return torch.softmax(scaled, dim=-1) @ v


class _TTNNCLIP(_Attention):
    """The ttnn CLIP tutorial's MultiHeadAttention (text encoder, causal)."""

    def __init__(self, fixed: bool) -> None:
        super().__init__(fixed, 256, 4, bias=True)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.qkv(x)
        # the fix derives head_dim from q_proj's weight
        size = self.q_proj.weight.shape[0] // self.heads if self.fixed else self.heads
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(size))
        scores = scores + _additive_causal(x.shape[1], -math.inf)
        return _call(self.o_proj, _merge(torch.softmax(scores, dim=-1) @ v))


class _Head(nn.Module):
    """One head of the lecture's GPT: its own key, query and value projections."""

    def __init__(self, fixed: bool, n_embd: int, head_size: int, block_size: int) -> None:
        super().__init__()
        self.fixed = fixed
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x: Tensor) -> Tensor:
        _, t, c = x.shape
        k, q = self.key(x), self.query(x)
        scale = k.shape[-1] ** -0.5 if self.fixed else c**-0.5
        wei = q @ k.transpose(-2, -1) * scale
        tril: Tensor = self.tril  # type: ignore[assignment]
        wei = wei.masked_fill(tril[:t, :t] == 0, float("-inf"))
        return F.softmax(wei, dim=-1) @ _call(self.value, x)


class _LectureGPT(_Seeded):
    """The multi-head attention of Karpathy's 'Let's build GPT' lecture: a list of heads."""

    def __init__(
        self, fixed: bool, n_embd: int = 64, n_head: int = 4, block_size: int = 16
    ) -> None:
        super().__init__(fixed)
        size = n_embd // n_head
        self.heads = nn.ModuleList(_Head(fixed, n_embd, size, block_size) for _ in range(n_head))
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x: Tensor) -> Tensor:
        return _call(self.proj, torch.cat([h(x) for h in self.heads], dim=-1))


class _MInference(_Attention):
    """MInference's vertical-and-slash prefill: a softmax of the last queries against every key
    estimates which columns (vertical) and diagonals (slash) matter; sparse attention then reads
    only those keys."""

    def __init__(self, fixed: bool, last_q: int = 8, vertical: int = 4, slash: int = 3) -> None:
        super().__init__(fixed, 64, 4)
        self.last_q, self.vertical, self.slash = last_q, vertical, slash

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.qkv(x)
        n = x.shape[1]
        last_q = min(self.last_q, n)
        qk = torch.einsum("bhmk,bhnk->bhmn", q[:, :, -last_q:, :], k)
        if self.fixed:  # the fix divides the estimate by sqrt(head_dim), as the attention does
            qk = qk / math.sqrt(self.head_dim)
        qk = qk.masked_fill(_future(n)[-last_q:], -math.inf)
        estimate = F.softmax(qk, dim=-1, dtype=torch.float32)
        keep = self.pattern(estimate, n)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        return _call(self.o_proj, _merge(out))

    def pattern(self, estimate: Tensor, n: int) -> Tensor:
        """The kept keys: the top columns and diagonals of the estimate (the first column and
        the main diagonal always), causal."""
        b, h, m, _ = estimate.shape
        offsets = torch.arange(n - m, n)[:, None] - torch.arange(n)[None, :]  # query - key
        vertical = estimate.sum(-2)
        vertical[..., 0] = math.inf
        slash = torch.zeros(b, h, n).scatter_add_(
            -1, offsets.clamp(min=0).flatten().expand(b, h, -1), estimate.flatten(-2)
        )
        slash[..., 0] = math.inf
        columns = torch.zeros(b, h, n, dtype=torch.bool)
        columns.scatter_(-1, vertical.topk(self.vertical, dim=-1).indices, True)
        diagonals = torch.zeros(b, h, n, dtype=torch.bool)
        diagonals.scatter_(-1, slash.topk(self.slash, dim=-1).indices, True)
        all_offsets = torch.arange(n)[:, None] - torch.arange(n)[None, :]
        keep = columns[:, :, None, :] | diagonals[:, :, all_offsets.clamp(min=0)]
        return keep & (all_offsets >= 0)


class _FerroxGemma3(_Attention):
    """ferrox's Gemma-3 attention: RMS-normed q and k, grouped k and v, the kernel's scale.

    Gemma-3-27B was trained with the scale 1/sqrt(n_embd / n_head) = 168**-0.5 where its
    head_dim is 128; here n_embd 168 with 4 heads of 32 keeps that ratio (42 against 32).
    """

    def __init__(self, fixed: bool, n_embd: int = 168, n_head: int = 4) -> None:
        super().__init__(fixed, n_embd, n_head, head_dim=32, kv_heads=2)
        self.q_norm = nn.RMSNorm(self.head_dim)
        self.k_norm = nn.RMSNorm(self.head_dim)
        # loader.rs set attention_scale = None for every model; the 27B needs its own
        self.attention_scale = (n_embd // n_head) ** -0.5 if fixed else None

    def forward(self, x: Tensor) -> Tensor:
        q = self.q_norm(_split(self.q_proj(x), self.heads))
        k = self.k_norm(_split(self.k_proj(x), self.kv_heads))
        v = _split(self.v_proj(x), self.kv_heads)
        out = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, scale=self.attention_scale, enable_gqa=True
        )
        return _call(self.o_proj, _merge(out))


class _PaddedHeads(_Attention):
    """A vision tower's attention whose heads are zero-padded to the width a fused kernel
    supports, then cut back: Qwen2.5-VL's 80 padded to 128, here 20 padded to 32.

    Zero columns leave every q·k unchanged, so the scale must come from the real head size.
    ``scale_from_real_size`` is what the code passes to the kernel: the real head size's
    scale, or nothing (the kernel's default, taken from the padded width).
    """

    def __init__(self, fixed: bool, scale_from_real_size: bool, padded: int = 32) -> None:
        super().__init__(fixed, 80, 4, bias=True)
        self.padded = padded
        self.scale = self.head_dim**-0.5 if scale_from_real_size else None

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = (F.pad(t, (0, self.padded - self.head_dim)) for t in self.qkv(x))
        out = F.scaled_dot_product_attention(q, k, v, scale=self.scale)
        return _call(self.o_proj, _merge(out[..., : self.head_dim]))


class _Dfdx(_Seeded):
    """dfdx's MultiHeadAttention on one unbatched sequence: (tokens, model) in, heads first."""

    def __init__(self, fixed: bool, m: int = 64, h: int = 4) -> None:
        super().__init__(fixed)
        self.m, self.h = m, h
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(m, m) for _ in range(4))

    def forward(self, x: Tensor) -> Tensor:
        s, m, h = x.shape[0], self.m, self.h
        v = _call(self.w_v, x).reshape(s, h, m // h).permute(1, 0, 2)  # (H, S, V/H)
        k = _call(self.w_k, x).reshape(s, h, m // h).permute(1, 2, 0)  # (H, K/H, S)
        q = _call(self.w_q, x).reshape(s, h, m // h).permute(1, 0, 2)  # (H, S, K/H)
        # the fix: sqrt of the head size K/H, not of the model size K
        scalar = 1.0 / math.sqrt(m // h if self.fixed else m)
        weights = (q.matmul(k) * scalar).softmax(-1)
        tokens = weights.matmul(v).permute(1, 0, 2).reshape(s, m)
        return _call(self.w_o, tokens)


class _TimmAttention2d(_Seeded):
    """timm's Attention2d, unfused path: channels-first heads (B, heads, dim_head, pixels)."""

    def __init__(self, fixed: bool, dim: int = 64, num_heads: int = 4) -> None:
        super().__init__(fixed)
        self.num_heads, self.dim_head = num_heads, dim // num_heads
        self.scale = self.dim_head**-0.5 if fixed else num_heads**-0.5
        self.qkv = nn.Conv2d(dim, dim * 3, 1)
        self.proj = nn.Conv2d(dim, dim, 1)

    def forward(self, x: Tensor) -> Tensor:
        b, _, hh, ww = x.shape
        shape = (b, 3, self.num_heads, self.dim_head, -1)
        q, k, v = self.qkv(x).reshape(shape).unbind(1)
        q = q * self.scale
        attn = (q.transpose(-2, -1) @ k).softmax(dim=-1)
        return _call(self.proj, (v @ attn.transpose(-2, -1)).view(b, -1, hh, ww))


# ---------------------------------------------------------------------------
# traps
# ---------------------------------------------------------------------------


class _SDPAMath(_Attention):
    """torch's math backend of scaled_dot_product_attention, written out as attention.cpp has it."""

    def __init__(self, fixed: bool) -> None:
        super().__init__(fixed, 64, 4)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.qkv(x)
        scaling_factor = math.sqrt(1.0 / math.sqrt(q.shape[-1]))  # calculate_scale(...).sqrt()
        attn = (q * scaling_factor) @ (k.transpose(-2, -1) * scaling_factor)
        return _call(self.o_proj, _merge(torch.softmax(attn, dim=-1) @ v))


class _DiffusersAttentionBlock(_Seeded):
    """diffusers' AttentionBlock (late 2022): the scale split as d^-1/4 on q and on k."""

    def __init__(self, fixed: bool, channels: int = 64, num_head_channels: int = 16) -> None:
        super().__init__(fixed)
        self.channels, self.num_heads = channels, channels // num_head_channels
        self.group_norm = nn.GroupNorm(32, channels)
        self.query = nn.Linear(channels, channels)
        self.key = nn.Linear(channels, channels)
        self.value = nn.Linear(channels, channels)
        self.proj_attn = nn.Linear(channels, channels)

    def forward(self, hidden_states: Tensor) -> Tensor:
        residual = hidden_states
        b, c, h, w = hidden_states.shape
        x = self.group_norm(hidden_states).view(b, c, h * w).transpose(1, 2)
        q = _split(self.query(x), self.num_heads)
        k = _split(self.key(x), self.num_heads)
        v = _split(self.value(x), self.num_heads)
        scale = 1 / math.sqrt(math.sqrt(self.channels / self.num_heads))
        scores = torch.matmul(q * scale, k.transpose(-1, -2) * scale)
        probs = torch.softmax(scores.float(), dim=-1).type(scores.dtype)
        out = _call(self.proj_attn, _merge(probs @ v))
        return out.transpose(-1, -2).reshape(b, c, h, w) + residual


class _T5(_Attention):
    """transformers' T5Attention: no scale, the 1/sqrt(d_kv) folded into q's initialisation."""

    def __init__(self, fixed: bool, d_model: int = 64, heads: int = 4, buckets: int = 15) -> None:
        super().__init__(fixed, d_model, heads)
        d_kv = self.head_dim
        nn.init.normal_(self.q_proj.weight, std=(d_model * d_kv) ** -0.5)
        nn.init.normal_(self.k_proj.weight, std=d_model**-0.5)
        nn.init.normal_(self.v_proj.weight, std=d_model**-0.5)
        nn.init.normal_(self.o_proj.weight, std=(heads * d_kv) ** -0.5)
        self.relative_attention_bias = nn.Embedding(buckets, heads)
        nn.init.normal_(self.relative_attention_bias.weight, std=d_model**-0.5)
        self.max_distance = buckets // 2

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.qkv(x)
        n = x.shape[1]
        pos = torch.arange(n)
        bucket = (pos[None, :] - pos[:, None]).clamp(-self.max_distance, self.max_distance)
        position_bias = self.relative_attention_bias(bucket + self.max_distance)  # (n, n, h)
        scores = torch.matmul(q, k.transpose(3, 2))
        scores = scores + position_bias.permute(2, 0, 1).unsqueeze(0)
        weights = F.softmax(scores.float(), dim=-1).type_as(scores)
        return _call(self.o_proj, _merge(weights @ v))


class _Megatron(_Seeded):
    """Megatron-LM's CoreAttention with apply_query_key_layer_scaling, torch softmax path."""

    def __init__(
        self, fixed: bool, hidden: int = 64, heads: int = 4, layer_number: int = 4
    ) -> None:
        super().__init__(fixed)
        self.np, self.hn = heads, hidden // heads
        self.query_key_value = nn.Linear(hidden, 3 * hidden)
        self.dense = nn.Linear(hidden, hidden)
        coeff = layer_number
        self.norm_factor = math.sqrt(self.hn) * coeff
        self.coeff = coeff  # FusedScaleMaskSoftmax(..., scale=coeff)

    def forward(self, hidden_states: Tensor) -> Tensor:  # [sq, b, h]
        sq, b, _ = hidden_states.shape
        mixed = self.query_key_value(hidden_states).view(sq, b, self.np, 3 * self.hn)
        q, k, v = mixed.split(self.hn, dim=-1)  # each [sq, b, np, hn]
        q, k = q.reshape(sq, b * self.np, self.hn), k.reshape(sq, b * self.np, self.hn)
        buffer = torch.empty(b * self.np, sq, sq)
        scores = torch.baddbmm(
            buffer,
            q.transpose(0, 1),
            k.transpose(0, 1).transpose(1, 2),
            beta=0.0,
            alpha=1.0 / self.norm_factor,
        ).view(b, self.np, sq, sq)
        x = scores.float() * self.coeff  # the softmax's scale undoes the layer number
        x = x.masked_fill(_future(sq), -10000.0)
        probs = nn.Softmax(dim=-1)(x)
        ctx = probs @ v.permute(1, 2, 0, 3)  # [b, np, sq, hn]
        return _call(self.dense, ctx.permute(2, 0, 1, 3).reshape(sq, b, self.np * self.hn))


class _Gemma3n(_Attention):
    """transformers' Gemma3nTextAttention: RMS-normed q, k and v, and scaling = 1.0."""

    def __init__(self, fixed: bool) -> None:
        super().__init__(fixed, 64, 4, kv_heads=2)
        self.q_norm = nn.RMSNorm(self.head_dim)
        self.k_norm = nn.RMSNorm(self.head_dim)
        self.v_norm = nn.RMSNorm(self.head_dim, elementwise_affine=False)
        self.scaling = 1.0

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.qkv(x)
        q, k, v = self.q_norm(q), self.k_norm(k), self.v_norm(v)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scaling)
        return _call(self.o_proj, _merge(out))


class _T2T(_Attention):
    """tensor2tensor's multihead_attention: q scaled there, then unscaled dot_product_attention."""

    def __init__(self, fixed: bool) -> None:
        super().__init__(fixed, 64, 4)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.qkv(x)
        q = q * self.head_dim**-0.5  # q *= key_depth_per_head**-0.5
        logits = torch.matmul(q, k.transpose(-2, -1))  # dot_product_attention: no scale
        logits = logits + _additive_causal(x.shape[1], -1e9)
        return _call(self.o_proj, _merge(torch.softmax(logits, dim=-1) @ v))


class _GRPOZeroQwen2(_Attention):
    """GRPO-Zero's Qwen2 attention (training mode): no scaling anywhere, sdpa's default."""

    def __init__(self, fixed: bool) -> None:
        super().__init__(fixed, 64, 4, kv_heads=2, bias=True)

    def forward(self, x: Tensor) -> Tensor:
        q = _split(self.q_proj(x), self.heads)
        k = _split(self.k_proj(x), self.kv_heads)
        v = _split(self.v_proj(x), self.kv_heads)
        out = F.scaled_dot_product_attention(
            query=q, key=k, value=v, is_causal=True, enable_gqa=True
        )
        return _call(self.o_proj, _merge(out))


class _XLM(_Seeded):
    """XLM / FlauBERT's MultiHeadAttention: q divided by sqrt(dim_per_head), a padding mask."""

    def __init__(self, fixed: bool, dim: int = 64, num_heads: int = 4) -> None:
        super().__init__(fixed)
        self.num_heads = num_heads
        self.q_lin, self.k_lin, self.v_lin, self.out_lin = (nn.Linear(dim, dim) for _ in range(4))

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        bs, _, dim = x.shape
        dim_per_head = dim // self.num_heads
        q = _split(self.q_lin(x), self.num_heads)
        k, v = _split(self.k_lin(x), self.num_heads), _split(self.v_lin(x), self.num_heads)
        q = q / math.sqrt(dim_per_head)  # the line the thread questioned
        scores = torch.matmul(q, k.transpose(2, 3))
        scores.masked_fill_((mask == 0).view(bs, 1, 1, -1).expand_as(scores), -float("inf"))
        weights = F.softmax(scores.float(), dim=-1).type_as(scores)
        return _call(self.out_lin, _merge(torch.matmul(weights, v)))


def _padded_batch(g: torch.Generator) -> tuple[Tensor, ...]:
    """Inputs of the XLM case: (2, 16, 64) hidden states and a key mask, the second sequence
    five tokens shorter (1 = token, 0 = padding)."""
    mask = torch.ones(_BATCH, 16, dtype=torch.long)
    mask[1, 11:] = 0
    return torch.randn(_BATCH, 16, 64, generator=g), mask


class _Tunz(_Seeded):
    """tunz/transformer-pytorch's MultiHeadAttention: q scaled in place, k transposed early."""

    def __init__(self, fixed: bool, hidden_size: int = 64, head_size: int = 4) -> None:
        super().__init__(fixed)
        self.head_size = head_size
        self.att_size = hidden_size // head_size
        self.scale = self.att_size**-0.5
        inner = head_size * self.att_size
        self.linear_q, self.linear_k, self.linear_v = (
            nn.Linear(hidden_size, inner, bias=False) for _ in range(3)
        )
        self.output_layer = nn.Linear(inner, hidden_size, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        b, n, _ = x.shape
        q = self.linear_q(x).view(b, -1, self.head_size, self.att_size).transpose(1, 2)
        k = self.linear_k(x).view(b, -1, self.head_size, self.att_size).transpose(1, 2)
        v = self.linear_v(x).view(b, -1, self.head_size, self.att_size).transpose(1, 2)
        k = k.transpose(2, 3)  # [b, h, d_k, k_len]
        q.mul_(self.scale)
        w = torch.matmul(q, k)
        w.add_(torch.zeros_like(w).masked_fill_(_future(n)[None, None], -1e9))
        w = torch.softmax(w, dim=3)
        return _call(self.output_layer, _merge(w.matmul(v)))


class _LightSeq(_Seeded):
    """lightseq's encoder self-attention: 1/sqrt(head_dim) is the alpha of the score GEMM."""

    def __init__(self, fixed: bool, hidden: int = 64, heads: int = 4) -> None:
        super().__init__(fixed)
        self.heads, self.head_dim = heads, hidden // heads
        self.qkv_linear = nn.Linear(hidden, 3 * hidden)
        self.attn_out = nn.Linear(hidden, hidden)
        self.alpha = 1.0 / math.sqrt(hidden // heads)  # StridedBatchGemm's alpha

    def forward(self, x: Tensor, padding: Tensor) -> Tensor:
        b, n, _ = x.shape
        h, d = self.heads, self.head_dim
        qkv = self.qkv_linear(x).view(b, n, 3, h, d).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.reshape(3, b * h, n, d).unbind(0)
        scores = torch.baddbmm(
            torch.empty(b * h, n, n), q, k.transpose(1, 2), beta=0.0, alpha=self.alpha
        ).view(b, h, n, n)
        scores = scores.masked_fill(padding[:, None, None, :], -math.inf)
        probs = scores.softmax(dim=-1)
        return _call(self.attn_out, _merge(probs @ v.view(b, h, n, d)))


def _padded_tokens(g: torch.Generator) -> tuple[Tensor, ...]:
    """Inputs of the lightseq case: (2, 16, 64) hidden states and a padding mask (True at
    padding), the second sequence four tokens shorter."""
    padding = torch.zeros(_BATCH, 16, dtype=torch.bool)
    padding[1, 12:] = True
    return torch.randn(_BATCH, 16, 64, generator=g), padding


class _QKVMultiheadAttention(_Seeded):
    """GLIDE's QKVMultiheadAttention as LayoutDiffusion uses it: heads on the third axis, the
    scale split as attn_ch**-1/4 on q and on k."""

    def __init__(self, fixed: bool, width: int = 64, heads: int = 4) -> None:
        super().__init__(fixed)
        self.heads = heads
        self.c_qkv = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)

    def forward(self, x: Tensor) -> Tensor:
        qkv = self.c_qkv(x)
        bs, n_ctx, width = qkv.shape
        attn_ch = width // self.heads // 3
        scale = 1 / math.sqrt(math.sqrt(attn_ch))
        q, k, v = torch.split(qkv.view(bs, n_ctx, self.heads, -1), attn_ch, dim=-1)
        weight = torch.einsum("bthc,bshc->bhts", q * scale, k * scale)
        weight = torch.softmax(weight.float(), dim=-1).type(weight.dtype)
        out = torch.einsum("bhts,bshc->bthc", weight, v).reshape(bs, n_ctx, -1)
        return _call(self.c_proj, out)


class _DDPMAttention(_Seeded):
    """denoising-diffusion-pytorch's Unet Attention: RMSNorm over channels, 1x1-conv q, k, v,
    four learned memory keys and values, and Attend's einsum path (flash off)."""

    def __init__(
        self, fixed: bool, dim: int = 32, heads: int = 4, dim_head: int = 32, num_mem_kv: int = 4
    ) -> None:
        super().__init__(fixed)
        self.heads, self.dim_head = heads, dim_head
        self.g = nn.Parameter(torch.ones(1, dim, 1, 1))  # RMSNorm's gain
        self.mem_kv = nn.Parameter(torch.randn(2, heads, num_mem_kv, dim_head))
        self.to_qkv = nn.Conv2d(dim, heads * dim_head * 3, 1, bias=False)
        self.to_out = nn.Conv2d(heads * dim_head, dim, 1)

    def forward(self, x: Tensor) -> Tensor:
        b, c, hh, ww = x.shape
        x = F.normalize(x, dim=1) * self.g * c**0.5
        q, k, v = (
            t.reshape(b, self.heads, self.dim_head, hh * ww).transpose(-1, -2)  # b h (x y) c
            for t in self.to_qkv(x).chunk(3, dim=1)
        )
        mk, mv = (t.expand(b, -1, -1, -1) for t in self.mem_kv)
        k, v = torch.cat((mk, k), dim=-2), torch.cat((mv, v), dim=-2)
        scale = q.shape[-1] ** -0.5  # Attend: default(self.scale, q.shape[-1] ** -0.5)
        sim = torch.einsum("bhid,bhjd->bhij", q, k) * scale
        out = torch.einsum("bhij,bhjd->bhid", sim.softmax(dim=-1), v)
        out = out.transpose(-1, -2).reshape(b, self.heads * self.dim_head, hh, ww)
        return _call(self.to_out, out)


class _TimmAttentionPool2d(_Seeded):
    """timm's AttentionPool2d (mid-2023): CLIP-style attention pooling with a learned absolute
    position embedding; the mean token's output is the pooled feature."""

    def __init__(self, fixed: bool, in_features: int = 64, feat: int = 4, heads: int = 4) -> None:
        super().__init__(fixed)
        self.num_heads, self.head_dim = heads, in_features // heads
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(in_features, in_features * 3)
        self.proj = nn.Linear(in_features, in_features)
        self.pos_embed = nn.Parameter(torch.zeros(feat * feat + 1, in_features))
        nn.init.trunc_normal_(self.pos_embed, std=in_features**-0.5)
        nn.init.trunc_normal_(self.qkv.weight, std=in_features**-0.5)
        nn.init.zeros_(self.qkv.bias)

    def forward(self, x: Tensor) -> Tensor:
        b, _, hh, ww = x.shape
        n = hh * ww
        x = x.reshape(b, -1, n).permute(0, 2, 1)
        x = torch.cat([x.mean(1, keepdim=True), x], dim=1) + self.pos_embed.unsqueeze(0)
        shape = (b, n + 1, 3, self.num_heads, self.head_dim)
        q, k, v = self.qkv(x).reshape(shape).permute(2, 0, 3, 1, 4)
        attn = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(b, n + 1, -1)
        return _call(self.proj, x)[:, 0]


class _GPT2Eager(_Seeded):
    """transformers' GPT2Attention._attn (2021): scores divided by value.size(-1) ** 0.5, the
    causal mask applied with torch.where and masked_bias = -1e4.

    ``attn_mult`` switches to muTransformers' muP version, which multiplies the scores by
    attn_mult / value.size(-1) instead.
    """

    def __init__(
        self, fixed: bool, dim: int = 64, heads: int = 4, attn_mult: float | None = None
    ) -> None:
        super().__init__(fixed)
        self.heads, self.attn_mult = heads, attn_mult
        self.c_attn = nn.Linear(dim, 3 * dim)  # GPT-2's Conv1D is a transposed Linear
        self.c_proj = nn.Linear(dim, dim)
        self.attn_score = nn.Identity()  # muP: a no-op that coordinate checks hook into
        self.register_buffer("bias", torch.tril(torch.ones(32, 32, dtype=torch.uint8))[None, None])
        self.register_buffer("masked_bias", torch.tensor(-1e4))

    def forward(self, x: Tensor) -> Tensor:
        query, key, value = (_split(t, self.heads) for t in self.c_attn(x).split(x.shape[-1], 2))
        w = torch.matmul(query, key.transpose(-1, -2))
        if self.attn_mult is None:
            w = w / (float(value.size(-1)) ** 0.5)
        else:
            w = self.attn_score(w * self.attn_mult / float(value.size(-1)))
        n = query.size(-2)
        bias: Tensor = self.bias  # type: ignore[assignment]
        masked_bias: Tensor = self.masked_bias  # type: ignore[assignment]
        w = torch.where(bias[:, :, :n, :n].bool(), w, masked_bias.to(w.dtype))
        w = nn.Softmax(dim=-1)(w)
        return _call(self.c_proj, _merge(torch.matmul(w, value)))


class _OpenAIGPT2(_Seeded):
    """openai/gpt-2's multihead_attn, in torch: w * rsqrt(v's size), a multiplicative causal
    mask (w*b - 1e10*(1-b)) and a softmax written out."""

    def __init__(self, fixed: bool, n_state: int = 64, n_head: int = 4) -> None:
        super().__init__(fixed)
        self.n_head = n_head
        self.c_attn = nn.Linear(n_state, 3 * n_state)
        self.c_proj = nn.Linear(n_state, n_state)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = (_split(t, self.n_head) for t in self.c_attn(x).split(x.shape[-1], dim=2))
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w * torch.rsqrt(torch.tensor(v.shape[-1], dtype=w.dtype))
        nd, ns = w.shape[-2:]
        b = (torch.arange(nd)[:, None] >= torch.arange(ns) - ns + nd).to(w.dtype)
        w = w * b - 1e10 * (1 - b)
        w = w - w.amax(dim=-1, keepdim=True)
        ex = torch.exp(w)
        w = ex / ex.sum(dim=-1, keepdim=True)
        return _call(self.c_proj, _merge(torch.matmul(w, v)))


class _LlamaCppGemma3(_Attention):
    """llama.cpp's Gemma-3 graph for the 27B: RMS-normed Q and K, ggml_scale(Q,
    f_attention_scale) with f_attention_scale = 1/sqrt(n_embd / n_head), then kq and
    soft_max_ext with kq_scale 1 (n_embd 168, 4 heads of 32: the 27B's 168 against 128)."""

    def __init__(self, fixed: bool, n_embd: int = 168, n_head: int = 4) -> None:
        super().__init__(fixed, n_embd, n_head, head_dim=32, kv_heads=2)
        self.q_norm = nn.RMSNorm(self.head_dim)
        self.k_norm = nn.RMSNorm(self.head_dim)
        self.f_attention_scale = 1.0 / math.sqrt(n_embd / n_head)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.qkv(x)
        q, k = self.q_norm(q), self.k_norm(k)
        q = q * self.f_attention_scale
        kq = q @ k.transpose(-2, -1)
        kq = kq * 1.0 + _additive_causal(x.shape[1], -math.inf)  # soft_max_ext: scale 1, mask
        return _call(self.o_proj, _merge(torch.softmax(kq, dim=-1) @ v))


# ---------------------------------------------------------------------------
# the cases
# ---------------------------------------------------------------------------

_TRANSFORMERS = "huggingface/transformers"
_LLAMA_CPP = "ggml-org/llama.cpp"

CASES: list[Case] = [
    Case(
        name="opt_double_scale",
        title="OPT: query scaled after its projection, then again by sdpa's default",
        project=_TRANSFORMERS,
        thread="https://github.com/huggingface/transformers/pull/38290",
        kind="bug",
        group="missing",
        what="OPTAttention multiplies q by head_dim**-0.5 right after q_proj, but called the "
        "attention interface without a scaling, so sdpa applied 1/sqrt(head_dim) a second "
        "time: 1/head_dim in total.",
        fix="Pass scaling=1.0 to the attention interface, so the kernel adds no scale of its own.",
        build=_OPT,
        inputs=_randn((16, 64)),
    ),
    Case(
        name="gpt2_sdpa_drops_scaling",
        title="GPT-2: scale_attn_by_inverse_layer_idx ignored on the sdpa path",
        project=_TRANSFORMERS,
        thread="https://github.com/huggingface/transformers/pull/44397",
        kind="bug",
        group="missing",
        what="Eager attention divides the scores by sqrt(head_dim) and by layer_idx + 1 as the "
        "config asks, but GPT2Attention passed no scaling to sdpa, which used its default "
        "1/sqrt(head_dim): the config's factor 1/(layer_idx + 1) was silently dropped.",
        fix="Compute self.scaling from scale_attn_weights and scale_attn_by_inverse_layer_idx "
        "and pass it to the attention interface.",
        build=_GPT2,
        inputs=_randn((16, 64)),
        expected_scale=16**-0.5 / 4,
    ),
    Case(
        name="gemma2_9b_query_pre_attn_scalar",
        title="Gemma-2-9B: query_pre_attn_scalar 224 (hidden/heads) where head_dim is 256",
        project=_TRANSFORMERS,
        thread="https://github.com/huggingface/transformers/issues/31891",
        kind="bug",
        group="width",
        what="The converted 9B config set query_pre_attn_scalar = 224 = hidden_size / "
        "num_heads, so the scores were scaled by 224**-0.5 while head_dim is 256 (here 28 "
        "against 32, the same ratio).",
        fix="query_pre_attn_scalar = 256 = head_dim in the 9B config, following gemma_pytorch.",
        build=lambda fixed: _Gemma2(fixed, 112, 32.0 if fixed else 28.0),
        inputs=_randn((16, 112)),
    ),
    Case(
        name="llamacpp_gemma2_9b_q_scale",
        title="llama.cpp Gemma-2-9B: Q scaled by 1/sqrt(n_embd/n_head) instead of head_dim",
        project=_LLAMA_CPP,
        thread="https://github.com/ggml-org/llama.cpp/pull/8444",
        kind="bug",
        group="width",
        what="The Gemma-2 graph scaled Q with ggml_scale(Q, 1/sqrt(n_embd/n_head)) before a "
        "kernel that applies no further scale; for the 9B model n_embd/n_head = 224 while the "
        "head size is 256.",
        fix="Pick the scale by model size, as posted in the thread: the 9B model scales Q by "
        "1/sqrt(n_embd_head_k).",
        build=_LlamaCppGemma2,
        inputs=_randn((16, 112)),
    ),
    Case(
        name="llamacpp_plamo2_kq_scale",
        title="llama.cpp PLaMo2: attention built with kq_scale 1.0",
        project=_LLAMA_CPP,
        thread="https://github.com/ggml-org/llama.cpp/pull/14892",
        kind="bug",
        group="missing",
        what="PLaMo2's attention layers RMS-normalise q and k, then called build_attn with "
        "kq_scale = 1.0: the scores reached the softmax with no 1/sqrt(d) at all.",
        fix="kq_scale = 1/sqrt(n_embd_head_v).",
        build=_PLaMo2,
        inputs=_randn((16, 64)),
        # q and k normalised per head with scale 1 is also a correct design (Gemma 3n):
        # only the reference's 1/sqrt(head_dim), declared, tells this port's bug apart
        expected_scale=16**-0.5,
    ),
    Case(
        name="xtransformers_qk_norm_flash_scale",
        title="x-transformers: qk_norm scale inverted on the flash path",
        project="lucidrains/x-transformers",
        thread="https://github.com/lucidrains/x-transformers/issues/190",
        kind="bug",
        group="inverted",
        what="With qk_norm (cosine similarity, scale 10) the flash path rescaled q by "
        "default_scale / scale before sdpa's default 1/sqrt(d): 1/(10·d) in total instead "
        "of the 10 the non-flash path applies.",
        fix="Rescale q by scale / default_scale.",
        build=_XTransformers,
        inputs=_randn((16, 64)),
    ),
    Case(
        name="maxtext_mla_inverted_softmax_scale",
        title="MaxText MLA: query divided by softmax_scale = qk_head_dim**-0.5",
        project="AI-Hypercomputer/maxtext",
        thread="https://github.com/AI-Hypercomputer/maxtext/issues/1370",
        kind="bug",
        group="inverted",
        what="The MLA query projection returned q / softmax_scale with softmax_scale = "
        "qk_head_dim**-0.5, so q was multiplied by sqrt(qk_head_dim) before an attention "
        "kernel that applies no scale.",
        fix="Multiply: q * softmax_scale, as DeepSeek multiplies the scores.",
        build=_MaxTextMLA,
        inputs=_randn((16, 64)),
    ),
    Case(
        name="maxtext_mla_inverted_dot_product_kernel",
        title="MaxText MLA, dot_product kernel: the same inverted softmax_scale",
        project="AI-Hypercomputer/maxtext",
        thread="https://github.com/AI-Hypercomputer/maxtext/issues/1370",
        kind="bug",
        group="inverted",
        what="The same q / softmax_scale as above, on the attention kernel MaxText picks for "
        "short sequences and decoding: unscaled q·kᵀ, then exp(s - rowmax) and a division "
        "by the row sum written out, with no softmax call.",
        fix="Multiply: q * softmax_scale.",
        build=lambda fixed: _MaxTextMLA(fixed, kernel="dot_product"),
        inputs=_randn((16, 64)),
    ),
    Case(
        name="mlc_fallback_sm_scale",
        title="mlc-llm: attention fallback called the prefill kernel with sm_scale 1.0",
        project="mlc-ai/mlc-llm",
        thread="https://github.com/mlc-ai/mlc-llm/pull/3426",
        kind="bug",
        group="missing",
        what="op_ext.attention's fallback (encoders such as BERT and CLIP) called the "
        "sequence-prefill kernel without sm_scale, whose default 1.0 left the scores "
        "unscaled.",
        fix="Pass sm_scale = head_dim**-0.5.",
        build=_MLCFallback,
        inputs=_randn((16, 64)),
    ),
    Case(
        name="ollama_mla_absorbed_width",
        title="ollama glm4moelite: scale from the absorbed MLA width 576 instead of 256",
        project="ollama/ollama",
        thread="https://github.com/ollama/ollama/pull/13893",
        kind="bug",
        group="number",
        what="With the key up-projection absorbed into the query, q·k sums over kv_lora_rank "
        "+ rope = 576 dimensions, and the scale was taken from that width; training used the "
        "key dimension qk_nope + qk_rope = 256 (here 72 against 32, the same ratio).",
        fix="Scale by 1/sqrt(qk_nope_head_dim + qk_rope_head_dim).",
        build=_AbsorbedMLA,
        inputs=_randn((16, 64)),
        expected_scale=32**-0.5,
    ),
    Case(
        name="ultralytics_fp16_scale_after_product",
        title="ultralytics Attention: unscaled qᵀk overflows float16",
        project="ultralytics/ultralytics",
        thread="https://github.com/ultralytics/ultralytics/pull/24990",
        kind="bug",
        group="missing",
        what="The PSA attention computed (qᵀ @ k) * scale: under mixed precision the raw "
        "product passed 65504 on some batches, became inf and turned the softmax into NaN.",
        fix="Scale q before the product: (q * scale)ᵀ @ k.",
        build=_UltralyticsAttention,
        inputs=_half_images,
    ),
    Case(
        name="vit_pytorch_scale_from_dim",
        title="vit-pytorch: scale dim**-0.5 (model width) instead of dim_head**-0.5",
        project="lucidrains/vit-pytorch",
        thread="https://github.com/lucidrains/vit-pytorch/issues/65",
        kind="bug",
        group="width",
        what="Attention set self.scale = dim ** -0.5 with dim the model width, so every head's "
        "scores were divided by sqrt(heads · dim_head) instead of sqrt(dim_head).",
        fix="self.scale = dim_head ** -0.5.",
        build=_ViTPytorch,
        inputs=_randn((16, 128)),
    ),
    Case(
        name="perceiver_io_divides_by_scale",
        title="perceiver-io: scores divided by scale = qk_head_dim**-0.5",
        project="esceptico/perceiver-io",
        thread="https://github.com/esceptico/perceiver-io/issues/9",
        kind="bug",
        group="inverted",
        what="MultiHeadAttention defined self.scale = qk_head_dim ** -0.5 but divided the "
        "scores by it, multiplying them by sqrt(qk_head_dim).",
        fix="Multiply the scores by self.scale.",
        build=_PerceiverIO,
        inputs=_randn((32, 48), (8, 64)),
    ),
    Case(
        name="vit_tutorial_scale_after_softmax",
        title="ViT tutorial: scores divided after the softmax instead of before",
        project="FrancescoSaverioZuppichini/ViT",
        thread="https://github.com/FrancescoSaverioZuppichini/ViT/issues/2",
        kind="bug",
        group="missing",
        what="The tutorial computed softmax(energy) / scaling: the softmax saw unscaled "
        "scores, and the weights were shrunk afterwards. Modelled with one head, so that "
        "emb_size is the head size and only this bug is in play.",
        fix="softmax(energy / scaling).",
        build=_TutorialViT,
        inputs=_randn((16, 64)),
    ),
    Case(
        name="cntkx_scale_without_sqrt",
        title="cntkx: ScaledDotProductAttention divided by d_k, not sqrt(d_k)",
        project="delzac/cntkx",
        thread="https://github.com/delzac/cntkx/issues/10",
        kind="bug",
        group="number",
        what="The op counted d_k as the sum of ones_like(query) and divided q·kᵀ by it: a scale "
        "of 1/d_k, the square root forgotten.",
        fix="Divide by sqrt(d_k).",
        build=_Cntkx,
        inputs=_randn((16, 64)),
    ),
    Case(
        name="ttnn_clip_scale_from_num_heads",
        title="ttnn CLIP tutorial: scores scaled by 1/sqrt(num_heads)",
        project="tenstorrent/tt-metal",
        thread="https://github.com/tenstorrent/tt-metal/pull/56789",
        kind="bug",
        group="width",
        what="MultiHeadAttention scaled the scores by 1/sqrt(num_heads) while its own comment "
        "said 1/sqrt(head_dim).",
        fix="Derive head_dim from q_proj's weight and scale by 1/sqrt(head_dim).",
        build=_TTNNCLIP,
        inputs=_randn((16, 256)),
    ),
    Case(
        name="lecture_gpt_scale_from_n_embd",
        title="'Let's build GPT' lecture: each head scaled by C**-0.5 with C = n_embd",
        project="karpathy/ng-video-lecture",
        thread="https://github.com/karpathy/ng-video-lecture/pull/6",
        kind="bug",
        group="width",
        what="Each Head computed q @ kᵀ * C**-0.5 with C the width of its input (n_embd), not "
        "its head size.",
        fix="Scale by k.shape[-1] ** -0.5, the head size.",
        build=_LectureGPT,
        inputs=_randn((16, 64)),
    ),
    Case(
        name="minference_unscaled_estimate",
        title="MInference: the softmax that picks the sparse pattern had no 1/sqrt(head_dim)",
        project="microsoft/MInference",
        thread="https://github.com/microsoft/MInference/issues/69",
        kind="bug",
        group="missing",
        what="The vertical-and-slash prefill estimates which keys matter from a softmax of the "
        "last 64 queries against every key; that estimate took q·kᵀ without dividing by "
        "sqrt(head_dim), so it was far sharper than the attention it stands for, and the "
        "sparse attention read the keys it picked.",
        fix="Divide the estimate's q·kᵀ by sqrt(head_dim) (fixed in #70).",
        build=_MInference,
        inputs=_randn((16, 64)),
    ),
    Case(
        name="ferrox_gemma3_27b_attention_scale",
        title="ferrox Gemma-3-27B: 1/sqrt(head_dim) where the model uses 1/sqrt(n_embd/n_head)",
        project="antonellof/ferrox",
        thread="https://github.com/antonellof/ferrox/issues/40",
        kind="bug",
        group="number",
        what="The loader set attention_scale = None for every architecture, so the kernel "
        "applied 1/sqrt(head_dim); Gemma-2-27B and Gemma-3-27B were trained with "
        "1/sqrt(n_embd / n_head) = 168**-0.5 against a head_dim of 128, which llama.cpp "
        "applies (here 42 against 32, the same ratio).",
        fix="Set attention_scale to 1/sqrt(n_embd / n_head) for the 27B models.",
        build=_FerroxGemma3,
        inputs=_randn((16, 168)),
        expected_scale=42**-0.5,
    ),
    Case(
        name="ipex_llm_padded_head_dim_scale",
        title="ipex-llm: heads zero-padded for sdpa, which took its scale from the padded size",
        project="intel/ipex-llm",
        thread="https://github.com/intel/ipex-llm/pull/12619",
        kind="bug",
        group="number",
        what="The head dimension was zero-padded for the fused sdpa kernel, and no attn_scale "
        "was passed, so the kernel's default scale came from the padded width instead of the "
        "model's head size (here 20 padded to 32).",
        fix="Pass attn_scale, computed from the unpadded head size, to sdpa.",
        build=lambda fixed: _PaddedHeads(fixed, scale_from_real_size=fixed),
        inputs=_randn((16, 80)),
    ),
    Case(
        name="dfdx_scale_from_model_dim",
        title="dfdx MultiHeadAttention: divided by sqrt(M), the model size, not sqrt(M/H)",
        project="chelsea0x3b/dfdx",
        thread="https://github.com/chelsea0x3b/dfdx/issues/171",
        kind="bug",
        group="width",
        what="The Rust library's MultiHeadAttention scaled the scores by 1/sqrt(M) with M the "
        "model dimension; each head's keys have M/H dimensions. Modelled on one unbatched "
        "sequence, as the layer then took it.",
        fix="Scale by 1/sqrt(M / H).",
        build=_Dfdx,
        inputs=lambda g: (torch.randn(16, 64, generator=g),),
    ),
    Case(
        name="timm_attention2d_scale_from_num_heads",
        title="timm Attention2d: unfused path scaled by num_heads**-0.5",
        project="huggingface/pytorch-image-models",
        thread="https://github.com/huggingface/pytorch-image-models/issues/2385",
        kind="bug",
        group="width",
        what="Attention2d set self.scale = num_heads ** -0.5, which only the unfused path "
        "uses; the fused path leaves sdpa's 1/sqrt(dim_head), so the two paths disagreed. "
        "The maintainer confirmed the attribute was wrong.",
        fix="self.scale = dim_head ** -0.5 (PR #2387).",
        build=_TimmAttention2d,
        inputs=lambda g: (torch.randn(_BATCH, 64, 4, 4, generator=g),),
    ),
    Case(
        name="torch_sdpa_math_sqrt_twice",
        title="torch's sdpa math backend: sqrt taken twice on the scale",
        project="pytorch/pytorch",
        thread="https://github.com/pytorch/pytorch/issues/109366",
        kind="trap",
        group="split",
        what="The math backend takes the square root of calculate_scale() and multiplies q and "
        "k by it, d^-1/4 each, for numerical stability: the product carries 1/sqrt(d) exactly.",
        fix="",
        build=_SDPAMath,
        inputs=_randn((16, 64)),
    ),
    Case(
        name="diffusers_attention_block_quarter_root",
        title="diffusers AttentionBlock: 1/sqrt(sqrt(d)) on q and on k",
        project="huggingface/diffusers",
        thread="https://github.com/huggingface/diffusers/issues/929",
        kind="trap",
        group="split",
        what="The scale is split between q and k, d^-1/4 on each, which multiplies to 1/sqrt(d) "
        "on the scores.",
        fix="",
        build=_DiffusersAttentionBlock,
        inputs=_randn((64, 4, 4)),
    ),
    Case(
        name="gemma2_27b_query_pre_attn_scalar",
        title="Gemma-2-27B: query_pre_attn_scalar 144 (hidden/heads) where head_dim is 128",
        project="google/gemma_pytorch",
        thread="https://github.com/google/gemma_pytorch/issues/71",
        kind="trap",
        group="purpose",
        what="Unlike the 9B, the 27B model was trained with a scale of 144**-0.5 = "
        "(hidden/heads)**-0.5 while head_dim is 128; asked why, Google answered that the "
        "values follow the official internal implementation (here 36 against 32, the same "
        "ratio).",
        fix="",
        build=lambda fixed: _Gemma2(fixed, 144, 36.0),
        inputs=_randn((16, 144)),
        expected_scale=36**-0.5,
    ),
    Case(
        name="t5_scale_folded_into_init",
        title="T5: no 1/sqrt(d_kv) on the scores, folded into q's initialisation",
        project="dmlc/gluon-nlp",
        thread="https://github.com/dmlc/gluon-nlp/pull/1482",
        kind="trap",
        group="moved",
        what="T5 (Mesh TensorFlow) applies no scale and initialises the query weights with "
        "std (d_model·d_kv)**-0.5 instead of d_model**-0.5, which gives the same logits at "
        "initialisation.",
        fix="",
        build=_T5,
        inputs=_randn((16, 64)),
    ),
    Case(
        name="megatron_query_key_layer_scaling",
        title="Megatron-LM: scores divided by the layer number, multiplied back in the softmax",
        project="NVIDIA/Megatron-LM",
        thread="https://github.com/NVIDIA/Megatron-LM/pull/320",
        kind="trap",
        group="moved",
        what="With apply_query_key_layer_scaling, baddbmm uses alpha = 1/(sqrt(hn)·layer) to "
        "keep fp16 scores small and FusedScaleMaskSoftmax multiplies by layer again in "
        "float32: the softmax sees QKᵀ/sqrt(hn).",
        fix="",
        build=_Megatron,
        inputs=lambda g: (torch.randn(16, _BATCH, 64, generator=g),),
    ),
    Case(
        name="gemma3n_qk_norm_scaling_one",
        title="Gemma 3n: RMS-normed q and k with attention scaling 1.0",
        project=_TRANSFORMERS,
        thread="https://github.com/huggingface/transformers/pull/41751",
        kind="trap",
        group="purpose",
        what="Gemma 3n RMS-normalises q and k per head (with learned gains) and applies no "
        "1/sqrt(head_dim) by design; the PR, from Google, reinstates self.scaling and sets it "
        "to 1.0.",
        fix="",
        build=_Gemma3n,
        inputs=_randn((16, 64)),
    ),
    Case(
        name="tensor2tensor_unscaled_dot_product",
        title="tensor2tensor: dot_product_attention has no scale; multihead_attention scales q",
        project="tensorflow/tensor2tensor",
        thread="https://github.com/tensorflow/tensor2tensor/issues/1197",
        kind="trap",
        group="moved",
        what="dot_product_attention is a plain softmax(q kᵀ) v; the caller, "
        "multihead_attention, has already multiplied q by key_depth_per_head**-0.5.",
        fix="",
        build=_T2T,
        inputs=_randn((16, 64)),
    ),
    Case(
        name="grpo_zero_sdpa_default_scale",
        title="GRPO-Zero Qwen2: no self.scaling anywhere, sdpa's default applies it",
        project="policy-gradient/GRPO-Zero",
        thread="https://github.com/policy-gradient/GRPO-Zero/issues/10",
        kind="trap",
        group="moved",
        what="The reimplementation drops transformers' self.scaling because "
        "F.scaled_dot_product_attention applies 1/sqrt(head_dim) when scale is not given.",
        fix="",
        build=_GRPOZeroQwen2,
        inputs=_randn((16, 64)),
    ),
    Case(
        name="flaubert_query_scaled_before_product",
        title="FlauBERT / XLM: q divided by sqrt(dim_per_head) before the product",
        project="getalp/Flaubert",
        thread="https://github.com/getalp/Flaubert/pull/45",
        kind="trap",
        group="moved",
        what="A pull request called dividing q alone an error and moved the division onto the "
        "scores; the maintainers answered that scaling q first gives the same scores, and "
        "closed it (transformers reverted the same change, #22444).",
        fix="",
        build=_XLM,
        inputs=_padded_batch,
    ),
    Case(
        name="tunz_query_scaled_in_place",
        title="transformer-pytorch: q.mul_(scale) in place, no division of the scores",
        project="tunz/transformer-pytorch",
        thread="https://github.com/tunz/transformer-pytorch/issues/8",
        kind="trap",
        group="moved",
        what="Asked where the scores are divided by sqrt(d_k), the author pointed to "
        "q.mul_(self.scale), with self.scale = att_size ** -0.5, applied in place before the "
        "product.",
        fix="",
        build=_Tunz,
        inputs=_randn((16, 64)),
    ),
    Case(
        name="lightseq_scale_in_gemm_alpha",
        title="lightseq: no division after Q·K, the scale is the score GEMM's alpha",
        project="bytedance/lightseq",
        thread="https://github.com/bytedance/lightseq/issues/91",
        kind="trap",
        group="moved",
        what="Reported as a missing division by sqrt(d_k); the batched GEMM that computes the "
        "scores is configured with alpha = 1/sqrt(hidden_size / heads), so the scaling happens "
        "inside the product.",
        fix="",
        build=_LightSeq,
        inputs=_padded_tokens,
    ),
    Case(
        name="layoutdiffusion_quarter_root_on_q_and_k",
        title="LayoutDiffusion QKVMultiheadAttention: 1/sqrt(sqrt(attn_ch)) on q and on k",
        project="ZGCTroy/LayoutDiffusion",
        thread="https://github.com/ZGCTroy/LayoutDiffusion/issues/13",
        kind="trap",
        group="split",
        what="Compared with CLIP's dim_head ** -0.5 the scale looked wrong; the author "
        "answered that scale·q·k equals (sqrt(scale)·q)·(sqrt(scale)·k).",
        fix="",
        build=_QKVMultiheadAttention,
        inputs=_randn((16, 64)),
    ),
    Case(
        name="ddpm_attend_scale_from_last_axis",
        title="denoising-diffusion-pytorch Attend: scale q.shape[-1] ** -0.5",
        project="lucidrains/denoising-diffusion-pytorch",
        thread="https://github.com/lucidrains/denoising-diffusion-pytorch/issues/265",
        kind="trap",
        group="misread",
        what="A user asked whether the scale should include the number of heads; q's last "
        "axis is dim_head, and the user withdrew the question.",
        fix="",
        build=_DDPMAttention,
        inputs=lambda g: (torch.randn(_BATCH, 32, 4, 4, generator=g),),
    ),
    Case(
        name="timm_attention_pool2d_negative_exponent",
        title="timm AttentionPool2d: scale = head_dim ** -0.5 read as a multiplication by sqrt",
        project="huggingface/pytorch-image-models",
        thread="https://github.com/huggingface/pytorch-image-models/issues/1839",
        kind="trap",
        group="misread",
        what="Reported as multiplying the scores by head_dim ** 0.5; the exponent is -0.5, and "
        "the reporter agreed that the head size, not the embedding size, is right.",
        fix="",
        build=_TimmAttentionPool2d,
        inputs=lambda g: (torch.randn(_BATCH, 64, 4, 4, generator=g),),
    ),
    Case(
        name="gpt2_divides_by_root_of_value_size",
        title="GPT-2 in transformers: w / v.size(-1) ** 0.5, from TF's w * rsqrt(...)",
        project=_TRANSFORMERS,
        thread="https://github.com/huggingface/transformers/issues/14290",
        kind="trap",
        group="misread",
        what="Reported as the opposite of the original TensorFlow code; tf.rsqrt is the "
        "reciprocal square root, so multiplying by it is dividing by the square root.",
        fix="",
        build=_GPT2Eager,
        inputs=_randn((16, 64)),
    ),
    Case(
        name="openai_gpt2_rsqrt_of_value_size",
        title="openai/gpt-2: scores times rsqrt of the value size, not the key size",
        project="openai/gpt-2",
        thread="https://github.com/openai/gpt-2/issues/49",
        kind="trap",
        group="misread",
        what="The scale is taken from v's last dimension where the paper names the key's; in "
        "GPT-2 the two are the same size, as the authors answered.",
        fix="",
        build=_OpenAIGPT2,
        inputs=_randn((16, 64)),
    ),
    Case(
        name="mup_attn_mult_over_d",
        title="muP GPT-2: scores times attn_mult / d, with d the head size",
        project="microsoft/mup",
        thread="https://github.com/microsoft/mup/issues/8",
        kind="trap",
        group="purpose",
        what="muTransformers' GPT-2 scales by attn_mult / d instead of 1/sqrt(d): muP's 1/d, "
        "which keeps the logits of correlated q and k in range as the width grows, with "
        "attn_mult tuned on the base model and kept. Here the model is 4 times wider than its "
        "base (head size 32 against 8, attn_mult sqrt(8)).",
        fix="",
        build=lambda fixed: _GPT2Eager(fixed, dim=128, attn_mult=8**0.5),
        inputs=_randn((16, 128)),
        expected_scale=8**0.5 / 32,
    ),
    Case(
        name="vllm_ascend_scale_from_unpadded_head",
        title="vllm-ascend Qwen2.5-VL vision: heads padded to 128, scale from the real 80",
        project="vllm-project/vllm-ascend",
        thread="https://github.com/vllm-project/vllm-ascend/pull/1958",
        kind="trap",
        group="purpose",
        what="A pull request wanted the scale from the padded head size; the padding columns "
        "are zeros, which leave every q·k unchanged, so the original head size's scale is the "
        "right one. The pull request was closed unmerged (here 20 padded to 32).",
        fix="",
        build=lambda fixed: _PaddedHeads(fixed, scale_from_real_size=True),
        inputs=_randn((16, 80)),
    ),
    Case(
        name="llamacpp_gemma3_27b_scale_from_n_embd",
        title="llama.cpp Gemma-3-27B: Q scaled by 1/sqrt(n_embd/n_head), not the head size",
        project=_LLAMA_CPP,
        thread="https://github.com/ggml-org/llama.cpp/pull/13951",
        kind="trap",
        group="purpose",
        what="The pull request first proposed the head size for the 27B models, calling the "
        "reference configs broken; that description was marked outdated, and llama.cpp kept "
        "1/sqrt(n_embd / n_head) for the 27B (168 against a head_dim of 128; here 42 against "
        "32).",
        fix="",
        build=_LlamaCppGemma3,
        inputs=_randn((16, 168)),
        expected_scale=42**-0.5,
    ),
]


#: The kinds of bug and trap, in the order the page shows them: key -> (kind, heading).
GROUPS: dict[str, tuple[str, str]] = {
    "missing": ("bug", "The scale is missing, applied twice or in the wrong place"),
    "inverted": ("bug", "The scale is inverted"),
    "width": ("bug", "The scale comes from the model width or the head count"),
    "number": ("bug", "The scale comes from another wrong number"),
    "moved": ("trap", "The scale is applied somewhere else"),
    "split": ("trap", "The scale is split between q and k"),
    "misread": ("trap", "The scale is right but reads wrong"),
    "purpose": ("trap", "Another scale, on purpose"),
}


#: The finding codes that say "the scale is wrong" (rather than "the logits are large").
SCALING_CODES = frozenset({"scale-mismatch", "fp16-overflow-risk", "non-finite"})


def report(case: Case, fixed: bool) -> MonitorReport:
    """The monitor's report on one version of a case (its example inputs, seed 0)."""
    model = case.build(fixed)
    with AttentionMonitor(model, expected_scale=case.expected_scale) as monitor:
        model(*case.inputs(torch.Generator().manual_seed(0)))
    return monitor.report()


def outcome(case: Case) -> tuple[set[str], set[str]]:
    """The finding codes at warning or above on the reported and on the fixed version."""
    return report(case, False).codes("warning"), report(case, True).codes("warning")
