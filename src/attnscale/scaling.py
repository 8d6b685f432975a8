r"""Scaled dot-product attention with pluggable score-scaling strategies.

The attention logits are $\ell = \alpha\, \phi(q) \cdot \psi(k)$, optionally soft-capped as
$c \tanh(\ell / c)$, then masked and passed through a softmax. A *score-scaling strategy*
chooses the maps $\phi, \psi$ (identity, or a normalisation of $q$ and $k$), the multiplier
$\alpha$ (fixed or learnable) and, for the folded variant, how the projections are
initialised.

Public API
----------
- [scaled_dot_product_attention][attnscale.scaled_dot_product_attention]
  ``(query, key, value, *, strategy="inverse_sqrt", attn_mask=None, is_causal=False,
  softcap=None, need_weights=False, need_logits=False) -> AttentionResult``, on tensors of shape
  ``(batch, heads, length, head_dim)``.
- [MultiHeadAttention][attnscale.MultiHeadAttention]
  ``(d_model, num_heads, *, strategy="inverse_sqrt", softcap=None, head_dim=None, bias=True,
  device=None, dtype=None)``: an ``nn.Module`` with projections ``q_proj``, ``k_proj``, ``v_proj``,
  ``out_proj`` and the strategy as submodule ``strategy``; its ``forward(query, key=None,
  value=None, *, attn_mask=None, is_causal=False, need_weights=False, need_logits=False)`` takes
  ``(batch, length, d_model)`` tensors and returns an ``AttentionResult``.
- [AttentionResult][attnscale.AttentionResult]: named tuple ``(output, weights, logits)``;
  ``weights`` and ``logits`` are ``None`` unless requested.
- Strategies (``nn.Module`` subclasses of [ScoreScaling][attnscale.ScoreScaling]):
  [NoScale][attnscale.NoScale] ``"none"``, [InverseSqrt][attnscale.InverseSqrt]
  ``"inverse_sqrt"``, [InverseD][attnscale.InverseD] ``"inverse_d"``,
  [LearnableTemperature][attnscale.LearnableTemperature] ``"learnable_temperature"``,
  [QKLayerNorm][attnscale.QKLayerNorm] ``"qk_layernorm"``, [QKRMSNorm][attnscale.QKRMSNorm]
  ``"qk_rmsnorm"``, [CosineScale][attnscale.CosineScale] ``"cosine"`` and
  [FoldedInit][attnscale.FoldedInit] ``"folded_init"``; build one by name (or check one built
  by hand) with [make_strategy][attnscale.make_strategy]; all names are in
  [SCALING_STRATEGIES][attnscale.SCALING_STRATEGIES].
- [soft_cap][attnscale.soft_cap]: the tanh soft-cap, composable with every strategy through the
  ``softcap`` argument.
"""

from __future__ import annotations

import math
from typing import ClassVar, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from . import _checks

__all__ = [
    "SCALING_STRATEGIES",
    "AttentionResult",
    "CosineScale",
    "FoldedInit",
    "InverseD",
    "InverseSqrt",
    "LearnableTemperature",
    "MultiHeadAttention",
    "NoScale",
    "QKLayerNorm",
    "QKRMSNorm",
    "ScoreScaling",
    "make_strategy",
    "scaled_dot_product_attention",
    "soft_cap",
]

_LOW_PRECISION = (torch.float16, torch.bfloat16)


class AttentionResult(NamedTuple):
    """What attention returns: the output and, when requested, weights and logits.

    Attributes
    ----------
    output : Tensor
        Attention output; ``(batch, heads, q_len, d_v)`` from the function,
        ``(batch, q_len, d_model)`` from the module, ``(batch, q_len, d_v)`` from
        [AdditiveAttention][attnscale.AdditiveAttention] (whose weights and logits have no heads
        dimension either).
    weights : Tensor or None
        Attention probabilities per head, ``(batch, heads, q_len, k_len)``, after masking; ``None``
        unless ``need_weights=True``.
    logits : Tensor or None
        Pre-softmax scores per head, ``(batch, heads, q_len, k_len)``, after scaling and
        soft-capping but *before* the mask is applied (so they stay finite); ``None`` unless
        ``need_logits=True``.
    """

    output: torch.Tensor
    weights: torch.Tensor | None
    logits: torch.Tensor | None


