"""The settings of a training call, each written once: its field, type, default and meaning."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .. import _checks
from .._models import MODELS
from .._strategies import SCALING_STRATEGIES
from .tasks import TASKS

__all__ = ["TrainingConfig"]

#: The most CPU threads ``num_threads`` may ask for (torch takes a 32-bit count, and more
#: threads than any machine has cores only oversubscribes it).
MAX_THREADS = 1024


@dataclass(frozen=True)
class TrainingConfig:
    r"""The settings of a [train][attnscale.train] call, validated and frozen: each written once.

    ``train`` takes one (or builds one from its keyword arguments), and the result carries it as
    [TrainingResult.config][attnscale.TrainingResult], so ``train(result.config)`` trains the
    same models again. The constructor accepts the values listed below and stores them
    normalised: ``strategies``, ``seeds`` and ``lrs`` as tuples, sizes and seeds as ``int``,
    learning rates, ``betas`` and ``eps`` as ``float`` and ``device`` as a ``torch.device``.
    Fields cannot be reassigned; ``dataclasses.replace`` (or ``train(config, **changes)``)
    makes a changed copy, validated again.

    Parameters
    ----------
    task : str
        One of [TASKS][attnscale.TASKS].
    strategies : str or sequence of str
        Distinct score-scaling strategies from
        [SCALING_STRATEGIES][attnscale.SCALING_STRATEGIES].
    seeds : int or sequence of int
        Distinct seeds in $[0, 2^{64})$: Python or numpy integers, or a 1-D tensor or array.
    lrs : float or sequence of float
        Learning rates (> 0): a number, a sequence, or a 0-D or 1-D tensor or array.
    model : str
        ``"simple"`` ([SimpleAttentionModel][attnscale.SimpleAttentionModel], ``num_heads``
        must be 1) or ``"block"`` ([AttentionBlock][attnscale.AttentionBlock], ``num_heads``
        must divide ``d_model``).
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
        Where to train (``"cpu"`` by default; ``"cuda"`` when available; not ``"meta"``). Data
        and initial weights are drawn on the CPU, so a seed means the same run on every device.
    progress : bool, optional
        Print a one-line progress report per epoch to stderr; by default (None) only when stderr
        is a terminal. ``True``, ``False`` or None (numpy bools and the integers 0 and 1 are
        taken as bools).
    num_threads : int, optional
        CPU threads for torch during the call (``torch.set_num_threads``, restored afterwards),
        from 1 to 1024; default: leave torch's setting. The matrices here are small: on a
        machine with few cores and other work, one thread can be faster than several.

    Raises
    ------
    TypeError
        For a size, seed or learning rate of the wrong type (a seed must be an integer), or a
        ``progress`` that is not a bool or None.
    ValueError
        For an unknown task, strategy or model, a size, learning rate, ``eps`` or epoch count
        that is not positive, sizes too large for torch to allocate the data or an epoch count
        too large for the recorded metrics, ``num_threads`` above 1024, repeated seeds or
        seeds outside $[0, 2^{64})$, ``strategies``, ``seeds`` or ``lrs`` that are empty or
        more than one-dimensional, ``num_heads`` not dividing ``d_model`` (``model="block"``)
        or not 1 (``model="simple"``), betas outside $[0, 1)$, or a device that cannot hold
        data (``"meta"``) or is not available. Each message names the field.

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
        self._check_allocations()
        store("device", _checks.device(self.device))
        store("progress", _flag(self.progress, "progress"))
        store("num_threads", _threads(self.num_threads))

    def _check_allocations(self) -> None:
        """Raise ``ValueError`` naming the fields if the data or the metrics cannot be allocated."""
        _checks.allocation(
            (len(self.seeds), max(self.num_samples, self.test_samples), self.seq_len, self.d_model),
            torch.float32,
            "num_samples, test_samples, seq_len or d_model",
        )
        # The metrics recorded per step: (models, epochs, steps per epoch) numbers of each kind.
        steps = -(-self.num_samples // self.batch_size)
        models = len(self.strategies) * len(self.lrs) * len(self.seeds)
        _checks.allocation(
            (models, self.epochs, steps), torch.float32, "epochs (with num_samples / batch_size)"
        )


def _threads(value: object) -> int | None:
    """``num_threads`` validated: None, or a whole number in [1, MAX_THREADS]."""
    if value is None:
        return None
    threads = _checks.positive_int(value, "num_threads")
    if threads > MAX_THREADS:
        raise ValueError(f"num_threads must be at most {MAX_THREADS}, got {_checks.show(threads)}")
    return threads


def _flag(value: object, name: str) -> bool | None:
    """``value`` as a bool: True, False, None (unset), numpy bools, or the integers 0 and 1."""
    if value is None:
        return None
    if isinstance(value, bool | np.bool_) or (
        isinstance(value, numbers.Integral) and value in (0, 1)
    ):
        return bool(value)
    raise TypeError(
        f"{name} must be True, False or None, got {type(value).__name__} {_checks.show(value)[:80]}"
    )


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
