r"""Small attention models for the training experiments.

Both models take the score-scaling strategy from [attnscale.scaling][attnscale.ScoreScaling]
(any name in [SCALING_STRATEGIES][attnscale.SCALING_STRATEGIES] or a strategy object), so every
strategy can be trained with the same code, and both return an
[AttentionResult][attnscale.AttentionResult] whose ``weights`` and ``logits`` feed the training
metrics.

- [SimpleAttentionModel][attnscale.SimpleAttentionModel]: the source article's single-head
  model, bias-free $W_q, W_k, W_v$ and an output projection, no residual, no normalisation.
- [AttentionBlock][attnscale.AttentionBlock]: a pre-LayerNorm Transformer block (multi-head
  attention and an MLP, each with a residual connection), for the logit-growth experiment.
- [make_model][attnscale.make_model]: build either one, seeded.
"""

from __future__ import annotations

import torch
from torch import nn

from . import _checks
from ._attention import AttentionResult, scaled_dot_product_attention
from ._multihead import MultiHeadAttention
from ._strategies import ScoreScaling, make_strategy

__all__ = ["MODELS", "AttentionBlock", "SimpleAttentionModel", "make_model"]

#: Names accepted by [make_model][attnscale.make_model] and [train][attnscale.train].
MODELS: tuple[str, ...] = ("simple", "block")


