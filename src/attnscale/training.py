r"""Seeded training runs on synthetic tasks, many models in one pass, with recorded metrics.

- [make_task][attnscale.make_task]: the synthetic tasks in [TASKS][attnscale.TASKS], generated
  in code from a seed.
- [train][attnscale.train]: trains every combination of strategies, learning rates and seeds in
  one call. Models that share a strategy are stacked along a leading *model* dimension
  (``torch.func.stack_module_state``) and run with ``torch.func.vmap`` over
  ``torch.func.functional_call``. A [SimpleAttentionModel][attnscale.SimpleAttentionModel] whose
  strategy only multiplies the logits by a constant (``"none"``, ``"inverse_sqrt"``,
  ``"inverse_d"``, ``"folded_init"``) runs instead with the batched matrix products written out,
  and neighbouring strategies of that kind share one stack (the same arithmetic with less
  overhead per step). The losses of a stack are summed before the backward pass, which leaves
  each model's gradient equal to the gradient of its own loss, and Adam is applied element-wise
  on the stacked tensors, so each model keeps its own optimizer state. The result equals
  sequential training of each model up to floating-point rounding.
- [TrainingConfig][attnscale.TrainingConfig]: the validated, frozen settings of a call, which the
  result carries.
- [TrainingResult][attnscale.TrainingResult]: the per-step metrics of every model as tensors of
  shape ``(models, steps)``, with helpers to average them per epoch and group them over seeds.
"""

from __future__ import annotations

import copy
import itertools
import math
import numbers
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from . import _checks
from .models import MODELS, SimpleAttentionModel, make_model
from .scaling import (
    SCALING_STRATEGIES,
    ScoreScaling,
)

__all__ = ["METRICS", "TASKS", "TrainingConfig", "TrainingResult", "make_task", "train"]

#: Synthetic tasks understood by [make_task][attnscale.make_task] and [train][attnscale.train].
TASKS: tuple[str, ...] = ("reconstruction", "mean", "retrieval")

#: Names of the per-step metrics in a [TrainingResult][attnscale.TrainingResult].
METRICS: tuple[str, ...] = (
    "loss",
    "grad_norm",
    "grad_norm_q",
    "grad_norm_k",
    "grad_norm_other",
    "logit_grad_norm",
    "logit_grad_row_median",
    "logit_grad_row_p10",
    "logit_grad_row_p90",
    "entropy",
    "normalized_entropy",
    "max_probability",
    "logit_std",
    "max_abs_logit",
    "scale",
)

_SHUFFLE_OFFSET = 1_000_003  # the shuffle generator of seed s is seeded with s + this


def _shuffle_seed(seed: int) -> int:
    """Seed of the mini-batch order for ``seed``: ``seed + 1000003``, wrapped into 64 bits."""
    return (seed + _SHUFFLE_OFFSET) % (_checks.MAX_SEED + 1)


