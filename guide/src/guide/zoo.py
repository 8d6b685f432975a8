"""Tiny Hugging Face ``transformers`` models, for testing on third-party code.

This module is private: it exists for the documentation site and the test
suite only, and it promises no stability at all. Its names, families,
configs, planted bugs and numbers may change, or the module may go away, in
any release, without notice. ``transformers`` is not a dependency of
attnscale; it is imported only when :func:`build` is called.

Every model is built from a tiny config (hidden size 64, 2 layers, 4 heads
of size 16, vocabulary 128) with seeded random weights; nothing is ever
downloaded. A forward pass takes milliseconds on a CPU.

The facts below were read from the ``transformers`` 5.23 sources and checked
by running the models with torch 2.13 on a CPU; other versions may differ.

How each family's eager attention computes the scores
-----------------------------------------------------
Unless said otherwise: ``torch.matmul(q, k.transpose(2, 3)) * scaling`` with
``scaling = head_dim**-0.5`` read from the attention module's ``scaling``
attribute at every call; the sdpa path passes the same attribute as
``scale=``, so it honours a changed value too. Then the additive mask, then
softmax.

* ``gpt2``: q, k and v from one fused ``Conv1D`` (``c_attn``, weight laid
  out ``(in, out)``, columns ``[q | k | v]``). The scale comes from the
  config (``scale_attn_weights``; ``scale_attn_by_inverse_layer_idx``
  divides it by ``layer_idx + 1``). With ``reorder_and_upcast_attn=True``
  the eager path instead uses ``torch.baddbmm(..., q.float(), k.float(),
  alpha=scaling)`` and a float32 softmax; the sdpa path ignores that switch.
* ``gpt2``, ``bert``, ``roberta``, ``bart``, ``t5``, ``whisper``: softmax in
  the input dtype (float16 stays float16). ``llama``, ``mistral``,
  ``qwen2``, ``mixtral``, ``phi3``, ``gemma2``, ``gpt_neox``, ``opt``,
  ``vit``: softmax with ``dtype=torch.float32``, cast back.
* ``opt`` and ``whisper`` multiply the *query* by ``scaling`` right after
  its projection and call the attention kernel with ``scaling=1.0``.
* ``t5`` has no scale (``scaling = 1.0``): ``1/sqrt(d_kv)`` is folded into
  the initialisation of the query weights (std ``(d_model * d_kv)**-0.5``
  against ``d_model**-0.5`` for the keys). A learned relative position bias
  is added to the scores before the mask; on the sdpa path it travels inside
  a float ``attn_mask`` of shape ``(1, heads, q, k)``.
* ``gemma2``: ``scaling = query_pre_attn_scalar**-0.5`` (a config value,
  256 for the 2B and 9B checkpoints, 144 (hidden/heads) for the 27B whose
  ``head_dim`` is 128; the first 9B conversion had 224, transformers #31891), then a tanh
  soft-cap ``50 * tanh(scores / 50)`` before the mask. No sdpa path
  (``_supports_sdpa = False``: sdpa cannot soft-cap).
* Llama-like families (``llama``, ``mistral``, ``qwen2``, ``mixtral``,
  ``phi3``, ``gemma2``) use grouped-query attention here (2 key/value
  heads, which eager repeats to 4 before the product).
* ``phi3``: q, k and v in one fused ``nn.Linear`` (``qkv_proj``, rows
  ``[q | k | v]``). ``gpt_neox``: one fused ``query_key_value`` whose rows
  are interleaved per head (``[q_h | k_h | v_h]`` for each head ``h``).
* ``falcon`` (the default multi-query, rotary variant): one fused
  ``query_key_value`` (rows ``[q (4 heads) | k (1 head) | v (1 head)]``) and
  its own attention code: eager computes ``q @ k.transpose(-1, -2)`` then
  ``/= math.sqrt(self.head_dim)``, with a softmax in the hidden-state dtype;
  sdpa is called *without* ``scale=`` (so the default ``1/sqrt(head_dim)``).
  No attribute changes its scale.

Masks
-----
Eager paths get an additive float mask ``(batch, 1, q, k)`` in the model
dtype whose masked entries are ``torch.finfo(dtype).min`` (finite, never
``-inf``), or None when nothing is masked (encoders with an all-ones mask,
ViT). Sdpa paths get a boolean mask (True: attend), or None and
``is_causal=True`` when the mask is purely causal. With Llama's left
padding, the padded query positions of the second row are fully masked:
eager then spreads a uniform softmax over all keys, while torch's sdpa
returns zeros there, so the two agree only at the unpadded positions.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "BUGS",
    "FAMILIES",
    "IMPLEMENTATIONS",
    "MAX_SEQ_LEN",
    "build",
    "expected_scale",
    "head_dim",
    "implementations",
    "run",
]

IMPLEMENTATIONS: tuple[str, ...] = ("eager", "sdpa")
"""Attention implementations :func:`build` knows how to ask for."""

BUGS: tuple[str, ...] = ("no-scale", "wrong-scalar", "qk-x16", "fp16-overflow")
"""Bugs :func:`build` can plant, by name.

