"""Hugging Face ``Trainer`` integration: the attention monitor over a training run.

Needs ``transformers`` (the ``hf`` extra) and, for its ``Trainer``, ``accelerate``. The
monitor's scalars go through ``Trainer.log``, so every ``report_to`` target (TensorBoard,
Weights & Biases, ...) and ``trainer.state.log_history`` receive them::

    from attnscale.hf import AttentionCallback

    trainer = Trainer(model=model, args=args, train_dataset=data)
    callback = AttentionCallback(trainer, every=50, all_rows=True, history=500)
    trainer.train()
    print(callback.monitor.report())
"""

from __future__ import annotations

from typing import Any

import transformers  # type: ignore[import-not-found,unused-ignore]

from ._monitor import AttentionMonitor

__all__ = ["AttentionCallback"]


class AttentionCallback(transformers.TrainerCallback):  # type: ignore[misc,unused-ignore]
    """Monitor ``trainer.model``'s attention during ``trainer.train()``.

    The monitor starts when training starts, counts the optimizer's steps (so gradient
    accumulation counts one step per update, as ``trainer.state.global_step`` does), and
    stops when training ends. The callback adds itself to ``trainer``.

    Parameters
    ----------
    trainer : transformers.Trainer
        The trainer whose model is watched and whose ``log`` receives the scalars.
    **monitor_kwargs
        Passed to [AttentionMonitor][attnscale.AttentionMonitor]: ``every``, ``history``,
        ``all_rows``, ``qk_clip_tau``, ``expected_scale``, thresholds ... (not ``model``,
        ``optimizer`` or ``log``, which the callback sets).

    Attributes
    ----------
    monitor : AttentionMonitor or None
        The monitor of the last ``train()``; its ``report()`` holds the run's points.
    """

    def __init__(self, trainer: Any, **monitor_kwargs: Any) -> None:
        taken = {"model", "optimizer", "log"} & set(monitor_kwargs)
        if taken:
            raise TypeError(f"AttentionCallback sets {sorted(taken)} itself; leave them out")
        if not isinstance(trainer, transformers.Trainer):
            raise TypeError(f"trainer must be a transformers.Trainer, got {type(trainer).__name__}")
        AttentionMonitor(**monitor_kwargs)  # bad arguments fail here, not at train time
        self.trainer = trainer
        self.monitor_kwargs = monitor_kwargs
        self.monitor: AttentionMonitor | None = None
        trainer.add_callback(self)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        optimizer = kwargs.get("optimizer") or self.trainer.optimizer
        # accelerate wraps the optimizer; its own step is the one that runs
        optimizer = getattr(optimizer, "optimizer", optimizer)
        self.monitor = AttentionMonitor(
            kwargs.get("model") or self.trainer.model,
            optimizer=optimizer,
            log=self.trainer.log,
            **self.monitor_kwargs,
        )
        self.monitor.__enter__()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.monitor is not None:
            self.monitor.__exit__(None, None, None)
