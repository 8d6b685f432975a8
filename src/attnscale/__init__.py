"""attnscale: measure, explain and debug the 1/sqrt(d_k) scaling in attention.

Everything documented is importable from the top level, e.g.
``from attnscale import sample_scores``.
"""

from .monitor import (
    GUIDE_URL,
    THRESHOLDS,
    AttentionMonitor,
    AttentionRecord,
    AttentionStats,
    Finding,
    MonitorReport,
)
from .plotting import (
    PALETTE,
    plot_monitor_series,
    plot_monitor_summary,
    plot_score_histograms,
    plot_theory_vs_measured,
    plot_variance_vs_dk,
)
from .sampling import DISTRIBUTIONS, VarianceEstimate, sample_scores, variance_estimate
from .theory import (
    Moments,
    dot_product_moments,
    init_projection_variance,
    scaled_dot_product_moments,
    unit_variance_scale,
)

__version__ = "0.1.0"

__all__ = [
    "DISTRIBUTIONS",
    "GUIDE_URL",
    "PALETTE",
    "THRESHOLDS",
    "AttentionMonitor",
    "AttentionRecord",
    "AttentionStats",
    "Finding",
    "Moments",
    "MonitorReport",
    "VarianceEstimate",
    "dot_product_moments",
    "init_projection_variance",
    "plot_monitor_series",
    "plot_monitor_summary",
    "plot_score_histograms",
    "plot_theory_vs_measured",
    "plot_variance_vs_dk",
    "sample_scores",
    "scaled_dot_product_moments",
    "unit_variance_scale",
    "variance_estimate",
]
