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
    Table,
    plot_entropy_vs_temperature,
    plot_jacobian_norm_vs_sigma,
    plot_log_histograms,
    plot_monitor_series,
    plot_monitor_summary,
    plot_probability_rows,
    plot_saturation_vs_sigma,
    plot_scaled_vs_unscaled,
    plot_score_histograms,
    plot_strategy_bars,
    plot_strategy_curves,
    plot_theory_vs_measured,
    plot_variance_vs_dk,
)
from .sampling import DISTRIBUTIONS, VarianceEstimate, sample_scores, variance_estimate
from .scaling import (
    SCALING_STRATEGIES,
    AttentionResult,
    CosineScale,
    FoldedInit,
    InverseD,
    InverseSqrt,
    LearnableTemperature,
    MultiHeadAttention,
    NoScale,
    QKLayerNorm,
    QKRMSNorm,
    ScoreScaling,
    make_strategy,
    scaled_dot_product_attention,
    soft_cap,
)
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
    "SCALING_STRATEGIES",
    "THRESHOLDS",
    "VERDICTS",
    "AttentionMonitor",
    "AttentionRecord",
    "AttentionResult",
    "AttentionStats",
    "ClaimCheck",
    "CosineScale",
    "Finding",
    "FoldedInit",
    "InverseD",
    "InverseSqrt",
    "LearnableTemperature",
    "Moments",
    "MonitorReport",
    "MultiHeadAttention",
    "NoScale",
    "QKLayerNorm",
    "QKRMSNorm",
    "ScoreScaling",
    "SoftmaxStats",
    "Table",
    "VarianceEstimate",
    "check_claims",
    "dot_product_moments",
    "gaussian_logit_entropy",
    "init_projection_variance",
    "logit_gradient",
    "make_strategy",
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
    "plot_strategy_bars",
    "plot_strategy_curves",
    "plot_theory_vs_measured",
    "plot_variance_vs_dk",
    "sample_scores",
    "saturated_fraction",
    "scaled_dot_product_attention",
    "scaled_dot_product_moments",
    "soft_cap",
    "softmax_entropy",
    "softmax_jacobian",
    "softmax_jacobian_norm",
    "softmax_stats",
    "tempered_softmax",
    "unit_variance_scale",
    "variance_estimate",
]

# --- training ---
from .models import MODELS, AttentionBlock, SimpleAttentionModel, make_model  # noqa: E402
from .plotting import plot_loss_grid, plot_seed_bands, plot_training_metric  # noqa: E402
from .training import METRICS, TASKS, TrainingResult, make_task, train  # noqa: E402

__all__ += [
    "METRICS",
    "MODELS",
    "TASKS",
    "AttentionBlock",
    "SimpleAttentionModel",
    "TrainingResult",
    "make_model",
    "make_task",
    "plot_loss_grid",
    "plot_seed_bands",
    "plot_training_metric",
    "train",
]