def make_task(
    task: str,
    num_samples: int,
    seq_len: int = 8,
    d_model: int = 128,
    *,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Draw inputs and targets of a synthetic sequence task.

    All tasks return inputs ``x`` and targets ``y`` of shape ``(num_samples, seq_len, d_model)``.

    - ``"reconstruction"`` (the source article's task): $x \sim \mathcal{N}(0, I)$, $y = x$.
      Attention that is one-hot on the query's own token is optimal.
    - ``"mean"``: $x \sim \mathcal{N}(0, I)$ and every position's target is the mean of the
      sequence, $y_i = \frac1L \sum_j x_j$. Uniform attention is optimal; predicting zero scores
      $1/L$ (the variance of the mean).
    - ``"retrieval"``: a content-addressed copy. Each token $j$ carries a value
      $u_j \sim \mathcal{N}(0, I)$ in its first $\lceil d_{\text{model}}/2 \rceil$ coordinates
      and, in the rest, the sum of a *key* id embedding $e_K(a_j)$ and a *query* id embedding
      $e_Q(b_j)$, divided by $\sqrt2$ (ids from a vocabulary of $2L$, key ids distinct within a
      sequence, embeddings drawn once per call from $\mathcal{N}(0, I)$). Each query id names
      the key id of a random position $m(j)$ of the same sequence, and the target is
      $y_j = (u_{m(j)}, 0)$. The correct attention is one-hot on the token chosen by content;
      predicting zero scores about $\lceil d_{\text{model}}/2 \rceil / d_{\text{model}}$.

    Parameters
    ----------
    task : str
        One of [TASKS][attnscale.TASKS].
    num_samples : int
        Number of sequences.
    seq_len : int
        Sequence length $L$.
    d_model : int
        Token width (at least 2 for ``"retrieval"``).
    generator : torch.Generator, optional
        Source of randomness (CPU); exclusive with ``seed``.
    seed : int, optional
        Seed of a fresh generator, in $[0, 2^{64})$ (default 0 when neither is given).

    Returns
    -------
    tuple of Tensor
        ``(x, y)``, float32 on the CPU.

    Raises
    ------
    TypeError
        If a size or ``seed`` is not an integer or ``generator`` not a ``torch.Generator``.
    ValueError
        If the task is unknown, a size is not a positive integer or so large that torch cannot
        allocate the data, ``d_model < 2`` for ``"retrieval"``, ``seed`` is outside
        $[0, 2^{64})$, or both ``generator`` and ``seed`` are given.

    Examples
    --------
    >>> from attnscale import make_task
    >>> x, y = make_task("retrieval", 10, 8, 32, seed=0)
    >>> x.shape, y.shape
    (torch.Size([10, 8, 32]), torch.Size([10, 8, 32]))
    """
    task = _checks.one_of(task, "task", TASKS)
    n = _checks.positive_int(num_samples, "num_samples")
    length = _checks.positive_int(seq_len, "seq_len")
    d = _checks.positive_int(d_model, "d_model")
    _checks.allocation((n, length, d), torch.float32, "num_samples, seq_len or d_model")
    gen = _checks.make_generator(generator, seed)
    if task == "reconstruction":
        x = torch.randn(n, length, d, generator=gen)  # (samples, length, d_model)
        return x, x.clone()
    if task == "mean":
        x = torch.randn(n, length, d, generator=gen)  # (samples, length, d_model)
        return x, x.mean(dim=1, keepdim=True).expand(n, length, d).clone()
    if d < 2:
        raise ValueError(f"d_model must be >= 2 for task='retrieval', got {d}")
    d_val = (d + 1) // 2
    d_id = d - d_val
    vocab = 2 * length
    key_emb = torch.randn(vocab, d_id, generator=gen)  # (vocab, d_id)
    query_emb = torch.randn(vocab, d_id, generator=gen)  # (vocab, d_id)
    u = torch.randn(n, length, d_val, generator=gen)  # (samples, length, d_val)
    key_ids = torch.rand(n, vocab, generator=gen).argsort(dim=1)[:, :length]  # (samples, length)
    match = torch.randint(0, length, (n, length), generator=gen)  # (samples, length): m(j)
    query_ids = key_ids.gather(1, match)  # (samples, length)
    ids = (key_emb[key_ids] + query_emb[query_ids]) / math.sqrt(2)  # (samples, length, d_id)
    x = torch.cat([u, ids], dim=-1)  # (samples, length, d_model)
    target_u = u.gather(1, match.unsqueeze(-1).expand(n, length, d_val))  # (samples, length, d_val)
    y = torch.cat([target_u, torch.zeros(n, length, d_id)], dim=-1)  # (samples, length, d_model)
    return x, y


@dataclass(frozen=True)
class TrainingConfig:
    r"""The settings of a [train][attnscale.train] call, validated and frozen.

    The fields are the parameters of [train][attnscale.train], with the same names, meanings and
    defaults; ``train`` builds one from its arguments and the result carries it as
    [TrainingResult.config][attnscale.TrainingResult], so
    ``train(**dataclasses.asdict(config))`` trains the same models again. The constructor
    accepts what ``train`` accepts and stores it normalised: ``strategies``, ``seeds`` and
    ``lrs`` as tuples (one value, a sequence, or a 0-D or 1-D tensor or array), sizes and seeds
    as ``int``, learning rates, ``betas`` and ``eps`` as ``float`` and ``device`` as a
    ``torch.device``. Fields cannot be reassigned; ``dataclasses.replace`` makes a changed copy,
    validated again.

    Raises
    ------
    TypeError, ValueError
        As [train][attnscale.train] does, naming the offending field.

    Examples
    --------
    >>> from attnscale import TrainingConfig
    >>> cfg = TrainingConfig("mean", strategies="none", seeds=[0, 1], epochs=2)
    >>> cfg.strategies, cfg.seeds, cfg.device
    (('none',), (0, 1), device(type='cpu'))
    """

    task: str = "reconstruction"
    strategies: tuple[str, ...] = ("inverse_sqrt",)
    seeds: tuple[int, ...] = (0,)
    lrs: tuple[float, ...] = (1e-3,)
    model: str = "simple"
    d_model: int = 128
    d_k: int = 64
    d_v: int | None = None
    num_heads: int = 1
    seq_len: int = 8
    num_samples: int = 500
    test_samples: int = 500
    batch_size: int = 32
    epochs: int = 100
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    warmup_steps: int = 0
    qk_init_gain: float = 1.0
    device: torch.device | str = "cpu"
    progress: bool | None = None
    num_threads: int | None = None

    def __post_init__(self) -> None:
        def store(name: str, value: object) -> None:
            object.__setattr__(self, name, value)  # frozen: the one place fields are set

        store("task", _checks.one_of(self.task, "task", TASKS))
        strategies = tuple(
            _checks.one_of(s, "strategy", SCALING_STRATEGIES)
            for s in _as_tuple(self.strategies, "strategies")
        )
        if len(set(strategies)) != len(strategies):
            raise ValueError(f"strategies must be distinct, got {list(strategies)}")
        store("strategies", strategies)
        seeds = tuple(_checks.rng_seed(s, "seeds") for s in _as_tuple(self.seeds, "seeds"))
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds must be distinct, got {list(seeds)}")
        store("seeds", seeds)
        store("lrs", tuple(_checks.positive_float(v, "lr") for v in _as_tuple(self.lrs, "lrs")))
        model = _checks.one_of(self.model, "model", MODELS)
        store("model", model)
        for name in ("d_model", "d_k", "num_heads", "seq_len", "num_samples", "test_samples"):
            store(name, _checks.positive_int(getattr(self, name), name))
        if self.d_v is not None:
            store("d_v", _checks.positive_int(self.d_v, "d_v"))
        if model == "simple" and self.num_heads != 1:
            raise ValueError(f"num_heads must be 1 for model='simple', got {self.num_heads}")
        if model == "block" and self.d_model % self.num_heads:
            raise ValueError(f"num_heads={self.num_heads} must divide d_model={self.d_model}")
        store("batch_size", _checks.positive_int(self.batch_size, "batch_size"))
        store("epochs", _checks.positive_int(self.epochs, "epochs"))
        betas = self.betas
        if not isinstance(betas, tuple) or len(betas) != 2:
            raise TypeError(f"betas must be a tuple of two floats, got {betas!r}")
        beta_pair = (
            _checks.finite_float(betas[0], "betas"),
            _checks.finite_float(betas[1], "betas"),
        )
        if not all(0.0 <= b < 1.0 for b in beta_pair):
            raise ValueError(f"betas must lie in [0, 1), got {betas!r}")
        store("betas", beta_pair)
        store("eps", _checks.positive_float(self.eps, "eps"))
        store("weight_decay", _checks.non_negative_float(self.weight_decay, "weight_decay"))
        store("warmup_steps", _checks.integer(self.warmup_steps, "warmup_steps", low=0, high=2**62))
        store("qk_init_gain", _checks.positive_float(self.qk_init_gain, "qk_init_gain"))
        _checks.allocation(
            (len(seeds), max(self.num_samples, self.test_samples), self.seq_len, self.d_model),
            torch.float32,
            "num_samples, test_samples, seq_len or d_model",
        )
        store("device", _checks.device(self.device))
        store("progress", None if self.progress is None else bool(self.progress))
        if self.num_threads is not None:
            store("num_threads", _checks.positive_int(self.num_threads, "num_threads"))


@dataclass(frozen=True)
class TrainingResult:
    r"""Per-step metrics of a batch of training runs.

    Every metric is a float tensor of shape ``(models, steps)`` on the CPU; model $i$ was
    trained with ``strategies[i]``, ``lrs[i]`` and ``seeds[i]``. The values at step $t$ describe
    the parameters *before* update $t$ on the mini-batch of step $t$ (the loss is the one the
    gradient was taken of). Attention statistics average over the batch, heads and query rows.

    Attributes
    ----------
    loss : Tensor
        Mean squared error on the mini-batch.
    grad_norm, grad_norm_q, grad_norm_k, grad_norm_other : Tensor
        Euclidean norm of the gradient: all parameters, the query projection, the key projection,
        and everything else (values, output, strategy, MLP, norms). Their size carries the
        strategy's multiplier: without $1/\sqrt{d_k}$ the query and key gradients lack that
        factor, whatever the softmax does.
    logit_grad_norm : Tensor
        Euclidean norm of $\partial L / \partial \ell$, the gradient of the loss with respect
        to the softmax input (the scaled, capped logits) over the whole mini-batch: the gradient
        that the softmax lets through, which saturation shrinks.
    logit_grad_row_median, logit_grad_row_p10, logit_grad_row_p90 : Tensor
        Median, 10th and 90th percentile over query rows (all batch elements, heads and
        positions) of each row's $\lVert \partial L / \partial \ell_{\text{row}} \rVert$.
    entropy, normalized_entropy : Tensor
        Attention entropy $-\sum_j p_j \ln p_j$ in nats, and divided by its maximum $\ln L$
        (0 for one-token sequences, where attention has no choice).
    max_probability : Tensor
        Mean over query rows of the row's largest attention probability.
    logit_std, max_abs_logit : Tensor
        Within-row standard deviation of the attention logits (the root of the mean, over query
        rows, of each row's population variance; 0 for one-token sequences), and the largest
        logit magnitude of the step. Softmax ignores a shift of a row, so the within-row spread
        is the one that sets how peaked attention is. The same definitions as the monitor's
        (see the [metric definitions][metric-definitions]).
    scale : Tensor
        The strategy's multiplier $\alpha$ (mean over heads): constant for fixed strategies,
        learned for ``"learnable_temperature"`` and ``"cosine"``.
    final_train_loss, test_loss : Tensor
        Shape ``(models,)``: loss on the whole training set after training, and on a held-out
        set drawn from the same task.
    strategies, seeds : tuple
        Strategy name and seed of each model.
    lrs : tuple of float
        Learning rate of each model.
    steps_per_epoch : int
        Number of optimizer steps per epoch.
    config : TrainingConfig
        The validated settings of the call; ``train(**dataclasses.asdict(config))`` trains the
        same models again.
    seconds : float
        Wall-clock time of the training loop.

    Examples
    --------
    >>> from attnscale import train
    >>> res = train("reconstruction", strategies=["none", "inverse_sqrt"], seeds=[0, 1, 2],
    ...             epochs=1, num_samples=16, d_model=8, d_k=4)
    >>> res.num_models, res.loss.shape, res.test_loss.shape
    (6, torch.Size([6, 1]), torch.Size([6]))
    """

    loss: torch.Tensor
    grad_norm: torch.Tensor
    grad_norm_q: torch.Tensor
    grad_norm_k: torch.Tensor
    grad_norm_other: torch.Tensor
    logit_grad_norm: torch.Tensor
    logit_grad_row_median: torch.Tensor
    logit_grad_row_p10: torch.Tensor
    logit_grad_row_p90: torch.Tensor
    entropy: torch.Tensor
    normalized_entropy: torch.Tensor
    max_probability: torch.Tensor
    logit_std: torch.Tensor
    max_abs_logit: torch.Tensor
    scale: torch.Tensor
    final_train_loss: torch.Tensor
    test_loss: torch.Tensor
    strategies: tuple[str, ...]
    seeds: tuple[int, ...]
    lrs: tuple[float, ...]
    steps_per_epoch: int
    config: TrainingConfig
    seconds: float = 0.0
    _states: tuple[dict[str, torch.Tensor], ...] = field(default=(), repr=False)

    @property
    def num_models(self) -> int:
        """Number of trained models."""
        return len(self.seeds)

    def metric(self, name: str, *, per_epoch: bool = False) -> torch.Tensor:
        """One metric, ``(models, steps)``, or averaged per epoch, ``(models, epochs)``.

        Parameters
        ----------
        name : str
            One of [METRICS][attnscale.METRICS].
        per_epoch : bool
            Average the steps of each epoch (the source article's epoch loss).

        Returns
        -------
        Tensor

        Raises
        ------
        ValueError
            If ``name`` is not a metric.

        Examples
        --------
        >>> from attnscale import train
        >>> res = train("mean", epochs=3, num_samples=8, d_model=8, d_k=4, batch_size=4)
        >>> res.metric("loss").shape, res.metric("loss", per_epoch=True).shape
        (torch.Size([1, 6]), torch.Size([1, 3]))
        """
        values: torch.Tensor = getattr(self, _checks.one_of(name, "name", METRICS))
        if not per_epoch:
            return values
        models, steps = values.shape
        return values.view(models, steps // self.steps_per_epoch, self.steps_per_epoch).mean(-1)

    def select(
        self, *, strategy: str | None = None, lr: float | None = None, seed: int | None = None
    ) -> list[int]:
        """Indices of the models matching every given field, in training order.

        Parameters
        ----------
        strategy, lr, seed : optional
            Values to match; ``None`` matches anything.

        Returns
        -------
        list of int

        Raises
        ------
        TypeError, ValueError
            If ``lr`` is given but is not a finite number.

        Examples
        --------
        >>> from attnscale import train
        >>> res = train("mean", strategies=["none", "cosine"], seeds=[0, 1], epochs=1,
        ...             num_samples=8, d_model=8, d_k=4)
        >>> res.select(strategy="cosine"), res.select(seed=1)
        ([2, 3], [1, 3])
        """
        lr = None if lr is None else _checks.finite_float(lr, "lr")
        return [
            i
            for i in range(self.num_models)
            if (strategy is None or self.strategies[i] == strategy)
            and (lr is None or math.isclose(self.lrs[i], lr))
            and (seed is None or self.seeds[i] == seed)
        ]

    def by_variant(self, name: str, *, per_epoch: bool = False) -> dict[str, torch.Tensor]:
        """A metric grouped over seeds: ``{variant label: (seeds, steps or epochs)}``.

        A variant is a (strategy, learning rate) pair; its label names the strategy, and the
        learning rate when several were trained. Per-model metrics of shape ``(models,)`` such
        as ``test_loss`` are grouped too, giving ``(seeds,)``.

        Parameters
        ----------
        name : str
            A name from [METRICS][attnscale.METRICS], ``"final_train_loss"`` or ``"test_loss"``.
        per_epoch : bool
            Average per epoch first (ignored for per-model metrics).

        Returns
        -------
        dict of str to Tensor

        Raises
        ------
        ValueError
            If ``name`` is not a metric.

        Examples
        --------
        >>> from attnscale import train
        >>> res = train("mean", strategies=["none", "cosine"], seeds=[0, 1], epochs=2,
        ...             num_samples=8, d_model=8, d_k=4, batch_size=4)
        >>> {k: tuple(v.shape) for k, v in res.by_variant("entropy", per_epoch=True).items()}
        {'none': (2, 2), 'cosine': (2, 2)}
        """
        if name in ("final_train_loss", "test_loss"):
            values: torch.Tensor = getattr(self, name)
        else:
            values = self.metric(name, per_epoch=per_epoch)
        several_lrs = len(set(self.lrs)) > 1
        groups: dict[str, list[int]] = {}
        for i in range(self.num_models):
            label = self.strategies[i] + (f", lr={self.lrs[i]:g}" if several_lrs else "")
            groups.setdefault(label, []).append(i)
        return {label: values[idx] for label, idx in groups.items()}

    def state_dict(self, index: int) -> dict[str, torch.Tensor]:
        """The final parameters and buffers of model ``index``, for ``load_state_dict``.

        Parameters
        ----------
        index : int
            Model index.

        Returns
        -------
        dict of str to Tensor

        Raises
        ------
        TypeError
            If ``index`` is not an integer (Python or numpy; not a bool or a float).
        ValueError
            If ``index`` is not in ``[0, num_models)``.
        """
        index = _checks.integer(index, "index", low=0, high=self.num_models - 1)
        return dict(self._states[index])


class _Probe(nn.Module):
    """Runs a model with weights and logits, and reports its strategy's current multiplier."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, x: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        res = self.model(x, need_weights=True, need_logits=True)
        strategy = self.model.strategy
        assert isinstance(strategy, ScoreScaling)  # both models expose their strategy
        scale = strategy.effective_scale().to(x.device).mean()
        return res.output, res.weights, res.logits, scale


def _param_group(name: str) -> str:
    leaf = name.rsplit(".", 2)
    owner = leaf[-2] if len(leaf) >= 2 else ""
    return {"q_proj": "q", "k_proj": "k"}.get(owner, "other")


class _Stack:
    """Models trained together, their parameters stacked along a leading model dimension.

    Subclasses provide ``forward``: per-model losses and attention statistics of a stacked batch.
    This class owns the step: one backward pass over the summed losses, gradient norms per
    parameter group, and Adam applied element-wise with a learning rate per model.
    """

    def __init__(
        self,
        params: dict[str, torch.Tensor],
        lrs: torch.Tensor,
        seed_pos: torch.Tensor,
        config: TrainingConfig,
    ) -> None:
        self.params = {k: v.detach().clone().requires_grad_() for k, v in params.items()}
        self.lrs = lrs  # (models,)
        lr_values = set(lrs.tolist())
        self.shared_lr = lr_values.pop() if len(lr_values) == 1 else None
        self.seed_pos = seed_pos  # (models,): which seed's data each model sees
        self.betas, self.eps = config.betas, config.eps
        self.weight_decay, self.warmup_steps = config.weight_decay, config.warmup_steps
        self.exp_avg = {k: torch.zeros_like(v) for k, v in self.params.items()}
        self.exp_avg_sq = {k: torch.zeros_like(v) for k, v in self.params.items()}
        self.groups = {k: _param_group(k) for k in self.params}

    def forward(
        self, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(loss (models,), weights, logits (models, batch, heads, L, L), scale (models,))``."""
        raise NotImplementedError

    def states(self) -> list[dict[str, torch.Tensor]]:
        """Each model's ``state_dict``, on the CPU."""
        raise NotImplementedError

    def step(self, t: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """One Adam step on ``x``/``y`` ``(models, batch, length, d_model)``.

        Returns the step's metrics as ``(len(METRICS), models)``, in the order of METRICS.
        """
        loss, w, logits, scale = self.forward(x, y)
        # One backward pass for the weights and the softmax input: the sum over models leaves
        # each model's gradients those of its own loss.
        params = list(self.params.values())
        *grads, logit_grad = torch.autograd.grad(loss.sum(), [*params, logits], allow_unused=True)
        with torch.no_grad():
            sq = {name: torch.zeros_like(loss) for name in ("q", "k", "other")}
            for (k, p), g in zip(self.params.items(), grads, strict=True):
                p.grad = g
                if g is not None:
                    sq[self.groups[k]] += g.flatten(1).square().sum(1)
            metrics = {
                "loss": loss.detach(),
                "grad_norm": (sq["q"] + sq["k"] + sq["other"]).sqrt(),
                "grad_norm_q": sq["q"].sqrt(),
                "grad_norm_k": sq["k"].sqrt(),
                "grad_norm_other": sq["other"].sqrt(),
                **_logit_grad_stats(logit_grad),
                **_attention_stats(w, logits),
                "scale": scale.detach().expand_as(loss),
            }
            self._adam(t)
        return torch.stack([metrics[m] for m in METRICS])

    def _adam(self, t: int) -> None:
        # torch.optim.AdamW's update (not amsgrad; weight_decay=0 is torch.optim.Adam's),
        # element-wise on the stacked tensors with a learning rate per model, so every model
        # keeps its own state. Warmup scales the learning rate linearly up to step warmup_steps.
        beta1, beta2 = self.betas
        bias1 = 1 - beta1**t
        bias2_sqrt = math.sqrt(1 - beta2**t)
        warm = min(1.0, t / self.warmup_steps) if self.warmup_steps else 1.0
        for k, p in self.params.items():
            if p.grad is None:
                continue
            g = p.grad
            m, v = self.exp_avg[k], self.exp_avg_sq[k]
            m.lerp_(g, 1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            denom = (v.sqrt() / bias2_sqrt).add_(self.eps)
            if self.shared_lr is not None:
                lr = warm * self.shared_lr
                if self.weight_decay:
                    p.mul_(1 - lr * self.weight_decay)
                p.addcdiv_(m, denom, value=-lr / bias1)
            else:
                lrs = warm * self.lrs.view(-1, *([1] * (p.dim() - 1)))  # (models, 1, ...)
                if self.weight_decay:
                    p.mul_(1 - lrs * self.weight_decay)
                p.sub_(lrs / bias1 * m / denom)

    def evaluate(self, x: torch.Tensor, y: torch.Tensor, chunk: int = 256) -> torch.Tensor:
        """Mean loss per model over each model's seed's data ``x``/``y`` ``(seeds, samples, ...)``."""
        total = torch.zeros(self.seed_pos.shape[0], device=x.device)
        n = x.shape[1]
        with torch.no_grad():
            for start in range(0, n, chunk):
                xb = x[:, start : start + chunk].index_select(0, self.seed_pos)
                yb = y[:, start : start + chunk].index_select(0, self.seed_pos)
                loss = self.forward(xb, yb)[0]  # (models,)
                total += loss * xb.shape[1]
        return total / n


class _VmapStack(_Stack):
    """Any model, run with ``torch.func.vmap`` over ``functional_call``."""

    def __init__(
        self,
        models: list[nn.Module],
        lrs: torch.Tensor,
        seed_pos: torch.Tensor,
        config: TrainingConfig,
    ) -> None:
        probes = [_Probe(m) for m in models]
        params, self.buffers = stack_module_state(probes)
        super().__init__(params, lrs, seed_pos, config)
        base = copy.deepcopy(probes[0]).to("meta")

        def one(
            p: dict[str, torch.Tensor], b: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor
        ) -> tuple[torch.Tensor, ...]:
            out, w, logits, scale = functional_call(base, (p, b), (x,))
            loss = ((out - y) ** 2).mean()
            return loss, w, logits, scale

        self._vmapped: Callable[..., tuple[torch.Tensor, ...]] = vmap(one)

    def forward(
        self, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        loss, w, logits, scale = self._vmapped(self.params, self.buffers, x, y)
        return loss, w, logits, scale

    def states(self) -> list[dict[str, torch.Tensor]]:
        prefix = "model."
        out = []
        for i in range(self.lrs.shape[0]):
            state = {k[len(prefix) :]: v[i].detach().cpu().clone() for k, v in self.params.items()}
            state.update({k[len(prefix) :]: v[i].cpu().clone() for k, v in self.buffers.items()})
            out.append(state)
        return out


_SIMPLE_WEIGHTS = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "out_proj.weight")


def _bilinear_is_cheaper(d_model: int, d_k: int, tokens: int) -> bool:
    """Whether logits through alpha W_q^T W_k, d_model^2 (d_k + tokens) multiply-adds per model,
    cost less than through the queries and keys, 2 tokens d_model d_k."""
    return d_model * (d_k + tokens) < 2 * tokens * d_k


class _SimpleStack(_Stack):
    """SimpleAttentionModels whose logits are a constant times q . k (``strategy.constant_scale``).

    The constant may differ from model to model, so models of several such strategies share one
    stack. The computation is the module's, written with batched matrix products over the model
    dimension: these small models spend much of a step in per-operation overhead, which this
    path cuts. When it needs fewer operations, for heads wider than about $d_{\text{model}}/2$,
    the logits are computed through the $d_{\text{model}} \times d_{\text{model}}$ matrix
    $\alpha W_q^\top W_k$ instead of the queries and keys.
    """

    def __init__(
        self,
        models: list[SimpleAttentionModel],
        lrs: torch.Tensor,
        seed_pos: torch.Tensor,
        config: TrainingConfig,
    ) -> None:
        states = [m.state_dict() for m in models]
        params = {k: torch.stack([st[k] for st in states]) for k in _SIMPLE_WEIGHTS}
        super().__init__(params, lrs, seed_pos, config)
        self.d_k, self.d_v = models[0].d_k, models[0].d_v
        alphas = [m.strategy.effective_scale().mean() for m in models]
        self.scale = torch.stack(alphas).to(lrs.device)  # (models,)

    @staticmethod
    def supports(model: nn.Module) -> bool:
        return type(model) is SimpleAttentionModel and model.strategy.constant_scale

    def forward(
        self, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        models, batch, length, d_model = x.shape
        w_q, w_k, w_v, w_o = (self.params[k] for k in _SIMPLE_WEIGHTS)
        tokens = x.reshape(models, batch * length, d_model)
        if _bilinear_is_cheaper(d_model, self.d_k, batch * length):
            # q . k = x_i W_q^T W_k x_j^T, through the (d_model, d_model) matrix alpha W_q^T W_k.
            bilinear = (w_q.transpose(1, 2) * self.scale.view(-1, 1, 1)) @ w_k  # (models, d, d)
            xm = torch.bmm(tokens, bilinear).view(models, batch, length, d_model)
            logits = xm @ x.transpose(-2, -1)  # (models, batch, L, L)
            v = torch.bmm(tokens, w_v.transpose(1, 2)).view(models, batch, length, self.d_v)
        else:
            # One product for queries, keys and values: (models, batch * length, 2 d_k + d_v).
            w_qkv = torch.cat([w_q, w_k, w_v], dim=1)  # (models, 2 d_k + d_v, d_model)
            qkv = torch.bmm(tokens, w_qkv.transpose(1, 2))
            q, k, v = torch.split(
                qkv.view(models, batch, length, -1), [self.d_k, self.d_k, self.d_v], dim=-1
            )  # (models, batch, length, d)
            # The multiplier on the query before the product, as the library's attention does.
            logits = (q * self.scale.view(-1, 1, 1, 1)) @ k.transpose(
                -2, -1
            )  # (models, batch, L, L)
        # The heads dimension (1) is added before the softmax, so that the logits returned are
        # the tensor the loss depends on (the trainer takes the loss's gradient with respect
        # to them).
        logits = logits.unsqueeze(2)  # (models, batch, 1, L, L)
        w = torch.softmax(logits, dim=-1)  # (models, batch, 1, L, L)
        heads = (w.squeeze(2) @ v).view(models, batch * length, self.d_v)
        out = torch.bmm(heads, w_o.transpose(1, 2))  # (models, batch * length, d_model)
        loss = (out - y.reshape(out.shape)).square().mean((1, 2))  # (models,)
        return loss, w, logits, self.scale

    def states(self) -> list[dict[str, torch.Tensor]]:
        return [
            {k: v[i].detach().cpu().clone() for k, v in self.params.items()}
            for i in range(self.lrs.shape[0])
        ]


def _logit_grad_stats(grad: torch.Tensor) -> dict[str, torch.Tensor]:
    """Norms of dL/dlogits ``(models, batch, heads, q_len, k_len)``: whole step and per row."""
    models = grad.shape[0]
    rows = grad.norm(dim=-1).reshape(models, -1)  # (models, rows)
    q = torch.quantile(rows, torch.tensor([0.1, 0.5, 0.9], device=grad.device), dim=1)
    return {
        "logit_grad_norm": grad.reshape(models, -1).norm(dim=1),
        "logit_grad_row_median": q[1],
        "logit_grad_row_p10": q[0],
        "logit_grad_row_p90": q[2],
    }


def _attention_stats(w: torch.Tensor, logits: torch.Tensor) -> dict[str, torch.Tensor]:
    """Attention statistics per model from ``(models, batch, heads, q_len, k_len)`` tensors."""
    models = w.shape[0]
    k_len = w.shape[-1]
    ent = -(w * w.clamp_min(1e-30).log()).sum(-1)  # (models, batch, heads, q_len)
    ent = ent.reshape(models, -1).mean(1)  # (models,)
    # Population variance of each row (no correction): 0, not NaN, for one-key rows.
    row_var = logits.var(dim=-1, correction=0).reshape(models, -1)  # (models, rows)
    return {
        "entropy": ent,
        "normalized_entropy": ent / math.log(k_len) if k_len > 1 else torch.zeros_like(ent),
        "max_probability": w.amax(-1).reshape(models, -1).mean(1),
        "logit_std": row_var.mean(1).sqrt(),
        "max_abs_logit": logits.abs().reshape(models, -1).amax(dim=1),
    }


def _as_tuple(value: object, name: str) -> tuple[object, ...]:
    """One value or a sequence, tensor or array of them (at most one-dimensional), as a tuple."""
    if isinstance(value, np.floating | np.ndarray | torch.Tensor):
        value = _as_python(value, name)
    if isinstance(value, str | numbers.Number):
        return (value,)
    if isinstance(value, Sequence):
        out = tuple(_as_python(v, name) if isinstance(v, np.floating) else v for v in value)
        if not out:
            raise ValueError(f"{name} must not be empty")
        return out
    raise TypeError(f"{name} must be a value or a sequence of values, got {type(value).__name__}")


def _as_python(value: np.floating | np.ndarray | torch.Tensor, name: str) -> object:
    """Python numbers from a numpy scalar, array or tensor (at most one-dimensional).

    A float32 1e-3 is 0.0010000000474974513 as a Python float; the value recorded is the number
    the caller wrote, the shortest decimal that rounds to it in its own dtype.
    """
    if isinstance(value, torch.Tensor) and value.dtype in (torch.float16, torch.float32):
        value = value.detach().cpu().numpy()
    if value.ndim > 1:
        raise ValueError(
            f"{name} must be a value or a one-dimensional sequence, got shape {tuple(value.shape)}"
        )
    if isinstance(value, torch.Tensor):
        return value.reshape(-1).tolist()
    if value.dtype in (np.float16, np.float32):
        flat = [float(str(v)) for v in np.asarray(value).reshape(-1)]
        return flat[0] if isinstance(value, np.floating) else flat
    return value.tolist() if isinstance(value, np.floating) else value.reshape(-1).tolist()


def train(
    task: str = "reconstruction",
    *,
    strategies: str | Sequence[str] = "inverse_sqrt",
    seeds: int | Sequence[int] = 0,
    lrs: float | Sequence[float] = 1e-3,
    model: str = "simple",
    d_model: int = 128,
    d_k: int = 64,
    d_v: int | None = None,
    num_heads: int = 1,
    seq_len: int = 8,
    num_samples: int = 500,
    test_samples: int = 500,
    batch_size: int = 32,
    epochs: int = 100,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    warmup_steps: int = 0,
    qk_init_gain: float = 1.0,
    device: torch.device | str = "cpu",
    progress: bool | None = None,
    num_threads: int | None = None,
) -> TrainingResult:
    r"""Train every (strategy, learning rate, seed) combination on a synthetic task, batched.

    For each seed $s$ the data come from [make_task][attnscale.make_task] with a generator
    seeded $s$ (training set, then test set), the mini-batch order from a generator seeded
    $(s + 1000003) \bmod 2^{64}$ (reshuffled each epoch, last batch smaller, like a ``DataLoader`` with
    ``shuffle=True``), and the initial weights from [make_model][attnscale.make_model] with
    ``seed=s``. Models that differ only in learning rate or strategy therefore see the same data
    and start from the same weights. Optimisation is Adam (``torch.optim.Adam``'s update; with
    ``weight_decay``, ``torch.optim.AdamW``'s) on the mean squared error, with an optional linear
    warmup of the learning rate. The models run in stacks, one per strategy or one
    per run of neighbouring constant-scale strategies; see the module description. The models
    are ordered strategy-major, then learning rate, then seed.

    The arguments are validated once into a [TrainingConfig][attnscale.TrainingConfig], which
    the result carries as ``config``: ``train(**dataclasses.asdict(result.config))`` repeats the
    call, and ``train(**dataclasses.asdict(cfg))`` runs a config built beforehand.

    Parameters
    ----------
    task : str
        One of [TASKS][attnscale.TASKS].
    strategies : str or sequence of str
        Score-scaling strategies from [SCALING_STRATEGIES][attnscale.SCALING_STRATEGIES].
    seeds : int or sequence of int
        Distinct seeds in $[0, 2^{64})$: Python or numpy integers, or a 1-D tensor or array.
    lrs : float or sequence of float
        Learning rates (> 0): a number, a sequence, or a 0-D or 1-D tensor or array.
    model : str
        ``"simple"`` ([SimpleAttentionModel][attnscale.SimpleAttentionModel]) or ``"block"``
        ([AttentionBlock][attnscale.AttentionBlock]).
    d_model, d_k, d_v, num_heads : int
        Model sizes, as in [make_model][attnscale.make_model].
    seq_len, num_samples, test_samples, batch_size, epochs : int
        Task and loop sizes (all > 0).
    betas : tuple of float
        Adam's decay rates, each in $[0, 1)$.
    eps : float
        Adam's epsilon (> 0).
    weight_decay : float
        Decoupled weight decay ($\ge 0$), as in ``torch.optim.AdamW``: before each update every
        weight is multiplied by $1 - \eta_t \lambda$. 0 (the default) is plain Adam.
    warmup_steps : int
        Linear learning-rate warmup ($\ge 0$): step $t$ uses $\eta \min(1, t / T_w)$; 0 (the
        default) means none.
    qk_init_gain : float
        Multiplier (> 0) of every query and key projection weight at initialisation, after the
        strategy's own init; 1 (the default) leaves them as drawn. With ``"none"`` and
        $d_k^{-1/4}$ the unscaled logits start exactly where the $1/\sqrt{d_k}$ model's do.
    device : str or torch.device
        Where to train (``"cpu"`` by default; ``"cuda"`` when available; not ``"meta"``). Data and initial
        weights are drawn on the CPU, so a seed means the same run on every device.
    progress : bool, optional
        Print a one-line progress report per epoch to stderr; by default only when stderr is a
        terminal.
    num_threads : int, optional
        CPU threads for torch during the call (``torch.set_num_threads``, restored afterwards);
        default: leave torch's setting. The matrices here are small: on a machine with few
        cores and other work, one thread can be faster than several.

    Returns
    -------
    TrainingResult
        Metrics of shape ``(models, epochs * steps_per_epoch)``, per-model final losses, and
        the settings as a [TrainingConfig][attnscale.TrainingConfig].

    Raises
    ------
    TypeError
        For a size, seed or learning rate of the wrong type (a seed must be an integer).
    ValueError
        For an unknown task, strategy or model, a size, learning rate, ``eps`` or epoch count
        that is not positive, sizes too large for torch to allocate the data, repeated seeds or
        seeds outside $[0, 2^{64})$, ``strategies``, ``seeds`` or ``lrs`` that are empty or
        more than one-dimensional, ``num_heads`` not dividing ``d_model`` (``model="block"``)
        or not 1 (``model="simple"``), betas outside $[0, 1)$, or a device that cannot hold
        data (``"meta"``) or is not available.

    Examples
    --------
    >>> from attnscale import train
    >>> res = train("mean", strategies=["none", "inverse_sqrt"], seeds=[0, 1], d_model=16,
    ...             d_k=8, num_samples=64, test_samples=32, epochs=2)
    >>> res.loss.shape, res.steps_per_epoch
    (torch.Size([4, 4]), 2)
    """
    # The first statement, so that locals() holds exactly the arguments: the config's fields.
    config = TrainingConfig(**locals())
    previous_threads = torch.get_num_threads()
    if config.num_threads is not None:
        torch.set_num_threads(config.num_threads)
    try:
        return _train(config)
    finally:
        torch.set_num_threads(previous_threads)


def _train(config: TrainingConfig) -> TrainingResult:
    """The training loop of [train][attnscale.train], on validated settings."""
    task, seed_list, dev = config.task, list(config.seeds), config.device
    d_model, seq_len, num_samples = config.d_model, config.seq_len, config.num_samples
    show = sys.stderr.isatty() if config.progress is None else config.progress

    # Data per seed: (seeds, samples, length, d_model), drawn on the CPU then moved.
    xs, ys, xts, yts = [], [], [], []
    for s in seed_list:
        gen = torch.Generator().manual_seed(s)
        x, y = make_task(task, num_samples, seq_len, d_model, generator=gen)
        xt, yt = make_task(task, config.test_samples, seq_len, d_model, generator=gen)
        xs.append(x)
        ys.append(y)
        xts.append(xt)
        yts.append(yt)
    x_train, y_train = torch.stack(xs).to(dev), torch.stack(ys).to(dev)
    x_test, y_test = torch.stack(xts).to(dev), torch.stack(yts).to(dev)
    shufflers = [torch.Generator().manual_seed(_shuffle_seed(s)) for s in seed_list]

    # Every model, in the order of the result: strategy-major, then learning rate, then seed.
    models: list[nn.Module] = []
    order: list[tuple[str, float, int]] = []
    for strat in config.strategies:
        for lr in config.lrs:
            for s in seed_list:
                model = make_model(
                    config.model,
                    d_model=d_model,
                    d_k=config.d_k,
                    d_v=config.d_v,
                    num_heads=config.num_heads,
                    strategy=strat,
                    seed=s,
                    device=dev,
                )
                if config.qk_init_gain != 1.0:
                    with torch.no_grad():
                        for name, p in model.named_parameters():
                            if _param_group(name) in ("q", "k"):
                                p.mul_(config.qk_init_gain)
                models.append(model)
                order.append((strat, lr, s))
    # One stack per strategy, except that neighbouring strategies the fast path covers share one.
    groups: list[_Stack] = []
    for (fast, _), run in itertools.groupby(
        range(len(models)),
        key=lambda i: (True, "") if _SimpleStack.supports(models[i]) else (False, order[i][0]),
    ):
        idx = list(run)
        stack = _SimpleStack if fast else _VmapStack
        groups.append(
            stack(
                [models[i] for i in idx],  # type: ignore[misc]
                torch.tensor([order[i][1] for i in idx], device=dev),
                torch.tensor([seed_list.index(order[i][2]) for i in idx], device=dev),
                config,
            )
        )

    steps_per_epoch = math.ceil(num_samples / config.batch_size)
    records: list[torch.Tensor] = []  # per step: (len(METRICS), models)
    # Mini-batches are gathered with index_select on the flattened data (several times faster
    # than advanced indexing on a CPU): row r * num_samples + i is sample i of seed r.
    x_rows = x_train.view(-1, seq_len, d_model)  # (seeds * samples, length, d_model)
    y_rows = y_train.view(-1, seq_len, d_model)  # (seeds * samples, length, d_model)
    row_offset = torch.arange(len(seed_list), device=dev).unsqueeze(1) * num_samples  # (seeds, 1)
    start_time = time.perf_counter()
    t = 0
    for epoch in range(config.epochs):
        perms = torch.stack([torch.randperm(num_samples, generator=g) for g in shufflers]).to(dev)
        perms += row_offset  # (seeds, samples): rows of x_rows
        for start in range(0, num_samples, config.batch_size):
            t += 1
            rows = perms[:, start : start + config.batch_size]  # (seeds, batch)
            step = []
            for g in groups:
                r = rows[g.seed_pos].flatten()  # (models * batch,)
                shape = (len(g.seed_pos), -1, seq_len, d_model)
                xb = x_rows.index_select(0, r).view(shape)  # (models, batch, length, d_model)
                yb = y_rows.index_select(0, r).view(shape)  # (models, batch, length, d_model)
                step.append(g.step(t, xb, yb))
            records.append(torch.cat(step, dim=1))  # (len(METRICS), models)
        if show:
            last = torch.stack([r[0] for r in records[-steps_per_epoch:]]).mean(0)
            sys.stderr.write(
                f"\rtrain {task}: epoch {epoch + 1}/{config.epochs}, {len(order)} models, "
                f"mean loss {float(last.mean()):.4g}, {time.perf_counter() - start_time:.1f} s"
            )
            sys.stderr.flush()
    if show:
        sys.stderr.write("\n")
    seconds = time.perf_counter() - start_time

    final_train = torch.cat([g.evaluate(x_train, y_train) for g in groups])
    test = torch.cat([g.evaluate(x_test, y_test) for g in groups])
    recorded = torch.stack(records, dim=2).float().cpu()  # (len(METRICS), models, steps)
    metrics = dict(zip(METRICS, recorded.unbind(0), strict=True))
    states = tuple(st for g in groups for st in g.states())
    return TrainingResult(
        **metrics,
        final_train_loss=final_train.detach().float().cpu(),
        test_loss=test.detach().float().cpu(),
        strategies=tuple(o[0] for o in order),
        seeds=tuple(o[2] for o in order),
        lrs=tuple(o[1] for o in order),
        steps_per_epoch=steps_per_epoch,
        config=config,
        seconds=seconds,
        _states=states,
    )
