"""Multi-head attention as an ``nn.Module``, with its score-scaling strategy as a submodule."""

from __future__ import annotations

import torch
from torch import nn

from . import _checks
from ._attention import AttentionResult, scaled_dot_product_attention
from ._strategies import ScoreScaling, make_strategy

__all__ = ["MultiHeadAttention"]


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention (``batch_first``) with a pluggable score-scaling strategy.

    Projects inputs of width $d_{\text{model}}$ to ``num_heads`` heads of size ``head_dim``,
    applies [scaled_dot_product_attention][attnscale.scaled_dot_product_attention] with the
    strategy and optional soft-cap, and projects back. The projections are ``nn.Linear`` modules
    ``q_proj``, ``k_proj``, ``v_proj`` (``d_model -> num_heads * head_dim``) and ``out_proj``
    (back to ``d_model``) with PyTorch's default init, except where the strategy re-initialises
    them ([FoldedInit][attnscale.FoldedInit]). The strategy is the submodule ``strategy``, so its
    learnable parameters (e.g. ``strategy.log_scale``, ``strategy.q_norm.weight``) are part of
    ``parameters()``. Unlike ``nn.MultiheadAttention``, returned weights are per head (not
    averaged).

    Parameters
    ----------
    d_model : int
        Width of the inputs and of the output.
    num_heads : int
        Number of heads.
    strategy : str or ScoreScaling
        Name from [SCALING_STRATEGIES][attnscale.SCALING_STRATEGIES] or a strategy object built
        with ``d_k=head_dim`` and this ``num_heads``.
    softcap : float, optional
        Tanh soft-cap of the logits, composable with any strategy.
    head_dim : int, optional
        Size $d_k$ of each head; default ``d_model // num_heads``, which must then divide exactly.
    bias : bool
        Whether the projections have biases.
    device, dtype : optional
        Where and in which floating ``torch.dtype`` to create the parameters.

    Raises
    ------
    TypeError
        If a size is not an integer, ``dtype`` is not a floating ``torch.dtype`` (strings such as
        ``"float32"`` are refused, as torch refuses them) or ``strategy`` has the wrong type.
    ValueError
        If ``num_heads`` does not divide ``d_model`` (without ``head_dim``), a size is not
        positive or so large that torch cannot allocate the weights, ``device`` cannot hold data
        (``"meta"``) or is not available, the strategy is unknown or built for other sizes, or
        ``softcap`` is not > 0.

    Examples
    --------
    >>> import torch
    >>> from attnscale import MultiHeadAttention
    >>> mha = MultiHeadAttention(32, 4, strategy="qk_layernorm", softcap=50.0)
    >>> x = torch.randn(2, 7, 32)
    >>> out = mha(x, need_weights=True)
    >>> out.output.shape, out.weights.shape
    (torch.Size([2, 7, 32]), torch.Size([2, 4, 7, 7]))
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        strategy: str | ScoreScaling = "inverse_sqrt",
        softcap: float | None = None,
        head_dim: int | None = None,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.d_model = _checks.positive_int(d_model, "d_model")
        self.num_heads = _checks.positive_int(num_heads, "num_heads")
        if head_dim is None:
            if self.d_model % self.num_heads:
                raise ValueError(
                    f"num_heads={self.num_heads} must divide d_model={self.d_model} "
                    "(or pass head_dim)"
                )
            head_dim = self.d_model // self.num_heads
        self.head_dim = _checks.positive_int(head_dim, "head_dim")
        self.softcap = None if softcap is None else _checks.positive_float(softcap, "softcap")
        inner = self.num_heads * self.head_dim
        dev, dt = _checks.placement(device, dtype)
        _checks.allocation((inner, self.d_model), dt, "d_model, num_heads or head_dim")
        kw: dict[str, object] = {"device": dev, "dtype": dt}
        self.q_proj = nn.Linear(self.d_model, inner, bias=bias, **kw)
        self.k_proj = nn.Linear(self.d_model, inner, bias=bias, **kw)
        self.v_proj = nn.Linear(self.d_model, inner, bias=bias, **kw)
        self.out_proj = nn.Linear(inner, self.d_model, bias=bias, **kw)
        # A strategy object keeps its own dtype unless one is asked for.
        self.strategy = make_strategy(strategy, self.head_dim, self.num_heads).to(
            device=dev, dtype=None if dtype is None else dt
        )
        self.strategy.init_projections(self.q_proj, self.k_proj)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        x = x.view(batch, length, self.num_heads, self.head_dim)  # (batch, len, heads, d_k)
        return x.transpose(1, 2)  # (batch, heads, len, d_k)

    def project_qk(
        self, query: torch.Tensor, key: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-head queries and keys before the strategy is applied.

        Parameters
        ----------
        query : Tensor
            ``(batch, q_len, d_model)``.
        key : Tensor, optional
            ``(batch, k_len, d_model)``; defaults to ``query``.

        Returns
        -------
        tuple of Tensor
            ``q`` of shape ``(batch, heads, q_len, head_dim)`` and ``k`` of shape
            ``(batch, heads, k_len, head_dim)``, ready for
            [scaled_dot_product_attention][attnscale.scaled_dot_product_attention] with
            ``strategy=self.strategy``.

        Raises
        ------
        TypeError
            If an input is not a floating tensor, or its dtype differs from the parameters'.
        ValueError
            If an input is not 3-D with width ``d_model``, or is on another device than the
            parameters.
        """
        key = query if key is None else key
        for name, t in (("query", query), ("key", key)):
            _checks.tokens(t, name, self.d_model, self.q_proj.weight)
        return self._split(self.q_proj(query)), self._split(self.k_proj(key))

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        *,
        attn_mask: torch.Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        need_logits: bool = False,
    ) -> AttentionResult:
        """Attend from ``query`` to ``key``/``value`` (self-attention when they are omitted).

        Parameters
        ----------
        query : Tensor
            ``(batch, q_len, d_model)``.
        key : Tensor, optional
            ``(batch, k_len, d_model)``; defaults to ``query``.
        value : Tensor, optional
            ``(batch, k_len, d_model)``; defaults to ``key``.
        attn_mask : Tensor, optional
            Boolean (``True`` = attend) or additive mask broadcastable to
            ``(batch, heads, q_len, k_len)``.
        is_causal : bool
            Top-left aligned causal mask.
        need_weights, need_logits : bool
            Also return per-head weights / logits, ``(batch, heads, q_len, k_len)``.

        Returns
        -------
        AttentionResult
            ``output`` of shape ``(batch, q_len, d_model)``.

        Raises
        ------
        TypeError
            If an input is not a floating tensor (a Python list, an integer tensor), or its dtype
            differs from the parameters' (convert the module or the input with ``.to()``).
        ValueError
            If an input is not 3-D with width ``d_model``, the batch sizes or key/value lengths
            differ, an input is on another device than the parameters, or the mask is invalid
            (as in [scaled_dot_product_attention][attnscale.scaled_dot_product_attention], which
            also says what fully masked rows give).
        """
        key = query if key is None else key
        value = key if value is None else value
        for name, t in (("query", query), ("key", key), ("value", value)):
            _checks.tokens(t, name, self.d_model, self.q_proj.weight)
        if key.shape[:2] != value.shape[:2] or key.shape[0] != query.shape[0]:
            raise ValueError(
                "query, key and value must share the batch size and key/value the length, got "
                f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
            )
        q = self._split(self.q_proj(query))  # (batch, heads, q_len, d_k)
        k = self._split(self.k_proj(key))  # (batch, heads, k_len, d_k)
        v = self._split(self.v_proj(value))  # (batch, heads, k_len, d_k)
        res = scaled_dot_product_attention(
            q,
            k,
            v,
            strategy=self.strategy,
            attn_mask=attn_mask,
            is_causal=is_causal,
            softcap=self.softcap,
            need_weights=need_weights,
            need_logits=need_logits,
        )
        batch, heads, q_len, d_v = res.output.shape
        # Explicit sizes (not -1): an empty sequence has no size to infer.
        out = res.output.transpose(1, 2).reshape(batch, q_len, heads * d_v)  # (batch, q_len, .)
        return AttentionResult(self.out_proj(out), res.weights, res.logits)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, head_dim={self.head_dim}, "
            f"softcap={self.softcap}"
        )
