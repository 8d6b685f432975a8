"""What a training call returns: per-step metrics of every model, and the per-step metric names."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import torch

from .. import _checks
from .config import TrainingConfig

__all__ = ["METRICS", "TrainingResult"]

_PER_STEP = {"per_step": True}  # marks the fields that hold a metric of every step


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
        The validated settings of the call; ``train(config)`` trains the same models again.
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

    loss: torch.Tensor = field(metadata=_PER_STEP)
    grad_norm: torch.Tensor = field(metadata=_PER_STEP)
    grad_norm_q: torch.Tensor = field(metadata=_PER_STEP)
    grad_norm_k: torch.Tensor = field(metadata=_PER_STEP)
    grad_norm_other: torch.Tensor = field(metadata=_PER_STEP)
    logit_grad_norm: torch.Tensor = field(metadata=_PER_STEP)
    logit_grad_row_median: torch.Tensor = field(metadata=_PER_STEP)
    logit_grad_row_p10: torch.Tensor = field(metadata=_PER_STEP)
    logit_grad_row_p90: torch.Tensor = field(metadata=_PER_STEP)
    entropy: torch.Tensor = field(metadata=_PER_STEP)
    normalized_entropy: torch.Tensor = field(metadata=_PER_STEP)
    max_probability: torch.Tensor = field(metadata=_PER_STEP)
    logit_std: torch.Tensor = field(metadata=_PER_STEP)
    max_abs_logit: torch.Tensor = field(metadata=_PER_STEP)
    scale: torch.Tensor = field(metadata=_PER_STEP)
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


#: Names of the per-step metrics in a [TrainingResult][attnscale.TrainingResult]: its fields of
#: shape ``(models, steps)``, in order.
METRICS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(TrainingResult) if f.metadata.get("per_step")
)