def soft_cap(logits: torch.Tensor, cap: float) -> torch.Tensor:
    r"""Tanh soft-capping of logits, $c \tanh(\ell / c)$.

    Smooth, odd and monotonic; close to the identity for $|\ell| \ll c$, and
    $|c \tanh(\ell / c)| < c$ always. Cost: three element-wise operations per logit
    (divide, tanh, multiply), no parameters. Used by Gemma 2 ($c = 50$) and Grok-1 ($c = 30$).

    Parameters
    ----------
    logits : Tensor
        Any floating-point tensor.
    cap : float
        The cap $c > 0$.

    Returns
    -------
    Tensor
        Capped logits, same shape and dtype.

    Raises
    ------
    ValueError
        If ``cap`` is not a finite number > 0.

    Examples
    --------
    >>> import torch
    >>> from attnscale import soft_cap
    >>> float(soft_cap(torch.tensor(1000.0), 50.0))
    50.0
    """
    _checks.float_tensor(logits, "logits", min_dim=0)
    return _soft_cap(logits, _checks.positive_float(cap, "cap"))


def _soft_cap(logits: torch.Tensor, cap: float) -> torch.Tensor:
    info = torch.finfo(logits.dtype)
    if info.tiny <= cap <= info.max:
        return torch.tanh(logits / cap) * cap
    # The dtype would hold this cap as 0 or inf (then 0/0 or 0*inf = NaN): work in float64.
    return (torch.tanh(logits.double() / cap) * cap).to(logits.dtype)


def _inv_sqrt(n: int) -> float:
    """``1 / sqrt(n)`` for any positive int, also beyond float range (10**400)."""
    try:
        return 1.0 / math.sqrt(n)
    except OverflowError:
        return math.exp(-0.5 * math.log(n))


def _inv(n: int) -> float:
    """``1 / n`` for any positive int; 0.0 where it underflows."""
    try:
        return 1.0 / n
    except OverflowError:
        return math.exp(-math.log(n))


# --------------------------------------------------------------------------- strategies


class ScoreScaling(nn.Module):
    r"""Base class of the score-scaling strategies.

    A strategy maps the per-head queries and keys to $(\phi(q), \psi(k), \alpha)$ so that the
    logits are $\alpha\, \phi(q) \cdot \psi(k)$. Subclasses override
    [prepare][attnscale.ScoreScaling.prepare] and, if they change the projections' initial
    values, [init_projections][attnscale.ScoreScaling.init_projections]. Learnable parameters are
    ordinary ``nn.Parameter`` attributes of the strategy, so they appear in the parameters of a
    [MultiHeadAttention][attnscale.MultiHeadAttention] under ``strategy.``.

    Parameters
    ----------
    d_k : int
        Head dimension of queries and keys.
    num_heads : int
        Number of heads (sets the shape of per-head parameters).

    Attributes
    ----------
    name : str
        Registry name (a key of [SCALING_STRATEGIES][attnscale.SCALING_STRATEGIES]).
    constant_scale : bool
        True when the logits are a fixed multiple of the raw $q \cdot k$: no parameters, no
        normalisation of $q$ or $k$. The trainer's fast path relies on it. A subclass inherits
        ``True`` only by declaring it again, since overriding ``prepare`` may break it.
    cost : str
        Extra parameters (in total, over all heads) / extra FLOPs per head over the plain
        product, for $n$ queries, $m$ keys, head dimension $d$ and $H$ heads ($QK^\top$ itself
        costs $2nmd$).
    used_by : tuple of str
        Published models that use the technique; each is checked against ``transformers``'
        model code or the cited paper. Empty when no model uses it alone.
    citation : tuple of str
        arXiv identifiers of the technique's paper and of the papers behind ``used_by``.

    Raises
    ------
    ValueError, TypeError
        If ``d_k`` or ``num_heads`` is not a positive integer.
    """

    name: ClassVar[str] = ""
    constant_scale: ClassVar[bool] = False
    cost: ClassVar[str] = ""
    used_by: ClassVar[tuple[str, ...]] = ()
    citation: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        # Not inherited: a subclass that overrides prepare() may no longer scale q . k linearly.
        if "constant_scale" not in cls.__dict__:
            cls.constant_scale = False

    def __init__(self, d_k: int, num_heads: int = 1) -> None:
        super().__init__()
        self.d_k = _checks.positive_int(d_k, "d_k")
        self.num_heads = _checks.positive_int(num_heads, "num_heads")
        _checks.allocation((self.num_heads,), torch.float64, "num_heads")  # per-head scales

    def prepare(
        self, query: torch.Tensor, key: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, float | torch.Tensor]:
        """Return the transformed query and key and the logit multiplier.

        Parameters
        ----------
        query, key : Tensor
            ``(batch, heads, length, d_k)``.

        Returns
        -------
        tuple
            ``(query, key, alpha)`` where ``alpha`` is a Python float or a tensor of shape
            ``(1, heads, 1, 1)``.
        """
        raise NotImplementedError

    def effective_scale(self) -> torch.Tensor:
        r"""The current multiplier $\alpha$ per head, shape ``(num_heads,)``.

        For learnable strategies this is differentiable; detach it to record it.
        """
        return torch.full((self.num_heads,), self._fixed_scale())

    def _fixed_scale(self) -> float:
        return _inv_sqrt(self.d_k)

    def init_projections(self, q_proj: nn.Linear, k_proj: nn.Linear) -> None:
        """Re-initialise the query and key projections if the strategy requires it.

        The default does nothing (the projections keep PyTorch's default ``nn.Linear`` init).
        """

    def extra_repr(self) -> str:
        return f"d_k={self.d_k}, num_heads={self.num_heads}"


