r"""Score-scaling strategies: what multiplies q·k, and what is done to q and k first.

The attention logits are $\ell = \alpha\, \phi(q) \cdot \psi(k)$. A *score-scaling strategy*
chooses the maps $\phi, \psi$ (identity, or a normalisation of $q$ and $k$), the multiplier
$\alpha$ (fixed or learnable) and, for the folded variant, how the projections are
initialised: [NoScale][attnscale.NoScale] ``"none"``, [InverseSqrt][attnscale.InverseSqrt]
``"inverse_sqrt"``, [InverseD][attnscale.InverseD] ``"inverse_d"``,
[LearnableTemperature][attnscale.LearnableTemperature] ``"learnable_temperature"``,
[QKLayerNorm][attnscale.QKLayerNorm] ``"qk_layernorm"``, [QKRMSNorm][attnscale.QKRMSNorm]
``"qk_rmsnorm"``, [CosineScale][attnscale.CosineScale] ``"cosine"`` and
[FoldedInit][attnscale.FoldedInit] ``"folded_init"``, all subclasses of
[ScoreScaling][attnscale.ScoreScaling]. [make_strategy][attnscale.make_strategy] builds one by
name (or checks one built by hand); the names are in
[SCALING_STRATEGIES][attnscale.SCALING_STRATEGIES].
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from . import _checks

__all__ = [
    "SCALING_STRATEGIES",
    "CosineScale",
    "FoldedInit",
    "InverseD",
    "InverseSqrt",
    "LearnableTemperature",
    "NoScale",
    "QKLayerNorm",
    "QKRMSNorm",
    "ScoreScaling",
    "make_strategy",
]


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
        return query, key, self._fixed_scale()

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
        return query, key, self._fixed_scale()


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
        return query, key, self._fixed_scale()

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
        return q, k, self._fixed_scale()


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
        return q, k, self._fixed_scale()


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


class FoldedInit(NoScale):
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
