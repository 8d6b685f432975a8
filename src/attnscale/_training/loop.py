"""The training loop: data per seed, the models in stacks, the steps, the result."""

from __future__ import annotations

import dataclasses
import itertools
import math
import sys
import time
from typing import Any

import torch
from torch import nn

from .._models import make_model
from .config import TrainingConfig
from .result import METRICS, TrainingResult
from .stacks import SimpleStack, Stack, VmapStack, param_group
from .tasks import make_task, shuffle_seed

__all__ = ["train"]


def train(config: TrainingConfig | str | None = None, /, **settings: Any) -> TrainingResult:
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

    Parameters
    ----------
    config : TrainingConfig or str, optional
        The settings: a [TrainingConfig][attnscale.TrainingConfig], or the name of a task
        (``train("mean", ...)`` is ``train(TrainingConfig("mean", ...))``), or None for the
        defaults.
    **settings
        Fields of [TrainingConfig][attnscale.TrainingConfig] to set or change, e.g.
        ``strategies=["none", "inverse_sqrt"], seeds=[0, 1]``; each field's meaning, default
        and accepted values are documented there, once. The result carries the validated
        settings as ``config``, so ``train(result.config)`` repeats a call.

    Returns
    -------
    TrainingResult
        Metrics of shape ``(models, epochs * steps_per_epoch)``, per-model final losses, and
        the settings as a [TrainingConfig][attnscale.TrainingConfig].

    Raises
    ------
    TypeError
        If ``config`` is of another type, a setting is not a field of ``TrainingConfig``, or
        a setting is of the wrong type (a seed must be an integer).
    ValueError
        For a setting out of range, as [TrainingConfig][attnscale.TrainingConfig] says.

    Examples
    --------
    >>> from attnscale import train
    >>> res = train("mean", strategies=["none", "inverse_sqrt"], seeds=[0, 1], d_model=16,
    ...             d_k=8, num_samples=64, test_samples=32, epochs=2)
    >>> res.loss.shape, res.steps_per_epoch
    (torch.Size([4, 4]), 2)
    >>> train(res.config, epochs=1).loss.shape
    torch.Size([4, 2])
    """
    config = _settings(config, settings)
    previous_threads = torch.get_num_threads()
    if config.num_threads is not None:
        torch.set_num_threads(config.num_threads)
    try:
        return _train(config)
    finally:
        torch.set_num_threads(previous_threads)


def _settings(config: object, settings: dict[str, Any]) -> TrainingConfig:
    fields = [f.name for f in dataclasses.fields(TrainingConfig)]
    unknown = sorted(set(settings) - set(fields))
    if unknown:
        raise TypeError(
            f"train() got unknown settings {unknown}; the settings are the fields of "
            f"TrainingConfig: {', '.join(fields)}"
        )
    if config is None:
        return TrainingConfig(**settings)
    if isinstance(config, str):
        if "task" in settings:
            raise TypeError("train() got the task twice: as its first argument and as task=")
        return TrainingConfig(config, **settings)
    if isinstance(config, TrainingConfig):
        return dataclasses.replace(config, **settings)
    raise TypeError(
        f"config must be a TrainingConfig, a task name or None, got {type(config).__name__}"
    )


def _data(config: TrainingConfig) -> tuple[torch.Tensor, ...]:
    """Training and test sets, ``(seeds, samples, length, d_model)`` each, drawn on the CPU
    with one generator per seed (training set first), then moved to the device."""
    xs, ys, xts, yts = [], [], [], []
    for s in config.seeds:
        gen = torch.Generator().manual_seed(s)
        x, y = make_task(
            config.task, config.num_samples, config.seq_len, config.d_model, generator=gen
        )
        xt, yt = make_task(
            config.task, config.test_samples, config.seq_len, config.d_model, generator=gen
        )
        xs.append(x)
        ys.append(y)
        xts.append(xt)
        yts.append(yt)
    dev = config.device
    return tuple(torch.stack(t).to(dev) for t in (xs, ys, xts, yts))


def _models(config: TrainingConfig) -> tuple[list[nn.Module], list[tuple[str, float, int]]]:
    """Every model and its (strategy, lr, seed), in the order of the result: strategy-major,
    then learning rate, then seed."""
    models: list[nn.Module] = []
    order: list[tuple[str, float, int]] = []
    for strat in config.strategies:
        for lr in config.lrs:
            for s in config.seeds:
                model = make_model(
                    config.model,
                    d_model=config.d_model,
                    d_k=config.d_k,
                    d_v=config.d_v,
                    num_heads=config.num_heads,
                    strategy=strat,
                    seed=s,
                    device=config.device,
                )
                if config.qk_init_gain != 1.0:
                    with torch.no_grad():
                        for name, p in model.named_parameters():
                            if param_group(name) in ("q", "k"):
                                p.mul_(config.qk_init_gain)
                models.append(model)
                order.append((strat, lr, s))
    return models, order


def _stacks(
    models: list[nn.Module], order: list[tuple[str, float, int]], config: TrainingConfig
) -> list[Stack]:
    """One stack per strategy, except that neighbouring strategies the fast path covers share
    one."""
    seeds, dev = list(config.seeds), config.device
    stacks: list[Stack] = []
    for (fast, _), run in itertools.groupby(
        range(len(models)),
        key=lambda i: (True, "") if SimpleStack.supports(models[i]) else (False, order[i][0]),
    ):
        idx = list(run)
        stack = SimpleStack if fast else VmapStack
        stacks.append(
            stack(
                [models[i] for i in idx],  # type: ignore[misc]
                torch.tensor([order[i][1] for i in idx], device=dev),
                torch.tensor([seeds.index(order[i][2]) for i in idx], device=dev),
                config,
            )
        )
    return stacks


def _train(config: TrainingConfig) -> TrainingResult:
    """The training loop of [train][attnscale.train], on validated settings."""
    seed_list, dev = list(config.seeds), config.device
    seq_len, d_model, num_samples = config.seq_len, config.d_model, config.num_samples
    show = sys.stderr.isatty() if config.progress is None else config.progress
    x_train, y_train, x_test, y_test = _data(config)
    shufflers = [torch.Generator().manual_seed(shuffle_seed(s)) for s in seed_list]
    models, order = _models(config)
    groups = _stacks(models, order, config)

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
                f"\rtrain {config.task}: epoch {epoch + 1}/{config.epochs}, {len(order)} models, "
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
