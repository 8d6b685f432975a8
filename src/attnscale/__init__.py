"""attnscale: measure, explain and debug the 1/sqrt(d_k) scaling in attention.

Everything documented is importable from the top level, e.g.
``from attnscale import sample_scores``. The plot helpers are imported on
first use, so ``import attnscale`` does not import matplotlib (an optional
dependency: the ``plot`` extra, see the README).
"""

import importlib.util
from typing import TYPE_CHECKING

from .additive import AdditiveAttention
from .models import MODELS, AttentionBlock, SimpleAttentionModel, make_model
from .monitor import (
    DESIGNS,
    GUIDE_URL,
    THRESHOLDS,
    AttentionMonitor,
    AttentionRecord,
    AttentionStats,
    Finding,
    HeadStats,
    MonitorReport,
    head_stats,
    head_stats_of_logits,
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
    logit_resolution,
    scaled_dot_product_moments,
    unit_variance_scale,
)
from .training import METRICS, TASKS, TrainingConfig, TrainingResult, make_task, train

if TYPE_CHECKING:  # for type checkers and the API reference; at run time see __getattr__
    from .plotting import (
        plot_monitor_series,
        plot_monitor_summary,
        plot_probability_rows,
        plot_seed_bands,
        plot_strategy_curves,
        plot_training_metric,
    )

_PLOTTING = (
    "plot_monitor_series",
    "plot_monitor_summary",
    "plot_probability_rows",
    "plot_seed_bands",
    "plot_strategy_curves",
    "plot_training_metric",
)


def __getattr__(name: str) -> object:
    """Import the plot helpers (and so matplotlib) only when one is first used."""
    if name in _PLOTTING:
        try:
            from . import plotting
        except ModuleNotFoundError as err:
            if (err.name or "").partition(".")[0] != "matplotlib":
                raise
            raise ImportError(
                f"attnscale.{name} draws with matplotlib, which is not installed: "
                'pip install "attnscale[plot]"'
            ) from err
        return getattr(plotting, name)
    raise AttributeError(f"module 'attnscale' has no attribute {name!r}")


def _has_matplotlib() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


__version__ = "0.1.0"

__all__ = [
    "DESIGNS",
    "DISTRIBUTIONS",
    "GUIDE_URL",
    "METRICS",
    "MODELS",
    "SCALING_STRATEGIES",
    "TASKS",
    "THRESHOLDS",
    "AdditiveAttention",
    "AttentionBlock",
    "AttentionMonitor",
    "AttentionRecord",
    "AttentionResult",
    "AttentionStats",
    "CosineScale",
    "Finding",
    "FoldedInit",
    "HeadStats",
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
    "SimpleAttentionModel",
    "SoftmaxStats",
    "TrainingConfig",
    "TrainingResult",
    "VarianceEstimate",
    "dot_product_moments",
    "gaussian_logit_entropy",
    "head_stats",
    "head_stats_of_logits",
    "init_projection_variance",
    "logit_gradient",
    "logit_resolution",
    "make_model",
    "make_strategy",
    "make_task",
    "max_probability",
    "plot_monitor_series",
    "plot_monitor_summary",
    "plot_probability_rows",
    "plot_seed_bands",
    "plot_strategy_curves",
    "plot_training_metric",
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
    "train",
    "unit_variance_scale",
    "variance_estimate",
]
if not _has_matplotlib():  # `from attnscale import *` works without the plot extra
    __all__ = [name for name in __all__ if name not in _PLOTTING]