class NoScale(ScoreScaling):
    r"""No scaling: $\ell = q \cdot k$.

    The logit variance grows linearly with $d_k$ (for independent unit-variance components it is
    exactly $d_k$), so the softmax sharpens as heads get wider. This is the baseline Vaswani et
    al. (2017, arXiv:1706.03762, §3.2.1) argue against; it is used on purpose only where the scale
    is folded elsewhere (see [FoldedInit][attnscale.FoldedInit]).
    """

    name = "none"
    constant_scale = True
    cost = "0 / 0"
    citation = ("arXiv:1706.03762",)

    def prepare(
        self, query: torch.Tensor, key: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, float | torch.Tensor]:
        return query, key, 1.0

    def _fixed_scale(self) -> float:
        return 1.0


class InverseSqrt(ScoreScaling):
    r"""The standard scale: $\ell = q \cdot k / \sqrt{d_k}$.

    For independent components with unit variance, $\mathrm{Var}(q \cdot k) = d_k$, so the scaled
    logits have unit variance whatever $d_k$. Vaswani et al. 2017 (arXiv:1706.03762, §3.2.1).
    The default of PyTorch's ``scaled_dot_product_attention`` and ``nn.MultiheadAttention``,
    FlashAttention's ``softmax_scale``, and almost every Transformer.
    """

    name = "inverse_sqrt"
    constant_scale = True
    cost = "0 / nd"
    used_by = ("BERT", "GPT-2", "Llama")
    citation = ("arXiv:1706.03762",)

    def prepare(
        self, query: torch.Tensor, key: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, float | torch.Tensor]:
        return query, key, _inv_sqrt(self.d_k)


class InverseD(ScoreScaling):
    r"""μP's scale: $\ell = q \cdot k / d_k$.

    Tensor Programs V (Yang et al. 2022, arXiv:2203.03466) argue that after training $q$ and $k$
    are correlated, so $q \cdot k$ grows like $d_k$, not $\sqrt{d_k}$; dividing by $d_k$ keeps the
    logits of order one as width grows, which lets hyperparameters transfer across widths. At
    initialisation (independent $q, k$) it makes logits shrink like $1/\sqrt{d_k}$. At $d_k = 1$ it
    coincides with [InverseSqrt][attnscale.InverseSqrt].
    """

    name = "inverse_d"
    constant_scale = True
    cost = "0 / nd"
    used_by = ("μTransfer GPT-3",)
    citation = ("arXiv:2203.03466",)

    def prepare(
        self, query: torch.Tensor, key: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, float | torch.Tensor]:
        return query, key, _inv(self.d_k)

    def _fixed_scale(self) -> float:
        return _inv(self.d_k)


class LearnableTemperature(ScoreScaling):
    r"""A learnable multiplier per head, initialised at $1/\sqrt{d_k}$.

    $$\ell = e^{\theta_h}\, q \cdot k,\qquad \theta_h^{(0)} = -\tfrac12 \ln d_k .$$

    The scale is stored as its logarithm ``log_scale`` (shape ``(num_heads,)``) so it stays
    positive; at initialisation the strategy equals [InverseSqrt][attnscale.InverseSqrt]. A
    learnable temperature is not by itself a bound: training can raise it, and the logits with it.
    Used with normalised $q, k$ in QKNorm (Henry et al. 2020, arXiv:2010.04245) and Swin V2
    (see [CosineScale][attnscale.CosineScale]); plain learnable temperatures appear in
    contrastive heads (CLIP's logit scale).

    Parameters
    ----------
    d_k, num_heads : int
        Head dimension and number of heads.
    init_scale : float, optional
        Initial multiplier; default $1/\sqrt{d_k}$.
    """

    name = "learnable_temperature"
    cost = "H / nd"
    citation = ("arXiv:2010.04245",)

    def __init__(self, d_k: int, num_heads: int = 1, *, init_scale: float | None = None) -> None:
        super().__init__(d_k, num_heads)
        init = _inv_sqrt(self.d_k) if init_scale is None else init_scale
        init = _checks.positive_float(init, "init_scale")
        self.log_scale = nn.Parameter(torch.full((self.num_heads,), math.log(init)))

    def effective_scale(self) -> torch.Tensor:
        return self.log_scale.exp()

    def prepare(
        self, query: torch.Tensor, key: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, float | torch.Tensor]:
        alpha = self.log_scale.exp().to(query.dtype).view(1, -1, 1, 1)  # (1, heads, 1, 1)
        return query, key, alpha


