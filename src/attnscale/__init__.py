"""attnscale: measure, explain and debug the 1/sqrt(d_k) scaling in attention.

Everything documented is importable from the top level, e.g.
``from attnscale import sample_scores``.
"""

from .factcheck import VERDICTS, ClaimCheck, check_claims
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
    plot_entropy_vs_temperature,
    plot_jacobian_norm_vs_sigma,
    plot_log_histograms,
    plot_monitor_series,
    plot_monitor_summary,
    plot_probability_rows,
    plot_saturation_vs_sigma,
    plot_scaled_vs_unscaled,
    plot_score_histograms,
    plot_theory_vs_measured,
    plot_variance_vs_dk,
)
from .sampling import DISTRIBUTIONS, VarianceEstimate, sample_scores, variance_estimate
from .softmax import (
    SoftmaxStats,
    gaussian_logit_entropy,
    logit_gradient,
    max_probability,
    saturated_fraction,
    softmax_entropy,
    softmax_jacobian,
    softmax_jacobian_norm,
    softmax_stats,
    tempered_softmax,
)
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
    "VERDICTS",
    "AttentionMonitor",
    "AttentionRecord",
    "AttentionStats",
    "ClaimCheck",
    "Finding",
    "Moments",
    "MonitorReport",
    "SoftmaxStats",
    "VarianceEstimate",
    "check_claims",
    "dot_product_moments",
    "gaussian_logit_entropy",
    "init_projection_variance",
    "logit_gradient",
    "max_probability",
    "plot_entropy_vs_temperature",
    "plot_jacobian_norm_vs_sigma",
    "plot_log_histograms",
    "plot_monitor_series",
    "plot_monitor_summary",
    "plot_probability_rows",
    "plot_saturation_vs_sigma",
    "plot_scaled_vs_unscaled",
    "plot_score_histograms",
    "plot_theory_vs_measured",
    "plot_variance_vs_dk",
    "sample_scores",
    "saturated_fraction",
    "scaled_dot_product_moments",
    "softmax_entropy",
    "softmax_jacobian",
    "softmax_jacobian_norm",
    "softmax_stats",
    "tempered_softmax",
    "unit_variance_scale",
    "variance_estimate",
]