``"no-scale"``
    The ``1/sqrt(d_k)`` scale turned off (see :func:`build` for how, per
    family).
``"wrong-scalar"``
    Gemma-2 only: ``query_pre_attn_scalar`` set to 7/8 of ``head_dim`` (the
    ratio of the real 224-instead-of-256 mix-up).
``"qk-x16"``
    Query and key projections (weights and biases) multiplied by 16 after
    initialisation, so every raw ``q . k`` grows 256-fold.
``"fp16-overflow"``
    Float16 only: query and key projections doubled until the raw ``q . k``
    of the eager path exceeds 65504 (the float16 maximum) somewhere.
"""

MAX_SEQ_LEN = 64
"""Largest ``seq_len`` :func:`build` accepts (text models have 128 positions)."""

_VOCAB = 128
_HIDDEN = 64
_LAYERS = 2
_HEADS = 4
_KV_HEADS = 2  # grouped-query attention for the Llama-like families
_FFN = 128
_POSITIONS = 128

# Keyword names of the same quantity in the different configs, first match wins.
_HEAD_DIM_KEYS = ("head_dim", "d_kv")
_HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model")
_HEADS_KEYS = ("num_attention_heads", "n_head", "num_heads", "encoder_attention_heads")

_COMMON = {
    "vocab_size": _VOCAB,
    "hidden_size": _HIDDEN,
    "num_hidden_layers": _LAYERS,
    "num_attention_heads": _HEADS,
    "intermediate_size": _FFN,
    "max_position_embeddings": _POSITIONS,
}
_LLAMA_LIKE = {
    **_COMMON,
    "num_key_value_heads": _KV_HEADS,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
_SEQ2SEQ = {
    "vocab_size": _VOCAB,
    "d_model": _HIDDEN,
    "encoder_layers": _LAYERS,
    "decoder_layers": _LAYERS,
    "encoder_attention_heads": _HEADS,
    "decoder_attention_heads": _HEADS,
    "encoder_ffn_dim": _FFN,
    "decoder_ffn_dim": _FFN,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "decoder_start_token_id": 3,
}


@dataclass(frozen=True)
class _Family:
    """What :func:`build` needs to know about one model family.

    Attributes
    ----------
    config, model, attention
        Class names in ``transformers``: the config, the model built, and the
        attention module that owns the scale (and the q/k projections).
    kwargs
        Config keyword arguments of the tiny model.
    inputs
        Input kind: ``"text"``, ``"seq2seq"``, ``"vision"`` or ``"speech"``.
    padding
        ``"none"``, ``"right"`` or ``"left"``: where the second row of the
        batch is padded.
    q, k
        Names of the query and key projections inside the attention module;
        for fused projections both name the same module and ``fused`` says
        how its output features are laid out.
    fused
        ``None`` (separate projections), ``"conv1d"`` (GPT-2: columns
        ``[q | k | v]`` of an ``(in, out)`` weight), ``"rows"`` (rows
        ``[q | k | v]``, k and v equally wide) or ``"per-head"`` (rows
        ``[q_h | k_h | v_h]`` per head).
    no_scale
        How ``"no-scale"`` is planted: ``"attribute"`` (``module.scaling =
        1.0``), a dict of config overrides, or ``"query-weights"`` (the query
        weights multiplied by ``sqrt(head_dim)``, for families whose code
        offers no working switch).
    sdpa
        Whether ``transformers`` offers the sdpa path for this family.
    scale_site
        ``"kernel"``: the scale goes to the attention kernel; ``"query"``: q
        is multiplied by it before the product and the kernel gets 1.0;
        ``"init"``: folded into the query weights (T5); ``"hard-coded"``:
        Falcon's ``math.sqrt(head_dim)`` / sdpa default.
    """

    config: str
    model: str
    attention: str
    kwargs: dict[str, Any]
    inputs: str = "text"
    padding: str = "none"
    q: str = "q_proj"
    k: str = "k_proj"
    fused: str | None = None
    no_scale: str | dict[str, Any] = "attribute"
    sdpa: bool = True
    scale_site: str = "kernel"


_FAMILIES: dict[str, _Family] = {
    "gpt2": _Family(
        "GPT2Config",
        "GPT2LMHeadModel",
        "GPT2Attention",
        {
            "vocab_size": _VOCAB,
            "n_positions": _POSITIONS,
            "n_embd": _HIDDEN,
            "n_layer": _LAYERS,
            "n_head": _HEADS,
            "n_inner": _FFN,
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
        q="c_attn",
        k="c_attn",
        fused="conv1d",
        no_scale={"scale_attn_weights": False},
    ),
    "bert": _Family(
        "BertConfig",
        "BertModel",
        "BertSelfAttention",
        dict(_COMMON, pad_token_id=0),
        padding="right",
        q="query",
        k="key",
    ),
    "roberta": _Family(
        "RobertaConfig",
        "RobertaModel",
        "RobertaSelfAttention",
        # Positions start after padding_idx = pad_token_id = 1.
        dict(
            _COMMON,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
            max_position_embeddings=_POSITIONS + 2,
        ),
        padding="right",
        q="query",
        k="key",
    ),
    "llama": _Family(
        "LlamaConfig", "LlamaForCausalLM", "LlamaAttention", _LLAMA_LIKE, padding="left"
    ),
    "mistral": _Family("MistralConfig", "MistralForCausalLM", "MistralAttention", _LLAMA_LIKE),
    "qwen2": _Family("Qwen2Config", "Qwen2ForCausalLM", "Qwen2Attention", _LLAMA_LIKE),
    "mixtral": _Family(
        "MixtralConfig",
        "MixtralForCausalLM",
        "MixtralAttention",
        dict(_LLAMA_LIKE, num_local_experts=4, num_experts_per_tok=2),
    ),
    "phi3": _Family(
        "Phi3Config",
        "Phi3ForCausalLM",
        "Phi3Attention",
        _LLAMA_LIKE,
        q="qkv_proj",
        k="qkv_proj",
        fused="rows",
    ),
    "gemma2": _Family(
        "Gemma2Config",
        "Gemma2ForCausalLM",
        "Gemma2Attention",
        # head_dim 32 != hidden / heads = 16; the healthy scalar equals head_dim.
        dict(_LLAMA_LIKE, head_dim=32, query_pre_attn_scalar=32),
        no_scale={"query_pre_attn_scalar": 1},
        sdpa=False,
    ),
    "gpt_neox": _Family(
        "GPTNeoXConfig",
        "GPTNeoXForCausalLM",
        "GPTNeoXAttention",
        dict(_COMMON, bos_token_id=1, eos_token_id=2),
        q="query_key_value",
        k="query_key_value",
        fused="per-head",
    ),
    "falcon": _Family(
        "FalconConfig",
        "FalconForCausalLM",
        "FalconAttention",
        {
            "vocab_size": _VOCAB,
            "hidden_size": _HIDDEN,
            "num_hidden_layers": _LAYERS,
            "num_attention_heads": _HEADS,
            "max_position_embeddings": _POSITIONS,
            "bos_token_id": 1,
            "eos_token_id": 2,
            # The defaults, pinned: _qk_features relies on this fused layout.
            "multi_query": True,
            "new_decoder_architecture": False,
            "alibi": False,
        },
        q="query_key_value",
        k="query_key_value",
        fused="rows",
        no_scale="query-weights",
        scale_site="hard-coded",
    ),
    "opt": _Family(
        "OPTConfig",
        "OPTForCausalLM",
        "OPTAttention",
        {
            "vocab_size": _VOCAB,
            "hidden_size": _HIDDEN,
            "num_hidden_layers": _LAYERS,
            "num_attention_heads": _HEADS,
            "ffn_dim": _FFN,
            "max_position_embeddings": _POSITIONS,
            "word_embed_proj_dim": _HIDDEN,
            "pad_token_id": 0,
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
        scale_site="query",
    ),
    "bart": _Family(
        "BartConfig",
        "BartForConditionalGeneration",
        "BartAttention",
        dict(_SEQ2SEQ, max_position_embeddings=_POSITIONS),
        inputs="seq2seq",
    ),
    "t5": _Family(
        "T5Config",
        "T5ForConditionalGeneration",
        "T5Attention",
        {
            "vocab_size": _VOCAB,
            "d_model": _HIDDEN,
            "d_kv": _HIDDEN // _HEADS,
            "d_ff": _FFN,
            "num_layers": _LAYERS,
            "num_decoder_layers": _LAYERS,
            "num_heads": _HEADS,
            "pad_token_id": 0,
            "eos_token_id": 1,
            "decoder_start_token_id": 0,
        },
        inputs="seq2seq",
        q="q",
        k="k",
        no_scale="query-weights",
        scale_site="init",
    ),
    "vit": _Family(
        "ViTConfig",
        "ViTModel",
        "ViTAttention",
        {
            "hidden_size": _HIDDEN,
            "num_hidden_layers": _LAYERS,
            "num_attention_heads": _HEADS,
            "intermediate_size": _FFN,
            "patch_size": 4,
            "num_channels": 3,
        },
        inputs="vision",
    ),
    "whisper": _Family(
        "WhisperConfig",
        "WhisperForConditionalGeneration",
        "WhisperAttention",
        dict(_SEQ2SEQ, num_mel_bins=8, max_target_positions=_POSITIONS),
        inputs="speech",
        scale_site="query",
    ),
}

FAMILIES: tuple[str, ...] = tuple(_FAMILIES)
"""Model families :func:`build` can make."""


def _family(family: str) -> _Family:
    """Return the table entry of ``family``, or raise a ValueError naming it."""
    try:
        return _FAMILIES[family]
    except (KeyError, TypeError):
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}; got {family!r}") from None


def _check_bug(family: str, bug: str | None) -> None:
    """Raise a ValueError if ``bug`` is unknown or cannot be planted in ``family``."""
    if bug is None:
        return
    if bug not in BUGS:
        raise ValueError(f"bug must be None or one of {', '.join(BUGS)}; got {bug!r}")
    if bug == "wrong-scalar" and family != "gemma2":
        raise ValueError(
            f"bug 'wrong-scalar' (query_pre_attn_scalar != head_dim) exists only for family 'gemma2', not {family!r}"
        )


def _first(kwargs: dict[str, Any], keys: tuple[str, ...]) -> Any:
    """Return the value of the first of ``keys`` present in ``kwargs``."""
    return next(kwargs[key] for key in keys if key in kwargs)


def implementations(family: str) -> tuple[str, ...]:
    """Attention implementations a family supports in ``transformers`` 5.23.

    Parameters
    ----------
    family : str
        One of :data:`FAMILIES`.

    Returns
    -------
    tuple of str
        ``("eager", "sdpa")``, or ``("eager",)`` for Gemma-2, whose tanh
        soft-cap the sdpa kernel cannot apply.

    Raises
    ------
    ValueError
        If ``family`` is unknown.
    """
    return IMPLEMENTATIONS if _family(family).sdpa else ("eager",)


def head_dim(family: str) -> int:
    """Head size of the family's tiny model.

    Parameters
    ----------
    family : str
        One of :data:`FAMILIES`.

    Returns
    -------
    int
        The config's ``head_dim`` (``d_kv`` for T5) where set, else hidden
        size / number of heads. 16 for every family except Gemma-2 (32).

    Raises
    ------
    ValueError
        If ``family`` is unknown.
    """
    kwargs = _family(family).kwargs
    if any(key in kwargs for key in _HEAD_DIM_KEYS):
        return int(_first(kwargs, _HEAD_DIM_KEYS))
    return int(_first(kwargs, _HIDDEN_KEYS)) // int(_first(kwargs, _HEADS_KEYS))


def expected_scale(family: str, bug: str | None = None) -> float:
    """The factor the family's code multiplies ``q . k`` by.

    With ``bug=None`` this is the scale of the healthy model; with a bug, the
    scale of the model :func:`build` makes with that bug (unchanged for bugs
    planted in the weights).

    Parameters
    ----------
    family : str
        One of :data:`FAMILIES`.
    bug : str or None, optional
        One of :data:`BUGS`, or None for the healthy model.

    Returns
    -------
    float
        Usually ``head_dim**-0.5``. Exceptions:

        * ``t5``: 1.0, always. T5 folds ``1/sqrt(d_kv)`` into the
          initialisation of the query weights instead; its ``"no-scale"``
          bug unfolds it (query weights times ``sqrt(d_kv)``), so the code
          scale stays 1.0.
        * ``gemma2``: ``query_pre_attn_scalar**-0.5``. Healthy: the scalar
          equals ``head_dim`` (32, so the scale is ``32**-0.5``, not
          ``16**-0.5`` as hidden/heads would suggest); ``"wrong-scalar"``:
          ``28**-0.5``; ``"no-scale"``: 1.0. The scores are then soft-capped
          by ``50 * tanh(x / 50)``.
        * ``opt`` and ``whisper``: ``head_dim**-0.5``, but applied to the
          query right after its projection; the attention kernel (eager or
          sdpa) receives ``scaling=1.0``.
        * ``falcon``: ``head_dim**-0.5``, hard-coded (eager:
          ``/ math.sqrt(head_dim)``; sdpa: no ``scale=``, so the default).
          Its ``"no-scale"`` bug is planted in the query weights, so the code
          scale stays the same.
        * ``gpt2`` built with ``config_overrides`` such as
          ``scale_attn_by_inverse_layer_idx=True`` uses a per-layer scale
          that this function does not know about.

    Raises
    ------
    ValueError
        If ``family`` or ``bug`` is unknown, or ``bug`` is ``"wrong-scalar"``
        for a family other than ``gemma2``.
    """
    spec = _family(family)
    _check_bug(family, bug)
    if spec.scale_site == "init":
        return 1.0
    if bug == "no-scale" and spec.no_scale != "query-weights":
        return 1.0
    # Computed as transformers does (``int ** -0.5``), so the values compare equal.
    size: int = head_dim(family)
    if family == "gemma2":
        size = (
            _wrong_scalar(family) if bug == "wrong-scalar" else spec.kwargs["query_pre_attn_scalar"]
        )
    scale: float = size**-0.5
    return scale


def _wrong_scalar(family: str) -> int:
    """Gemma-2's buggy ``query_pre_attn_scalar``: 7/8 of head_dim (224/256)."""
    return head_dim(family) * 7 // 8


