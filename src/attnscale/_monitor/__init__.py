r"""Attention monitor: watch every attention computation of a real PyTorch model.

Wrap a forward pass (or a few training steps) in an
[AttentionMonitor][attnscale.AttentionMonitor]; on exit,
[report][attnscale.AttentionMonitor.report] gives, per attention call site,
what was measured and what looks wrong, why it matters and how to fix it.

The package has one module per job: ``monitor`` (the context manager itself), ``calls``
(the handler table: one ``@handles`` function per attention path, each returning a ``Call``
record), ``capture`` (the torch-function mode that dispatches to the handlers and records
what they return; its docstring says what is captured and how), ``lineage`` (how a tensor on
its way to a softmax derives from q·kᵀ), ``adapters`` (the fused paths: SDPA, FlexAttention,
``nn.MultiheadAttention`` and the fused encoder layer), ``hooks`` (the global module hooks and
the module stack), ``stats`` and ``every_row`` (the statistics of one call), ``facts`` (the
thresholds and finding codes, one table each), ``diagnosis`` (findings as a pure function of
statistics and thresholds), ``report`` (the report types) and ``run`` (a monitor over
training steps). This module only re-exports.
"""

from .diagnosis import DESIGNS, THRESHOLDS
from .every_row import HeadStats, head_stats, head_stats_of_logits
from .monitor import AttentionMonitor
from .report import GUIDE_URL, AttentionRecord, AttentionStats, Finding, MonitorReport

__all__ = [
    "DESIGNS",
    "GUIDE_URL",
    "THRESHOLDS",
    "AttentionMonitor",
    "AttentionRecord",
    "AttentionStats",
    "Finding",
    "HeadStats",
    "MonitorReport",
    "head_stats",
    "head_stats_of_logits",
]
