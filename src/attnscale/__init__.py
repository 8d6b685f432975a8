"""attnscale: measure, explain and debug the 1/sqrt(d_k) scaling in attention.

Everything documented is importable from the top level, e.g.
``from attnscale import sample_scores``.
"""

from .plotting import PALETTE, plot_score_histograms, plot_theory_vs_measured, plot_variance_vs_dk
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
    "PALETTE",
    "Moments",
    "VarianceEstimate",
    "dot_product_moments",
    "init_projection_variance",
    "plot_score_histograms",
    "plot_theory_vs_measured",
    "plot_variance_vs_dk",
    "sample_scores",
    "scaled_dot_product_moments",
    "unit_variance_scale",
    "variance_estimate",
]

# --- scaling ---
from .plotting import Table, plot_strategy_bars, plot_strategy_curves

__all__ += [
    "SCALING_STRATEGIES",
    "AttentionResult",
    "CosineScale",
    "FoldedInit",
    "InverseD",
    "InverseSqrt",
    "LearnableTemperature",
    "MultiHeadAttention",
    "NoScale",
    "QKLayerNorm",
    "QKRMSNorm",
    "ScoreScaling",
    "Table",
    "make_strategy",
    "plot_strategy_bars",
    "plot_strategy_curves",
    "scaled_dot_product_attention",
    "soft_cap",
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