class SimpleAttentionModel(nn.Module):
    r"""The source article's single-head attention model.

    $$Q = XW_q,\quad K = XW_k,\quad V = XW_v,\quad
    Y = \mathrm{softmax}\!\big(\alpha\,\phi(Q)\psi(K)^\top\big)\,V\,W_o ,$$

    with bias-free projections ``q_proj``, ``k_proj`` (``d_model -> d_k``), ``v_proj``
    (``d_model -> d_v``) and ``out_proj`` (``d_v -> d_model``), PyTorch's default ``nn.Linear``
    init, and the logit map $(\phi, \psi, \alpha)$ given by the strategy (see
    [ScoreScaling][attnscale.ScoreScaling]). There is no residual connection and no
    normalisation, so the attention pattern alone decides what reaches the output.

    Parameters
    ----------
    d_model : int
        Width of the inputs and outputs.
    d_k : int
        Width of queries and keys.
    d_v : int, optional
        Width of the values; default ``d_k`` (as in the article).
    strategy : str or ScoreScaling
        Score scaling, a name from [SCALING_STRATEGIES][attnscale.SCALING_STRATEGIES] or an
        object built for this ``d_k`` and one head. ``"none"`` is the article's unscaled model,
        ``"inverse_sqrt"`` its scaled one.
    device, dtype : optional
        Where and in which dtype to create the parameters.

    Raises
    ------
    TypeError
        If a size is not an integer, ``dtype`` is not a floating ``torch.dtype`` (strings such as
        ``"float32"`` are refused, as torch refuses them) or ``strategy`` has the wrong type.
    ValueError
        If a size is not positive or so large that torch cannot allocate the weights, ``device``
        cannot hold data (``"meta"``) or is not available, or the strategy is unknown or built for
        other sizes.

    Examples
    --------
    >>> import torch
    >>> from attnscale import SimpleAttentionModel
    >>> model = SimpleAttentionModel(32, 16, strategy="none")
    >>> res = model(torch.randn(4, 8, 32), need_weights=True)
    >>> res.output.shape, res.weights.shape
    (torch.Size([4, 8, 32]), torch.Size([4, 1, 8, 8]))
    """

    def __init__(
        self,
        d_model: int = 128,
        d_k: int = 64,
        d_v: int | None = None,
        *,
        strategy: str | ScoreScaling = "inverse_sqrt",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.d_model = _checks.positive_int(d_model, "d_model")
        self.d_k = _checks.positive_int(d_k, "d_k")
        self.d_v = self.d_k if d_v is None else _checks.positive_int(d_v, "d_v")
        dev, dt = _checks.placement(device, dtype)
        _checks.allocation((max(self.d_k, self.d_v), self.d_model), dt, "d_model, d_k or d_v")
        kw: dict[str, object] = {"device": dev, "dtype": dt}
        self.q_proj = nn.Linear(self.d_model, self.d_k, bias=False, **kw)
        self.k_proj = nn.Linear(self.d_model, self.d_k, bias=False, **kw)
        self.v_proj = nn.Linear(self.d_model, self.d_v, bias=False, **kw)
        self.out_proj = nn.Linear(self.d_v, self.d_model, bias=False, **kw)
        # A strategy object keeps its own dtype unless one is asked for.
        self.strategy = make_strategy(strategy, self.d_k, 1).to(
            device=dev, dtype=None if dtype is None else dt
        )
        self.strategy.init_projections(self.q_proj, self.k_proj)

    def forward(
        self, x: torch.Tensor, *, need_weights: bool = False, need_logits: bool = False
    ) -> AttentionResult:
        """Self-attention over ``x``.

        Parameters
        ----------
        x : Tensor
            ``(batch, length, d_model)``.
        need_weights, need_logits : bool
            Also return the attention probabilities / logits, ``(batch, 1, length, length)``.

        Returns
        -------
        AttentionResult
            ``output`` of shape ``(batch, length, d_model)``.

        Raises
        ------
        TypeError
            If ``x`` is not a floating tensor, or its dtype differs from the parameters'.
        ValueError
            If ``x`` is not 3-D with width ``d_model``, or is on another device than the
            parameters.
        """
        _checks.tokens(x, "x", self.d_model, self.q_proj.weight)
        q = self.q_proj(x).unsqueeze(1)  # (batch, 1, length, d_k)
        k = self.k_proj(x).unsqueeze(1)  # (batch, 1, length, d_k)
        v = self.v_proj(x).unsqueeze(1)  # (batch, 1, length, d_v)
        res = scaled_dot_product_attention(
            q, k, v, strategy=self.strategy, need_weights=need_weights, need_logits=need_logits
        )
        out = self.out_proj(res.output.squeeze(1))  # (batch, length, d_model)
        return AttentionResult(out, res.weights, res.logits)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, d_k={self.d_k}, d_v={self.d_v}"


class AttentionBlock(nn.Module):
    r"""A pre-LayerNorm Transformer block: multi-head attention and an MLP, with residuals.

    $$h = x + \mathrm{MHA}(\mathrm{LN}_1(x)),\qquad
    y = h + W_2\,\mathrm{GELU}(W_1\,\mathrm{LN}_2(h)),$$

    where the attention is a [MultiHeadAttention][attnscale.MultiHeadAttention] with the chosen
    score-scaling strategy and optional soft-cap, and the MLP has hidden width
    ``mlp_ratio * d_model``. This is the layout of the small Transformers in Wortsman et al. 2023
    (arXiv:2309.14322) without the embedding and the stack, enough to watch attention logits grow
    at high learning rate and the effect of QK-LayerNorm
    ([QKLayerNorm][attnscale.QKLayerNorm]).

    Parameters
    ----------
    d_model : int
        Width of the inputs and outputs.
    num_heads : int
        Number of heads; must divide ``d_model``.
    strategy : str or ScoreScaling
        Score scaling of the attention, as in [MultiHeadAttention][attnscale.MultiHeadAttention].
    mlp_ratio : int
        Hidden width of the MLP as a multiple of ``d_model``.
    softcap : float, optional
        Tanh soft-cap of the attention logits.
    device, dtype : optional
        Where and in which dtype to create the parameters.

    Raises
    ------
    TypeError
        If a size is not an integer, ``dtype`` is not a floating ``torch.dtype`` or the strategy
        has the wrong type.
    ValueError
        If a size is not positive or too large to allocate, ``num_heads`` does not divide
        ``d_model``, ``device`` cannot hold data or is not available, or the strategy is invalid.

    Examples
    --------
    >>> import torch
    >>> from attnscale import AttentionBlock
    >>> block = AttentionBlock(32, 4, strategy="qk_layernorm")
    >>> res = block(torch.randn(2, 8, 32), need_logits=True)
    >>> res.output.shape, res.logits.shape
    (torch.Size([2, 8, 32]), torch.Size([2, 4, 8, 8]))
    """

    def __init__(
        self,
        d_model: int = 64,
        num_heads: int = 4,
        *,
        strategy: str | ScoreScaling = "inverse_sqrt",
        mlp_ratio: int = 4,
        softcap: float | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.d_model = _checks.positive_int(d_model, "d_model")
        self.num_heads = _checks.positive_int(num_heads, "num_heads")
        if self.d_model % self.num_heads:
            raise ValueError(f"num_heads={self.num_heads} must divide d_model={self.d_model}")
        hidden = _checks.positive_int(mlp_ratio, "mlp_ratio") * self.d_model
        dev, dt = _checks.placement(device, dtype)
        _checks.allocation((hidden, self.d_model), dt, "d_model or mlp_ratio")
        device, dtype = dev, None if dtype is None else dt
        self.ln1 = nn.LayerNorm(self.d_model, device=device, dtype=dtype)
        self.attn = MultiHeadAttention(
            self.d_model,
            self.num_heads,
            strategy=strategy,
            softcap=softcap,
            device=device,
            dtype=dtype,
        )
        self.ln2 = nn.LayerNorm(self.d_model, device=device, dtype=dtype)
        self.mlp = nn.Sequential(
            nn.Linear(self.d_model, hidden, device=device, dtype=dtype),
            nn.GELU(),
            nn.Linear(hidden, self.d_model, device=device, dtype=dtype),
        )

    @property
    def strategy(self) -> ScoreScaling:
        """The score-scaling strategy of the attention (``attn.strategy``)."""
        return self.attn.strategy

    def forward(
        self,
        x: torch.Tensor,
        *,
        is_causal: bool = False,
        need_weights: bool = False,
        need_logits: bool = False,
    ) -> AttentionResult:
        """Apply the block to ``x``.

        Parameters
        ----------
        x : Tensor
            ``(batch, length, d_model)``.
        is_causal : bool
            Causal self-attention.
        need_weights, need_logits : bool
            Also return per-head weights / logits, ``(batch, heads, length, length)``.

        Returns
        -------
        AttentionResult
            ``output`` of shape ``(batch, length, d_model)``.

        Raises
        ------
        TypeError
            If ``x`` is not a floating tensor, or its dtype differs from the parameters'.
        ValueError
            If ``x`` is not 3-D with width ``d_model``, or is on another device than the
            parameters.
        """
        # Checked here, not only in attn: the LayerNorm would fail first, naming no argument.
        _checks.tokens(x, "x", self.d_model, self.attn.q_proj.weight)
        res = self.attn(
            self.ln1(x), is_causal=is_causal, need_weights=need_weights, need_logits=need_logits
        )
        h = x + res.output  # (batch, length, d_model)
        out = h + self.mlp(self.ln2(h))  # (batch, length, d_model)
        return AttentionResult(out, res.weights, res.logits)


def make_model(
    model: str = "simple",
    *,
    d_model: int = 128,
    d_k: int = 64,
    d_v: int | None = None,
    num_heads: int = 1,
    strategy: str = "inverse_sqrt",
    seed: int = 0,
    device: torch.device | str | None = None,
) -> SimpleAttentionModel | AttentionBlock:
    r"""Build a model with its parameters drawn from a fixed seed.

    The parameters are drawn on the CPU inside ``torch.random.fork_rng`` seeded with ``seed``
    (the global random state is left untouched), then moved to ``device``, so the same seed gives
    the same initial weights on every device and for every strategy (apart from the query and
    key weights that [FoldedInit][attnscale.FoldedInit] redraws).

    Parameters
    ----------
    model : str
        ``"simple"`` ([SimpleAttentionModel][attnscale.SimpleAttentionModel], one head) or
        ``"block"`` ([AttentionBlock][attnscale.AttentionBlock]).
    d_model : int
        Model width.
    d_k : int
        Query/key width (``"simple"`` only; a block uses ``d_model // num_heads``).
    d_v : int, optional
        Value width (``"simple"`` only); default ``d_k``.
    num_heads : int
        Number of heads: 1 for ``"simple"``.
    strategy : str
        Score-scaling strategy name.
    seed : int
        Seed of the initial parameters: an integer in $[0, 2^{64})$ (Python or numpy).
    device : optional
        Device of the returned model; it must hold data (not ``"meta"``) and be available.

    Returns
    -------
    SimpleAttentionModel or AttentionBlock

    Raises
    ------
    TypeError
        If a size or ``seed`` is not an integer.
    ValueError
        If ``model`` or ``strategy`` is unknown, a size is not positive, ``num_heads`` is not 1
        for ``"simple"`` or does not divide ``d_model`` for ``"block"``, ``seed`` is outside
        $[0, 2^{64})$, or ``device`` cannot hold data or is not available.

    Examples
    --------
    >>> import torch
    >>> from attnscale import make_model
    >>> a = make_model("simple", d_model=16, d_k=8, seed=3)
    >>> b = make_model("simple", d_model=16, d_k=8, seed=3, strategy="none")
    >>> bool(torch.equal(a.q_proj.weight, b.q_proj.weight))
    True
    """
    model = _checks.one_of(model, "model", MODELS)
    seed = _checks.rng_seed(seed)
    dev = None if device is None else _checks.device(device)
    num_heads = _checks.positive_int(num_heads, "num_heads")
    if model == "simple" and num_heads != 1:
        raise ValueError(f"num_heads must be 1 for model='simple', got {num_heads}")
    with torch.random.fork_rng(devices=[]):
        # Seed only the CPU generator: torch.manual_seed would also reseed every CUDA
        # generator, which fork_rng(devices=[]) does not restore.
        torch.default_generator.manual_seed(seed)
        built: SimpleAttentionModel | AttentionBlock
        if model == "simple":
            built = SimpleAttentionModel(d_model, d_k, d_v, strategy=strategy)
        else:
            built = AttentionBlock(d_model, num_heads, strategy=strategy)
    return built.to(dev) if dev is not None else built