def _layer_norm(x: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
    # Normalise in float32 at least: in float16 the mean of squares overflows for |x| > 256.
    dtype = torch.promote_types(x.dtype, torch.float32)
    weight = None if norm.weight is None else norm.weight.to(dtype)
    bias = None if norm.bias is None else norm.bias.to(dtype)
    return F.layer_norm(x.to(dtype), norm.normalized_shape, weight, bias, norm.eps).to(x.dtype)


class QKLayerNorm(ScoreScaling):
    r"""LayerNorm on each head's queries and keys, then $1/\sqrt{d_k}$.

    $$\ell = \frac{\mathrm{LN}_q(q) \cdot \mathrm{LN}_k(k)}{\sqrt{d_k}},\qquad
    \mathrm{LN}(x) = \gamma \odot \frac{x - \bar{x}}{\sqrt{\mathrm{Var}(x) + \epsilon}} + \beta .$$

    Each normalised vector has norm about $\sqrt{d_k}\,\lVert\gamma\rVert_\infty$, so
    $|\ell| \le \sqrt{d_k}$ times the gains (plus biases) *whatever the size of the projection
    weights*: this is the fix for attention-logit growth (Dehghani et al. 2023, ViT-22B,
    arXiv:2302.05442; Wortsman et al. 2023, arXiv:2309.14322). The gains $\gamma$ and biases
    $\beta$ (``q_norm`` and ``k_norm``, shape ``(d_k,)``, shared across heads) are learnable, so the
    bound can still move during training. The FLOPs (mean, variance, normalise, affine) are per
    query and per key, none per logit. Gemma 3 and Qwen 3 use the RMS variant per head
    ([QKRMSNorm][attnscale.QKRMSNorm]); OLMo 2 uses RMSNorm over the full query and key width
    (all heads together), which is neither strategy. Normalisation runs in at least float32.

    Parameters
    ----------
    d_k, num_heads : int
        Head dimension and number of heads.
    eps : float
        LayerNorm epsilon.
    """

    name = "qk_layernorm"
    cost = "4d / ~8(n+m)d"
    used_by = ("ViT-22B", "Persimmon")
    citation = ("arXiv:2302.05442", "arXiv:2309.14322")

    def __init__(self, d_k: int, num_heads: int = 1, *, eps: float = 1e-5) -> None:
        super().__init__(d_k, num_heads)
        eps = _checks.positive_float(eps, "eps")
        _checks.allocation((self.d_k,), torch.float64, "d_k")
        self.q_norm = nn.LayerNorm(self.d_k, eps=eps)
        self.k_norm = nn.LayerNorm(self.d_k, eps=eps)

    def prepare(
        self, query: torch.Tensor, key: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, float | torch.Tensor]:
        q = _layer_norm(query, self.q_norm)  # (batch, heads, q_len, d_k)
        k = _layer_norm(key, self.k_norm)  # (batch, heads, k_len, d_k)
        return q, k, _inv_sqrt(self.d_k)


class _RMSNorm(nn.Module):
    """RMS normalisation over the last dimension with a learnable gain (computed in float32+)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = torch.promote_types(x.dtype, torch.float32)
        y = x.to(dtype)
        y = y * torch.rsqrt(y.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (y * self.weight.to(dtype)).to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


class QKRMSNorm(ScoreScaling):
    r"""RMSNorm on each head's queries and keys, then $1/\sqrt{d_k}$.

    $$\ell = \frac{\mathrm{RMS}_q(q) \cdot \mathrm{RMS}_k(k)}{\sqrt{d_k}},\qquad
    \mathrm{RMS}(x) = \gamma \odot \frac{x}{\sqrt{\tfrac{1}{d_k}\lVert x\rVert^2 + \epsilon}} .$$

    Like [QKLayerNorm][attnscale.QKLayerNorm] without centring or bias: each normalised vector has
    norm $\sqrt{d_k}$ before the gain, so $|\ell| \le \sqrt{d_k}\,\lVert\gamma_q\rVert_\infty
    \lVert\gamma_k\rVert_\infty$ independently of the projection weights. Gains ``q_norm.weight``
    and ``k_norm.weight`` (shape ``(d_k,)``, shared across heads) are learnable. OLMo 2 normalises
    the full query and key width instead (all heads together), which is not this strategy.
    Normalisation runs in at least float32.

    Parameters
    ----------
    d_k, num_heads : int
        Head dimension and number of heads.
    eps : float
        Epsilon added to the mean square.
    """

    name = "qk_rmsnorm"
    cost = "2d / ~4(n+m)d"
    used_by = ("Gemma 3", "Qwen 3")
    citation = ("arXiv:2503.19786", "arXiv:2505.09388")

    def __init__(self, d_k: int, num_heads: int = 1, *, eps: float = 1e-6) -> None:
        super().__init__(d_k, num_heads)
        eps = _checks.positive_float(eps, "eps")
        _checks.allocation((self.d_k,), torch.float64, "d_k")
        self.q_norm = _RMSNorm(self.d_k, eps)
        self.k_norm = _RMSNorm(self.d_k, eps)

    def prepare(
        self, query: torch.Tensor, key: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, float | torch.Tensor]:
        q = self.q_norm(query)  # (batch, heads, q_len, d_k)
        k = self.k_norm(key)  # (batch, heads, k_len, d_k)
        return q, k, _inv_sqrt(self.d_k)


class CosineScale(ScoreScaling):
    r"""Scaled cosine attention (Swin Transformer V2): $\ell = s_h \cos(q, k)$.

    $$\ell = \frac{q \cdot k}{\lVert q\rVert\,\lVert k\rVert} \cdot s_h,\qquad
    s_h = \exp\bigl(\min(\theta_h, \ln s_{\max})\bigr).$$

    Swin V2 (Liu et al. 2022, arXiv:2111.09883) writes the score as $\cos(q, k)/\tau$ with a
    learnable temperature $\tau > 0.01$ per head and layer; its code stores
    $\theta = \ln(1/\tau)$, initialised at $\ln 10$ ($\tau = 0.1$) and clamped at
    $\ln 100$ ($\tau \ge 0.01$) before exponentiating. This class does exactly that, with
    $\theta$ as ``log_scale`` (shape ``(num_heads,)``). So $|\ell| \le s_h \le s_{\max}$
    always, and the logits do not depend on the norms of $q$ and $k$ at all. (Above the clamp,
    $\theta$ receives no gradient.) QKNorm (Henry et al. 2020, arXiv:2010.04245) is the same
    idea with a single learnable gain. The FLOPs (an L2 norm and a division) are per query
    and per key. The Swin V2 model adds a relative position bias, which is not part of this
    strategy.

    Parameters
    ----------
    d_k, num_heads : int
        Head dimension and number of heads.
    init_scale : float
        Initial logit scale $s = 1/\tau$ (Swin V2: 10).
    max_scale : float
        Clamp on the logit scale (Swin V2: 100).
    """

    name = "cosine"
    cost = "H / ~3(n+m)d"
    used_by = ("Swin Transformer V2",)
    citation = ("arXiv:2111.09883", "arXiv:2010.04245")

    def __init__(
        self, d_k: int, num_heads: int = 1, *, init_scale: float = 10.0, max_scale: float = 100.0
    ) -> None:
        super().__init__(d_k, num_heads)
        init_scale = _checks.positive_float(init_scale, "init_scale")
        self.max_scale = _checks.positive_float(max_scale, "max_scale")
        if init_scale > self.max_scale:
            raise ValueError(
                f"init_scale must be <= max_scale, got {init_scale!r} > {self.max_scale!r}"
            )
        self.log_scale = nn.Parameter(torch.full((self.num_heads,), math.log(init_scale)))

    def effective_scale(self) -> torch.Tensor:
        return torch.clamp(self.log_scale, max=math.log(self.max_scale)).exp()

    def prepare(
        self, query: torch.Tensor, key: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, float | torch.Tensor]:
        dtype = torch.promote_types(query.dtype, torch.float32)
        q = F.normalize(query.to(dtype), dim=-1).to(query.dtype)  # (batch, heads, q_len, d_k)
        k = F.normalize(key.to(dtype), dim=-1).to(key.dtype)  # (batch, heads, k_len, d_k)
        alpha = self.effective_scale().to(query.dtype).view(1, -1, 1, 1)  # (1, heads, 1, 1)
        return q, k, alpha


class FoldedInit(ScoreScaling):
    r"""T5-style: no scale at run time, $\ell = q \cdot k$, with the scale folded into the init.

    Mesh-TensorFlow T5 (Raffel et al. 2020, arXiv:1910.10683) divides by nothing and instead
    initialises the query projection with standard deviation $(d_{\text{model}} d_k)^{-1/2}$ and
    the key projection with $d_{\text{model}}^{-1/2}$. For unit-variance inputs this gives
    $\mathrm{Var}(q_i) = 1/d_k$ and $\mathrm{Var}(k_i) = 1$, so $\mathrm{Var}(q \cdot k) = 1$ at
    initialisation, as with $1/\sqrt{d_k}$ and LeCun init. Unlike a run-time scale, nothing keeps
    it there: the factor lives in the weights and training (or weight decay) can change it.
    [init_projections][attnscale.ScoreScaling.init_projections] applies the init (and zeroes
    biases; T5 has none); values and output projections keep their default init.
    """

    name = "folded_init"
    constant_scale = True
    cost = "0 / 0"
    used_by = ("T5", "mT5")
    citation = ("arXiv:1910.10683",)

    def prepare(
        self, query: torch.Tensor, key: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, float | torch.Tensor]:
        return query, key, 1.0

    def _fixed_scale(self) -> float:
        return 1.0

    def init_projections(self, q_proj: nn.Linear, k_proj: nn.Linear) -> None:
        d_model = q_proj.in_features
        with torch.no_grad():
            nn.init.normal_(q_proj.weight, std=(d_model * self.d_k) ** -0.5)
            nn.init.normal_(k_proj.weight, std=k_proj.in_features**-0.5)
            for proj in (q_proj, k_proj):
                if proj.bias is not None:
                    nn.init.zeros_(proj.bias)


_REGISTRY: dict[str, type[ScoreScaling]] = {
    cls.name: cls
    for cls in (
        NoScale,
        InverseSqrt,
        InverseD,
        LearnableTemperature,
        QKLayerNorm,
        QKRMSNorm,
        CosineScale,
        FoldedInit,
    )
}

#: Names accepted wherever a score-scaling strategy is expected.
SCALING_STRATEGIES: tuple[str, ...] = tuple(_REGISTRY)


def make_strategy(strategy: str | ScoreScaling, d_k: int, num_heads: int = 1) -> ScoreScaling:
    """The score-scaling strategy for heads of size ``d_k``: built from a name, or checked.

    Everything that takes a ``strategy=`` argument goes through this function, so a name and a
    strategy object are accepted (and checked) the same way everywhere.

    Parameters
    ----------
    strategy : str or ScoreScaling
        One of [SCALING_STRATEGIES][attnscale.SCALING_STRATEGIES] (a fresh strategy with default
        settings), or a strategy object, returned as it is after checking that it was built for
        these sizes.
    d_k : int
        Head dimension.
    num_heads : int
        Number of heads.

    Returns
    -------
    ScoreScaling
        The strategy; one built from a name starts at its initial values.

    Raises
    ------
    ValueError
        If the name is unknown, the sizes are not positive integers, or a strategy object was
        built for another ``d_k`` or ``num_heads``.
    TypeError
        If ``strategy`` is neither a string nor a [ScoreScaling][attnscale.ScoreScaling].

    Examples
    --------
    >>> from attnscale import InverseD
    >>> from attnscale import make_strategy
    >>> make_strategy("cosine", d_k=64, num_heads=4).effective_scale().shape
    torch.Size([4])
    >>> make_strategy(InverseD(16), d_k=32)
    Traceback (most recent call last):
    ...
    ValueError: strategy was built for d_k=16, but the head dim is 32
    """
    if isinstance(strategy, ScoreScaling):
        d_k = _checks.positive_int(d_k, "d_k")
        num_heads = _checks.positive_int(num_heads, "num_heads")
        if strategy.d_k != d_k:
            raise ValueError(
                f"strategy was built for d_k={strategy.d_k}, but the head dim is {d_k}"
            )
        if strategy.num_heads != num_heads:
            raise ValueError(
                f"strategy was built for num_heads={strategy.num_heads}, "
                f"but there are {num_heads} heads"
            )
        return strategy
    if not isinstance(strategy, str):
        raise TypeError(
            f"strategy must be a name (one of {', '.join(SCALING_STRATEGIES)}) or a "
            f"ScoreScaling, got {type(strategy).__name__}"
        )
    name = _checks.one_of(strategy, "strategy", SCALING_STRATEGIES)
    return _REGISTRY[name](d_k, num_heads)


# --------------------------------------------------------------------------- attention


def _check_mask(
    attn_mask: object,
    shape: tuple[int, ...],
    query: torch.Tensor,
    axes: str = "(batch, heads, q_len, k_len)",
) -> torch.Tensor | None:
    """Check a boolean or additive mask against the score shape ``shape``, named ``axes``."""
    if attn_mask is None:
        return None
    if not isinstance(attn_mask, torch.Tensor):
        raise TypeError(f"attn_mask must be a torch.Tensor or None, got {type(attn_mask).__name__}")
    if attn_mask.dtype != torch.bool and not attn_mask.is_floating_point():
        raise TypeError(f"attn_mask must be boolean or floating point, got {attn_mask.dtype}")
    m = tuple(attn_mask.shape)
    # At least (q_len, k_len): torch's fused kernels index the mask's last two dims, and a
    # 0-d or 1-d mask is more likely a mistake than a broadcast.
    fits = all(a in (1, b) for a, b in zip(m[::-1], shape[::-1], strict=False))
    if not (2 <= len(m) <= len(shape) and fits):
        dims = "2 or 3" if len(shape) == 3 else f"2 to {len(shape)}"
        raise ValueError(
            f"attn_mask must have {dims} dimensions and broadcast to "
            f"{axes} = {shape}, got shape {m}"
        )
    if attn_mask.device != query.device:
        raise ValueError(f"attn_mask is on {attn_mask.device}, but query is on {query.device}")
    return attn_mask if attn_mask.dtype == torch.bool else attn_mask.to(query.dtype)


def _dead_rows(mask: torch.Tensor) -> torch.Tensor:
    """``(..., q_len, 1)``: True where a query row's keys are all masked (False or -inf)."""
    blocked = ~mask if mask.dtype == torch.bool else torch.isneginf(mask)
    return blocked.all(dim=-1, keepdim=True)


def _merge_causal(
    mask: torch.Tensor | None, q_len: int, k_len: int, device: torch.device
) -> torch.Tensor:
    # Top-left aligned, as in torch SDPA: query i sees keys 0..i.
    causal = torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril()  # (q_len, k_len)
    if mask is None:
        return causal
    if mask.dtype == torch.bool:
        return mask & causal
    return mask.masked_fill(~causal, float("-inf"))


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    *,
    strategy: str | ScoreScaling = "inverse_sqrt",
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    softcap: float | None = None,
    need_weights: bool = False,
    need_logits: bool = False,
) -> AttentionResult:
    r"""Multi-head scaled dot-product attention with a chosen score-scaling strategy.

    Computes $\mathrm{softmax}(\ell + M)\,V$ with logits
    $\ell = \alpha\,\phi(q)\cdot\psi(k)$ given by ``strategy`` (see
    [ScoreScaling][attnscale.ScoreScaling]), optionally soft-capped as $c\tanh(\ell/c)$
    (see [soft_cap][attnscale.soft_cap]). When neither weights, logits nor a soft-cap are
    requested, the work is done by ``torch.nn.functional.scaled_dot_product_attention`` (fused
    kernels where available), with a learnable multiplier folded into the query; otherwise the
    logits are formed explicitly, scaling the query before the product (the order that does not
    overflow in float16), and the softmax runs in float32 for float16/bfloat16 inputs. Under
    ``torch.func.vmap`` prefer the explicit path (e.g. ``need_weights=True``): torch 2.13 has no
    batching rule for the CPU fused kernel and falls back to a loop, with a warning.

    Parameters
    ----------
    query : Tensor
        ``(batch, heads, q_len, d_k)``.
    key : Tensor
        ``(batch, heads, k_len, d_k)``.
    value : Tensor
        ``(batch, heads, k_len, d_v)``.
    strategy : str or ScoreScaling
        A name from [SCALING_STRATEGIES][attnscale.SCALING_STRATEGIES] (a learnable strategy given
        by name starts at its initial value) or a strategy object built for this ``d_k`` and head
        count (its parameters are used and receive gradients).
    attn_mask : Tensor, optional
        2 to 4 dimensions, broadcastable to ``(batch, heads, q_len, k_len)``. Boolean: ``True``
        marks positions that take part (as in torch SDPA). Floating point: added to the logits.
    is_causal : bool
        Causal mask, top-left aligned (query $i$ sees keys $0..i$); may be combined with
        ``attn_mask``.
    softcap : float, optional
        Tanh soft-cap $c > 0$ applied to the scaled logits (Gemma 2 uses 50).
    need_weights : bool
        Also return the attention probabilities.
    need_logits : bool
        Also return the logits (scaled, capped, unmasked).

    Returns
    -------
    AttentionResult
        ``output`` of shape ``(batch, heads, q_len, d_v)``, and ``weights``/``logits`` of shape
        ``(batch, heads, q_len, k_len)`` when requested (else ``None``). A query row whose keys
        are all masked (all ``False`` or $-\infty$ in ``attn_mask``, alone or combined with
        ``is_causal``; or ``k_len = 0``) gets zero weights and a zero output, on the fused and the
        explicit path alike (torch's fused CPU kernel gives zeros, a plain softmax NaN); its
        gradients are zero too. Non-finite inputs are not checked (that would need a
        data-dependent branch, which ``vmap`` and ``torch.compile`` cannot follow) and propagate.

    Raises
    ------
    TypeError
        If an input is not a floating-point tensor, key or value has another dtype than query,
        ``attn_mask`` is neither boolean nor floating point, ``is_causal`` is not a bool, or
        ``strategy`` has the wrong type.
    ValueError
        If an input is not 4-D, shapes or devices do not agree, the mask has fewer than 2 or more
        than 4 dimensions or does not broadcast (the same error on both paths), the strategy name
        is unknown or was built for other sizes, or ``softcap`` is not > 0.

    Examples
    --------
    >>> import torch
    >>> from attnscale import scaled_dot_product_attention
    >>> q = k = v = torch.randn(2, 4, 5, 16)
    >>> out = scaled_dot_product_attention(q, k, v, strategy="cosine", need_weights=True)
    >>> out.output.shape, out.weights.shape
    (torch.Size([2, 4, 5, 16]), torch.Size([2, 4, 5, 5]))
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        _checks.float_tensor(t, name, min_dim=4)
        if t.dim() != 4:
            raise ValueError(
                f"{name} must have shape (batch, heads, length, dim), got {tuple(t.shape)}"
            )
    _checks.matches(key, "key", query, "query")
    _checks.matches(value, "value", query, "query")
    batch, heads, q_len, d_k = query.shape
    if key.shape[:2] != (batch, heads) or value.shape[:2] != (batch, heads):
        raise ValueError(
            "query, key and value must agree in (batch, heads), got "
            f"{tuple(query.shape[:2])}, {tuple(key.shape[:2])}, {tuple(value.shape[:2])}"
        )
    if key.shape[-1] != d_k:
        raise ValueError(f"key must have head dim {d_k} like query, got {key.shape[-1]}")
    k_len = key.shape[2]
    if value.shape[2] != k_len:
        raise ValueError(f"value must have k_len={k_len} like key, got {value.shape[2]}")
    if softcap is not None:
        softcap = _checks.positive_float(softcap, "softcap")
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal must be a bool, got {type(is_causal).__name__}")
    mask = _check_mask(attn_mask, (batch, heads, q_len, k_len), query)
    strat = make_strategy(strategy, d_k, heads)

    if is_causal and mask is not None:
        mask = _merge_causal(mask, q_len, k_len, query.device)
        is_causal = False

    # Rows with every key masked get zero weights and output on both paths (torch's fused CPU
    # kernel does this, a plain softmax gives NaN). They are unmasked for the softmax and
    # zeroed after it, so no NaN reaches the output or the gradients on any backend. No
    # data-dependent branch: this also runs under vmap and torch.compile.
    dead = None if mask is None else _dead_rows(mask)  # (..., q_len, 1)
    if dead is not None and mask is not None:
        mask = mask | dead if mask.dtype == torch.bool else mask.masked_fill(dead, 0.0)

    q, k, alpha = strat.prepare(query, key)
    fused = not (need_weights or need_logits or softcap is not None)
    if fused:
        if isinstance(alpha, torch.Tensor):
            q, scale = q * alpha, 1.0  # (batch, heads, q_len, d_k)
        else:
            scale = alpha
        out = F.scaled_dot_product_attention(
            q, k, value, attn_mask=mask, is_causal=is_causal, scale=scale
        )
        if dead is not None:
            out = out.masked_fill(dead, 0.0)
        return AttentionResult(out, None, None)

    if isinstance(alpha, torch.Tensor) or alpha != 1.0:
        q = q * alpha  # (batch, heads, q_len, d_k)
    logits = q @ k.transpose(-2, -1)  # (batch, heads, q_len, k_len)
    if softcap is not None:
        logits = _soft_cap(logits, softcap)
    scores = logits
    if is_causal:
        mask = _merge_causal(None, q_len, k_len, query.device)
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask
    if scores.dtype in _LOW_PRECISION:
        weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(scores.dtype)
    else:
        weights = torch.softmax(scores, dim=-1)
    if dead is not None:
        weights = weights.masked_fill(dead, 0.0)
    out = weights @ value  # (batch, heads, q_len, d_v)
    return AttentionResult(out, weights if need_weights else None, logits if need_logits else None)


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
