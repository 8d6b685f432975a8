"""A check for users' own test suites: does a model's attention pass the monitor?

::

    from attnscale.testing import assert_attention_healthy

    def test_attention_is_scaled_right():
        assert_attention_healthy(model, {"input_ids": ids})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from . import _checks
from ._monitor import AttentionMonitor, MonitorReport
from ._monitor.report import SEVERITY_RANK

__all__ = ["assert_attention_healthy"]


def assert_attention_healthy(
    model: nn.Module, inputs: Any, *, fail_on: str = "warning", **monitor_kwargs: Any
) -> MonitorReport:
    """Run ``model`` on ``inputs`` under an [AttentionMonitor][attnscale.AttentionMonitor]
    and fail if it finds anything at ``fail_on`` or worse.

    Parameters
    ----------
    model : nn.Module
        The model, in the mode (train or eval) to check.
    inputs : Tensor, tuple or mapping
        ``model(inputs)``, ``model(*inputs)`` or ``model(**inputs)``.
    fail_on : str
        ``"warning"`` (the default) or ``"error"``; ``"info"`` fails on any finding.
    **monitor_kwargs
        Passed to the monitor: ``expected_scale`` for a deliberate scale, thresholds ...

    Returns
    -------
    MonitorReport
        The report, when nothing failed.

    Raises
    ------
    AssertionError
        With the report, if a finding is at ``fail_on`` or worse (``no-attention``
        included: a check that saw no attention vouches for nothing).
    """
    _checks.one_of(fail_on, "fail_on", SEVERITY_RANK)
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    with torch.no_grad(), AttentionMonitor(model, **monitor_kwargs) as monitor:
        call(model, inputs)
    report = monitor.report()
    failed = [f for f in report.findings if SEVERITY_RANK[f.severity] >= SEVERITY_RANK[fail_on]]
    if failed:
        codes = ", ".join(sorted({f.code for f in failed}))
        raise AssertionError(f"attention is not healthy ({codes}):\n{report}")
    return report


def call(model: nn.Module, inputs: Any) -> Any:
    """``model(**inputs)`` for a mapping, ``model(*inputs)`` for a tuple, else ``model(inputs)``."""
    if isinstance(inputs, Mapping):
        return model(**inputs)
    if isinstance(inputs, tuple):
        return model(*inputs)
    return model(inputs)