def _config_for(
    spec: _Family,
    family: str,
    attn_implementation: str,
    seq_len: int,
    bug: str | None,
    config_overrides: dict[str, Any] | None,
) -> Any:
    """Build the ``transformers`` config of a family: bug switches, then overrides."""
    transformers = importlib.import_module("transformers")
    kwargs = dict(spec.kwargs, use_cache=False)
    if spec.inputs == "vision":
        # side**2 patches + [CLS] >= seq_len tokens
        side = math.ceil(math.sqrt(max(seq_len - 1, 1)))
        kwargs["image_size"] = side * kwargs["patch_size"]
    elif spec.inputs == "speech":
        # A stride-1 then a stride-2 convolution: 2 * seq_len mel frames in.
        kwargs["max_source_positions"] = seq_len
    if bug == "no-scale" and isinstance(spec.no_scale, dict):
        kwargs.update(spec.no_scale)
    elif bug == "wrong-scalar":
        kwargs["query_pre_attn_scalar"] = _wrong_scalar(family)
    kwargs.update(config_overrides or {})
    return getattr(transformers, spec.config)(attn_implementation=attn_implementation, **kwargs)


def _make_inputs(
    spec: _Family, config: Any, seq_len: int, seed: int, dtype: torch.dtype
) -> dict[str, torch.Tensor]:
    """Seeded model inputs: batch of 2, second row padded as the family says."""
    gen = torch.Generator().manual_seed(seed)
    batch = 2
    if spec.inputs == "vision":
        size = config.image_size
        pixels = torch.randn(batch, config.num_channels, size, size, generator=gen)
        return {"pixel_values": pixels.to(dtype)}
    if spec.inputs == "speech":
        frames = 2 * config.max_source_positions
        features = torch.randn(batch, config.num_mel_bins, frames, generator=gen).to(dtype)
        decoder_ids = torch.randint(4, _VOCAB, (batch, seq_len), generator=gen)
        return {"input_features": features, "decoder_input_ids": decoder_ids}
    # Token ids from 4 up stay clear of the special tokens (0-3).
    input_ids = torch.randint(4, _VOCAB, (batch, seq_len), generator=gen)
    mask = torch.ones(batch, seq_len, dtype=torch.long)
    pad = max(1, seq_len // 4) if seq_len > 1 else 0  # never a fully padded row
    if spec.padding == "right":
        mask[1, seq_len - pad :] = 0
    elif spec.padding == "left":
        mask[1, :pad] = 0
    pad_id = config.pad_token_id if config.pad_token_id is not None else 0
    input_ids = input_ids.masked_fill(mask == 0, pad_id)
    inputs = {"input_ids": input_ids, "attention_mask": mask}
    if spec.inputs == "seq2seq":
        inputs["decoder_input_ids"] = torch.randint(4, _VOCAB, (batch, seq_len), generator=gen)
    return inputs


def _attention_modules(model: torch.nn.Module, spec: _Family) -> Iterator[torch.nn.Module]:
    """The modules of ``model`` whose class is the family's attention class."""
    return (m for m in model.modules() if type(m).__name__ == spec.attention)


def _qk_features(spec: _Family, family: str, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Boolean masks over the ``width`` output features of a fused projection: (q, k)."""
    index = torch.arange(width)
    if spec.fused == "conv1d":  # [q | k | v], equal widths
        return index < width // 3, (index >= width // 3) & (index < 2 * width // 3)
    dim = head_dim(family)
    if spec.fused == "per-head":  # [q_h | k_h | v_h] for each head h
        slot = (index // dim) % 3
        return slot == 0, slot == 1
    # "rows": [q (all heads) | k | v], k as wide as v.
    q_width = _HEADS * dim
    k_width = (width - q_width) // 2
    return index < q_width, (index >= q_width) & (index < q_width + k_width)


def _scale_qk(model: torch.nn.Module, family: str, q_factor: float, k_factor: float) -> None:
    """Multiply the query and key projections (weights and biases) in place."""
    spec = _FAMILIES[family]
    with torch.no_grad():
        for module in _attention_modules(model, spec):
            if spec.fused is None:
                for name, factor in ((spec.q, q_factor), (spec.k, k_factor)):
                    proj = module.get_submodule(name)
                    for param in (proj.weight, proj.bias):
                        if isinstance(param, torch.Tensor):
                            param.mul_(factor)
                continue
            proj = module.get_submodule(spec.q)
            weight, bias = proj.weight, proj.bias
            assert isinstance(weight, torch.Tensor)
            out_dim = 1 if spec.fused == "conv1d" else 0  # GPT-2's Conv1D weight is (in, out)
            q_rows, k_rows = _qk_features(spec, family, weight.shape[out_dim])
            factors = torch.ones(q_rows.shape, dtype=weight.dtype)
            factors[q_rows] = q_factor
            factors[k_rows] = k_factor
            weight.mul_(factors if out_dim == 1 else factors[:, None])
            if isinstance(bias, torch.Tensor):
                bias.mul_(factors)


_MATMULS: frozenset[Callable[..., Any]] = frozenset(
    {
        torch.matmul,
        torch.bmm,
        torch.baddbmm,
        torch.einsum,
        torch.Tensor.matmul,
        torch.Tensor.__matmul__,
        torch.Tensor.bmm,
        torch.Tensor.baddbmm,
    }
)


class _OverflowSpy(torch.overrides.TorchFunctionMode):
    """Note whether a batched matmul turned finite inputs into an inf output."""

    def __init__(self) -> None:
        super().__init__()
        self.overflowed = False

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        if (
            func in _MATMULS
            and isinstance(out, torch.Tensor)
            and out.dim() >= 3
            and out.is_floating_point()
            and not self.overflowed
        ):
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            if all(bool(t.isfinite().all()) for t in tensors) and bool(torch.isinf(out).any()):
                self.overflowed = True
        return out


def _scores_overflow(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> bool:
    """Whether a forward pass computes an infinite raw ``q . k`` from finite inputs.

    Watches the batched matrix products (``matmul``, ``@``, ``bmm``,
    ``baddbmm``, ``einsum``) of 3 or more dimensions: in these models those
    are the attention products ``q . k`` and ``probabilities . v``, the
    projections being 2-D or ``nn.Linear``. Only ``q`` and ``k`` are grown by
    the bug, so an inf there is a score overflow.
    """
    spy = _OverflowSpy()
    with spy:
        run(model, inputs)
    return spy.overflowed


def _fresh(
    spec: _Family,
    family: str,
    attn_implementation: str,
    dtype: torch.dtype,
    seed: int,
    bug: str | None,
    seq_len: int,
    config_overrides: dict[str, Any] | None,
) -> tuple[torch.nn.Module, Any]:
    """A seeded float32 model cast to ``dtype``, its config switches set; weights untouched."""
    transformers = importlib.import_module("transformers")
    config = _config_for(spec, family, attn_implementation, seq_len, bug, config_overrides)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = getattr(transformers, spec.model)(config)
    # Cast the parameters only, as ``from_config(config, dtype=...)`` leaves
    # them: float buffers such as the rotary ``inv_freq`` stay float32.
    with torch.no_grad():
        for param in model.parameters():
            param.data = param.data.to(dtype)
    config.dtype = dtype
    return model.eval(), config


def build(
    family: str,
    *,
    attn_implementation: str = "eager",
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
    bug: str | None = None,
    seq_len: int = 16,
    config_overrides: dict[str, Any] | None = None,
) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    """Build a tiny randomly initialised model of ``family`` and its inputs.

    Parameters
    ----------
    family : str
        One of :data:`FAMILIES`.
    attn_implementation : str, optional
        ``"eager"`` or ``"sdpa"`` (see :func:`implementations`), passed to the
        config as ``attn_implementation=``.
    dtype : torch.dtype, optional
        Floating dtype of the weights and float inputs. The weights are drawn
        in float32 and then cast, so every dtype rounds the same weights.
    seed : int, optional
        Seeds the weights and the inputs; the caller's global random state is
        left as it was. The same arguments give bitwise identical weights.
    bug : str or None, optional
        One of :data:`BUGS`, or None for a healthy model. How each is planted:

        * ``"no-scale"``: ``gpt2``: config ``scale_attn_weights=False``;
          ``gemma2``: config ``query_pre_attn_scalar=1`` (the soft-cap
          stays); ``t5``: the query
          weights times ``sqrt(d_kv)`` (T5 has no scale to switch off, it is
          folded into the query initialisation); ``falcon``: the query part
          of the fused projection times ``sqrt(head_dim)`` (its scale is
          hard-coded from ``head_dim`` in eager and left to sdpa's default
          otherwise); every other family: ``scaling = 1.0`` on each
          attention module, which eager and sdpa both read at call time.
        * ``"wrong-scalar"``: ``gemma2`` only, config
          ``query_pre_attn_scalar = 7/8 * head_dim`` (28 for head_dim 32).
        * ``"qk-x16"``: query and key projection weights (and biases) times
          16; for fused projections only their q and k parts.
        * ``"fp16-overflow"``: needs ``dtype=torch.float16``. Query and key
          projections are doubled until an eager forward pass of the same
          weights computes an infinite raw ``q . k`` (above 65504) from
          finite inputs; the same weights are used whatever
          ``attn_implementation`` is. This works for every family: 9
          doublings (q and k times 512) for most, 10 for ``opt`` and
          ``whisper`` (whose q is scaled before the product), 7 for ``t5``.
          What follows differs: the eager outputs are NaN, except Gemma-2's,
          whose tanh soft-cap turns the inf into a finite 50; the sdpa
          outputs stay finite (torch's kernels do not form the unscaled
          float16 product).
    seq_len : int, optional
        Tokens per row, 1 to :data:`MAX_SEQ_LEN`. ViT gets the smallest
        square number of 4x4 patches that, with [CLS], reaches ``seq_len``;
        Whisper gets ``2 * seq_len`` mel frames (``seq_len`` encoder tokens)
        and ``seq_len`` decoder tokens.
    config_overrides : dict or None, optional
        Extra config attributes set before the model is built (for example
        ``{"reorder_and_upcast_attn": True}`` for ``gpt2``). Bug switches are
        applied first, so an override can undo them. The weight bugs assume
        the fused q/k/v layouts of the default configs: do not combine them
        with overrides that change a layout (Falcon's
        ``new_decoder_architecture``, ``multi_query``).

    Returns
    -------
    model : torch.nn.Module
        The model, in eval mode and in ``dtype``, with ``use_cache=False``.
    inputs : dict of str to torch.Tensor
        Keyword arguments for ``model(**inputs)``, batch of 2:
        ``input_ids`` and ``attention_mask`` (BERT and RoBERTa: the second
        row padded at the end; Llama: padded at the start; others: all
        ones), ``decoder_input_ids`` for encoder-decoders, ``pixel_values``
        for ViT, ``input_features`` for Whisper.

    Raises
    ------
    ValueError
        If ``family``, ``attn_implementation``, ``bug``, ``dtype`` or
        ``seq_len`` is not accepted, naming the argument; or if
        ``"fp16-overflow"`` cannot be planted because ``config_overrides``
        made the eager path compute ``q . k`` in float32.
    """
    spec = _family(family)
    if attn_implementation not in implementations(family):
        raise ValueError(
            f"attn_implementation must be one of {', '.join(implementations(family))} for family {family!r}; "
            f"got {attn_implementation!r}"
        )
    _check_bug(family, bug)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating torch.dtype; got {dtype!r}")
    if bug == "fp16-overflow" and dtype != torch.float16:
        raise ValueError(f"bug 'fp16-overflow' needs dtype=torch.float16; got dtype={dtype}")
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or not 1 <= seq_len <= MAX_SEQ_LEN:
        raise ValueError(f"seq_len must be an int from 1 to {MAX_SEQ_LEN}; got {seq_len!r}")

    model, config = _fresh(
        spec, family, attn_implementation, dtype, seed, bug, seq_len, config_overrides
    )
    inputs = _make_inputs(spec, config, seq_len, seed, dtype)
    if bug == "no-scale" and spec.no_scale == "attribute":
        for module in _attention_modules(model, spec):
            setattr(module, "scaling", 1.0)  # noqa: B010 (a plain attribute, not a parameter)
    elif bug == "no-scale":  # "query-weights": undo the scale through q
        _scale_qk(model, family, math.sqrt(head_dim(family)), 1.0)
    elif bug == "qk-x16":
        _scale_qk(model, family, 16.0, 16.0)
    elif bug == "fp16-overflow":
        doublings = _doublings_to_overflow(
            spec, family, dtype, seed, seq_len, config_overrides, inputs
        )
        _scale_qk(model, family, 2.0**doublings, 2.0**doublings)
    return model, inputs


def _doublings_to_overflow(
    spec: _Family,
    family: str,
    dtype: torch.dtype,
    seed: int,
    seq_len: int,
    config_overrides: dict[str, Any] | None,
    inputs: dict[str, torch.Tensor],
    limit: int = 20,
) -> int:
    """How many doublings of q and k make an eager twin's raw ``q . k`` overflow."""
    twin, _ = _fresh(spec, family, "eager", dtype, seed, None, seq_len, config_overrides)
    for doublings in range(limit + 1):
        if _scores_overflow(twin, inputs):
            return doublings
        _scale_qk(twin, family, 2.0, 2.0)  # exact in floating point
    raise ValueError(
        f"bug 'fp16-overflow' cannot be planted in family {family!r} with config_overrides={config_overrides!r}: "
        f"its eager raw q.k did not overflow float16 within {limit} doublings of q and k "
        "(GPT-2's reorder_and_upcast_attn=True, for one, computes q.k in float32)"
    )


def run(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """Run ``model(**inputs)`` without gradients and return one output tensor.

    Parameters
    ----------
    model : torch.nn.Module
        A model from :func:`build`.
    inputs : dict of str to torch.Tensor
        Its inputs from :func:`build`.

    Returns
    -------
    torch.Tensor
        ``logits`` where the model has them (causal LMs, encoder-decoders),
        else ``last_hidden_state`` (BERT, RoBERTa, ViT).
    """
    with torch.no_grad():
        out = model(**inputs)
    tensor = getattr(out, "logits", None)
    if tensor is None:
        tensor = out.last_hidden_state
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(
            f"model output has neither logits nor last_hidden_state: {type(out).__name__}"
        )
    return tensor
